package verify

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/cgroupfs"
)

// startInfo is what verify learns about a job's first process when the
// runtime reports it running: its pid namespace and its cgroups. After the
// run, nothing in that namespace or those cgroups may remain.
type startInfo struct {
	mu      sync.Mutex
	pid     int
	pidNS   string   // e.g. "pid:[4026532281]"
	nsFile  *os.File // holds the pid namespace so its inode number cannot be reused
	start   uint64   // the process's start time, in clock ticks since boot
	cgroups []string // host cgroup directories of the process
	facts   jobFacts // credentials, seccomp and network of the process, read from the host
}

// record reads the namespace and cgroups of pid. It is called from
// Job.OnStart and must return quickly.
func (si *startInfo) record(pid int) {
	// Opening the namespace pins it: while verify holds it, no new
	// namespace can take its inode number, so a process found in it later
	// really is the job's.
	nsf, _ := os.Open(fmt.Sprintf("/proc/%d/ns/pid", pid))
	ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	own, _ := os.ReadFile("/proc/self/cgroup")
	facts := readJobFacts(pid)
	si.mu.Lock()
	defer si.mu.Unlock()
	si.pid = pid
	si.facts = facts
	si.pidNS = ns
	if si.nsFile != nil {
		si.nsFile.Close()
	}
	si.nsFile = nsf
	if nsf != nil {
		var st unix.Stat_t
		if unix.Fstat(int(nsf.Fd()), &st) == nil {
			si.pidNS = fmt.Sprintf("pid:[%d]", st.Ino)
		}
	}
	si.start, _ = procStartTicks(pid)
	si.cgroups = cgroupDirs(string(cg), string(own))
}

// release lets the pinned namespace go.
func (si *startInfo) release() {
	si.mu.Lock()
	defer si.mu.Unlock()
	if si.nsFile != nil {
		si.nsFile.Close()
		si.nsFile = nil
	}
}

// jobFacts returns what record read of the job from the host.
func (si *startInfo) jobFacts() jobFacts {
	si.mu.Lock()
	defer si.mu.Unlock()
	if si.pid == 0 {
		return noJobFacts
	}
	return si.facts
}

func (si *startInfo) snapshot() (int, string, []string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	return si.pid, si.pidNS, slices.Clone(si.cgroups)
}

// procStartTicks reads a process's start time (field 22 of /proc/PID/stat),
// in clock ticks since boot.
func procStartTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat of %d", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("malformed stat of %d", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// clockTicksPerSecond is USER_HZ, the unit of /proc/PID/stat times; it is
// 100 on every architecture Linux supports for awf.
const clockTicksPerSecond = 100

// bootTicks is the current CLOCK_BOOTTIME in clock ticks, the clock process
// start times are measured on.
func bootTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return ^uint64(0)
	}
	return uint64(ts.Nano()) / (1e9 / clockTicksPerSecond)
}

