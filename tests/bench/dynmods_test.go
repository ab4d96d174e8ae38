package bench

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/cgroupfs"
)

// The direct-cold-fdm row: the cgroup attach's cheap path (see
// isolate/cgroupfs's Cgroup2Mount) switched on around each of its samples
// and back to what the host had, so that the report can say what the host
// setting buys, side by side. awf itself never changes it.

// hostCgroup2 is the host's cgroup2 mount as the bench found it.
type hostCgroup2 struct{ m cgroupfs.Cgroup2Mount }

// findCgroup2 returns the host's cgroup2 mount, or why the row cannot run.
func findCgroup2() (*hostCgroup2, string) {
	m, err := cgroupfs.FindCgroup2()
	if err != nil {
		return nil, err.Error()
	}
	if m == nil {
		return nil, "BLOCKED: the host has no cgroup2 mount (favordynmods is a cgroup2 option)"
	}
	return &hostCgroup2{m: *m}, ""
}

// remount sets the hierarchy's superblock options to data, keeping its
// per-mount flags.
func (h *hostCgroup2) remount(data string) error {
	if err := unix.Mount("none", h.m.Point, "cgroup2", unix.MS_REMOUNT|h.m.Flags, data); err != nil {
		return fmt.Errorf("remount %s with %q: %w", h.m.Point, data, err)
	}
	return nil
}

// withFavored runs f with favordynmods on, then restores the host's own
// options, and checks that the mount table says so.
func (h *hostCgroup2) withFavored(f func() error) error {
	if h.m.FavorDynmods {
		return f()
	}
	data := "favordynmods"
	if h.m.Data != "" {
		data = h.m.Data + ",favordynmods"
	}
	if err := h.remount(data); err != nil {
		return err
	}
	ferr := f()
	if err := h.remount(h.m.Data); err != nil {
		return fmt.Errorf("restore the host's cgroup2 options: %w (the sample: %v)", err, ferr)
	}
	now, why := findCgroup2()
	if now == nil {
		return fmt.Errorf("after restoring the host's cgroup2 options: %s", why)
	}
	if now.m != h.m {
		return fmt.Errorf("the host's cgroup2 mount is %+v after the sample, want %+v", now.m, h.m)
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
