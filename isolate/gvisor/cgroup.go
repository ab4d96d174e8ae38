package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/cgroupfs"
)

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = cgroupfs.Root

// sentryTasks is the headroom added to the pids limit for the sandbox's own
// host tasks: the Sentry's threads, the gofer and the ptrace stubs. A trivial
// Python job uses about 38 host tasks under the ptrace platform.
const sentryTasks = 64

// cgroup is the per-sandbox cgroup. The backend creates and configures it
// itself before runsc starts; runsc then only joins the sandbox to it and
// leaves it in place, so its OOM and pids counters can be read after the run
// and its removal is under the backend's control.
type cgroup struct {
	v2   bool
	rel  string   // path below each hierarchy root, e.g. "awf/gvisor-<run>-<id>"
	dirs []string // absolute directories, one per hierarchy
}

// hierarchies returns the directory of every mounted cgroup v1 hierarchy.
func hierarchies() ([]string, error) {
	ents, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("cgroup: list %s: %w", cgroupRoot, err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() { // skips the cpu,cpuacct style symlinks
			continue
		}
		p := filepath.Join(cgroupRoot, e.Name())
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil || st.Type != unix.CGROUP_SUPER_MAGIC {
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("cgroup: no cgroup v1 hierarchy is mounted")
	}
	return out, nil
}

// cgroupDirs returns the directories a cgroup at rel occupies.
func cgroupDirs(v2 bool, rel string) ([]string, error) {
	if v2 {
		return []string{filepath.Join(cgroupRoot, rel)}, nil
	}
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	dirs := make([]string, len(hs))
	for i, h := range hs {
		dirs[i] = filepath.Join(h, rel)
	}
	return dirs, nil
}

// newCgroup creates parent/name in every hierarchy and writes the limits.
// cpus is the sandbox's CPU list (HostConfig.SandboxCPUs; "" = the
// parent's). On error whatever was created is removed.
func newCgroup(ctx context.Context, parent, name, cpus string, l isolate.Limits, weak isolate.Weakening) (c *cgroup, err error) {
	v2, err := cgroupfs.Unified()
	if err != nil {
		return nil, err
	}
	c = &cgroup{v2: v2, rel: filepath.Join(parent, name)}
	defer func() {
		if err != nil {
			_ = c.remove(context.WithoutCancel(ctx))
		}
	}()
	if v2 {
		err = c.createV2(parent, cpus, l, weak)
	} else {
		err = c.createV1(parent, cpus, l, weak)
	}
	return c, err
}

func (c *cgroup) createV1(parent, cpus string, l isolate.Limits, weak isolate.Weakening) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		if err := ensureV1Parent(h, parent); err != nil {
			return err
		}
		d := filepath.Join(h, c.rel)
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("cgroup: create %s: %w", d, err)
		}
		c.dirs = append(c.dirs, d)
		if filepath.Base(h) == "cpuset" {
			if err := inheritCpuset(filepath.Dir(d), d); err != nil {
				return err
			}
			if err := writeCPUs(d, cpus); err != nil {
				return err
			}
		}
	}
	mem := filepath.Join(cgroupRoot, "memory", c.rel)
	if err := writeFile(mem, "memory.limit_in_bytes", l.MemoryBytes); err != nil {
		return err
	}
	// Without swap accounting the kernel has no memsw files; the host then
	// must have no swap for the limit to be exact (checked by Probe).
	if _, err := os.Stat(filepath.Join(mem, "memory.memsw.limit_in_bytes")); err == nil {
		if err := writeFile(mem, "memory.memsw.limit_in_bytes", l.MemoryBytes); err != nil {
			return err
		}
	}
	if !weak.NoPidsLimit {
		if err := writeFile(filepath.Join(cgroupRoot, "pids", c.rel), "pids.max", l.Pids+sentryTasks); err != nil {
			return err
		}
	}
	cpu := filepath.Join(cgroupRoot, "cpu", c.rel)
	if err := writeFile(cpu, "cpu.cfs_period_us", 100000); err != nil {
		return err
	}
	return writeFile(cpu, "cpu.cfs_quota_us", l.CPUMilli*100)
}

