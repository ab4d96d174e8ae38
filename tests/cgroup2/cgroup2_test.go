//go:build cgroup2

// Package cgroup2_test proves the direct sandbox's cgroup v2 behaviour on a
// pure cgroup v2 kernel, and where direct and gvisor place their cgroups
// inside a delegated subtree. It is compiled with the cgroup2 build tag and run by
// `make test-cgroup2` inside a throwaway VM; on any other host it fails, by
// design, because nothing here can be proven without a v2 hierarchy.
package cgroup2_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/isolatetest"
)

func init() { direct.InitIfRequested() }

const cgroupRoot = "/sys/fs/cgroup"

// rootDir is the rootfs shared by every test in this binary.
var rootDir string

func TestMain(m *testing.M) {
	os.Exit(isolatetest.WithRootFS("awf-cgroup2-rootfs-", func(r *isolatetest.RootFS) int {
		rootDir = r.Dir
		return m.Run()
	}))
}

// requireV2 fails the test unless /sys/fs/cgroup is a pure cgroup v2 mount.
func requireV2(t *testing.T) {
	t.Helper()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(cgroupRoot, &st))
	require.Equal(t, int64(unix.CGROUP2_SUPER_MAGIC), int64(st.Type),
		"%s is not a cgroup2 mount: run these tests through `make test-cgroup2`", cgroupRoot)
}

// env is one runtime plus a seed, cleaned up with the test.
type env struct {
	rt   isolate.Runtime
	tmpl isolate.Template
}

func newEnv(t *testing.T) env {
	t.Helper()
	requireV2(t)
	state := t.TempDir()
	seed := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README"), []byte("seed\n"), 0o444))
	require.NoError(t, os.Chmod(seed, 0o555))
	runID := isolatetest.RandomID(t)
	rt, err := direct.New(isolate.HostConfig{RunID: runID, StateDir: state, CgroupParent: "awf"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.Chmod(seed, 0o755) })
	isolatetest.SweepAtCleanup(t, rt, 30*time.Second, func() { assert.NoError(t, rt.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, rt.Probe(ctx), "the direct runtime must be usable here")
	pol := isolatetest.Policy(t)
	lim := isolate.DefaultLimits()
	lim.Wall = 60 * time.Second // the VM is emulated and slow
	return env{rt: rt, tmpl: isolate.Template{RunID: runID, RootFS: rootDir, Repo: seed, Limits: lim, Policy: pol}}
}

func (e env) run(t *testing.T, script string, lim func(*isolate.Limits), onStart func(int)) isolate.Outcome {
	t.Helper()
	tmpl := e.tmpl
	if lim != nil {
		lim(&tmpl.Limits)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return e.rt.Run(ctx, isolate.Spec{Template: tmpl, Job: isolate.Job{
		InvocationID: isolatetest.RandomID(t)[:24], Script: []byte(script), OnStart: onStart,
	}})
}

// cgroupOf returns the absolute cgroup v2 directory of pid.
func cgroupOf(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(cgroupRoot, rest), nil
		}
	}
	return "", fmt.Errorf("pid %d: no cgroup v2 line in %q", pid, b)
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "ERR " + err.Error()
	}
	return strings.TrimSpace(string(b))
}

// TestCgroupV2Layout checks the limits the live sandbox runs under, read from
// its own cgroup while it runs.
func TestCgroupV2Layout(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	got := map[string]string{}
	var dir string
	var pid int
	out := e.run(t, "import time, json\ntime.sleep(1)\njson.dump(True, open('/query/out','w'))\n",
		func(l *isolate.Limits) { l.MemoryBytes = 96 << 20; l.Pids = 33; l.CPUMilli = 500 },
		func(p int) {
			mu.Lock()
			defer mu.Unlock()
			pid = p
			d, err := cgroupOf(p)
			if err != nil {
				got["error"] = err.Error()
				return
			}
			dir = d
			for _, f := range []string{"memory.max", "memory.swap.max", "memory.oom.group", "pids.max", "cpu.max"} {
				got[f] = readTrim(filepath.Join(d, f))
			}
			got["parent.subtree_control"] = readTrim(filepath.Join(filepath.Dir(d), "cgroup.subtree_control"))
			got["root.procs"] = readTrim(filepath.Join(cgroupRoot, "cgroup.procs"))
		})
	require.Equal(t, isolate.KindOK, out.Kind, "detail: %s", out.Detail)
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, got["error"])
	rel, err := filepath.Rel(cgroupRoot, dir)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(rel, "awf/"), "sandbox cgroup %s is not under the dedicated awf parent", rel)
	assert.Equal(t, strconv.Itoa(96<<20), got["memory.max"])
	assert.Equal(t, "0", got["memory.swap.max"], "no swap")
	assert.Equal(t, "1", got["memory.oom.group"])
	assert.Equal(t, "33", got["pids.max"])
	assert.Equal(t, "50000 100000", got["cpu.max"])
	for _, c := range []string{"memory", "pids", "cpu"} {
		assert.Contains(t, strings.Fields(got["parent.subtree_control"]), c, "parent subtree_control must enable %s", c)
	}
	assert.NotContains(t, strings.Fields(got["root.procs"]), strconv.Itoa(pid), "sandbox in the root cgroup's process list")
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "sandbox cgroup %s left behind", dir)
}

// TestCgroupV2Outcomes checks that each limit yields its typed outcome, from
// the v2 event files, and that nothing is left behind.
func TestCgroupV2Outcomes(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name   string
		script string
		lim    func(*isolate.Limits)
		want   isolate.Kind
	}{
		{"oom from memory.events", "b = []\nwhile True:\n    b.append(bytearray(8 << 20))\n",
			func(l *isolate.Limits) { l.MemoryBytes = 64 << 20 }, isolate.KindOOM},
		{"pids from pids.events", "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n",
			func(l *isolate.Limits) { l.Pids = 16 }, isolate.KindPidsLimit},
		// fork is killed by the policy, so the sandbox's extra tasks are threads;
		// cgroup.kill must take all of them, whatever signals they ignore.
		{"timeout kills the whole cgroup", "import signal, threading, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nfor _ in range(4):\n    threading.Thread(target=time.sleep, args=(3600,)).start()\ntime.sleep(3600)\n",
			func(l *isolate.Limits) { l.Wall = 5 * time.Second }, isolate.KindTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var dir string
			out := e.run(t, tc.script, tc.lim, func(p int) { dir, _ = cgroupOf(p) })
			assert.Equal(t, tc.want, out.Kind, "detail: %s", out.Detail)
			require.NotEmpty(t, dir)
			_, err := os.Stat(dir)
			assert.True(t, os.IsNotExist(err), "cgroup %s left behind", dir)
			assertNoSandboxProcesses(t)
		})
	}
}

// assertNoSandboxProcesses fails if any process of uid 65534 is alive.
func assertNoSandboxProcesses(t *testing.T) {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, ent := range ents {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", ent.Name()), &st) == nil && st.Uid == 65534 {
			t.Errorf("process %s of uid 65534 survived the sandbox", ent.Name())
		}
	}
}
