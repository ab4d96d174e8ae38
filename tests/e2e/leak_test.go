package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate/mountinfo"
)

// leakQueries is how many sequential sandboxed queries the leak test runs.
// AWF_E2E_LEAK_QUERIES may lower it for a quick local run; CI uses 500.
func leakQueries(t *testing.T) int {
	if v := os.Getenv("AWF_E2E_LEAK_QUERIES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	return 500
}

// snapshot counts what a leak would grow, for this run only (other tests
// may create sandboxes at the same time): the broker's open fds and
// threads, its child processes, the host mounts and cgroups that carry the
// run id, temp entries named after it, and the runtime's state entries.
type snapshot struct {
	fds, threads, children, mounts, cgroups, tmp, state int
}

func take(t *testing.T, brokerPID int, stateDir string) snapshot {
	t.Helper()
	run := filepath.Base(filepath.Dir(stateDir))
	var s snapshot
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(brokerPID) + "/fd")
	require.NoError(t, err)
	s.fds = len(fds)
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(brokerPID) + "/task")
	require.NoError(t, err)
	s.threads = len(tasks)
	ms, err := mountinfo.Read(mountinfo.Self)
	require.NoError(t, err)
	for _, m := range ms {
		if strings.Contains(m.Point, run) || strings.Contains(m.Root, run) || strings.Contains(m.Source, run) {
			s.mounts++
		}
	}
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.Contains(p, run) {
			s.cgroups++
		}
		return nil
	})
	procs, _ := os.ReadDir("/proc")
	ppid := "PPid:\t" + strconv.Itoa(brokerPID) + "\n"
	for _, p := range procs {
		if st, err := os.ReadFile("/proc/" + p.Name() + "/status"); err == nil && strings.Contains(string(st), ppid) {
			s.children++
		}
	}
	tmp, _ := os.ReadDir(os.TempDir())
	for _, e := range tmp {
		if strings.Contains(e.Name(), run) {
			s.tmp++
		}
	}
	_ = filepath.WalkDir(stateDir, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			s.state++
		}
		return nil
	})
	return s
}

// settled takes a snapshot once the warm pool (boundedQueries.warmPool,
// default 1) holds its one idle sandbox again. The refill after an answer
// runs after its response, on the lane; a request for a repository that
// is not configured queues for the lane too and then needs no sandbox, so
// once it is answered the refill is over.
func settled(t *testing.T, socket string, brokerPID int, stateDir string) snapshot {
	t.Helper()
	barrier := wrapperRequest("demo/not-configured", `{"type":"const","value":1}`, "pass\n")
	require.Equal(t, `{"status":"error"}`, body(t, exchange(t, socket, barrier)))
	return take(t, brokerPID, stateDir)
}

// brokerPID finds the broker process serving socket.
func brokerPID(t *testing.T, socket string) (int, string) {
	t.Helper()
	run := filepath.Base(filepath.Dir(filepath.Dir(socket)))
	if pids := hostProcesses("broker\x00--serve\x00", run); len(pids) > 0 {
		return pids[0], filepath.Join("/var/lib/awf/private", run, "state")
	}
	t.Fatalf("no broker process for %s", socket)
	return 0, ""
}

// TestNoLeakAfterSequentialQueries runs many sequential sandboxed queries
// (the cheapest: a const answer in the first reachable bucket) and checks
// that nothing grows between the first ten and the last.
func TestNoLeakAfterSequentialQueries(t *testing.T) {
	dirs := runDirs()
	n := leakQueries(t)
	cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/pub", "public")}, MaxInvocations: n + 12})
	b := startForeground(t, cfg)
	pid, state := brokerPID(t, b.socket)
	req := wrapperRequest("demo/pub", `{"type":"const","value":1}`, "open('/query/out','w').write('1')\n")
	for i := 0; i < 10; i++ {
		require.Equal(t, `{"status":"ok","result":1}`, body(t, exchange(t, b.socket, req)))
	}
	before := settled(t, b.socket, pid, state)
	for i := 10; i < n; i++ {
		require.Equal(t, `{"status":"ok","result":1}`, body(t, exchange(t, b.socket, req)), "query %d", i)
	}
	after := settled(t, b.socket, pid, state)
	assert.LessOrEqual(t, after.fds, before.fds+1, "broker fds (one connection may be closing)")
	assert.LessOrEqual(t, after.threads, before.threads+2, "broker threads")
	assert.Equal(t, 1, after.children, "broker child processes: the warm pool's one idle sandbox")
	assert.Equal(t, before.mounts, after.mounts, "mounts of this run")
	assert.Equal(t, before.cgroups, after.cgroups, "cgroups of this run")
	assert.Equal(t, before.tmp, after.tmp, "temp entries of this run")
	assert.Equal(t, before.state, after.state, "runtime state entries")
	t.Logf("after %d queries: %+v (after the first 10: %+v)", n, after, before)
	b.stop(t)
	assertNoNewRunDirs(t, dirs)
}
