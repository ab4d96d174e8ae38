package cgroupfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// The cgroup attach's cheap path.
//
// Moving a task into a cgroup (the write of init's pid to cgroup.procs
// that every sandbox start makes, on cgroup v1 and v2 alike) takes the
// kernel's global cgroup_threadgroup_rwsem for writing, and a writer that
// finds it idle first waits out an RCU grace period: up to about 10 ms of
// a cold start here, less when the host's RCU state lets it pass sooner. A cgroup2 hierarchy mounted with
// favordynmods keeps that lock in its slow-reader mode, so the attach does
// not wait, at a small cost to every fork and exit on the host. It is a
// host setting: awf reports it (verify's host/cgroup) and never changes it.

// Cgroup2Mount is the calling process's cgroup2 mount.
type Cgroup2Mount struct {
	Point string  // mount point
	Flags uintptr // its per-mount flags (MS_*), for a remount that keeps them
	Data  string  // its superblock options without rw/ro, comma-separated
	// FavorDynmods: the hierarchy is mounted favordynmods.
	FavorDynmods bool
}

// FindCgroup2 returns the first cgroup2 mount in /proc/self/mountinfo, or
// nil when there is none.
func FindCgroup2() (*Cgroup2Mount, error) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroupfs: read mountinfo: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if m, ok := ParseCgroup2Line(sc.Text()); ok {
			return m, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cgroupfs: parse mountinfo: %w", err)
	}
	return nil, nil
}

// ParseCgroup2Line reads one mountinfo line ("id parent maj:min root point
// mountopts [optional fields] - fstype source superopts") and reports
// whether it is a cgroup2 mount.
func ParseCgroup2Line(line string) (*Cgroup2Mount, bool) {
	f, sep, ok := mountinfoFields(line, "cgroup2")
	if !ok {
		return nil, false
	}
	// mountinfo escapes a space as \040; no cgroup2 mount point seen in
	// practice has one, and an escaped point is refused rather than
	// unescaped here a second time (isolate/workspace owns that).
	if strings.Contains(f[4], `\`) {
		return nil, false
	}
	m := &Cgroup2Mount{Point: f[4]}
	for _, o := range strings.Split(f[5], ",") {
		m.Flags |= mountFlags[o]
	}
	var super []string
	for _, o := range strings.Split(f[sep+3], ",") {
		switch o {
		case "rw", "ro", "":
		case "favordynmods":
			m.FavorDynmods = true
			super = append(super, o)
		default:
			super = append(super, o)
		}
	}
	m.Data = strings.Join(super, ",")
	return m, true
}

// mountinfoFields splits one mountinfo line and reports whether it is a
// well-formed line of filesystem type fstype; sep is the index of the "-"
// that ends the optional fields, so f[sep+3] holds the superblock options.
func mountinfoFields(line, fstype string) (f []string, sep int, ok bool) {
	f = strings.Fields(line)
	sep = slices.Index(f, "-")
	return f, sep, sep >= 6 && len(f) >= sep+4 && f[sep+1] == fstype
}

// mountFlags are the per-mount options mountinfo prints and their flags.
var mountFlags = map[string]uintptr{
	"ro": unix.MS_RDONLY, "nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV, "noexec": unix.MS_NOEXEC,
	"noatime": unix.MS_NOATIME, "nodiratime": unix.MS_NODIRATIME, "relatime": unix.MS_RELATIME,
	"strictatime": unix.MS_STRICTATIME,
}

// Root is where the host's cgroup hierarchies are mounted.
const Root = "/sys/fs/cgroup"

// Unified reports whether Root is the cgroup v2 hierarchy alone (a pure v2
// host), the test a backend that places its own cgroups uses to choose
// between its v2 and v1 paths. On a hybrid host Root is a tmpfs of v1
// hierarchies, with the v2 one (holding no controllers) below it.
func Unified() (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(Root, &st); err != nil {
		return false, fmt.Errorf("cgroupfs: statfs %s: %w", Root, err)
	}
	return st.Type == unix.CGROUP2_SUPER_MAGIC, nil
}
