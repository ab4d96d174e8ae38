package faults

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/isolate/mountinfo"
)

// What the package leaves on the host. Each case checks its own run
// (assertNothingLeft) and its own Engine (newEngine's clean-up); this is
// the check over the whole package, after every case, that also names what
// a case left when it failed before its own checks: every process, mount,
// cgroup and directory bearing a name the package made (its Engines' tags,
// its wedge's, its runs' ids), and every container of its runs on the
// shared test Engine.

// hostThing is one thing on the host: a process (pid), or a mount, cgroup
// or directory (path), or what only can be named (a run's socket, a
// container).
type hostThing struct {
	kind string // process, mount, cgroup, directory, or another kind
	pid  int    // a process's
	path string // a mount's, cgroup's or directory's
	what string // how it is named in a report
}

func (x hostThing) String() string { return x.kind + " " + x.what }

func joinThings(xs []hostThing) string {
	var s []string
	for _, x := range xs {
		s = append(s, x.String())
	}
	return strings.Join(s, "\n  ")
}

// hostSet is xs as a set of their names.
func hostSet(xs []hostThing) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x.String()] = true
	}
	return m
}

// name matches a path element made by the package: s exactly (one
// Engine's tag, the wedge's group) or, with prefix, every element s begins
// (the tags of all Engines of this test process).
type name struct {
	s      string
	prefix bool
}

func (n name) is(elem string) bool {
	if n.prefix {
		return strings.HasPrefix(elem, n.s)
	}
	return elem == n.s
}

// in reports whether any path element or word of s is n.
func (n name) in(s string) bool {
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return r == '/' || r == ' ' || r == '\n' || r == ':' || r == '=' || r == 0
	}) {
		if n.is(f) {
			return true
		}
	}
	return false
}

// zombie reports whether pid is dead, awaiting its reaper: it holds no
// memory, file, mount or cgroup any more, and only its parent (for an
// orphan, the host's init) can collect it.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // gone
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && strings.HasPrefix(string(b[i+1:]), " Z")
}

// taggedLeft lists what on the host bears n: processes naming it in their
// command line (an Engine's dockerd and containerd, the shims its
// containerd started, whose -address lies below its run directory) or in
// their cgroup (its containers' processes, a "runc init" of a container
// created and never started), mounts below a directory named n, cgroup
// directories named n in every hierarchy and everything below them
// (deepest first), and the directories named n in /run, /var/lib and
// engineHomes.
func taggedLeft(n name) []hostThing {
	var out []hostThing
	self := os.Getpid()
	for _, p := range procs() {
		if p == self {
			continue
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p))
		cl := cmdline(p)
		if (n.in(cl) || n.in(string(cg))) && !zombie(p) {
			out = append(out, hostThing{kind: "process", pid: p, what: fmt.Sprintf("%d: %.160s", p, cl)})
		}
	}
	ms, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		out = append(out, hostThing{kind: "mount table", what: err.Error()})
	}
	for _, m := range ms {
		if n.in(m.Point) {
			out = append(out, hostThing{kind: "mount", path: m.Point, what: m.Point})
		}
	}
	dirs, err := host.RunCgroups(n.s)
	if err != nil {
		out = append(out, hostThing{kind: "cgroup table", what: err.Error()})
	}
	for _, d := range dirs {
		if n.in(d) {
			out = append(out, hostThing{kind: "cgroup", path: d, what: d})
		}
	}
	for _, base := range append([]string{"/run", "/var/lib"}, engineHomes()...) {
		ents, _ := os.ReadDir(base)
		for _, e := range ents {
			if n.is(e.Name()) {
				d := filepath.Join(base, e.Name())
				out = append(out, hostThing{kind: "directory", path: d, what: d})
			}
		}
	}
	return out
}

// reapBound bounds each wait of reap: for killed processes to die, for a
// cgroup a dying process holds to become removable.
const reapBound = 5 * time.Second