// cgroupDirs maps the lines of a /proc/PID/cgroup file to host directories,
// leaving out the root and any cgroup that verify itself is in.
func cgroupDirs(procCgroup, own string) []string {
	mine := map[string]bool{}
	for _, l := range strings.Split(own, "\n") {
		mine[l] = true
	}
	var v2root = "/sys/fs/cgroup"
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err == nil {
		v2root = "/sys/fs/cgroup/unified"
	}
	var out []string
	for _, l := range strings.Split(procCgroup, "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 || parts[2] == "/" || mine[l] {
			continue
		}
		ctrls, p := parts[1], parts[2]
		if ctrls == "" {
			out = append(out, filepath.Join(v2root, p))
			continue
		}
		name := strings.TrimPrefix(ctrls, "name=")
		dir := filepath.Join("/sys/fs/cgroup", name)
		if _, err := os.Stat(dir); err != nil {
			dir = filepath.Join("/sys/fs/cgroup", strings.Split(name, ",")[0])
		}
		out = append(out, filepath.Join(dir, p))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// leftovers are the resources one probe left behind.
type leftovers struct {
	procs, cgroups, mounts, state []string
}

func (l leftovers) empty() bool {
	return len(l.procs)+len(l.cgroups)+len(l.mounts)+len(l.state) == 0
}

// leftoverScanner checks the host after each probe.
type leftoverScanner struct {
	stateDir string
	runID    string
	parent   string
	// base is the delegated cgroup v2 subtree the runtimes place the
	// parent below (cgroupfs.V2Base), "" when there is none.
	base     string
	watch    []string // substrings that mark verify's own mounts
	ownPidNS string

	baseState  map[string]bool
	baseMounts map[string]bool
}

func newLeftoverScanner(stateDir, runID, parent string, watch []string) *leftoverScanner {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	// Looked up without claiming the subtree: verify only looks. An error
	// (no cgroup v2 entry) leaves the base at the root.
	base, _ := cgroupfs.V2Base(false)
	return &leftoverScanner{stateDir: stateDir, runID: runID, parent: parent, base: base, watch: watch, ownPidNS: ns}
}

// setBaseline records the state directory and mount table as the runtime
// keeps them between runs. It is taken after the battery's first run, so that
// resources the runtime creates once per run are not counted as leftovers.
func (s *leftoverScanner) setBaseline() {
	s.baseState = setOf(s.stateEntries())
	s.baseMounts = setOf(s.mountLines())
}

// hasBaseline reports whether setBaseline ran.
func (s *leftoverScanner) hasBaseline() bool { return s.baseState != nil && s.baseMounts != nil }

func setOf(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// scan looks for anything of invocation inv that survived its run. It
// re-checks for up to a second so that kernel teardown in flight is not
// reported, then returns what is still there.
func (s *leftoverScanner) scan(inv string, si *startInfo, runEnd uint64) leftovers {
	var l leftovers
	for i := 0; i < 10; i++ {
		l = s.scanOnce(inv, si, runEnd)
		if l.empty() {
			return l
		}
		time.Sleep(100 * time.Millisecond)
	}
	return l
}

func (s *leftoverScanner) scanOnce(inv string, si *startInfo, runEnd uint64) leftovers {
	var l leftovers
	_, pidNS, cgs := si.snapshot()
	if pidNS == s.ownPidNS {
		pidNS = "" // no pid namespace of its own: priv/proc-pids reports that
	}
	si.mu.Lock()
	jobStart := si.start
	si.mu.Unlock()
	l.procs = s.processes(inv, pidNS, jobStart, runEnd)
	for _, d := range cgs {
		if _, err := os.Stat(d); err == nil {
			l.cgroups = append(l.cgroups, d)
		}
	}
	l.cgroups = append(l.cgroups, s.namedCgroups(inv)...)
	slices.Sort(l.cgroups)
	l.cgroups = slices.Compact(l.cgroups)
	for _, m := range s.mountLines() {
		if strings.Contains(m, inv) || s.baseMounts != nil && !s.baseMounts[m] {
			l.mounts = append(l.mounts, m)
		}
	}
	if p := s.pinnedNamespace(); p != "" {
		l.mounts = append(l.mounts, p)
	}
	for _, e := range s.stateEntries() {
		if strings.Contains(e, inv) || s.baseState != nil && !s.baseState[e] {
			l.state = append(l.state, e)
		}
	}
	return l
}

// processes lists live processes in the job's pid namespace, in a cgroup
// named after the invocation or the run, or whose command line names the
// invocation, the run or the runtime's state directory. A namespace's inode number can be
// reused by a new namespace as soon as the old one is gone, so a process
// counts as the job's only if it started between the job's start and the
// end of its run.
func (s *leftoverScanner) processes(inv, pidNS string, jobStart, runEnd uint64) []string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		hit := false
		if pidNS != "" {
			if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && ns == pidNS {
				st, err := procStartTicks(pid)
				hit = err == nil && st+1 >= jobStart && st <= runEnd+1
			}
		}
		if !hit {
			cg, err := os.ReadFile("/proc/" + e.Name() + "/cgroup")
			hit = err == nil && (strings.Contains(string(cg), inv) || strings.Contains(string(cg), s.runID))
		}
		if !hit {
			// Runtime processes outside the job's namespace (a runsc
			// sandbox or gofer, a shim) name the run or the state directory
			// on their command line.
			cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			hit = err == nil && (strings.Contains(string(cl), inv) || strings.Contains(string(cl), s.runID) ||
				s.stateDir != "" && strings.Contains(string(cl), s.stateDir))
		}
		if hit {
			comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
			out = append(out, fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(string(comm))))
		}
	}
	return out
}

