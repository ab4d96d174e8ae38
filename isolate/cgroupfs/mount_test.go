package cgroupfs

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/mountinfo"
)

// parseCgroup2 reads one mountinfo line as FindCgroup2 reads each.
func parseCgroup2(line string) (*Cgroup2Mount, bool) {
	m, err := mountinfo.ParseLine(line)
	if err != nil {
		return nil, false
	}
	return cgroup2Of(m)
}

func TestCgroup2Of(t *testing.T) {
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
		{"escaped point", `41 31 0:38 / /mnt/a\040b rw - cgroup2 cgroup2 rw`, true, Cgroup2Mount{Point: "/mnt/a b"}},
		{"cgroup2 as the source only", "41 31 0:38 / /x rw - tmpfs cgroup2 rw", false, Cgroup2Mount{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := parseCgroup2(tc.line)
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

// FuzzCgroup2Of: an accepted line's options never keep rw or ro, and
// favordynmods is reported exactly when the options hold it.
func FuzzCgroup2Of(f *testing.F) {
	f.Add("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw")
	f.Add("30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate,favordynmods")
	f.Add("1 2 3 4 5 6 - cgroup2 cgroup2 rw,,ro")
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := parseCgroup2(line)
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
