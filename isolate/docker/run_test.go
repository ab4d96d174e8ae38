package docker

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

func TestRunTrivialQuery(t *testing.T) {
	r := newTestRuntime(t)
	var pid int
	ctx := context.Background()
	// The job outlives the Engine's inspect after start, which is when
	// docker learns the pid: a job already gone by then has no pid to give
	// (on a loaded host a bare InspectScript sometimes was).
	script := isolatetest.InspectScript + "\nimport time\ntime.sleep(2)\n"
	o := r.Run(ctx, isolate.Spec{Template: template(t, r, ""), Job: isolate.Job{
		InvocationID: "trivial", Script: []byte(script), OnStart: func(p int) { pid = p },
	}})
	got := isolatetest.Inspected(t, o, testRootFS)
	assert.Equal(t, "1", got["nnp"])
	assert.Equal(t, "2", got["seccomp"])
	assert.Positive(t, pid, "OnStart gets the job's host pid")
}

// backend is docker's side of the tests every backend runs alike, with
// docker's own limit outcomes.
var backend = isolatetest.Backend[*Runtime]{
	New: newTestRuntime, Template: template, Leftovers: requireNoLeftovers,
	EvictRoot: evictRoot, Unit: "container",
	LimitCases: []isolatetest.LimitCase{
		{Name: "memory", Want: isolate.KindOOM,
			Limits: func(l *isolate.Limits) { l.MemoryBytes = 64 << 20 },
			Script: "b = []\nwhile True:\n    b.append(bytearray(8 << 20))\n"},
		{Name: "fork is forbidden", Want: isolate.KindSeccompKill,
			Script: "import os\nwhile True:\n    os.fork()\n"},
		{Name: "output is a fifo", Want: isolate.KindOutputInvalid, Weaken: isolate.Weakening{NoSeccomp: true},
			Script: "import os\nos.mkfifo('/query/out')\n"},
	},
	// The busy job is the one running container of r's state dir; the
	// idle sandbox's was created, stopped, by its Prepare.
	Crash: func(t testing.TB, r *Runtime) isolatetest.Crash {
		return isolatetest.Crash{
			StateDir: r.dir, Wait: time.Minute, SweepTime: time.Minute,
			Running: func() bool { return len(runningOf(t, r)) == 1 },
			Open: func(h isolate.HostConfig) (isolate.Runtime, error) {
				h.DockerSocket = testSocket
				return New(h)
			},
			Swept: func() { assert.Empty(t, containersOf(t, r)) },
		}
	},
	// The declared residual (docs/security.md): the Engine builds the
	// root, /etc's image directory and the files it binds into /etc on
	// its data root's filesystem, the host's disk on a default install.
	HostDisk: func(t testing.TB, _ *Runtime) ([]string, bool) {
		info, err := Info(context.Background(), testSocket)
		require.NoError(t, err)
		return append([]string{"/", "/etc"}, isolate.EngineEtcFiles()...), sameDevice(t, info.RootDir, os.TempDir())
	},
}

// sameDevice reports whether paths a and b lie on one filesystem.
func sameDevice(t testing.TB, a, b string) bool {
	t.Helper()
	sa, err := os.Stat(a)
	require.NoError(t, err)
	sb, err := os.Stat(b)
	require.NoError(t, err)
	return sa.Sys().(*syscall.Stat_t).Dev == sb.Sys().(*syscall.Stat_t).Dev
}

// TestSuite runs the jobs every backend runs alike.
func TestSuite(t *testing.T) { isolatetest.Suite(t, Name, backend) }

// TestSweepRemovesWhatACrashLeft leaves a prepared sandbox and a running
// container behind, as a crashed broker would, and sweeps them from a fresh
// runtime over the same state dir.
func TestSweepRemovesWhatACrashLeft(t *testing.T) { isolatetest.SweepRemovesWhatACrashLeft(t, backend) }

