// Package faults injects faults into real awf runs as root: kill -9 of awf
// run, of its broker, of the agent shim and of runsc at each phase of a run,
// and many concurrent clients against one broker. Each case asserts that
// within 2 s nothing of the run is left (no process naming the run or in
// one of its cgroups, no mount, no cgroup, no socket, no run directory),
// that the agent saw canonical bytes only, and what the audit recorded.
package faults

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/isolate/mountinfo"
	"github.com/awf-project/awf/tests/fixture"
)

var (
	binDir     string
	awfBin     string
	rootfsDir  string
	rootfsHash string
	agentUser  string
	repoDir    string
)

const (
	privateBase  = "/var/lib/awf/private"
	ingressBase  = "/run/awf-ingress"
	auditArchive = "/var/log/awf"
	okTrue       = `{"status":"ok","result":true}`
	errorEnv     = `{"status":"error"}`
)

// prebuilt names a directory holding awf and bounded-query already built with
// -tags seccomp, for hosts where building at run time is too slow (the
// emulated cgroup v2 VM of tests/cgroup2). Empty: TestMain builds them.
var prebuilt = flag.String("faults.bin", "", "use awf and bounded-query from this directory instead of building them")

// leftoverBound: within this long after a kill, nothing of the run may be
// left. 2 s is the guarantee, on a real host. Only the emulated cgroup v2
// VM, where code runs many times slower (a runsc call of the watchdog's
// reclaim takes seconds there), sets it longer: it proves there that
// everything is reclaimed, not how fast.
var leftoverBound time.Duration

func init() {
	flag.DurationVar(&leftoverBound, "faults.bound", 2*time.Second, "how long after a kill nothing of the run may be left (2s; longer only in an emulated VM)")
}

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	flag.Parse()
	env, err := fixture.Setup(fixture.Options{Suite: "faults", UserPrefix: "awf-flt", Prebuilt: *prebuilt})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	binDir, awfBin, rootfsDir, rootfsHash, agentUser = env.BinDir, env.AwfBin, env.RootFS, env.RootFSHash, env.AgentUser
	repoDir = filepath.Join(env.Work, "repo")
	if err := fixture.MakeRepo(repoDir, "f", map[string]string{"SECURITY.md": "report to security@example.com\n"}); err != nil {
		fmt.Fprintln(os.Stderr, "faults: repo:", err)
		return 1
	}
	// Anything bearing the package's names before it runs (a pid reused
	// from an earlier session's) is not the package's: never judged or
	// touched.
	before := hostSet(packageLeft())
	sharedUp := pingEngine(os.Getenv("AWF_TEST_DOCKER_SOCKET"))
	if err := makeEngineHomes(); err != nil {
		fmt.Fprintln(os.Stderr, "faults: the Engines' directories:", err)
		return 1
	}
	code := m.Run()
	if !checkPackageLeft(before, sharedUp) && code == 0 {
		code = 1
	}
	// A killed run's reclaim keeps its audit log in the host's archive, as
	// it must for an operator; the package's runs are not an operator's,
	// so their logs go with the package (a reported run's went with its
	// case: runIDAfter).
	madeRuns.Range(func(k, _ any) bool {
		if err := os.RemoveAll(filepath.Join(auditArchive, k.(string))); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: faults: remove a run's kept audit log:", err)
			code = 1
		}
		return true
	})
	if err := removeEngineHomes(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: faults: remove the Engines' directories:", err)
		code = 1
	}
	return code
}

// writeConfig writes an awf config for runtime rt (killConfig without a
// private Engine).
func writeConfig(t *testing.T, rt string, maxInvocations int) string {
	t.Helper()
	return killConfig(t, rt, nil, maxInvocations)
}

// agentScript writes a shell script the agent user can run.
func agentScript(t *testing.T, body string) string {
	t.Helper()
	return fixture.AgentScript(t, "awf-faults-agent-", body)
}

