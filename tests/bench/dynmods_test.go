package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The cgroup attach's cheap path.
//
// Moving a task into a cgroup (the write of init's pid to cgroup.procs
// that every direct sandbox makes, on cgroup v1 and v2 alike) takes the
// kernel's global cgroup_threadgroup_rwsem for writing, and a writer that
// finds it idle first waits out an RCU grace period: about 10 ms of each
// cold Prepare on this machine class. Mounting the cgroup2 hierarchy with
// favordynmods keeps that lock in its slow-reader mode, so the attach does
// not wait, at a small cost to every fork and exit on the host. It is a
// host setting: awf never changes it. The direct-cold-fdm row switches it
// on around each of its samples and back to what the host had, so that the
// report can say what the setting buys, side by side.

// hostCgroup2 is the host's cgroup2 mount as the bench found it.
type hostCgroup2 struct {
	point string  // mount point
	flags uintptr // its per-mount flags, for a remount that keeps them
	data  string  // its superblock options, as found
	on    bool    // the host already mounts it with favordynmods
}

// findCgroup2 reads the calling process's mount table for the cgroup2
// hierarchy. It returns why the row cannot run when there is none.
func findCgroup2() (*hostCgroup2, string) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Sprintf("read mountinfo: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		h, ok := parseCgroup2Line(sc.Text())
		if ok {
			return h, ""
		}
	}
	return nil, "BLOCKED: the host has no cgroup2 mount (favordynmods is a cgroup2 option)"
}

// parseCgroup2Line reads one mountinfo line: "id parent maj:min root point
// mountopts [optional fields] - fstype source superopts".
func parseCgroup2Line(line string) (*hostCgroup2, bool) {
	f := strings.Fields(line)
	sep := slices.Index(f, "-")
	if sep < 6 || len(f) < sep+4 || f[sep+1] != "cgroup2" {
		return nil, false
	}
	h := &hostCgroup2{point: f[4]}
	for _, o := range strings.Split(f[5], ",") {
		switch o {
		case "ro":
			h.flags |= unix.MS_RDONLY
		case "nosuid":
			h.flags |= unix.MS_NOSUID
		case "nodev":
			h.flags |= unix.MS_NODEV
		case "noexec":
			h.flags |= unix.MS_NOEXEC
		case "noatime":
			h.flags |= unix.MS_NOATIME
		case "nodiratime":
			h.flags |= unix.MS_NODIRATIME
		case "relatime":
			h.flags |= unix.MS_RELATIME
		case "strictatime":
			h.flags |= unix.MS_STRICTATIME
		}
	}
	var super []string
	for _, o := range strings.Split(f[sep+3], ",") {
		switch o {
		case "rw", "ro":
		case "favordynmods":
			h.on = true
			super = append(super, o)
		default:
			super = append(super, o)
		}
	}
	h.data = strings.Join(super, ",")
	return h, true
}

// remount sets the hierarchy's superblock options to data, keeping its
// per-mount flags.
func (h *hostCgroup2) remount(data string) error {
	if err := unix.Mount("none", h.point, "cgroup2", unix.MS_REMOUNT|h.flags, data); err != nil {
		return fmt.Errorf("remount %s with %q: %w", h.point, data, err)
	}
	return nil
}

// withFavored runs f with favordynmods on, then restores the host's own
// options, and checks that the mount table says so.
func (h *hostCgroup2) withFavored(f func() error) error {
	if h.on {
		return f()
	}
	data := "favordynmods"
	if h.data != "" {
		data = h.data + ",favordynmods"
	}
	if err := h.remount(data); err != nil {
		return err
	}
	ferr := f()
	if err := h.remount(h.data); err != nil {
		return fmt.Errorf("restore the host's cgroup2 options: %w (the sample: %v)", err, ferr)
	}
	now, why := findCgroup2()
	if now == nil {
		return fmt.Errorf("after restoring the host's cgroup2 options: %s", why)
	}
	if now.on || now.data != h.data || now.flags != h.flags {
		return fmt.Errorf("the host's cgroup2 options are %q (flags %#x) after the sample, want %q (flags %#x)", now.data, now.flags, h.data, h.flags)
	}
	return ferr
}

// fdmRunner is a cold direct run with favordynmods on around it.
type fdmRunner struct {
	cold *coldRunner
	h    *hostCgroup2
}

func (s *suite) fdmRow(r *benchRepo, w Workload) (runner, error) {
	c, err := s.coldRow("direct")(r, w)
	if err != nil {
		return nil, err
	}
	return &fdmRunner{cold: c.(*coldRunner), h: s.cgroup2}, nil
}

func (f *fdmRunner) once(ctx context.Context) (sample, error) {
	var smp sample
	err := f.h.withFavored(func() error {
		var err error
		smp, err = f.cold.once(ctx)
		return err
	})
	return smp, err
}

func (f *fdmRunner) close() { f.cold.close() }

func TestParseCgroup2Line(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		ok         bool
		want       hostCgroup2
	}{
		{"hybrid", "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw", true,
			hostCgroup2{point: "/sys/fs/cgroup/unified", flags: unix.MS_RELATIME}},
		{"systemd v2", "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot", true,
			hostCgroup2{point: "/sys/fs/cgroup", flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RELATIME, data: "nsdelegate,memory_recursiveprot"}},
		{"already favoured", "30 23 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 ro,favordynmods", true,
			hostCgroup2{point: "/sys/fs/cgroup", flags: unix.MS_RDONLY | unix.MS_NOSUID, data: "favordynmods", on: true}},
		{"v1", "32 31 0:29 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,memory", false, hostCgroup2{}},
		{"short", "41 31 0:38 / - cgroup2", false, hostCgroup2{}},
		{"empty", "", false, hostCgroup2{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := parseCgroup2Line(tc.line)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, tc.want, *h)
			}
		})
	}
}

func FuzzParseCgroup2Line(f *testing.F) {
	f.Add("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw")
	f.Add("30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate,favordynmods")
	f.Add("1 2 3 4 5 6 - cgroup2")
	f.Fuzz(func(t *testing.T, line string) {
		h, ok := parseCgroup2Line(line)
		if !ok {
			return
		}
		if h.point == "" || slices.Contains(strings.Split(h.data, ","), "rw") {
			t.Fatalf("%q: point %q data %q", line, h.point, h.data)
		}
		if h.on != slices.Contains(strings.Split(h.data, ","), "favordynmods") {
			t.Fatalf("%q: on %v but data %q", line, h.on, h.data)
		}
	})
}
