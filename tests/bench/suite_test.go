package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/docker"
	"github.com/awf-project/awf/isolate/gvisor"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/tests/fixture"
)

// The suite runs only when asked: AWF_BENCH_SUITE=1 (make bench sets it).
// Its knobs:
//
//	BENCH_QUICK=1           a small run for development (two repositories, n ≤ 3)
//	AWF_BENCH_BIN=DIR       prebuilt awf and bounded-query (make bench passes bin/)
//	AWF_BENCH_OUT=DIR       where PERFORMANCE.md and performance.json are (default ../../docs)
//	AWF_TEST_DOCKER_SOCKET  the private Engine (tests/setup/dockerd.sh)
//	AWF_BENCH_ROWS=A,B      only these rows (ids as in the report; "broker"
//	                        and "startup" name those sections); a run for
//	                        development: the report says it is partial
//	AWF_BENCH_WORKLOADS=A,B only these workloads (trivial, gitlog, treewalk)
func init() {
	// The direct runtime re-executes this test binary as container init.
	direct.InitIfRequested()
}

// skipAbove: a row whose sample took longer than this on the 10k-file
// repository is not run on the 100k-file one.
const skipAbove = 2 * time.Second

// params say how many samples a row takes.
type params struct {
	quick   bool
	repos   []repoSpec
	nMin    int           // at least this many samples per row and cell
	nMax    int           // at most this many
	nTarget int           // at most this many in the cell the targets read
	budget  time.Duration // per row and cell, between nMin and nMax
	brokerN int
	startN  int
}

func suiteParams() params {
	if os.Getenv("BENCH_QUICK") == "1" {
		return params{quick: true, repos: []repoSpec{{RepoSmall, 10}, {RepoMid, 10000}},
			nMin: 1, nMax: 3, nTarget: 3, budget: 0, brokerN: 3, startN: 10}
	}
	return params{repos: []repoSpec{{RepoSmall, 10}, {RepoMid, 10000}, {RepoLarge, 100000}},
		nMin: 5, nMax: 40, nTarget: 60, budget: 12 * time.Second, brokerN: 20, startN: 60}
}

// sample is one measured run.
type sample struct {
	proc time.Duration // processing time, as the row defines it
	wall time.Duration // wall time around the whole call
}

// runner runs one row on one repository and workload.
type runner interface {
	once(ctx context.Context) (sample, error)
	close()
}

// rowDef makes a row's runner for a cell, or says why it cannot run.
type rowDef struct {
	Row
	blocked string
	make    func(r *benchRepo, w Workload) (runner, error)
}

// suite is the run's shared state.
type suite struct {
	p       params
	env     *fixture.Env
	work    string
	pol     *policy.Policy
	rts     map[string]isolate.Runtime
	runIDs  map[string]string
	blocked map[string]string
	dockerS string
	refImg  string
	seq     int
	notes   []string
	// stateDirs are the runtimes' state directories, removed at the end.
	stateDirs []string
	// cgroup2 is the host's cgroup2 mount for the favordynmods row, or
	// cgroup2Why says why that row cannot run.
	cgroup2    *hostCgroup2
	cgroup2Why string
	// perSample is each row's median wall per sample by workload and
	// repository, so that a bigger repository can skip a row that would
	// not fit the run's time.
	perSample map[string]time.Duration
}

func (s *suite) note(format string, a ...any) { s.notes = append(s.notes, fmt.Sprintf(format, a...)) }

func (s *suite) nextID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s-%d", prefix, s.seq)
}