// queryLine is a shell line that runs one query whose script sleeps for
// sleep seconds and then answers true; the agent prints "Q <response>".
func queryLine(sleep int) string {
	return fmt.Sprintf(`r=$(printf 'import time\ntime.sleep(%d)\nopen("/query/out","w").write("true")\n' | bounded-query --repo demo/app --schema '{"type":"boolean"}'); echo "Q $r"`+"\n", sleep)
}

// run is one awf run started by a test.
type run struct {
	cmd            *exec.Cmd
	stdout, stderr *fixture.SyncBuffer
	done           chan struct{}
	err            error
}

// startRun starts awf run in its own process group (as a job runner does).
// Cleanup kills whatever is left of it.
func startRun(t *testing.T, cfg, script string) *run {
	t.Helper()
	return startCmd(t, exec.Command(awfBin, "run", "--config", cfg, "--", "/bin/sh", script))
}

// startCmd starts cmd, an awf run, from / with the base environment in
// its own process group, capturing its output. Cleanup kills the group.
func startCmd(t *testing.T, cmd *exec.Cmd) *run {
	t.Helper()
	cmd.Dir = "/"
	cmd.Env = fixture.BaseEnv()
	r := &run{cmd: cmd, stdout: &fixture.SyncBuffer{}, stderr: &fixture.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	go func() { r.err = cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
		if t.Failed() {
			// What awf run said is the first thing to read when a fault
			// case fails: its teardown's errors and its watchdog.
			t.Logf("awf run's stderr:\n%s", r.stderr.String())
		}
	})
	return r
}

// wait waits for awf run to exit and returns its status.
func (r *run) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(d):
		t.Fatalf("awf run did not exit within %v\nstderr:\n%s", d, r.stderr.String())
	}
	return r.cmd.ProcessState.ExitCode()
}

// runID returns the run id, read from the watchdog that awf run starts.
func (r *run) runID(t *testing.T) string {
	t.Helper()
	var id string
	found := assert.Eventually(t, func() bool {
		for _, p := range procs() {
			cl := cmdline(p)
			if i := strings.Index(cl, "run --watchdog "); i >= 0 && ppid(p) == r.cmd.Process.Pid {
				f := strings.Fields(cl[i:])
				id = f[len(f)-1]
				noteRun(id)
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "no watchdog for awf run")
	if !found {
		// Its stderr as of now, not as of the call: what awf run said
		// while it did not start its watchdog.
		t.Fatalf("awf run (pid %d) started no watchdog in 30 s; its stderr so far:\n%s\nits threads' wait channels: %s", r.cmd.Process.Pid, r.stderr.String(), waitChans(r.cmd.Process.Pid))
	}
	return id
}

// waitChans names where each thread of pid sleeps in the kernel, and the
// private roots present, for a run that is stuck before its watchdog.
func waitChans(pid int) string {
	var b strings.Builder
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		w, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/wchan", pid, e.Name()))
		fmt.Fprintf(&b, "%s:%s ", e.Name(), w)
	}
	roots, _ := os.ReadDir(privateBase)
	for _, r := range roots {
		fmt.Fprintf(&b, "\n  root %s", r.Name())
	}
	return b.String()
}

// runIDAfter returns the run id of a run that has ended, from the audit
// archive line awf printed.
func (r *run) runIDAfter(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`audit log kept in ` + auditArchive + `/([0-9a-f]{32})`).FindStringSubmatch(r.stderr.String())
	require.NotNil(t, m, "no audit archive line:\n%s", r.stderr.String())
	noteRun(m[1])
	t.Cleanup(func() { os.RemoveAll(filepath.Join(auditArchive, m[1])) })
	return m[1]
}

func (r *run) waitStdout(t *testing.T, s string) {
	t.Helper()
	r.waitFor(t, func() bool { return strings.Contains(r.stdout.String(), s) }, 10*time.Millisecond, "the agent to print "+s)
}

func (r *run) waitStderr(t *testing.T, s string) {
	t.Helper()
	r.waitFor(t, func() bool { return strings.Contains(r.stderr.String(), s) }, 2*time.Millisecond, "awf to print "+s)
}

// waitFor polls cond until it holds, failing at once when awf run exits
// first.
func (r *run) waitFor(t *testing.T, cond func() bool, every time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		select {
		case <-r.done:
			if cond() {
				return
			}
			t.Fatalf("awf run exited before %s\nstdout:\n%s\nstderr:\n%s", what, r.stdout.String(), r.stderr.String())
		case <-time.After(every):
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\nstdout:\n%s\nstderr:\n%s", what, r.stdout.String(), r.stderr.String())
		}
	}
}

