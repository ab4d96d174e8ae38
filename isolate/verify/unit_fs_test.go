package verify

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/hostview"
)

func probeByID(t *testing.T, id string) Probe {
	t.Helper()
	for _, p := range Battery() {
		if p.ID == id {
			return p
		}
	}
	t.Fatalf("no probe %s", id)
	return Probe{}
}

// answerCtx is the context of a run that answered ans, checked against the
// probe's schema first.
func answerCtx(t *testing.T, p Probe, ans map[string]any) *probeCtx {
	t.Helper()
	b, err := json.Marshal(ans)
	require.NoError(t, err)
	return exampleCtx(t, p, b)
}

// TestHostDiskCheck is the unit twin of fs/host-disk: a sandbox mount on a
// host disk fails; the root and the Engine's /etc files on one are a WARN
// only where the runtime declares that residual; nothing shared passes.
func TestHostDiskCheck(t *testing.T) {
	p := probeByID(t, "fs/host-disk")
	disk := diskPaths()
	for _, dst := range []string{isolate.DevDir, isolate.DevShmDir, isolate.TmpDir, isolate.QueryDir, isolate.RepoDir, isolate.ScriptDir} {
		assert.Contains(t, disk, dst, "every mount of the description is stat'ed")
	}
	bit := func(path string) int {
		i := slices.Index(disk, path)
		require.GreaterOrEqual(t, i, 0, path)
		return 1 << i
	}
	docker := traitsFor("docker")
	for _, tc := range []struct {
		name   string
		mask   int
		traits traits
		want   Status
		ev     string
	}{
		{"nothing shared", 0, traits{}, Pass, "none of 12"},
		{"the script's directory", bit("/awf"), traits{}, Fail, "/awf on a host disk"},
		{"the script's directory, on docker too", bit("/awf") | bit("/"), docker, Fail, "/, /awf"},
		{"the root", bit("/"), traits{}, Fail, "/ on a host disk"},
		{"docker's root and /etc files", bit("/") | bit("/etc/hosts") | bit("/etc/resolv.conf"), docker, Warn, "declared residual"},
		{"docker's /etc directory", bit("/") | bit("/etc"), docker, Warn, "declared residual"},
		{"/etc elsewhere", bit("/etc"), traits{}, Fail, "/etc on a host disk"},
		{"the last path", bit("/etc/resolv.conf"), traits{}, Fail, "/etc/resolv.conf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := answerCtx(t, p, map[string]any{"mask": tc.mask})
			c.traits = tc.traits
			st, ev := p.check(c)
			assert.Equal(t, tc.want, st, ev)
			assert.Contains(t, ev, tc.ev)
		})
	}
}

// TestHostDisks: the host's own root is among the filesystems compared,
// once, as a script reads it.
func TestHostDisks(t *testing.T) {
	ds := hostDisks("/", "/", "", "/no/such/path")
	require.Len(t, ds, 1)
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs("/", &st))
	assert.Equal(t, [3]int64{int64(st.Blocks), int64(st.Files), st.Bsize}, ds[0])
}

// TestHostCountersCheck is the unit twin of fs/host-counters: any readable
// path fails, except on a runtime whose /proc is its own (WARN).
func TestHostCountersCheck(t *testing.T) {
	p := probeByID(t, "fs/host-counters")
	paths := hostview.SandboxMaskPaths()
	stat := -1
	for i, q := range paths {
		if q == "/proc/stat" {
			stat = i
		}
	}
	require.GreaterOrEqual(t, stat, 0)
	ans := map[string]any{}
	for k := 0; k*maskBits < len(paths); k++ {
		ans[fmt.Sprintf("m%d", k)] = 0
	}
	st, ev := p.check(answerCtx(t, p, ans))
	assert.Equal(t, Pass, st, ev)
	ans[fmt.Sprintf("m%d", stat/maskBits)] = 1 << (stat % maskBits)
	c := answerCtx(t, p, ans)
	st, ev = p.check(c)
	assert.Equal(t, Fail, st, ev)
	assert.Contains(t, ev, "/proc/stat")
	c.traits.sentryProc = true
	st, ev = p.check(c)
	assert.Equal(t, Warn, st, ev)
	// The last path must fit its field too.
	last := len(paths) - 1
	ans[fmt.Sprintf("m%d", stat/maskBits)] = 0
	ans[fmt.Sprintf("m%d", last/maskBits)] = 1 << (last % maskBits)
	st, ev = p.check(answerCtx(t, p, ans))
	assert.Equal(t, Fail, st, ev)
	assert.Contains(t, ev, paths[last])
}

// TestProcInodeCounterCheck is the unit twin of fs/proc-inode-counter: a
// reading within the host's counter fails, the Sentry's own small numbers
// and an absent /proc pass.
func TestProcInodeCounterCheck(t *testing.T) {
	p := probeByID(t, "fs/proc-inode-counter")
	start, err := hostInodeCounter()
	require.NoError(t, err, "the host's inode counter must be readable")
	now, err := hostInodeCounter()
	require.NoError(t, err)
	require.GreaterOrEqual(t, now, start, "the counter only grows")
	for _, tc := range []struct {
		name string
		ans  map[string]any
		want Status
	}{
		{"no /proc", map[string]any{"proc": "ENOENT", "batch": -1, "ino": -1}, Pass},
		{"host counter", map[string]any{"proc": "ok", "batch": now, "ino": now + 1}, Fail},
		{"host inode, no batch seen", map[string]any{"proc": "ok", "batch": -1, "ino": start + 5}, Fail},
		{"the Sentry's own numbers", map[string]any{"proc": "ok", "batch": -1, "ino": 124}, Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := answerCtx(t, p, tc.ans)
			c.inoBefore, c.inoAfter = start, now
			st, ev := p.check(c)
			assert.Equal(t, tc.want, st, ev)
		})
	}
	// Without the host's reading before the run, numbers that never move
	// pass and batches fail.
	c := answerCtx(t, p, map[string]any{"proc": "ok", "batch": -1, "ino": 124})
	c.inoBefore, c.inoAfter = -1, -1
	st, ev := p.check(c)
	assert.Equal(t, Pass, st, ev)
	c = answerCtx(t, p, map[string]any{"proc": "ok", "batch": now, "ino": now + 1})
	c.inoBefore, c.inoAfter = -1, -1
	st, ev = p.check(c)
	assert.Equal(t, Fail, st, "a batched counter that cannot be compared proves nothing: %s", ev)

	// A runtime that declares the residual gets a WARN naming it, never a
	// PASS; the same reading on a runtime that declares nothing fails.
	for _, rt := range []struct {
		name string
		want Status
	}{{"docker", Warn}, {"direct", Fail}, {"gvisor", Fail}} {
		c = answerCtx(t, p, map[string]any{"proc": "ok", "batch": now, "ino": now + 1})
		c.traits = traitsFor(rt.name)
		c.inoBefore, c.inoAfter = start, now
		st, ev = p.check(c)
		assert.Equal(t, rt.want, st, "%s: %s", rt.name, ev)
		if rt.want == Warn {
			assert.Contains(t, ev, "declared residual")
		}
	}
}