// namedCgroups finds cgroup directories under the awf parent, in every
// hierarchy, whose name carries the invocation id. It is the net for the
// cgroups of a backend that reports no job pid (gvisor).
func (s *leftoverScanner) namedCgroups(inv string) []string {
	var out []string
	for _, r := range parentDirs(cgroupfs.Root, s.base, s.parent) {
		_ = filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.Count(strings.TrimPrefix(p, r), "/") > 3 {
				return fs.SkipDir
			}
			if strings.Contains(d.Name(), inv) {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// parentDirs lists the awf parent's directories below the cgroup root:
// one in each v1 hierarchy (root/<hierarchy>/parent), and the v2 one, which
// a delegated base puts at root/base/parent, however deep the base is.
func parentDirs(root, base, parent string) []string {
	dirs, _ := filepath.Glob(filepath.Join(root, "*", parent))
	dirs = append(dirs, filepath.Join(root, base, parent))
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// mountLines are the host mount table entries that mention verify's run,
// its state directory or its scratch directory, without their mount ids.
// The table is read through /proc/thread-self: /proc/self is the main
// thread, which may sit in another mount namespace (see pinnedNamespace).
func (s *leftoverScanner) mountLines() []string {
	return s.markedLines("/proc/thread-self/mountinfo")
}

// pinnedNamespace detects a sandbox mount namespace kept alive by this
// process's main thread. libcontainer joins the container's mount namespace
// on a locked thread to open mount sources; the Go runtime cannot end the
// main thread when such a goroutine exits on it, so the thread stays in the
// sandbox namespace and pins its mounts for the life of the process. The
// fix is to keep the main goroutine on the main thread (LockOSThread in an
// init function of the binary).
func (s *leftoverScanner) pinnedNamespace() string {
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	thread, err2 := os.Readlink("/proc/thread-self/ns/mnt")
	if err1 != nil || err2 != nil || self == thread {
		return ""
	}
	if ms := s.markedLines("/proc/self/mountinfo"); len(ms) > 0 {
		return fmt.Sprintf("the process's main thread is stuck in sandbox mount namespace %s, pinning %d of its mounts (lock the main goroutine to the main thread in init)", self, len(ms))
	}
	return ""
}

func (s *leftoverScanner) markedLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		rest := strings.Join(f[2:], " ")
		mark := strings.Contains(rest, s.runID)
		for _, w := range s.watch {
			mark = mark || w != "" && strings.Contains(rest, w)
		}
		if mark {
			out = append(out, rest)
		}
	}
	return out
}

// stateEntries lists the state directory four levels deep.
func (s *leftoverScanner) stateEntries() []string {
	var out []string
	if s.stateDir == "" {
		return nil
	}
	_ = filepath.WalkDir(s.stateDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(s.stateDir, p)
		if rel == "." {
			return nil
		}
		if strings.Count(rel, "/") >= 3 && d.IsDir() {
			out = append(out, rel+"/")
			return fs.SkipDir
		}
		out = append(out, rel)
		return nil
	})
	return out
}

// leftoverTally aggregates leftovers over a battery into four results.
type leftoverTally struct {
	probes                        int
	procs, cgroups, mounts, state []string // "probe: what"
	noStart                       int      // probes whose runtime never reported a pid
}

func (t *leftoverTally) add(probe string, l leftovers, started bool) {
	t.probes++
	if !started {
		t.noStart++
	}
	note := func(dst *[]string, xs []string) {
		if len(xs) > 0 {
			*dst = append(*dst, fmt.Sprintf("%s: %s", probe, strings.Join(xs, ", ")))
		}
	}
	note(&t.procs, l.procs)
	note(&t.cgroups, l.cgroups)
	note(&t.mounts, l.mounts)
	note(&t.state, l.state)
}

// results renders the tally as the four leftover results.
func (t *leftoverTally) results() []Result {
	one := func(id, what string, hits []string, how string) Result {
		r := Result{ID: id, Group: "leftovers"}
		if len(hits) > 0 {
			r.Status = Fail
			r.Evidence = fmt.Sprintf("%s left behind after %d of %d probes: %s", what, len(hits), t.probes, strings.Join(hits, "; "))
			return r
		}
		r.Status = Pass
		r.Evidence = fmt.Sprintf("no %s remained after any of %d probes (%s)", what, t.probes, how)
		return r
	}
	procHow := "checked the job's pid namespace, and cgroups and command lines naming the run"
	if t.noStart > 0 {
		procHow += fmt.Sprintf("; %d probes never reported a pid, checked by name only", t.noStart)
	}
	return []Result{
		one("leftover/processes", "process", t.procs, procHow),
		one("leftover/cgroups", "cgroup", t.cgroups, "checked the job's own cgroup directories and cgroups named after the invocation"),
		one("leftover/mounts", "mount", t.mounts, "checked the host mount table for the run, state and scratch paths"),
		one("leftover/state", "state-directory entry", t.state, "checked the runtime's state directory"),
	}
}
