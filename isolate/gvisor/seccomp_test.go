package gvisor

import (
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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
	assert.Equal(t, specs.ActKill, out.DefaultAction)
	assert.Contains(t, dev, "openat2: not in the Sentry's table, runsc ignores its rule (SCMP_ACT_ALLOW) and the call meets the default action (SCMP_ACT_KILL)")
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