// reap removes xs: it thaws their frozen cgroups (a frozen task's SIGKILL
// stays pending until then), kills their processes and waits until they
// are dead, detaches their mounts (deepest first), removes their
// directories, then their cgroups in the order given (taggedLeft's and
// host.RunCgroups', deepest first), retrying while one is still busy.
// Kinds it cannot remove (a socket, a container) it leaves. It returns
// what it could not remove.
func reap(xs []hostThing) []error {
	var errs []error
	for _, x := range xs {
		if x.kind != "cgroup" {
			continue
		}
		if _, err := os.Stat(filepath.Join(x.path, "freezer.state")); err == nil {
			_ = os.WriteFile(filepath.Join(x.path, "freezer.state"), []byte("THAWED"), 0)
		}
		if _, err := os.Stat(filepath.Join(x.path, "cgroup.freeze")); err == nil {
			_ = os.WriteFile(filepath.Join(x.path, "cgroup.freeze"), []byte("0"), 0)
		}
	}
	var pids []int
	for _, x := range xs {
		if x.kind == "process" {
			_ = syscall.Kill(x.pid, syscall.SIGKILL)
			pids = append(pids, x.pid)
		}
	}
	for deadline := time.Now().Add(reapBound); ; time.Sleep(20 * time.Millisecond) {
		alive := pids[:0]
		for _, p := range pids {
			if !zombie(p) {
				alive = append(alive, p)
			}
		}
		pids = alive
		if len(pids) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, p := range pids {
		errs = append(errs, fmt.Errorf("process %d still alive %v after SIGKILL", p, reapBound))
	}
	var mounts []string
	for _, x := range xs {
		if x.kind == "mount" {
			mounts = append(mounts, x.path)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts))) // below before above
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	for _, x := range xs {
		if x.kind == "directory" {
			if err := os.RemoveAll(x.path); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, x := range xs {
		if x.kind != "cgroup" {
			continue
		}
		for deadline := time.Now().Add(reapBound); ; time.Sleep(20 * time.Millisecond) {
			err := syscall.Rmdir(x.path)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", x.path, err))
				break
			}
		}
	}
	return errs
}

// madeRuns holds the id of every awf run the package started (runID and
// runIDAfter note them).
var madeRuns sync.Map

func noteRun(id string) { madeRuns.Store(id, true) }

// wedgeName is the wedge's freezer group (newWedge).
func wedgeName() string { return fmt.Sprintf("awf-faults-wedge-%d", os.Getpid()) }

// packageLeft lists what of the package is on the host: what bears the
// name of one of its Engines or of its wedge, what is left of each of its
// runs (leftovers: processes, mounts, cgroups, sockets, directories), and
// the containers of its runs on the shared test Engine.
func packageLeft() []hostThing {
	out := taggedLeft(name{s: enginePrefix(), prefix: true})
	out = append(out, taggedLeft(name{s: wedgeName()})...)
	ids := map[string]bool{}
	madeRuns.Range(func(k, _ any) bool {
		id := k.(string)
		ids[id] = true
		for _, l := range leftovers(id) {
			kind, rest, _ := strings.Cut(l, " ")
			x := hostThing{kind: kind, what: rest}
			switch kind {
			case "process":
				x.pid, _ = strconv.Atoi(strings.Fields(rest)[0])
			case "mount", "cgroup", "directory":
				x.path = rest
			}
			out = append(out, x)
		}
		return true
	})
	if sock := os.Getenv("AWF_TEST_DOCKER_SOCKET"); sock != "" && len(ids) > 0 {
		cs, err := labelledContainers(sock, "awf.run")
		if err == nil {
			for _, c := range cs {
				if ids[c.Labels["awf.run"]] {
					out = append(out, hostThing{kind: "container", what: fmt.Sprintf("%.12s %v of run %s on %s", c.ID, c.Names, c.Labels["awf.run"], sock)})
				}
			}
		}
	}
	return out
}

// checkPackageLeft is the package's last check: it fails (returns false),
// naming each, if anything of the package that was not there before it
// (before) is still on the host once every case ended, and then reaps what
// it can of it. It also fails if the shared test Engine answered before
// the package and no longer does.
func checkPackageLeft(before map[string]bool, sharedUp bool) bool {
	var left []hostThing
	// A case's own clean-up has run; a process it killed may take a moment
	// to die, its cgroup to become removable.
	for deadline := time.Now().Add(reapBound); ; time.Sleep(50 * time.Millisecond) {
		left = left[:0]
		for _, x := range packageLeft() {
			if !before[x.String()] {
				left = append(left, x)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	ok := true
	if len(left) > 0 {
		ok = false
		fmt.Fprintf(os.Stderr, "FAIL: faults: %d things the package made are left after every case:\n  %s\n", len(left), joinThings(left))
		for _, err := range reap(left) {
			fmt.Fprintln(os.Stderr, "faults: reap:", err)
		}
		madeRuns.Range(func(k, _ any) bool { reclaimRun(k.(string)); return true })
	}
	if sock := os.Getenv("AWF_TEST_DOCKER_SOCKET"); sharedUp && !pingEngine(sock) {
		ok = false
		fmt.Fprintf(os.Stderr, "FAIL: faults: the shared test Engine at %s answered before the package and does not now\n", sock)
	}
	return ok
}