// runSuite runs everything and writes the report; it returns a process
// exit code.
func runSuite() int {
	start := time.Now()
	p := suiteParams()
	rep := &Report{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Host: hostLine(), Quick: p.quick, LoadStart: loadavg()}
	s := &suite{p: p, rts: map[string]isolate.Runtime{}, runIDs: map[string]string{}, blocked: map[string]string{}, perSample: map[string]time.Duration{}}
	defer s.cleanup()
	logf("bench: setting up (binaries, rootfs, agent user)")
	var err error
	s.env, err = fixture.Setup(fixture.Options{Suite: "bench", UserPrefix: "awf-bench", Prebuilt: os.Getenv("AWF_BENCH_BIN")})
	if err != nil {
		logf("bench: FAIL: %v", err)
		return 1
	}
	s.work = s.env.Work
	if s.pol, err = policy.Default(); err != nil {
		logf("bench: FAIL: policy: %v", err)
		return 1
	}
	repos, err := makeRepos(filepath.Join(s.work, "repos"), p.repos)
	if err != nil {
		logf("bench: FAIL: repositories: %v", err)
		return 1
	}
	for _, r := range repos {
		rep.Repos = append(rep.Repos, r.id)
		s.note("The %s-file repository: %d files (about 90 bytes each, %d per directory), one commit, packed (`git repack -ad`), read-only as a staged seed is; made in %.1f s.", r.id, r.files, perDir, r.made.Seconds())
	}
	s.note("Runtime rows run with the default limits (every runtime overlays one view per seed, so the repository tmpfs holds only an invocation's writes), no CPU pinning, the default seccomp policy and the project's rootfs. The broker row runs as `awf broker` does (sandboxes pinned to the last CPU).")
	s.note("`bwrap` binds the repository read-only (awf gives a private writable overlay) and sets up no cgroup and no seccomp filter: it is a floor, not an equal.")
	s.note("`reference` reproduces the reference's per-query path with public tools: the image is the project's rootfs imported with `docker import` (the reference uses python:3.12-alpine), `--pull never` on that local image, Docker's default seccomp profile in place of the reference's own; every other flag is the reference's. Its in-container entry point copies the seed again into `/query` (`shutil.copytree`) and runs the script with `runpy`, as its `run-query` does.")
	s.note("Each row takes as many samples as its first run's cost (a warm row's refill included) fits in %.0f s per cell (twice that, up to %d, in the trivial 10k-file cell the targets read), between %d and %d; a first run that cost over 2 s is kept as a sample and the row may take as few as 2 (1 over 8 s); other first runs are untimed. On the 100k-file repository, the git-log and tree-walk cells skip a row whose 10k-file run cost over 2 s.", s.p.budget.Seconds(), max(s.p.nMax, s.p.nTarget), s.p.nMin, s.p.nMax)
	sel := selection{rows: listEnv("AWF_BENCH_ROWS"), workloads: listEnv("AWF_BENCH_WORKLOADS")}
	if sel.rows != nil || sel.workloads != nil {
		s.note("A partial run: rows %v, workloads %v (AWF_BENCH_ROWS, AWF_BENCH_WORKLOADS).", sel.rows, sel.workloads)
	}
	s.openRuntimes(sel)
	s.cgroup2, s.cgroup2Why = findCgroup2()
	if s.cgroup2 != nil {
		if s.cgroup2.m.FavorDynmods {
			s.note("The host's cgroup2 (%s) is already mounted `favordynmods`: `direct-cold` and `direct-cold-fdm` measure the same thing.", s.cgroup2.m.Point)
		} else {
			s.note("The host's cgroup2 (%s) is mounted without `favordynmods` (options %q): `direct-cold-fdm` sets it around each of its samples and restores these options after each, checked in the mount table.", s.cgroup2.m.Point, s.cgroup2.m.Data)
		}
	}
	if sel.row(RowReference) {
		s.importReference()
	}
	var rows []rowDef
	for _, row := range s.rows() {
		if sel.row(row.ID) {
			rows = append(rows, row)
			rep.Rows = append(rep.Rows, row.Row)
		}
	}
	var wls []Workload
	for _, w := range Workloads() {
		if sel.workload(w.ID) {
			wls = append(wls, w)
			rep.Workloads = append(rep.Workloads, w.ID)
		}
	}
	for _, r := range repos {
		if err := s.warmRepo(r); err != nil {
			logf("bench: FAIL: %v", err)
			return 1
		}
		for _, w := range wls {
			rep.Cells = append(rep.Cells, s.measureCell(rows, r, w)...)
		}
	}
	repoOf := func(id string) *benchRepo {
		for _, r := range repos {
			if r.id == id {
				return r
			}
		}
		return nil
	}
	if small, large := repoOf(RepoSmall), repoOf(RepoLarge); small != nil && large != nil && len(wls) > 0 && wls[0].ID == WorkTrivial {
		rep.Scaling = s.measureScaling(rows, small, large, wls[0])
	}
	rep.Startup = Startup{Blocked: "not selected (AWF_BENCH_ROWS)"}
	if sel.row("startup") {
		rep.Startup = s.measureStartup()
	}
	mid := repoOf(RepoMid)
	rep.Broker = Broker{Blocked: "not selected (AWF_BENCH_ROWS, AWF_BENCH_WORKLOADS)"}
	if sel.row("broker") && len(wls) > 0 && wls[0].ID == WorkTrivial {
		rep.Broker = s.measureBroker(mid, wls[0])
	}
	rep.LoadEnd = loadavg()
	rep.Minutes = float64(int(time.Since(start).Minutes()*10)) / 10
	rep.Notes = s.notes
	rep.Ratios()
	rep.CheckTargets()
	for _, t := range rep.Targets {
		logf("bench: target %s: %s: %s", t.Status, t.Name, t.Detail)
	}
	if err := writeReport(rep); err != nil {
		logf("bench: FAIL: %v", err)
		return 1
	}
	return 0
}

