package cgroupfs

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestParseCgroup2Line(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		ok         bool
		want       Cgroup2Mount
	}{
		{"hybrid", "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw", true,
			Cgroup2Mount{Point: "/sys/fs/cgroup/unified", Flags: unix.MS_RELATIME}},
		{"systemd v2", "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot", true,
			Cgroup2Mount{Point: "/sys/fs/cgroup", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RELATIME, Data: "nsdelegate,memory_recursiveprot"}},
		{"already favoured", "30 23 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 ro,favordynmods", true,
			Cgroup2Mount{Point: "/sys/fs/cgroup", Flags: unix.MS_RDONLY | unix.MS_NOSUID, Data: "favordynmods", FavorDynmods: true}},
		{"v1", "32 31 0:29 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,memory", false, Cgroup2Mount{}},
		{"escaped point", `41 31 0:38 / /mnt/a\040b rw - cgroup2 cgroup2 rw`, false, Cgroup2Mount{}},
		{"short", "41 31 0:38 / - cgroup2", false, Cgroup2Mount{}},
		{"empty", "", false, Cgroup2Mount{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := ParseCgroup2Line(tc.line)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, tc.want, *m)
			}
		})
	}
}

// TestFindCgroup2OnThisHost: every host the project supports has a cgroup2
// mount (pure v2, or hybrid's unified tree).
func TestFindCgroup2OnThisHost(t *testing.T) {
	m, err := FindCgroup2()
	require.NoError(t, err)
	require.NotNil(t, m, "no cgroup2 mount in /proc/self/mountinfo")
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(m.Point, &st))
	require.Equal(t, int64(unix.CGROUP2_SUPER_MAGIC), int64(st.Type))
}

func FuzzParseCgroup2Line(f *testing.F) {
	f.Add("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw")
	f.Add("30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate,favordynmods")
	f.Add("1 2 3 4 5 6 - cgroup2")
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := ParseCgroup2Line(line)
		if !ok {
			return
		}
		opts := strings.Split(m.Data, ",")
		if m.Point == "" || slices.Contains(opts, "rw") || slices.Contains(opts, "ro") {
			t.Fatalf("%q: point %q data %q", line, m.Point, m.Data)
		}
		if m.FavorDynmods != slices.Contains(opts, "favordynmods") {
			t.Fatalf("%q: favordynmods %v but data %q", line, m.FavorDynmods, m.Data)
		}
	})
}

// FuzzHasV1Controller: a line counts only when it is a well-formed cgroup
// (v1) line whose superblock options name the controller whole; the oracle
// finds the options after the " - cgroup " separator its own way.
func FuzzHasV1Controller(f *testing.F) {
	f.Add("35 25 0:30 / /sys/fs/cgroup/memory rw,nosuid shared:15 - cgroup cgroup rw,memory", "memory")
	f.Add("30 25 0:26 / /sys/fs/cgroup/unified rw shared:10 - cgroup2 cgroup2 rw,memory", "memory")
	f.Add("1 2 3 4 5 6 - cgroup x cpu,cpuacct", "cpu")
	f.Fuzz(func(t *testing.T, line, ctrl string) {
		if strings.Contains(line, "\n") {
			return
		}
		got := hasV1Controller(line, ctrl)
		f := strings.Fields(line)
		want := false
		for i, w := range f {
			if w == "-" {
				want = i >= 6 && len(f) >= i+4 && f[i+1] == "cgroup" && slices.Contains(strings.Split(f[i+3], ","), ctrl)
				break
			}
		}
		if got != want {
			t.Fatalf("hasV1Controller(%q, %q) = %v, want %v", line, ctrl, got, want)
		}
	})
}
