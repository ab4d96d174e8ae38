package direct

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/cgroupfs"
)

const cgroupRoot = cgroupfs.Root

// cgroupSetup is where and how sandboxes get their cgroups.
type cgroupSetup struct {
	mode      string
	parentRel string   // parent cgroup, relative to each hierarchy root
	v1Mounts  []string // v1 (and hybrid unified) mount points, v1 only
	memsw     bool     // v1: swap accounting is available
	cpus      string   // cpuset.cpus of every sandbox; "" = not pinned
}

// setupCgroups prepares the dedicated parent cgroup; cpus is the CPU list
// every sandbox is confined to ("" = not pinned).
func setupCgroups(parent, cpus string) (cgroupSetup, error) {
	mode, err := cgroupfs.Mode()
	if err != nil {
		return cgroupSetup{}, err
	}
	s := cgroupSetup{mode: mode, parentRel: parent, cpus: cpus}
	switch mode {
	case cgroupfs.ModeHybrid, cgroupfs.ModeV1:
		return s, s.setupV1()
	case cgroupfs.ModeV2Delegated:
		base, err := cgroupfs.V2Base(true)
		if err != nil {
			return s, err
		}
		s.parentRel = base + "/" + parent
		return s, s.setupV2(base)
	default:
		return s, s.setupV2("")
	}
}

// setupV2 creates the parent under base (relative to the root) and enables
// the controllers on the way down. Sandboxes are never placed in the root
// cgroup's own process list: they always get a leaf below the parent.
func (s *cgroupSetup) setupV2(base string) error {
	if err := cgroupfs.EnableControllers(filepath.Join(cgroupRoot, base), cgroupfs.SandboxControllers()...); err != nil {
		return err
	}
	parent := filepath.Join(cgroupRoot, s.parentRel)
	if err := mkdirPrivate(parent); err != nil {
		return err
	}
	return cgroupfs.EnableControllers(parent, cgroupfs.SandboxControllers()...)
}

// setupV1 records every v1 hierarchy (and the hybrid unified one) that
// libcontainer will create a leaf in, and checks the controllers we need.
func (s *cgroupSetup) setupV1() error {
	mounts, err := cgroups.GetCgroupMounts(true)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	have := map[string]bool{}
	for _, m := range mounts {
		s.v1Mounts = append(s.v1Mounts, m.Mountpoint)
		for _, ss := range m.Subsystems {
			have[ss] = true
		}
	}
	if cgroups.IsCgroup2HybridMode() {
		s.v1Mounts = append(s.v1Mounts, filepath.Join(cgroupRoot, "unified"))
	}
	// libcontainer would create the parents 0755; made here first, they
	// are 0700. A new v1 cpuset starts empty and the gvisor backend shares
	// this parent, so it gets its parent's CPUs and memory nodes now.
	cpusetMount, _ := cgroups.FindCgroupMountpoint("", "cpuset")
	for _, m := range s.v1Mounts {
		p := filepath.Join(m, s.parentRel)
		if err := mkdirPrivate(p); err != nil {
			return err
		}
		if m == cpusetMount {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if cur, _ := cgroups.ReadFile(p, f); strings.TrimSpace(cur) != "" {
					continue
				}
				v, err := cgroups.ReadFile(m, f)
				if err == nil {
					err = cgroups.WriteFile(p, f, v)
				}
				if err != nil {
					return fmt.Errorf("cgroup: %s of %s: %w", f, p, err)
				}
			}
		}
	}
	for _, c := range cgroupfs.SandboxControllers() {
		if !have[c] {
			return fmt.Errorf("cgroup: v1 controller %s is not mounted", c)
		}
	}
	mem, _ := cgroups.FindCgroupMountpoint("", "memory")
	s.memsw = cgroups.PathExists(filepath.Join(mem, "memory.memsw.limit_in_bytes"))
	if !s.memsw {
		swap, err := swapTotal()
		if err != nil {
			return err
		}
		if swap > 0 {
			return errors.New("cgroup: host has swap but no v1 swap accounting (memsw): swap cannot be denied")
		}
	}
	return nil
}