func writeReport(rep *Report) error {
	out := os.Getenv("AWF_BENCH_OUT")
	if out == "" {
		out = filepath.Join("..", "..", "docs")
	}
	mdPath := filepath.Join(out, "PERFORMANCE.md")
	doc, err := os.ReadFile(mdPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	next, err := ReplaceBlock(string(doc), rep.Markdown())
	if err != nil {
		return err
	}
	js, err := rep.JSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(mdPath, []byte(next), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "performance.json"), js, 0o644); err != nil {
		return err
	}
	logf("bench: wrote %s and %s", mdPath, filepath.Join(out, "performance.json"))
	return nil
}

// selection is what AWF_BENCH_ROWS and AWF_BENCH_WORKLOADS choose; a nil
// list chooses everything.
type selection struct{ rows, workloads []string }

func (s selection) row(id string) bool { return s.rows == nil || slices.Contains(s.rows, id) }
func (s selection) workload(id string) bool {
	return s.workloads == nil || slices.Contains(s.workloads, id)
}

// runtimeUsed reports whether a selected row runs on runtime name.
func (s selection) runtimeUsed(name string) bool {
	switch name {
	case "direct":
		return s.row(RowDirectCold) || s.row(RowDirectColdFDM) || s.row(RowDirectWarm) || s.row("broker")
	case "gvisor":
		return s.row(RowGvisorCold) || s.row(RowGvisorWarm)
	}
	return s.row(RowDocker) || s.row(RowReference)
}

