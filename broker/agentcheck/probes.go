package agentcheck

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/hostview"
	"github.com/awf-project/awf/isolate/verify"
	"github.com/awf-project/awf/proto"
)

// The lines of the counters handshake. The probe mode writes readyLine to
// standard error once it holds its first reading; the orchestrator answers
// goLine on standard input once the sandbox has run (or abortPrefix and a
// reason when it could not run one).
const (
	readyLine   = "AWF-AGENTCHECK ready"
	goLine      = "go"
	abortPrefix = "abort "
)

// handshakeWait bounds how long the probe mode waits for the orchestrator.
const handshakeWait = 5 * time.Minute

// kernelFiles are /proc files that show kernel-wide state or addresses and
// that no agent needs. They are checked with hostview's masked entries
// under /proc. (hostview masks /sys too, for sandboxes; the agent's /sys
// keeps a few frozen files that tools read, and agent/sys-cgroup checks it.)
var kernelFiles = []string{"/proc/kcore", "/proc/kallsyms", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"}

// usableCounters must stay readable and non-empty in the agent's view:
// free, nproc, top and language runtimes read them.
var usableCounters = []string{"/proc/stat", "/proc/loadavg", "/proc/meminfo"}

// probeReport is what the probe mode prints on standard output.
type probeReport struct {
	Version int             `json:"version"`
	UID     int             `json:"uid"`
	Results []verify.Result `json:"results"`
}

// ProbeMain is the hidden probe mode, "awf isolate verify --agent-probes
// SPEC": it runs inside the agent shim as the agent user, runs every probe
// against its own view, and prints one JSON report on stdout. The counters
// probe waits between its two readings for the orchestrator's word on
// stdin. It returns 0 when it could write a report (whatever the verdicts),
// 2 otherwise.
func ProbeMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: awf isolate verify --agent-probes SPEC")
		return 2
	}
	spec, err := readSpec(args[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	rep := probeReport{Version: specVersion, UID: os.Getuid()}
	add := func(id string, s verify.Status, format string, a ...any) {
		rep.Results = append(rep.Results, agentResult(id, s, fmt.Sprintf(format, a...)))
	}
	if rep.UID != spec.AgentUID || os.Geteuid() != spec.AgentUID {
		fmt.Fprintf(stderr, "agentcheck: probes run as uid %d/%d, want the agent user %d\n", os.Getuid(), os.Geteuid(), spec.AgentUID)
		return 2
	}
	for _, h := range spec.Hidden {
		s, ev := probeHidden(h.Path)
		add(h.ID, s, "%s", ev)
	}
	s, ev := probeEngineSocket(spec.EngineSocket)
	add(IDEngineSocket, s, "%s", ev)
	s, ev = probeCredentials(os.Environ(), spec.Credentials)
	add(IDCredentials, s, "%s", ev)
	s, ev = probeBrokerSocket(spec.BrokerSocket, spec.BrokerGreeting)
	add(IDBrokerSocket, s, "%s", ev)
	s, ev = probeProc(spec)
	add(IDProc, s, "%s", ev)
	s, ev = probeProcKernel()
	add(IDProcKernel, s, "%s", ev)
	s, ev = probeSysCgroup(spec.CgroupNames)
	add(IDSysCgroup, s, "%s", ev)
	s, ev = probeNetwork(spec.Network)
	add(IDNetwork, s, "%s", ev)
	s, ev = probeCounters(stdin, stderr)
	add(IDCounters, s, "%s", ev)

	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rep); err != nil {
		fmt.Fprintf(stderr, "agentcheck: write report: %v\n", err)
		return 2
	}
	return 0
}

// probeHidden passes only when path does not exist in the agent's view.
// A permission error fails: the file is there and only its mode keeps it,
// and the issue is that a mode is not a hiding place (0755 sources, a 0700
// base whose metadata still shows, a later chmod).
func probeHidden(path string) (verify.Status, string) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		if b, rerr := readSome(path, 64); rerr == nil {
			return verify.Fail, fmt.Sprintf("%s exists and is readable (%d bytes read)", path, len(b))
		}
		return verify.Fail, fmt.Sprintf("%s exists in the agent's view", path)
	case errors.Is(err, fs.ErrNotExist):
		return verify.Pass, fmt.Sprintf("%s does not exist in the agent's view", path)
	}
	return verify.Fail, fmt.Sprintf("%s is there, kept only by its permissions: %v", path, err)
}