func procs() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
}

func ppid(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return -1
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// findProc returns the first process whose command line matches re and
// carries the run id.
func findProc(t *testing.T, runID string, re *regexp.Regexp) int {
	t.Helper()
	pid := 0
	require.Eventually(t, func() bool {
		for _, p := range procs() {
			cl := cmdline(p)
			if strings.Contains(cl, runID) && re.MatchString(cl) {
				pid = p
				return true
			}
		}
		return false
	}, time.Minute, 5*time.Millisecond, "no process matching %s for run %s", re, runID)
	return pid
}

// waitSandbox waits until a sandbox process of the run exists (a query is
// running).
func waitSandbox(t *testing.T, runID string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(sandboxProcs(runID)) > 0 },
		time.Minute, 5*time.Millisecond, "no sandbox process for run %s", runID)
}

// sandboxProcs lists the processes of the run's sandboxes: those in a
// cgroup of the run other than the agent's, and runsc's. A dead orphan
// (leftovers says why) is not one: the cgroup it names is only its record.
func sandboxProcs(runID string) []string {
	var out []string
	found, of := runProcs(runID)
	for _, p := range found {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.pid))
		cl := cmdline(p.pid)
		in := false
		for _, l := range strings.Split(string(b), "\n") {
			in = in || (strings.Contains(l, runID) && !strings.Contains(l, "-agent/"))
		}
		if (in || (strings.HasPrefix(cl, "runsc") && strings.Contains(cl, runID))) && !p.deadOrphan(of) {
			out = append(out, fmt.Sprintf("%d %.100s", p.pid, cl))
		}
	}
	return out
}

// leftovers lists everything of run runID that still exists.
//
// A zombie is not left, provided it is dead whole (no thread of it runs)
// and its parent is no process of the run: it holds no memory, file,
// mount or cgroup any more, only a pid and an exit status for its parent
// to collect. When awf run is killed, its children (broker, agent shim)
// and the orphans of its broker die and are reparented to the host's init,
// which alone can reap them; awf cannot. On a host whose init reaps late
// (this workplace's polls, every 2 s or so) such a zombie outlives the
// bound. A zombie whose parent is a process of the run is left: that
// parent is, and it should have reaped it.
func leftovers(runID string) []string {
	left, _ := leftoversAndZombies(runID)
	return left
}

// runProc is a process of a run: one whose cmdline, environ or cgroup
// names the run.
type runProc struct {
	pid           int
	line          string // what a report says of it
	zombie, whole bool
	ppid          int
}

// deadOrphan reports whether p is a zombie dead whole whose parent is no
// process of the run (of: the run's pids): not left (leftovers).
func (p runProc) deadOrphan(of map[int]bool) bool {
	return p.zombie && p.whole && !of[p.ppid]
}

