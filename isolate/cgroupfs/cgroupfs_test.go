package cgroupfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/mountinfo"
)

func TestReadEvents(t *testing.T) {
	cases := []struct {
		name    string
		v2      bool
		files   map[string]string // name -> content, in one directory
		want    Events
		wantErr string // "" for none
	}{
		{name: "v2", v2: true,
			files: map[string]string{"memory.events": "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 0\n", "pids.events": "max 7\n"},
			want:  Events{OOMKills: 2, PidsMax: 7}},
		{name: "v1", files: map[string]string{"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n", "pids.events": "max 0\n"},
			want: Events{OOMKills: 1}},
		{name: "v1 files on v2", v2: true, files: map[string]string{"memory.oom_control": "oom_kill 1\n", "pids.events": "max 3\n"},
			want: Events{PidsMax: 3}, wantErr: "memory.events"},
		{name: "no pids file", v2: true, files: map[string]string{"memory.events": "oom_kill 5\n"},
			want: Events{OOMKills: 5}, wantErr: "pids.events"},
		{name: "no key", v2: true, files: map[string]string{"memory.events": "oom 1\n", "pids.events": "max 1\n"},
			want: Events{PidsMax: 1}, wantErr: "no oom_kill"},
		{name: "not a number", v2: true, files: map[string]string{"memory.events": "oom_kill x\n", "pids.events": "max 1\n"},
			want: Events{PidsMax: 1}, wantErr: "oom_kill"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, body := range c.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644))
			}
			got, err := ReadEvents(c.v2, dir, dir)
			assert.Equal(t, c.want, got)
			if c.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, c.wantErr)
			}
		})
	}
}

func TestProcs(t *testing.T) {
	dir := t.TempDir()
	pids, err := Procs(filepath.Join(dir, "gone"))
	require.NoError(t, err)
	assert.Nil(t, pids, "a cgroup that is gone has no processes")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("12\n0\nx\n34\n"), 0o644))
	pids, err = Procs(dir)
	require.NoError(t, err)
	assert.Equal(t, []int{12, 34}, pids)
}

// TestEnableControllers runs on plain files: what it checks is which
// controllers are written to cgroup.subtree_control, and when it refuses.
// The kernel's side (a write enables each named controller) is exercised by
// every backend on a cgroup v2 host.
func TestEnableControllers(t *testing.T) {
	tests := []struct {
		name, offered, enabled string
		ctrls                  []string
		wantWrite              string // "" = no write
		wantErr                string
	}{
		{name: "all missing", offered: "cpuset cpu io memory pids", ctrls: []string{"memory", "pids", "cpu"}, wantWrite: "+memory +pids +cpu"},
		{name: "some on", offered: "cpuset cpu io memory pids", enabled: "memory", ctrls: []string{"memory", "pids"}, wantWrite: "+pids"},
		{name: "all on: no write", offered: "cpu memory pids", enabled: "cpu memory pids", ctrls: []string{"memory", "pids", "cpu"}},
		{name: "asked twice", offered: "cpu memory", ctrls: []string{"cpu", "cpu"}, wantWrite: "+cpu"},
		{name: "none asked", offered: "cpu"},
		{name: "not offered", offered: "cpu memory", ctrls: []string{"memory", "cpuset"}, wantErr: "controller cpuset is not available"},
		{name: "nothing offered", ctrls: []string{"pids"}, wantErr: "controller pids is not available"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte(tc.offered+"\n"), 0o644))
			sc := filepath.Join(dir, "cgroup.subtree_control")
			require.NoError(t, os.WriteFile(sc, []byte(tc.enabled+"\n"), 0o644))
			before, err := os.Stat(sc)
			require.NoError(t, err)
			err = EnableControllers(dir, tc.ctrls...)
			got, rerr := os.ReadFile(sc)
			require.NoError(t, rerr)
			after, serr := os.Stat(sc)
			require.NoError(t, serr)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.Contains(t, err.Error(), dir, "the error names the directory")
				assert.Equal(t, tc.enabled+"\n", string(got), "a refusal writes nothing")
				return
			}
			require.NoError(t, err)
			if tc.wantWrite == "" {
				assert.Equal(t, tc.enabled+"\n", string(got), "nothing to enable writes nothing")
				assert.Equal(t, before.ModTime(), after.ModTime(), "cgroup.subtree_control was written")
				return
			}
			assert.Equal(t, tc.wantWrite, string(got))
		})
	}
	t.Run("no cgroup", func(t *testing.T) {
		require.ErrorContains(t, EnableControllers(filepath.Join(t.TempDir(), "gone"), "cpu"), "controllers of")
	})
}

// Lines of a hybrid host's mountinfo.
const (
	infoMem   = "35 25 0:30 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,memory\n"
	infoCPU   = "36 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:16 - cgroup cgroup rw,cpu,cpuacct\n"
	infoV2    = "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate,memory\n"
	infoTmpfs = "25 1 0:22 / /sys/fs/cgroup ro shared:9 - tmpfs tmpfs ro,mode=755\n"
)

// table parses a mount table as Mode reads the host's.
func table(t *testing.T, info string) []mountinfo.Mount {
	t.Helper()
	ms, err := mountinfo.Parse(strings.NewReader(info))
	require.NoError(t, err)
	return ms
}

func TestHasV1Controller(t *testing.T) {
	tests := []struct {
		name, info, ctrl string
		want             bool
	}{
		{"memory hierarchy", infoTmpfs + infoCPU + infoMem, "memory", true},
		{"only cpu", infoTmpfs + infoCPU, "memory", false},
		{"a cgroup2 option is not a v1 hierarchy", infoV2, "memory", false},
		{"a controller is a whole option", infoCPU, "cpua", false},
		{"empty", "", "memory", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, hasV1Controller(table(t, tc.info), tc.ctrl)) })
	}
}

// TestV1Mode: off a pure v2 host, a v2 mount beside the v1 hierarchies
// makes the host hybrid; verify reports the difference, the backends take
// one path for both (IsV1).
func TestV1Mode(t *testing.T) {
	tests := []struct {
		name, info, want string
	}{
		{"hybrid", infoTmpfs + infoV2 + infoCPU + infoMem, ModeHybrid},
		{"v1 only", infoTmpfs + infoCPU + infoMem, ModeV1},
		{"no memory hierarchy", infoTmpfs + infoV2 + infoCPU, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v1Mode(table(t, tc.info))
			if tc.want == "" {
				require.ErrorContains(t, err, "no v1 memory controller")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.True(t, IsV1(got))
		})
	}
	for _, m := range []string{ModeV2, ModeV2Delegated} {
		assert.False(t, IsV1(m), m)
	}
}

// TestDelegated: the runtimes, the agent cgroup and verify read a service
// manager's delegation mark by this one rule: trusted.delegate or
// user.delegate set to 1.
func TestDelegated(t *testing.T) {
	tests := []struct {
		name, attr, value string
		want              bool
	}{
		{"unmarked", "", "", false},
		{"trusted.delegate", "trusted.delegate", "1", true},
		{"user.delegate", "user.delegate", "1", true},
		{"a mark set to 0", "trusted.delegate", "0", false},
		{"another attribute", "trusted.other", "1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.attr != "" {
				require.NoError(t, unix.Setxattr(dir, tc.attr, []byte(tc.value), 0), "this test sets xattrs as root")
			}
			assert.Equal(t, tc.want, Delegated(dir))
		})
	}
}
