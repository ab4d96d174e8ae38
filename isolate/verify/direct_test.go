package verify

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/runtimes"
)

// knownDirectDefects are probes that fail today because of a defect outside
// verify, with the reason. The test asserts that they still fail, so the
// entry must be removed when the defect is fixed; the report and the exit
// status of awf isolate verify are not affected by this list.
var knownDirectDefects = map[string]string{}

// TestDirectPasses runs the whole battery in the real direct sandbox: every
// probe, the loaded-filter comparison and the leftover checks must pass.
func TestDirectPasses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Runtimes: []string{"direct"}, Required: []string{"direct"}, RootFS: testRootFS, Environ: []string{}})
	require.NoError(t, err)
	var txt bytes.Buffer
	require.NoError(t, rep.WriteText(&txt))
	rr := rep.Runtimes[0]
	require.NotEqual(t, Blocked, rr.Status, "the direct runtime must be available here: %s", rr.Reason)
	for _, r := range rr.Results {
		if why, known := knownDirectDefects[r.ID]; known {
			assert.Equal(t, Fail, r.Status, "%s passes now: remove it from knownDirectDefects (%s)", r.ID, why)
			t.Logf("known defect, FAIL as expected: %s: %s (%s)", r.ID, r.Evidence, why)
			continue
		}
		assert.Contains(t, []Status{Pass, Warn}, r.Status, "%s: %s", r.ID, r.Evidence)
	}
	assert.GreaterOrEqual(t, len(rr.Results), 40)
	pooled := 0
	for _, r := range rr.Results {
		if r.ID == "ctl/python" {
			assert.Positive(t, r.Millis, "a probe reports how long it took")
		}
		if r.Kind != "" {
			// Every probe ran in a sandbox the warm pool prepared ahead.
			assert.Equal(t, PathPooled, r.Path, r.ID)
			pooled++
		}
	}
	assert.Equal(t, len(Battery())+1, pooled, "every probe and the filter job ran pooled")
	if t.Failed() {
		t.Log("\n" + txt.String())
	}
}

// weakened wraps a runtime and removes controls from every template. Only
// tests can build it: nothing in configuration reaches Template.Weaken.
type weakened struct {
	isolate.Runtime
	w isolate.Weakening
}

func (r weakened) Prepare(ctx context.Context, t isolate.Template) (isolate.Sandbox, error) {
	t.Weaken = r.w
	return r.Runtime.Prepare(ctx, t)
}

func (r weakened) Run(ctx context.Context, s isolate.Spec) isolate.Outcome {
	s.Template.Weaken = r.w
	return r.Runtime.Run(ctx, s)
}

// TestWeakenedConfigurationsFail proves the probes can fail: each removed
// control must turn exactly the probes that test it into FAIL.
func TestWeakenedConfigurationsFail(t *testing.T) {
	noNetNS := []string{"net/abstract-unix"}
	if hostHasNetwork(t) {
		// Where the host's own namespace has only lo (a test VM), sharing it
		// shows nothing more than lo.
		noNetNS = append(noNetNS, "net/interfaces", "net/routes")
	}
	noSeccomp := []string{"priv/seccomp-mode", "priv/keyctl", "priv/io-uring", "priv/userfaultfd", "priv/ptrace",
		"priv/process-vm", "priv/open-tree", "priv/pidfd-open", "priv/memfd", "priv/mknod", "net/socket-netlink",
		"filter/loaded", "filter/denylist"}
	if userNamespacesPossible(t) {
		// Without seccomp, only the kernel's own user-namespace rules stop
		// these; in a chroot (a test VM's command) the kernel refuses them.
		noSeccomp = append(noSeccomp, "priv/unshare-userns", "priv/userns-mount", "priv/clone-newns")
	}
	cases := []struct {
		name     string
		w        isolate.Weakening
		mustFail []string
	}{
		{"no network namespace", isolate.Weakening{NoNetNS: true}, noNetNS},
		// The policy refuses every socket, so only with the filter gone too
		// do the connections themselves reach the host's listeners.
		{"no network namespace, no seccomp", isolate.Weakening{NoNetNS: true, NoSeccomp: true},
			[]string{"net/abstract-unix", "net/tcp-host", "net/udp-host", "net/dns"}},
		{"no seccomp", isolate.Weakening{NoSeccomp: true}, noSeccomp},
		{"no pids limit", isolate.Weakening{NoPidsLimit: true},
			[]string{"limit/pids"}},
		{"nil capability set", isolate.Weakening{NilCapsConfig: true},
			[]string{"priv/caps"}},
		{"host view (/proc mounted, counters unmasked)", isolate.Weakening{HostView: true},
			[]string{"fs/host-counters", "fs/proc-inode-counter"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := Run(ctx, Options{
				Runtimes: []string{"direct"}, RootFS: testRootFS, Probes: tc.mustFail, Environ: []string{},
				Open: func(name string, h isolate.HostConfig) (isolate.Runtime, error) {
					rt, err := runtimes.Open(name, h)
					if err != nil {
						return nil, err
					}
					return weakened{rt, tc.w}, nil
				},
			})
			require.NoError(t, err)
			rr := rep.Runtimes[0]
			require.NotEqual(t, Blocked, rr.Status, rr.Reason)
			got := map[string]Result{}
			for _, r := range rr.Results {
				got[r.ID] = r
			}
			for _, id := range tc.mustFail {
				r, ok := got[id]
				require.True(t, ok, "%s did not run", id)
				assert.Equal(t, Fail, r.Status, "%s must fail with %s: %s", id, tc.name, r.Evidence)
				if id != "filter/denylist" {
					assert.Equal(t, PathPooled, r.Path, "%s failed on the warm pool's path", id)
				}
			}
			// The leftover checks still hold: weakening a control must not
			// make the runtime leak.
			for _, id := range []string{"leftover/processes", "leftover/cgroups", "leftover/mounts", "leftover/state"} {
				assert.Equal(t, Pass, got[id].Status, "%s: %s", id, got[id].Evidence)
			}
			assert.False(t, rep.OK)
		})
	}
}