// runProcs lists the processes of run runID, and their pids as a set.
func runProcs(runID string) ([]runProc, map[int]bool) {
	self := os.Getpid()
	id := []byte(runID)
	var found []runProc
	of := map[int]bool{}
	for _, p := range procs() {
		if p == self {
			continue
		}
		for _, f := range []string{"cmdline", "environ", "cgroup"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", p, f))
			if err == nil && bytes.Contains(b, id) {
				st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
				// Uid, State and PPid say what a leftover is (a zombie
				// nobody reaps, a process still exiting, a live one).
				uid, state, ppid := "", "", ""
				for _, l := range strings.Split(string(st), "\n") {
					k, v, _ := strings.Cut(l, ":")
					switch fs := strings.Fields(v); {
					case len(fs) == 0:
					case k == "Uid":
						uid = fs[0]
					case k == "State":
						state = strings.Join(fs, " ")
					case k == "PPid":
						ppid = fs[0]
					}
				}
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
				// A thread-group leader that exited before its other
				// threads also reads Z: whole only when no other task is
				// left in the group.
				tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
				pp, _ := strconv.Atoi(ppid)
				found = append(found, runProc{
					pid:    p,
					line:   fmt.Sprintf("process %d (%s, uid %s, state %s, ppid %s, %s): %.120s", p, strings.TrimSpace(string(comm)), uid, state, ppid, f, cmdline(p)),
					zombie: strings.HasPrefix(state, "Z"),
					whole:  len(tasks) == 1 && tasks[0].Name() == strconv.Itoa(p),
					ppid:   pp,
				})
				of[p] = true
				break
			}
		}
	}
	return found, of
}

// leftoversAndZombies is leftovers, and the dead zombies it does not count
// (to be logged).
func leftoversAndZombies(runID string) (out, zombies []string) {
	found, of := runProcs(runID)
	for _, p := range found {
		if p.deadOrphan(of) {
			zombies = append(zombies, p.line)
			continue
		}
		out = append(out, p.line)
	}
	points, err := mountPoints(mountinfo.Self, runID)
	if err != nil {
		out = append(out, "mount table: "+err.Error())
	}
	for _, p := range points {
		out = append(out, "mount "+p)
	}
	dirs, err := host.RunCgroups(runID)
	if err != nil {
		out = append(out, "cgroup table: "+err.Error())
	}
	for _, d := range dirs {
		out = append(out, "cgroup "+d)
	}
	un, _ := os.ReadFile("/proc/net/unix")
	for _, l := range strings.Split(string(un), "\n") {
		if strings.Contains(l, runID) {
			out = append(out, "socket "+l)
		}
	}
	for _, d := range []string{filepath.Join(privateBase, runID), filepath.Join(ingressBase, runID)} {
		if _, err := os.Lstat(d); err == nil {
			out = append(out, "directory "+d)
		}
	}
	return out, zombies
}

// assertNothingLeft fails unless nothing of the run is left within
// leftoverBound of since (the fault). It logs how long the reclaim took
// and, on failure, when each kind of leftover (process, mount, cgroup,
// socket, directory) was last seen, so a slow reclaim says which part
// was slow.
func assertNothingLeft(t *testing.T, runID string, since time.Time) {
	t.Helper()
	deadline := since.Add(leftoverBound)
	var left []string
	gone := map[string]time.Duration{}
	for {
		var zombies []string
		left, zombies = leftoversAndZombies(runID)
		now := time.Since(since)
		for _, l := range left {
			kind, _, _ := strings.Cut(l, " ")
			gone[kind] = now
		}
		if len(left) == 0 {
			if len(zombies) > 0 {
				t.Logf("dead, awaiting their reaper outside the run: %s", strings.Join(zombies, "; "))
			}
			t.Logf("nothing of run %s left %v after the fault%s", runID, now.Round(time.Millisecond), lastSeen(gone))
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, l := range left {
		if d, ok := strings.CutPrefix(l, "directory "); ok {
			left[i] += holding(d)
		}
	}
	t.Errorf("%d things of run %s left %v after the fault%s:\n  %s", len(left), runID, time.Since(since).Round(time.Millisecond),
		lastSeen(gone), strings.Join(left, "\n  "))
}

// holding names what directory d holds, two levels deep and at most 8
// entries, for a leftover's report: what was left says who left it.
func holding(d string) string {
	var names []string
	_ = filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
		if err != nil || p == d {
			return nil
		}
		rel, _ := filepath.Rel(d, p)
		if len(names) == 8 {
			return filepath.SkipAll
		}
		names = append(names, rel)
		if de.IsDir() && strings.Count(rel, "/") >= 1 {
			return filepath.SkipDir
		}
		return nil
	})
	if len(names) == 0 {
		return " (empty)"
	}
	return " (holding " + strings.Join(names, ", ") + ")"
}

