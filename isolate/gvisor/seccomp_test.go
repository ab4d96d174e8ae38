package gvisor

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
)

// TestTranslateSeccompNamesOutsideTheTable: a rule naming a call that the
// Sentry's table lacks (openat2 in this runsc build) is ignored by runsc,
// so the call meets the default action; the translation says so instead
// of letting the policy claim an allow it does not get (the hang of
// gvisor enclaves under agent-loop.policy came from exactly that).
func TestTranslateSeccompNamesOutsideTheTable(t *testing.T) {
	enosys := uint(unix.ENOSYS)
	in := &specs.LinuxSeccomp{DefaultAction: specs.ActKillProcess, Syscalls: []specs.LinuxSyscall{
		{Names: []string{"read", "openat2"}, Action: specs.ActAllow},
		{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		{Names: []string{"futex_waitv"}, Action: specs.ActKillProcess},
	}}
	table := map[string]bool{"read": false, "clone3": true}
	out, dev, err := translateSeccomp(in, table)
	require.NoError(t, err)
	assert.Equal(t, specs.ActTrap, out.DefaultAction)
	assert.Contains(t, dev, "openat2: not in the Sentry's table, runsc ignores its rule (SCMP_ACT_ALLOW) and the call meets the default action (SCMP_ACT_TRAP)")
	for _, d := range dev {
		assert.NotContains(t, d, "futex_waitv: not in", "a rule that repeats the default action loses nothing when runsc ignores it")
		assert.NotContains(t, d, "read:")
		assert.NotContains(t, d, "clone3", "the Sentry answers clone3 ENOSYS itself")
	}
}

// TestUnimplementedSyscallsKnowsTheTable: the probe's table holds every
// call runsc lists, true only for the unimplemented ones, and not
// openat2, which this build does not list at all.
func TestUnimplementedSyscallsKnowsTheTable(t *testing.T) {
	require.NotNil(t, probed)
	m := probed.unimplemented()
	unimpl, ok := m["clone3"]
	assert.True(t, ok && unimpl, "clone3 is listed as unimplemented")
	unimpl, ok = m["read"]
	assert.True(t, ok && !unimpl, "read is listed and implemented")
	_, ok = m["openat2"]
	assert.False(t, ok, "this runsc build does not list openat2; if a newer one does, the enclave's openat2 rule reaches its filter")
}

// TestTranslateSeccompKillIsATrap: a kill rule and a kill default become
// TRAP (SIGSYS to the caller, whose default action ends every thread),
// each listed as a deviation; a thread kill stays a thread kill.
func TestTranslateSeccompKillIsATrap(t *testing.T) {
	in := &specs.LinuxSeccomp{DefaultAction: specs.ActKillProcess, Syscalls: []specs.LinuxSyscall{
		{Names: []string{"unshare"}, Action: specs.ActKillProcess},
		{Names: []string{"tkill"}, Action: specs.ActKillThread},
	}}
	out, dev, err := translateSeccomp(in, map[string]bool{"unshare": false, "tkill": false})
	require.NoError(t, err)
	assert.Equal(t, specs.ActTrap, out.DefaultAction)
	require.Len(t, out.Syscalls, 2)
	assert.Equal(t, specs.ActTrap, out.Syscalls[0].Action)
	assert.Equal(t, specs.ActKill, out.Syscalls[1].Action)
	assert.ElementsMatch(t, []string{"default action: " + killProcessDeviation, "unshare: " + killProcessDeviation}, dev)
}

// denyInThread is a job whose only way to end before the wall-clock limit
// is that the whole process dies: %s makes the denied call (unshare is a
// kill rule of python3.policy) in a worker thread or in the main thread
// while a worker waits, and the other thread waits forever.
const denyInThread = `import ctypes, threading
forever = threading.Event()
def deny():
    ctypes.CDLL(None).unshare(0x10000000)
%s
forever.wait()
`

// TestSeccompKillEndsAMultiThreadedJob: a denied call in a multi-threaded
// job ends the whole sandbox as seccomp-kill, not as a timeout at the wall
// limit (with runsc's thread-only KILL the other thread ran on).
func TestSeccompKillEndsAMultiThreadedJob(t *testing.T) {
	r := newTestRuntime(t)
	for name, start := range map[string]string{
		"worker thread": "threading.Thread(target=deny).start()",
		"main thread":   "threading.Thread(target=forever.wait).start()\ndeny()",
	} {
		t.Run(name, func(t *testing.T) {
			tpl := template(t, r, "")
			// Far above a start on a loaded host; a job that outlives
			// the kill ends here as a timeout.
			tpl.Limits.Wall = 30 * time.Second
			t0 := time.Now()
			o := run(t, r, tpl, fmt.Sprintf(denyInThread, start))
			t.Logf("%s ended after %v (wall limit %v): %s", name, time.Since(t0).Round(time.Millisecond), tpl.Limits.Wall, o.Detail)
			assert.Equal(t, isolate.KindSeccompKill, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
			assert.Equal(t, "SIGSYS", o.Signal)
			assert.Nil(t, o.Output)
		})
	}
	require.NoError(t, r.Usable())
}

// TestSeccompTrapNeverRunsTheCall pins the declared residual of TRAP: a
// job that handles, ignores or blocks SIGSYS survives a denied call, but
// the call is not executed (it returns neither 0 nor -1, which unshare
// gives when it runs, but the trap's register value). If a runsc forces
// the signal as Linux does, these jobs die instead and the deviation
// shrinks: update it then.
func TestSeccompTrapNeverRunsTheCall(t *testing.T) {
	r := newTestRuntime(t)
	for name, prep := range map[string]string{
		"handled": "signal.signal(signal.SIGSYS, lambda *a: None)",
		"ignored": "signal.signal(signal.SIGSYS, signal.SIG_IGN)",
		"blocked": "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGSYS])",
	} {
		t.Run(name, func(t *testing.T) {
			script := "import ctypes, json, signal\n" + prep + "\n" +
				"r = ctypes.CDLL(None).unshare(0x10000000)\n" +
				"json.dump({'r': r}, open('/query/out', 'w'))\n"
			o := run(t, r, template(t, r, ""), script)
			require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
			var got struct{ R int }
			require.NoError(t, json.Unmarshal(o.Output, &got))
			assert.NotContains(t, []int{0, -1}, got.R, "unshare ran")
		})
	}
	require.NoError(t, r.Usable())
}