// probeEngineSocket passes when the engine socket cannot be connected to.
func probeEngineSocket(path string) (verify.Status, string) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return verify.Pass, fmt.Sprintf("connect %s: %v", path, errText(err))
	}
	c.Close()
	return verify.Fail, fmt.Sprintf("connected to the engine socket %s", path)
}

// probeCredentials passes when no planted credential and no variable that
// the credential rules name is in the environment. Only names are reported.
func probeCredentials(environ, planted []string) (verify.Status, string) {
	var found []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(planted, name) || proto.IsCredentialVariable(name) {
			found = append(found, name)
		}
	}
	slices.Sort(found)
	if len(found) > 0 {
		return verify.Fail, fmt.Sprintf("credential variables reach the agent: %s", strings.Join(found, " "))
	}
	return verify.Pass, fmt.Sprintf("none of %d environment variables is a credential (planted: %s)", len(environ), strings.Join(planted, " "))
}

// probeBrokerSocket passes when the broker socket answers its greeting.
func probeBrokerSocket(path, greeting string) (verify.Status, string) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return verify.Fail, fmt.Sprintf("connect %s: %v", path, errText(err))
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, len(greeting))
	if _, err := io.ReadFull(c, buf); err != nil {
		return verify.Fail, fmt.Sprintf("read the greeting of %s: %v", path, errText(err))
	}
	if string(buf) != greeting {
		return verify.Fail, fmt.Sprintf("%s answered %q, not the broker's greeting", path, buf)
	}
	return verify.Pass, fmt.Sprintf("connected to %s and read the broker's greeting", path)
}

// probeProc passes when every process directory in /proc belongs to the
// agent user, and none is the broker's.
func probeProc(spec Spec) (verify.Status, string) {
	des, err := os.ReadDir("/proc")
	if err != nil {
		return verify.Fail, fmt.Sprintf("read /proc: %v", err)
	}
	var pids, foreign []string
	broker := ""
	for _, de := range des {
		if !hostview.LiveProcEntry(de.Name()) || de.Name() == "self" || de.Name() == "thread-self" {
			continue
		}
		pids = append(pids, de.Name())
		p := filepath.Join("/proc", de.Name())
		if fi, err := os.Lstat(p); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != spec.AgentUID {
				foreign = append(foreign, fmt.Sprintf("%s (uid %d, %s)", de.Name(), st.Uid, commOf(p)))
			}
		}
		if comm, start, ok := statMark(p); ok && comm == spec.Broker.Comm && start == spec.Broker.StartTime {
			broker = de.Name()
		}
	}
	if spec.Broker.HostPID > 0 {
		p := filepath.Join("/proc", strconv.Itoa(spec.Broker.HostPID))
		if comm, start, ok := statMark(p); ok && comm == spec.Broker.Comm && start == spec.Broker.StartTime {
			broker = strconv.Itoa(spec.Broker.HostPID)
		}
	}
	switch {
	case broker != "":
		return verify.Fail, fmt.Sprintf("the broker's process is visible as /proc/%s (%d processes visible)", broker, len(pids))
	case len(foreign) > 0:
		return verify.Fail, fmt.Sprintf("%d of %d processes in /proc are not the agent's: %s", len(foreign), len(pids), strings.Join(firstN(foreign, 4), ", "))
	case len(pids) == 0:
		return verify.Fail, "/proc lists no process at all, not even the probe itself: it is not a process view"
	}
	return verify.Pass, fmt.Sprintf("/proc lists %d processes, all the agent user's; the broker is not among them", len(pids))
}

// statMark returns the command name and start time of /proc/PID.
func statMark(dir string) (string, uint64, bool) {
	b, err := readSome(filepath.Join(dir, "stat"), 4096)
	if err != nil {
		return "", 0, false
	}
	return parseStat(string(b))
}