// listEnv splits a comma-separated variable; nil when it is unset or empty.
func listEnv(key string) []string {
	v := strings.TrimSpace(os.Getenv(key))
	if v == "" {
		return nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// openRuntimes opens and probes direct, gvisor and docker (those a selected
// row runs on); a runtime that cannot run here is recorded with its reason.
func (s *suite) openRuntimes(sel selection) {
	s.dockerS = os.Getenv("AWF_TEST_DOCKER_SOCKET")
	open := map[string]func(isolate.HostConfig) (isolate.Runtime, error){"direct": direct.New, "gvisor": gvisor.New, "docker": docker.New}
	for _, name := range []string{"direct", "gvisor", "docker"} {
		switch {
		case !sel.runtimeUsed(name):
			s.blocked[name] = "not selected (AWF_BENCH_ROWS)"
			continue
		case name == "gvisor" && !onPath("runsc"):
			s.blocked[name] = "BLOCKED: runsc is not installed"
			continue
		case name == "docker" && s.dockerS == "":
			s.blocked[name] = "BLOCKED: no Docker Engine (AWF_TEST_DOCKER_SOCKET is unset; make bench starts one)"
			continue
		}
		// Not below /tmp: a runtime refuses a state directory that
		// overlaps its binary's directory, and go test builds in /tmp.
		state, err := os.MkdirTemp("/var/tmp", "awf-bench-"+name+"-")
		if err != nil {
			s.blocked[name] = err.Error()
			continue
		}
		s.stateDirs = append(s.stateDirs, state)
		id := randomID()
		var rt isolate.Runtime
		rt, err = open[name](isolate.HostConfig{RunID: id, StateDir: state, CgroupParent: "awf-bench", DockerSocket: s.dockerS})
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			err = rt.Probe(ctx)
			cancel()
			if err != nil {
				_ = rt.Close()
			}
		}
		if err != nil {
			s.blocked[name] = fmt.Sprintf("%s: %v", name, err)
			logf("bench: %s", s.blocked[name])
			continue
		}
		s.rts[name], s.runIDs[name] = rt, id
	}
}

// template is the sandbox template of runtime name over repository r,
// with the default limits: every runtime overlays one view per seed, so the
// repository tmpfs holds only an invocation's writes, whatever the seed's
// size.
func (s *suite) template(name string, r *benchRepo) isolate.Template {
	return isolate.Template{RunID: s.runIDs[name], RootFS: s.env.RootFS, Repo: r.dir, Limits: isolate.DefaultLimits(), Policy: s.pol}
}

// warmRepo does each runtime's one-off work for r (direct: the per-seed
// view copy) before anything is measured, as the broker does at start.
func (s *suite) warmRepo(r *benchRepo) error {
	for name, rt := range s.rts {
		w, ok := rt.(isolate.Warmer)
		if !ok {
			continue
		}
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		err := w.Warm(ctx, s.template(name, r))
		cancel()
		if err != nil {
			return fmt.Errorf("%s: warm %s-file repository: %w", name, r.id, err)
		}
		if d := time.Since(t0); d > time.Second {
			s.note("%s: one-off work for the %s-file repository (Warm, before measuring): %.1f s.", name, r.id, d.Seconds())
		}
	}
	return nil
}

// measureCell runs every row on r and w, interleaved: in each round every
// row that still wants samples runs once, in row order.
func (s *suite) measureCell(rows []rowDef, r *benchRepo, w Workload) []Cell {
	logf("bench: %s files, %s", r.id, w.ID)
	ctx := context.Background()
	type state struct {
		run   runner
		want  int
		procs []time.Duration
		walls []time.Duration
		fail  string
		cost  time.Duration // the first call's whole time
	}
	var cells []Cell
	st := make([]*state, len(rows))
	nMax := s.p.nMax
	if r.id == targetRepo && w.ID == targetWorkload {
		nMax = max(nMax, s.p.nTarget)
	}
	for i, row := range rows {
		st[i] = &state{}
		if row.blocked != "" {
			st[i].fail = row.blocked
			continue
		}
		if d, ok := s.perSample[row.ID+"/"+w.ID+"/"+RepoMid]; ok && r.id == RepoLarge && w.ID != WorkTrivial && d > skipAbove {
			st[i].fail = fmt.Sprintf("a sample cost %.1f s on the 10k-file repository; ten times that does not fit the run's time", d.Seconds())
			continue
		}
		run, err := row.make(r, w)
		if err != nil {
			st[i].fail = err.Error()
			continue
		}
		st[i].run = run
		// One untimed run warms caches and proves the answer; a slow one
		// (over 2 s) is kept as a sample, its caches being no warmer.
		// cost is the whole call, a warm row's refill included: it is
		// what the run's time pays per sample.
		t0 := time.Now()
		sm, err := run.once(ctx)
		cost := time.Since(t0)
		if err != nil {
			st[i].fail = "failed: " + err.Error()
			run.close()
			st[i].run = nil
			continue
		}
		st[i].cost = cost
		budget, nMin := s.p.budget, s.p.nMin
		if nMax > s.p.nMax {
			budget *= 2 // the cell the targets read
		}
		if cost > 2*time.Second {
			// A slow row's caches are no warmer after one run: keep
			// the sample, and take fewer.
			nMin = 2
			if cost > 8*time.Second {
				nMin = 1
			}
			st[i].procs, st[i].walls = append(st[i].procs, sm.proc), append(st[i].walls, sm.wall)
		}
		n := nMax
		if budget > 0 {
			n = int(budget / cost)
		}
		n = min(max(n, nMin), nMax)
		st[i].want = n
	}
	// Each round starts one row later, so that no row always runs right
	// after the same neighbour.
	for round, more := 0, true; more; round++ {
		more = false
		for k := range st {
			x := st[(round+k)%len(st)]
			if x.run == nil || len(x.procs) >= x.want {
				continue
			}
			sm, err := x.run.once(ctx)
			if err != nil {
				x.fail = fmt.Sprintf("failed after %d samples: %v", len(x.procs), err)
				x.run.close()
				x.run = nil
				continue
			}
			x.procs, x.walls = append(x.procs, sm.proc), append(x.walls, sm.wall)
			more = true
		}
	}
	for i, row := range rows {
		x := st[i]
		if x.run != nil {
			x.run.close()
		}
		c := Cell{Row: row.ID, Repo: r.id, Workload: w.ID}
		if x.fail != "" && len(x.procs) == 0 {
			c.Blocked = x.fail
			logf("bench:   %-12s %s", row.ID, x.fail)
		} else {
			c.Processing = Summarise(x.procs)
			ws := Summarise(x.walls)
			s.perSample[row.ID+"/"+w.ID+"/"+r.id] = x.cost
			c.Wall = &ws
			c.Buckets = Buckets(x.procs)
			if x.fail != "" {
				s.note("%s on the %s-file repository, %s: %s", row.ID, r.id, w.ID, x.fail)
			}
			logf("bench:   %-12s median %8.2f ms  p95 %8.2f ms  n=%d", row.ID, c.Processing.MedianMS, c.Processing.P95MS, c.Processing.N)
		}
		cells = append(cells, c)
	}
	return cells
}

// cleanup undoes everything the suite made, each step on its own.
func (s *suite) cleanup() {
	logf("bench: cleaning up (runtimes, image, repositories; a minute or two after a full run)")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for name, rt := range s.rts {
		if err := rt.Sweep(ctx); err != nil {
			logf("bench: %s: sweep: %v", name, err)
		}
		if err := rt.Close(); err != nil {
			logf("bench: %s: close: %v", name, err)
		}
	}
	if s.refImg != "" {
		_, _ = s.dockerCmd(ctx, nil, "rmi", "-f", s.refImg)
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/awf-bench")
	for _, d := range append(dirs, "/sys/fs/cgroup/awf-bench") {
		_ = os.Remove(d)
	}
	for _, d := range s.stateDirs {
		_ = os.RemoveAll(d)
	}
	if s.env != nil {
		s.env.Close()
	}
}

func onPath(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// hostLine describes the machine: CPUs, kernel, cgroup mode.
func hostLine() string {
	var uts [3]string
	for i, f := range []string{"/proc/sys/kernel/ostype", "/proc/sys/kernel/osrelease"} {
		b, _ := os.ReadFile(f)
		uts[i] = strings.TrimSpace(string(b))
	}
	cg := "hybrid or v1 cgroups"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		cg = "cgroup v2"
	}
	cpu := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s %s, %s", runtime.NumCPU(), cpu, uts[0], uts[1], cg)
}
