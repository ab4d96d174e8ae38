package agentcheck

import (
	"context"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/isolate/verify"
)

// run runs the battery over the shared fixtures with o's other fields.
func run(t *testing.T, o Options) *Report {
	t.Helper()
	o.Exe, o.RootFS, o.CgroupParent = testAwf, testRootFS, testCgroupParent
	if o.AgentUser == "" {
		o.AgentUser = testUser
	}
	rep, err := Run(context.Background(), o)
	require.NoError(t, err)
	return rep
}

// verdicts maps each probe of the view to its verdict.
func verdicts(v ViewReport) map[string]verify.Status {
	m := map[string]verify.Status{}
	for _, r := range v.Results {
		m[r.ID] = r.Status
	}
	return m
}

// result returns the view's result for id.
func result(v ViewReport, id string) verify.Result {
	for _, r := range v.Results {
		if r.ID == id {
			return r
		}
	}
	return verify.Result{}
}

// failing lists the probes of the view that FAIL, sorted.
func failing(v ViewReport) []string {
	var out []string
	for _, r := range v.Results {
		if r.Status == verify.Fail {
			out = append(out, r.ID)
		}
	}
	slices.Sort(out)
	return out
}

func dump(t *testing.T, rep *Report) string {
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	return b.String()
}

// TestBatteryPasses is the production view: every probe passes in both
// network modes (the network probe is N/A with host), as a throwaway agent
// user that is gone afterwards.
func TestBatteryPasses(t *testing.T) {
	// Short: the broker socket's path must fit a sockaddr_un.
	work, err := os.MkdirTemp("", "ac")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(work) })
	require.NoError(t, os.Chmod(work, 0o755))
	rep, err := Run(context.Background(), Options{Exe: testAwf, RootFS: testRootFS, WorkDir: work, CgroupParent: testCgroupParent})
	require.NoError(t, err)
	require.Len(t, rep.Views, 2)
	for _, v := range rep.Views {
		assert.Empty(t, failing(v), "network %s:\n%s", v.Network, dump(t, rep))
		assert.Len(t, v.Results, len(catalogue))
	}
	assert.Equal(t, verify.NotApplicable, verdicts(rep.Views[0])[IDNetwork])
	assert.Equal(t, verify.Pass, verdicts(rep.Views[1])[IDNetwork])
	assert.True(t, rep.OK, dump(t, rep))
	_, err = user.Lookup(rep.Host.AgentUser)
	assert.Error(t, err, "the throwaway agent user %s must be removed", rep.Host.AgentUser)
	// Nothing of the fixtures is left: no work directory, no cgroup leaf.
	left, err := os.ReadDir(work)
	require.NoError(t, err)
	assert.Empty(t, left)
	for _, v := range rep.Views {
		leaf := filepath.Dir(strings.Fields(result(v, IDCgroupFile).Evidence)[0])
		assert.True(t, strings.HasPrefix(leaf, "/sys/fs/cgroup/"), leaf)
		assert.NoDirExists(t, leaf)
	}
}

// TestWeakenedTwins removes one control at a time and requires exactly the
// probes that watch it to FAIL: each probe of the battery can fail.
func TestWeakenedTwins(t *testing.T) {
	hidden := []string{IDAuditArchive, IDEngineSocket, IDPrivateBase, IDRootFSCache, IDSource}
	viewProbes := []string{IDAuditArchive, IDCgroupFile, IDCounters, IDEngineSocket, IDNetwork, IDPrivateBase, IDProc, IDProcKernel, IDRootFSCache, IDSource, IDSysCgroup}
	cases := []struct {
		name string
		o    Options
		want []string
	}{
		{"nothing hidden", Options{TestOnlyShim: func(a *host.ShimArgs) {
			a.Hide = nil
			a.PrivateBase = "/nonexistent-awf-agentcheck"
		}}, hidden},
		{"a credential left in", Options{TestOnlyEnv: func(env []string) []string {
			return append(env, "GH_ENTERPRISE_TOKEN=left-in")
		}}, []string{IDCredentials}},
		{"the broker socket hidden", Options{TestOnlyShim: func(a *host.ShimArgs) {
			a.Hide = append(a.Hide, a.IngressRoot)
		}}, []string{IDBrokerSocket}},
		{"the host network where none was asked", Options{TestOnlyShim: func(a *host.ShimArgs) {
			a.Network = host.NetworkHost
		}}, []string{IDNetwork}},
		{"no shim: the host's own view", Options{TestOnlyNoShim: true}, viewProbes},
	}
	// The real shim, with one control of the view removed at a time.
	for _, k := range []struct {
		knob string
		want []string
	}{
		{"TestOnlyNoHidepid", []string{IDProc}},
		{"TestOnlyKeepProc", []string{IDProcKernel}},
		{"TestOnlyLiveProc", []string{IDCounters}},
		{"TestOnlyLiveSysinfo", []string{IDCounters}},
		{"TestOnlyHostSys", []string{IDCgroupFile, IDSysCgroup}},
		{"TestOnlyNoCgroupNS", []string{IDSysCgroup}},
	} {
		knobs := `{"` + k.knob + `":true}`
		cases = append(cases, struct {
			name string
			o    Options
			want []string
		}{"shim " + k.knob, Options{TestOnlyShimExe: testSelf, TestOnlyEnv: func(env []string) []string {
			return append(env, knobsEnv+"="+knobs)
		}}, k.want})
	}
	// Without the shim the agent shares the host's network namespace, which
	// shows more than lo on every host this runs on but a bare one.
	if ifs, err := net.Interfaces(); err == nil && len(ifs) == 1 {
		cases[len(cases)-1].want = slices.DeleteFunc(cases[len(cases)-1].want, func(id string) bool { return id == IDNetwork })
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.Networks = []string{host.NetworkNone}
			rep := run(t, c.o)
			require.Len(t, rep.Views, 1)
			assert.Equal(t, c.want, failing(rep.Views[0]), dump(t, rep))
			assert.False(t, rep.OK)
			if c.o.TestOnlyNoShim {
				// The live counters moved because the sandbox ran: the fork
				// counter saw at least its 1,000 threads.
				ev := result(rep.Views[0], IDCounters).Evidence
				m := regexp.MustCompile(`processes \+(\d+)`).FindStringSubmatch(ev)
				require.NotNil(t, m, ev)
				n, _ := strconv.Atoi(m[1])
				assert.GreaterOrEqual(t, n, loadThreads, ev)
				assert.Contains(t, ev, "sysinfo(2) (", "the live sysinfo(2) must have moved too")
				assert.Contains(t, ev, "/proc/stat")
			}
		})
	}
}