// parseStat reads fields 2 (comm) and 22 (starttime) of a /proc/PID/stat
// line. The command name is in parentheses and may hold spaces.
func parseStat(s string) (string, uint64, bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	rest := strings.Fields(s[end+1:])
	const startIdx = 22 - 3 // fields after the comm start at field 3
	if len(rest) <= startIdx {
		return "", 0, false
	}
	t, err := strconv.ParseUint(rest[startIdx], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return s[open+1 : end], t, true
}

func commOf(dir string) string {
	b, err := readSome(filepath.Join(dir, "comm"), 64)
	if err != nil {
		return "comm unreadable"
	}
	return strings.TrimSpace(string(b))
}

// probeProcKernel passes when every kernel-wide file and every masked
// host-wide entry is absent, unreadable or empty.
func probeProcKernel() (verify.Status, string) {
	paths := append([]string(nil), kernelFiles...)
	for _, e := range hostview.Entries() {
		if e.Action == hostview.Mask && strings.HasPrefix(e.Path, "/proc/") {
			paths = append(paths, e.Path)
		}
	}
	var shown []string
	for _, p := range paths {
		if n := visibleBytes(p); n > 0 {
			shown = append(shown, fmt.Sprintf("%s (%d+ bytes)", p, n))
		}
	}
	if len(shown) > 0 {
		return verify.Fail, fmt.Sprintf("readable: %s", strings.Join(firstN(shown, 4), ", "))
	}
	return verify.Pass, fmt.Sprintf("%d kernel-wide and masked entries are absent, unreadable or empty", len(paths))
}

// visibleBytes returns how much of path the agent can read: the bytes of a
// file, or the first non-empty file found below a directory (a masked
// directory may keep empty directories, which show nothing). It is 0 when
// nothing can be opened.
func visibleBytes(path string) int {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if !fi.IsDir() {
		b, err := readSome(path, 4096)
		if err != nil {
			return 0
		}
		return len(b)
	}
	found, seen := 0, 0
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if seen++; seen > maxMaskWalk {
			return fs.SkipAll
		}
		if d.Type().IsRegular() {
			if b, err := readSome(p, 4096); err == nil && len(b) > 0 {
				found = len(b)
				return fs.SkipAll
			}
		}
		return nil
	})
	return found
}

// maxMaskWalk bounds the walk of one masked directory.
const maxMaskWalk = 5000

// maxCgroupWalk bounds the /sys/fs/cgroup walk.
const maxCgroupWalk = 20000

// probeSysCgroup passes when no directory below /sys/fs/cgroup, and no
// component of the agent's own cgroup path in /proc/self/cgroup, carries
// one of awf's names.
func probeSysCgroup(names []string) (verify.Status, string) {
	const root = "/sys/fs/cgroup"
	var hits []string
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable parts are not visible parts
		}
		n++
		if n > maxCgroupWalk {
			return fs.SkipAll
		}
		if !d.IsDir() {
			return nil
		}
		if strings.Count(strings.TrimPrefix(p, root), "/") > 4 {
			return fs.SkipDir
		}
		if slices.Contains(names, d.Name()) {
			hits = append(hits, p)
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return verify.Fail, fmt.Sprintf("walk %s: %v", root, err)
	}
	// The agent's own cgroup path, which a cgroup namespace shows as "/".
	if b, err := readSome("/proc/self/cgroup", 64<<10); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(l, ":", 3) // id:controllers:path
			if len(parts) != 3 {
				continue
			}
			for _, c := range strings.Split(parts[2], "/") {
				if slices.Contains(names, c) {
					hits = append(hits, "/proc/self/cgroup "+l)
					break
				}
			}
		}
	}
	if len(hits) > 0 {
		return verify.Fail, fmt.Sprintf("awf's cgroups are visible: %s", strings.Join(firstN(hits, 4), ", "))
	}
	return verify.Pass, fmt.Sprintf("%d entries below %s, none of them awf's (%s)", n, root, strings.Join(names, ", "))
}