// ensureV1Parent creates the parent cgroup in hierarchy h when missing.
func ensureV1Parent(h, parent string) error {
	p := filepath.Join(h, parent)
	// 0700: the parent's files stay closed to other users (defence in depth).
	if err := os.Mkdir(p, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil
		}
		return fmt.Errorf("cgroup: create parent %s: %w", p, err)
	}
	if filepath.Base(h) == "cpuset" {
		return inheritCpuset(h, p)
	}
	return nil
}

// inheritCpuset copies cpus and mems from a cpuset's parent: a new v1 cpuset
// starts empty and cannot take tasks.
func inheritCpuset(from, to string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			return fmt.Errorf("cgroup: read %s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(to, f), b, 0o644); err != nil {
			return fmt.Errorf("cgroup: write %s/%s: %w", to, f, err)
		}
	}
	return nil
}

func (c *cgroup) createV2(parent, cpus string, l isolate.Limits, weak isolate.Weakening) error {
	p := filepath.Join(cgroupRoot, parent)
	// 0700: the parent's files stay closed to other users (defence in depth).
	if err := os.MkdirAll(p, 0o700); err != nil {
		return fmt.Errorf("cgroup: create parent %s: %w", p, err)
	}
	ctrls := cgroupfs.SandboxControllers()
	if cpus != "" {
		ctrls = append(ctrls, "cpuset")
	}
	// parent is one level below the root, or below the delegated base.
	for _, d := range []string{filepath.Join(cgroupRoot, path.Dir(parent)), p} {
		if err := cgroupfs.EnableControllers(d, ctrls...); err != nil {
			return err
		}
	}
	d := filepath.Join(cgroupRoot, c.rel)
	if err := os.Mkdir(d, 0o755); err != nil {
		return fmt.Errorf("cgroup: create %s: %w", d, err)
	}
	c.dirs = []string{d}
	if err := writeCPUs(d, cpus); err != nil {
		return err
	}
	if err := writeFile(d, "memory.max", l.MemoryBytes); err != nil {
		return err
	}
	if err := writeFile(d, "memory.swap.max", 0); err != nil {
		return err
	}
	if !weak.NoPidsLimit {
		if err := writeFile(d, "pids.max", l.Pids+sentryTasks); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(d, "cpu.max"), []byte(fmt.Sprintf("%d 100000", l.CPUMilli*100)), 0o644); err != nil {
		return fmt.Errorf("cgroup: write cpu.max: %w", err)
	}
	return nil
}

// writeCPUs confines the cgroup at dir to cpus, disjoint from the agent's
// CPUs (invariant 8); "" leaves the parent's.
func writeCPUs(dir, cpus string) error {
	if cpus == "" {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cpuset.cpus"), []byte(cpus), 0o644); err != nil {
		return fmt.Errorf("cgroup: write %s/cpuset.cpus %q: %w", dir, cpus, err)
	}
	return nil
}

func writeFile(dir, name string, v int64) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
		return fmt.Errorf("cgroup: write %s/%s: %w", dir, name, err)
	}
	return nil
}

// memoryDir is the cgroup's directory in the memory hierarchy (the only
// one on cgroup v2).
func (c *cgroup) memoryDir() string {
	if c.v2 {
		return filepath.Join(cgroupRoot, c.rel)
	}
	return filepath.Join(cgroupRoot, "memory", c.rel)
}

// events reports whether the OOM killer fired and whether the pids limit
// refused a fork in this cgroup. A counter that cannot be read counts as
// no event: classify then goes on to runsc's own exit and log.
func (c *cgroup) events() (oom, pids bool) {
	pidsDir := filepath.Join(cgroupRoot, c.rel)
	if !c.v2 {
		pidsDir = filepath.Join(cgroupRoot, "pids", c.rel)
	}
	e, _ := cgroupfs.ReadEvents(c.v2, c.memoryDir(), pidsDir)
	return e.OOMKills > 0, e.PidsMax > 0
}

// remove kills every task left in the cgroup and removes its directories.
func (c *cgroup) remove(ctx context.Context) error {
	if c.dirs == nil {
		dirs, err := cgroupDirs(c.v2, c.rel)
		if err != nil {
			return err
		}
		c.dirs = dirs
	}
	var errs []error
	for _, d := range c.dirs {
		if err := cgroupfs.Remove(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
