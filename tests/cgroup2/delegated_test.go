//go:build cgroup2

package cgroup2_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/cgroupfs"
	"github.com/awf-project/awf/isolate/gvisor"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/isolate/verify"
)

// TestDelegatedSubtree runs the broker's backends as a service manager runs
// a unit with Delegate=yes: the process starts inside a cgroup marked
// trusted.delegate, and may manage only that subtree. Every sandbox cgroup
// must then go below it (never beside it, never at the root), the process
// must move itself into the supervisor leaf (an inner cgroup with processes
// could hand no controller to its children), and nothing may be written
// above the delegated cgroup. This is the placement both direct and gvisor
// take from cgroupfs.V2Base, and the agent's cgroup (broker/host) and
// verify's host report too.
func TestDelegatedSubtree(t *testing.T) {
	requireV2(t)
	unit := delegatedUnit(t)
	rel := strings.TrimPrefix(unit, cgroupRoot+"/")

	mode, err := cgroupfs.Mode()
	require.NoError(t, err)
	require.Equal(t, cgroupfs.ModeV2Delegated, mode, "a process in a cgroup marked trusted.delegate")

	e := newEnv(t)
	own, err := cgroupfs.OwnV2()
	require.NoError(t, err)
	assert.Equal(t, "/"+rel+"/"+cgroupfs.SupervisorLeaf, own, "the runtime moves its process into the supervisor leaf")
	assert.Equal(t, "", readTrim(filepath.Join(unit, "cgroup.procs")), "the delegated cgroup itself keeps no process")
	for _, c := range cgroupfs.SandboxControllers() {
		assert.Contains(t, strings.Fields(readTrim(filepath.Join(unit, "cgroup.subtree_control"))), c,
			"the delegated cgroup hands %s to its children", c)
	}

	t.Run("direct", func(t *testing.T) {
		var dir, memMax string
		out := e.run(t, "import json\njson.dump(True, open('/query/out','w'))\n",
			func(l *isolate.Limits) { l.MemoryBytes = 80 << 20 },
			func(p int) {
				dir, _ = cgroupOf(p)
				memMax = readTrim(filepath.Join(dir, "memory.max"))
			})
		require.Equal(t, isolate.KindOK, out.Kind, "detail: %s", out.Detail)
		assert.True(t, strings.HasPrefix(dir, unit+"/awf/"), "sandbox cgroup %s is not below the delegated %s/awf", dir, unit)
		assert.Equal(t, strconv.Itoa(80<<20), memMax, "the limit is written in the delegated subtree")
	})

	t.Run("gvisor", func(t *testing.T) {
		runID := isolatetest.RandomID(t)
		rt, err := gvisor.New(isolate.HostConfig{RunID: runID, StateDir: t.TempDir(), CgroupParent: "awf"})
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			assert.NoError(t, rt.Sweep(ctx))
			assert.NoError(t, rt.Close())
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		require.NoError(t, rt.Probe(ctx), "the gvisor runtime must be usable here")

		// gvisor reports no job pid: the sandbox's cgroup is found by its
		// name while the script sleeps, below the unit or anywhere else.
		leaf := gvisor.Name + "-" + runID + "-*"
		seen := make(chan []string, 1)
		go func() {
			var m []string
			for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && len(m) == 0; {
				for _, g := range []string{filepath.Join(cgroupRoot, "*", leaf), filepath.Join(cgroupRoot, "*", "*", leaf)} {
					found, _ := filepath.Glob(g)
					m = append(m, found...)
				}
				time.Sleep(50 * time.Millisecond)
			}
			seen <- m
		}()
		tmpl := e.tmpl
		tmpl.RunID = runID
		out := rt.Run(ctx, isolate.Spec{Template: tmpl, Job: isolate.Job{
			InvocationID: "delegated", Script: []byte("import json, time\ntime.sleep(5)\njson.dump(True, open('/query/out','w'))\n"),
		}})
		require.Equal(t, isolate.KindOK, out.Kind, "detail: %s", out.Detail)
		got := <-seen
		require.NotEmpty(t, got, "no gvisor sandbox cgroup appeared")
		for _, d := range got {
			assert.True(t, strings.HasPrefix(d, unit+"/awf/"), "gvisor sandbox cgroup %s is not below the delegated %s/awf", d, unit)
		}
	})

	t.Run("agent", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		a, err := host.PlanAgentCgroup(isolatetest.RandomID(t), "awf")
		require.NoError(t, err)
		assert.Equal(t, cgroupfs.ModeV2Delegated, a.Mode)
		require.NoError(t, host.CreateAgentCgroup(ctx, a))
		t.Cleanup(func() { assert.NoError(t, host.RemoveAgentCgroup(context.Background(), a)) })
		for _, d := range a.Dirs() {
			assert.True(t, strings.HasPrefix(d, unit+"/"), "the agent's cgroup %s is not below the delegated %s", d, unit)
			assert.DirExists(t, d)
		}
	})

	// verify's host report speaks of the same placement, in the same words.
	t.Run("verify", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		f, rs := verify.CheckHost(ctx, verify.HostOptions{CgroupParent: "awf"})
		assert.Equal(t, cgroupfs.ModeV2Delegated, f.CgroupMode)
		var found bool
		for _, r := range rs {
			if r.ID == "host/cgroup" {
				found = true
				assert.Equal(t, verify.Pass, r.Status, r.Evidence)
				assert.Contains(t, r.Evidence, "/"+rel+"/awf")
			}
		}
		assert.True(t, found, "no host/cgroup result")
	})
}

// delegatedUnit makes a fresh cgroup below the root marked as a service
// manager marks a unit with Delegate=yes, with the controllers its parent
// gives a delegated unit, and moves this process into it. At cleanup, which
// runs after every runtime the test opens has closed, the process goes back
// to where it was and the unit's whole subtree is removed.
func delegatedUnit(t *testing.T) string {
	t.Helper()
	orig, err := cgroupfs.OwnV2()
	require.NoError(t, err)
	require.NoError(t, cgroupfs.EnableControllers(cgroupRoot, cgroupfs.SandboxControllers()...))
	unit := filepath.Join(cgroupRoot, "awf-delegated-"+isolatetest.RandomID(t)[:8]+".service")
	require.NoError(t, os.Mkdir(unit, 0o755))
	t.Cleanup(func() {
		assert.NoError(t, os.WriteFile(filepath.Join(cgroupRoot, orig, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644),
			"move the test process back to %s", orig)
		assert.NoError(t, removeTree(unit))
	})
	require.NoError(t, unix.Setxattr(unit, "trusted.delegate", []byte("1"), 0), "mark %s delegated", unit)
	require.NoError(t, os.WriteFile(filepath.Join(unit, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644))
	return unit
}

// removeTree removes a cgroup and its descendants, deepest first. A cgroup
// that still holds a process cannot be removed: that is a leak the error
// names.
func removeTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return os.Remove(dir)
}
