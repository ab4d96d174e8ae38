package cgroupfs

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/mountinfo"
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
	ms, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return nil, fmt.Errorf("cgroupfs: %w", err)
	}
	for _, m := range ms {
		if c, ok := cgroup2Of(m); ok {
			return c, nil
		}
	}
	return nil, nil
}

// cgroup2Of reports whether m is a cgroup2 mount and describes it.
func cgroup2Of(m mountinfo.Mount) (*Cgroup2Mount, bool) {
	if m.FSType != "cgroup2" {
		return nil, false
	}
	c := &Cgroup2Mount{Point: m.Point}
	for _, o := range m.Options {
		c.Flags |= mountFlags[o]
	}
	var super []string
	for _, o := range m.Super {
		switch o {
		case "rw", "ro", "":
		case "favordynmods":
			c.FavorDynmods = true
			super = append(super, o)
		default:
			super = append(super, o)
		}
	}
	c.Data = strings.Join(super, ",")
	return c, true
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
