package e2e

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/host"
)

// TestAgentFrozenDuringMeteredQueries runs one query against an internal
// repository and one against a public one, each in its own run, while the
// test watches the run's agent cgroup from outside: the agent is frozen
// during the metered query and never during the public one. The agent runs
// only on the agent's CPUs and the sandbox only on the sandboxes' CPUs.
func TestAgentFrozenDuringMeteredQueries(t *testing.T) {
	split, err := host.SplitCPUs()
	require.NoError(t, err)
	require.NotEmpty(t, split.Sandbox, "CPU separation needs a host with two or more CPUs")
	u, err := user.Lookup(agentUser)
	require.NoError(t, err)
	for _, tc := range []struct {
		sensitivity string
		frozen      bool
	}{{"internal", true}, {"public", false}} {
		t.Run(tc.sensitivity, func(t *testing.T) {
			cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/r", tc.sensitivity)}, MaxInvocations: 4})
			// The sandbox sleeps long enough for the watcher to look, and
			// answers whether it may run only on the sandboxes' CPUs.
			script := agentScript(t, `
printf 'import os, time\ntime.sleep(1.5)\nw = set()\nfor p in "`+split.Sandbox+`".split(","):\n    a, _, b = p.partition("-")\n    w.update(range(int(a), int(b or a) + 1))\nopen("/query/out","w").write("true" if os.sched_getaffinity(0) == w else "false")\n' > /tmp/s.$$.py
echo "agent-cpus $(grep Cpus_allowed_list /proc/self/status | cut -f2)"
echo "answer $(bounded-query --repo demo/r --schema '{"type":"boolean"}' < /tmp/s.$$.py)"
rm -f /tmp/s.$$.py
`)
			var sawFrozen, sawLeaf atomic.Bool
			var brokerCPUs atomic.Value // every thread's Cpus_allowed_list of the run's broker
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				leaf := ""
				for {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					if leaf == "" {
						leaf = agentLeafOf(u.Uid)
						sawLeaf.Store(leaf != "")
						if leaf != "" {
							brokerCPUs.Store(brokerThreadCPUs(filepath.Base(leaf)))
						}
						continue
					}
					if isFrozen(leaf) {
						sawFrozen.Store(true)
					}
				}
			}()
			r := awfRun(t, cfg, script)
			close(stop)
			<-done
			require.Equal(t, 0, r.code, r.stderr)
			got := lines(r.stdout)
			assert.Equal(t, `{"status":"ok","result":true}`, got["answer"], "the sandbox ran only on CPUs %s", split.Sandbox)
			assert.Equal(t, split.Agent, got["agent-cpus"], "the agent's CPUs")
			require.True(t, sawLeaf.Load(), "the agent's cgroup was never found")
			assert.Equal(t, tc.frozen, sawFrozen.Load(), "agent frozen during a %s query", tc.sensitivity)
			cpus, _ := brokerCPUs.Load().([]string)
			require.NotEmpty(t, cpus, "the run's broker was not found")
			for _, c := range cpus {
				assert.Equal(t, split.Sandbox, c, "a broker thread may run on the agent's CPUs")
			}
		})
	}
}

// agentLeafOf returns the agent cgroup leaf (the one with the freezer) that
// holds a process of uid, or "".
func agentLeafOf(uid string) string {
	leaves, _ := filepath.Glob("/sys/fs/cgroup/freezer/awf-agent/*")
	v2, _ := filepath.Glob("/sys/fs/cgroup/awf-agent/*")
	for _, l := range append(leaves, v2...) {
		b, err := os.ReadFile(filepath.Join(l, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(b)) {
			st, err := os.ReadFile("/proc/" + pid + "/status")
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(st), "\n") {
				if v, ok := strings.CutPrefix(line, "Uid:"); ok {
					if f := strings.Fields(v); len(f) > 0 && f[0] == uid {
						return l
					}
				}
			}
		}
	}
	return ""
}

// brokerThreadCPUs returns the Cpus_allowed_list of every thread of the
// broker of run runID (its command line names the run's spec).
func brokerThreadCPUs(runID string) []string {
	var out []string
	for _, pid := range hostProcesses("broker\x00--serve\x00", runID) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
		for _, task := range tasks {
			st, err := os.ReadFile(task)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(st), "\n") {
				if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
					out = append(out, strings.TrimSpace(v))
				}
			}
		}
	}
	return out
}

// isFrozen reads the kernel's freezer state of a v1 or v2 leaf.
func isFrozen(leaf string) bool {
	if b, err := os.ReadFile(filepath.Join(leaf, "freezer.state")); err == nil {
		return strings.TrimSpace(string(b)) == "FROZEN"
	}
	b, err := os.ReadFile(filepath.Join(leaf, "cgroup.events"))
	return err == nil && strings.Contains(string(b), "frozen 1")
}