// probeNetwork passes, with agent.network none, when lo is the only
// interface. With host it is N/A: the agent shares the host's network by
// design.
func probeNetwork(mode string) (verify.Status, string) {
	ifs, err := net.Interfaces()
	if err != nil {
		return verify.Fail, fmt.Sprintf("list interfaces: %v", err)
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	list := strings.Join(names, " ")
	if mode != "none" {
		return verify.NotApplicable, fmt.Sprintf("agent.network %s: the agent shares the host's network (%s)", orQuote(mode), list)
	}
	if len(names) == 1 && names[0] == "lo" {
		return verify.Pass, "agent.network none: the only interface is lo"
	}
	return verify.Fail, fmt.Sprintf("agent.network none, but the agent has interfaces: %s", list)
}

func orQuote(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// counterFiles lists every file of the snapshotted entries.
func counterFiles() []string {
	var out []string
	for _, e := range hostview.Entries() {
		if e.Action != hostview.Snapshot {
			continue
		}
		_ = filepath.WalkDir(e.Path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.Type().IsRegular() {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// reading is one read of every counter file: its digest, or "" when it
// could not be read.
type reading map[string]string

func readCounters(files []string) reading {
	r := reading{}
	for _, p := range files {
		b, err := readSome(p, hostview.MaxSnapshotBytes)
		if err != nil {
			r[p] = ""
			continue
		}
		sum := sha256.Sum256(b)
		r[p] = fmt.Sprintf("%x", sum[:8])
	}
	return r
}

// probeCounters reads every snapshotted entry, tells the orchestrator it is
// ready, waits for the sandbox to have run, and reads again. It passes when
// nothing changed and the files tools need are still there.
func probeCounters(stdin io.Reader, stderr io.Writer) (verify.Status, string) {
	files := counterFiles()
	stat0, _ := readSome("/proc/stat", hostview.MaxSnapshotBytes)
	before := readCounters(files)
	si0, si0err := sysinfoCounters()
	fmt.Fprintln(stderr, readyLine)
	word := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdin).ReadString('\n')
		word <- strings.TrimSpace(l)
	}()
	var w string
	select {
	case w = <-word:
	case <-time.After(handshakeWait):
		return verify.Fail, "the orchestrator never said the sandbox had run"
	}
	if w != goLine {
		return verify.Fail, fmt.Sprintf("no sandbox ran between the readings: %s", strings.TrimPrefix(w, abortPrefix))
	}
	after := readCounters(files)
	si1, si1err := sysinfoCounters()
	stat1, _ := readSome("/proc/stat", hostview.MaxSnapshotBytes)
	var changed []string
	switch {
	case si0err != nil || si1err != nil:
		changed = append(changed, fmt.Sprintf("sysinfo(2) failed: %v", errors.Join(si0err, si1err)))
	case si0 != si1:
		changed = append(changed, fmt.Sprintf("sysinfo(2) (%s became %s)", si0, si1))
	}
	for _, p := range files {
		if before[p] != after[p] {
			changed = append(changed, p)
		}
	}
	var missing []string
	for _, p := range usableCounters {
		if b, err := readSome(p, 64); err != nil || len(b) == 0 {
			missing = append(missing, p)
		}
	}
	switch {
	case len(changed) > 0:
		ev := fmt.Sprintf("%d of %d readings (the files and sysinfo) changed while the sandbox ran: %s", len(changed), len(files)+1, strings.Join(firstN(changed, 6), ", "))
		if d, ok := forkDelta(stat0, stat1); ok {
			ev += fmt.Sprintf("; /proc/stat processes +%d", d)
		}
		return verify.Fail, ev
	case len(missing) > 0:
		return verify.Fail, fmt.Sprintf("tools need %s, which the agent cannot read", strings.Join(missing, ", "))
	}
	return verify.Pass, fmt.Sprintf("none of %d snapshotted files, nor sysinfo(2), changed while a sandbox started 1,000 threads", len(files))
}

// hostCounters is what sysinfo(2) reports that a sandbox can move: load
// averages, memory and swap use, the number of tasks. The uptime is left
// out: it is the time, which moves for everyone.
type hostCounters struct {
	Loads                                             [3]uint64
	Freeram, Sharedram, Bufferram, Freeswap, Freehigh uint64
	Procs                                             uint16
}

func (c hostCounters) String() string {
	return fmt.Sprintf("loads %v, free %d, shared %d, buffers %d, free swap %d, tasks %d", c.Loads, c.Freeram, c.Sharedram, c.Bufferram, c.Freeswap, c.Procs)
}

// sysinfoCounters reads them.
func sysinfoCounters() (hostCounters, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return hostCounters{}, err
	}
	return hostCounters{Loads: si.Loads, Freeram: uint64(si.Freeram), Sharedram: uint64(si.Sharedram), Bufferram: uint64(si.Bufferram),
		Freeswap: uint64(si.Freeswap), Freehigh: uint64(si.Freehigh), Procs: si.Procs}, nil
}

// forkDelta is how far the fork counter (the processes line of /proc/stat)
// moved between two readings.
func forkDelta(a, b []byte) (int64, bool) {
	x, ok1 := forks(a)
	y, ok2 := forks(b)
	return y - x, ok1 && ok2
}

func forks(stat []byte) (int64, bool) {
	for _, l := range bytes.Split(stat, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("processes ")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// readSome reads at most n bytes of path.
func readSome(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// errText is an error without the operation prefix, for evidence.
func errText(err error) string {
	var se syscall.Errno
	if errors.As(err, &se) {
		return se.Error()
	}
	return err.Error()
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}