// hostHasNetwork reports whether this host's network namespace has an
// interface other than lo.
func hostHasNetwork(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/net/dev")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n")[2:] {
		if name, _, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(name) != "lo" {
			return true
		}
	}
	return false
}

// userNamespacesPossible reports whether an unprivileged process on this
// host could create a user namespace without seccomp: the sysctls allow it
// and this process is not chrooted (the kernel refuses user namespaces to
// chrooted processes).
func userNamespacesPossible(t *testing.T) bool {
	t.Helper()
	var root, init unix.Stat_t
	require.NoError(t, unix.Stat("/", &root))
	if err := unix.Stat("/proc/1/root/", &init); err != nil || root.Dev != init.Dev || root.Ino != init.Ino {
		return false
	}
	return gatherUserns().enabled()
}

// TestDirectFilterSelection runs the selection docs/verify.md gives,
// "--probe filter/", in the real direct sandbox: the root tree the runtime
// keeps for the run is not a leftover of the filter job.
func TestDirectFilterSelection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Runtimes: []string{"direct"}, Required: []string{"direct"}, RootFS: testRootFS,
		Probes: []string{"filter/"}, Environ: []string{}})
	require.NoError(t, err)
	rr := rep.Runtimes[0]
	require.NotEqual(t, Blocked, rr.Status, "the direct runtime must be available here: %s", rr.Reason)
	ids := map[string]bool{}
	for _, r := range rr.Results {
		ids[r.ID] = true
		assert.Contains(t, []Status{Pass, Warn}, r.Status, "%s: %s", r.ID, r.Evidence)
	}
	for _, id := range RuntimeChecks() {
		assert.True(t, ids[id], "%s is reported", id)
	}
}

// TestConfiguredCPUQuotaHolds runs config/cpu in the real direct sandbox
// under a quota below the sandbox's one CPU, so that the quota, not the
// cpuset, is what binds: the probe must measure it and PASS. A busy host
// only lowers the measurement.
func TestConfiguredCPUQuotaHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := isolate.DefaultLimits()
	l.CPUMilli = 300
	rep, err := Run(ctx, Options{Runtimes: []string{"direct"}, Required: []string{"direct"}, RootFS: testRootFS,
		Probes: []string{"config/cpu"}, Configured: &l, Environ: []string{}})
	require.NoError(t, err)
	rr := rep.Runtimes[0]
	require.NotEqual(t, Blocked, rr.Status, rr.Reason)
	assert.EqualValues(t, 300, rep.Pins.Config.Limits.CPUMilli, "the report pins the configured quota")
	found := false
	for _, r := range rr.Results {
		if r.ID == "config/cpu" {
			found = true
			assert.Equal(t, Pass, r.Status, r.Evidence)
			assert.Contains(t, r.Evidence, "under a 300 quota")
			t.Log(r.Evidence)
		}
	}
	assert.True(t, found, "config/cpu ran")
}