// TestSandboxCPUs runs a container pinned to the host's last CPU (as awf
// run pins it, away from the agent's CPUs) and checks what the script sees.
func TestSandboxCPUs(t *testing.T) {
	cpus := isolatetest.LastCPU(t)
	r := newTestRuntimeWith(t, isolate.HostConfig{SandboxCPUs: cpus})
	o := run(t, r, template(t, r, ""), `import json, os
allowed = [l.split(":", 1)[1].strip() for l in open("/proc/self/status") if l.startswith("Cpus_allowed_list:")][0]
open("/query/out", "w").write(json.dumps([allowed, sorted(os.sched_getaffinity(0))]))
`)
	require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
	assert.JSONEq(t, `["`+cpus+`", [`+cpus+`]]`, string(o.Output))
}

func TestFailClosedWithoutDaemon(t *testing.T) {
	notSocket := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notSocket, nil, 0o600))
	// A socket file nobody listens on any more.
	dead := filepath.Join(t.TempDir(), "dead.sock")
	l, err := net.Listen("unix", dead)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
	for _, sock := range []string{"", "/nonexistent/docker.sock", notSocket, "tcp://127.0.0.1:2375", "relative.sock", dead} {
		r, err := New(isolate.HostConfig{RunID: isolatetest.RandomID(t), StateDir: t.TempDir(), DockerSocket: sock})
		require.NoError(t, err)
		t.Run(sock, func(t *testing.T) { isolatetest.FailsClosedWithout(t, r, testRoot, "sock") })
	}
}

// engineTap sees each Engine call of a sweep: it counts the container
// listings and, when listedCreate is set, answers the first removal of a
// container with the Engine's 404, as the Engine does for a container it
// already lists while its create is still under way (the listing reads a
// replica the create writes before the container can be looked up).
type engineTap struct {
	next         http.RoundTripper
	listedCreate bool
	lists        atomic.Int32
	answered     atomic.Bool
}

func (c *engineTap) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/containers/json"):
		c.lists.Add(1)
	case req.Method == http.MethodDelete && c.listedCreate && c.answered.CompareAndSwap(false, true):
		return &http.Response{
			StatusCode: http.StatusNotFound, Header: http.Header{"Content-Type": {"application/json"}},
			Body:    io.NopCloser(strings.NewReader(`{"message":"No such container"}`)),
			Request: req,
		}, nil
	}
	return c.next.RoundTrip(req)
}

// TestSweepAfterAPreparedSandbox sweeps a crashed runtime's prepared
// sandbox (its container created, its journal naming it) from a runtime of
// the next run over the same state dir, as the watchdog's.
//   - removed: the sweep's first listing removes it; the sweep must not
//     then take the journal's container for a create still under way and
//     poll for it (createSettle), which made every reclaim of a killed run
//     wait 1.5 s.
//   - listed create: the Engine lists the container but cannot remove it
//     yet; the sweep must not count it removed, or the Engine finishes the
//     create after the sweep and the container is left (a kill of awf run
//     right after readiness met the warm pool's create in a CI run).
func TestSweepAfterAPreparedSandbox(t *testing.T) {
	for _, tc := range []struct {
		name         string
		listedCreate bool
		maxLists     int32
	}{
		{name: "removed", maxLists: 1},
		{name: "listed create", listedCreate: true, maxLists: 1 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			crashed := newTestRuntime(t)
			sb, err := crashed.Prepare(ctx, template(t, crashed, ""))
			require.NoError(t, err)
			require.Len(t, containersOf(t, crashed), 1)

			rt, err := New(isolate.HostConfig{RunID: isolatetest.RandomID(t), StateDir: filepath.Dir(crashed.dir), DockerSocket: testSocket})
			require.NoError(t, err)
			after := rt.(*Runtime)
			tap := &engineTap{next: after.eng.hc.Transport, listedCreate: tc.listedCreate}
			after.eng.hc.Transport = tap
			require.NoError(t, after.Sweep(ctx))
			assert.Empty(t, containersOf(t, crashed), "the crashed runtime's container is left")
			assert.Equal(t, tc.listedCreate, tap.answered.Load(), "the listed create was not met")
			assert.LessOrEqual(t, tap.lists.Load(), tc.maxLists, "the sweep listed the Engine's containers again after removing the journal's container")
			require.NoError(t, after.Close())
			require.NoError(t, sb.Destroy(ctx))
		})
	}
}