// mkdirPrivate creates a parent cgroup directory closed to other users
// (defence in depth: its files would be world-readable otherwise), and
// closes an existing one.
func mkdirPrivate(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cgroup: parent: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("cgroup: parent: %w", err)
	}
	return nil
}

// swapTotal reads SwapTotal from /proc/meminfo, in kB.
func swapTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("meminfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "SwapTotal:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("meminfo: no SwapTotal")
}

// v2 reports whether sandboxes use cgroup v2.
func (s cgroupSetup) v2() bool { return !cgroupfs.IsV1(s.mode) }

// libcontainerPath is the absolute cgroup path libcontainer gets for a leaf.
func (s cgroupSetup) libcontainerPath(id string) string { return "/" + s.parentRel + "/" + id }

// parentPath is the parent directory in the memory hierarchy (or the v2 tree).
func (s cgroupSetup) parentPath() string {
	if s.v2() {
		return filepath.Join(cgroupRoot, s.parentRel)
	}
	mem, _ := cgroups.FindCgroupMountpoint("", "memory")
	return filepath.Join(mem, s.parentRel)
}

// leafPaths lists every directory a leaf named id has or may have.
func (s cgroupSetup) leafPaths(id string) []string {
	if s.v2() {
		return []string{filepath.Join(cgroupRoot, s.parentRel, id)}
	}
	out := make([]string, 0, len(s.v1Mounts))
	for _, m := range s.v1Mounts {
		out = append(out, filepath.Join(m, s.parentRel, id))
	}
	return out
}

// controllerPath is the leaf directory that holds ctrl's files.
func (s cgroupSetup) controllerPath(id, ctrl string) string {
	if s.v2() {
		return filepath.Join(cgroupRoot, s.parentRel, id)
	}
	m, err := cgroups.FindCgroupMountpoint("", ctrl)
	if err != nil {
		return ""
	}
	return filepath.Join(m, s.parentRel, id)
}

// readCounters reads the leaf's OOM and pids events. A counter that
// cannot be read is an error: the verdict must not silently miss a limit.
func (s cgroupSetup) readCounters(id string) (cgroupfs.Events, error) {
	return cgroupfs.ReadEvents(s.v2(), s.controllerPath(id, "memory"), s.controllerPath(id, "pids"))
}

// killLeaf kills every process in the leaf.
func (s cgroupSetup) killLeaf(id string) { killDirs(s.leafPaths(id)) }

// removeLeaf kills what is left in the leaf and removes its directories.
func (s cgroupSetup) removeLeaf(ctx context.Context, id string) error {
	return removeDirs(ctx, s.leafPaths(id))
}

// killDirs kills every process in the given cgroup directories:
// cgroup.kill where the kernel has it (v2), SIGKILL to each listed process
// otherwise.
func killDirs(dirs []string) {
	for _, p := range dirs {
		if cgroups.PathExists(filepath.Join(p, "cgroup.kill")) {
			_ = cgroups.WriteFile(p, "cgroup.kill", "1")
			continue
		}
		pids, _ := cgroups.GetPids(p)
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// thawDirs thaws every given cgroup directory that has a freezer (v1
// freezer.state, v2 cgroup.freeze), best effort: a leaf that is gone or has
// no freezer needs nothing.
func thawDirs(dirs []string) {
	for _, p := range dirs {
		switch {
		case cgroups.PathExists(filepath.Join(p, "freezer.state")):
			_ = cgroups.WriteFile(p, "freezer.state", string(cgroups.Thawed))
		case cgroups.PathExists(filepath.Join(p, "cgroup.freeze")):
			_ = cgroups.WriteFile(p, "cgroup.freeze", "0")
		}
	}
}

// removeDirs kills what is left in the cgroup directories and removes
// them, retrying until ctx ends.
func removeDirs(ctx context.Context, dirs []string) error {
	for {
		var left []string
		for _, p := range dirs {
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if err := cgroups.RemovePath(p); err != nil || cgroups.PathExists(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return nil
		}
		killDirs(left)
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup: cannot remove %v: %w", left, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