// stillLeft calls list every 20 ms until it returns nothing or
// leftoverBound has passed since since (the fault), and returns what it
// returned last.
func stillLeft(since time.Time, list func() []string) []string {
	for {
		left := list()
		if len(left) == 0 || time.Since(since) > leftoverBound {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastSeen says when each kind of leftover was last seen after the fault.
func lastSeen(gone map[string]time.Duration) string {
	if len(gone) == 0 {
		return ""
	}
	var kinds []string
	for _, k := range []string{"process", "mount", "cgroup", "socket", "directory"} {
		if d, ok := gone[k]; ok {
			kinds = append(kinds, fmt.Sprintf("%s %v", k, d.Round(time.Millisecond)))
		}
	}
	return " (last seen: " + strings.Join(kinds, ", ") + ")"
}

// assertCanonical fails unless every response the agent printed ("Q …"
// lines) is one of the canonical envelopes, and every other line is one the
// script printed itself.
func assertCanonical(t *testing.T, stdout string, own ...string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimRight(stdout, "\n"), "\n") {
		if l == "" {
			continue
		}
		if r, ok := strings.CutPrefix(l, "Q "); ok {
			if r != okTrue && r != errorEnv {
				t.Errorf("the agent saw a non-canonical response %q", r)
			}
			continue
		}
		found := false
		for _, o := range own {
			found = found || l == o
		}
		if !found {
			t.Errorf("the agent printed an unexpected line %q", l)
		}
	}
}

// audit reads the archived audit log of the run (the watchdog or the
// teardown keeps it) and removes the archive at the end of the test.
func audit(t *testing.T, runID string) []map[string]any {
	t.Helper()
	dir := filepath.Join(auditArchive, runID)
	t.Cleanup(func() { os.RemoveAll(dir) })
	raw, err := os.ReadFile(filepath.Join(dir, "bounded-query.jsonl"))
	require.NoError(t, err, "no archived audit log for run %s", runID)
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if l == "" {
			continue // killed before the first record
		}
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		recs = append(recs, r)
	}
	return recs
}

// collect returns, in order, f of each audit record of recs that f keeps.
func collect[T any](recs []map[string]any, f func(map[string]any) (T, bool)) []T {
	var out []T
	for _, r := range recs {
		if v, ok := f(r); ok {
			out = append(out, v)
		}
	}
	return out
}

// events returns the lifecycle events of recs, in order.
func events(recs []map[string]any) []string {
	return collect(recs, func(r map[string]any) (string, bool) {
		if r["kind"] != "lifecycle" {
			return "", false
		}
		return r["event"].(string), true
	})
}

// runtimes are the runtimes the kill cases run on: direct always, gvisor
// where runsc is installed.
func runtimes(t *testing.T) []string {
	rts := []string{"direct"}
	if _, err := exec.LookPath("runsc"); err == nil {
		rts = append(rts, "gvisor")
	} else {
		t.Log("BLOCKED: runsc is not installed on this host; the gvisor kill cases cannot run")
	}
	return rts
}

// mountPoints lists the mount points in the mount table at path that
// contain s (a run id or a name), in table order. A table that cannot be
// read or parsed is an error, not an empty list: a leak check that read
// nothing would pass.
func mountPoints(path, s string) ([]string, error) {
	ms, err := mountinfo.Read(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if strings.Contains(m.Point, s) {
			out = append(out, m.Point)
		}
	}
	return out, nil
}
