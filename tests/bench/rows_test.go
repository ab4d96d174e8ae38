package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate"
)

// rows lists the suite's rows in report order.
func (s *suite) rows() []rowDef {
	rt := func(name string) string { return s.blocked[name] }
	bw := ""
	if !onPath("bwrap") {
		bw = "BLOCKED: bubblewrap is not installed"
	}
	ref := s.blocked["docker"]
	if ref == "" && s.refImg == "" {
		ref = "the reference image could not be imported (see the notes)"
	}
	fdm := rt("direct")
	if fdm == "" {
		fdm = s.cgroup2Why
	}
	timings := "the runtime's `Timings` sum (prepare + start + run + read + destroy)"
	warmT := "the runtime's `Timings` of `Exec` (start + run + read) + `Destroy`; `Prepare` ran before, outside the window, as the pool does, and the runner then waited 200 ms for the prepared interpreter's imports, as a pool refilled between two requests has"
	return []rowDef{
		{Row: Row{RowHost, "the floor: the script on the host, `python3 -I -S -B script`, no sandbox", "process wall time"}, make: s.hostRow},
		{Row: Row{RowPass, "the floor: bare `python3 -c pass` on the host (ignores the workload)", "process wall time"}, make: s.passRow},
		{Row: Row{RowBwrap, "bubblewrap: new user, pid, net, ipc, uts, cgroup and mount namespaces, read-only root and repository binds, tmpfs `/query` and `/tmp`, uid 65534, no capabilities (no cgroup limits, no seccomp filter)", "process wall time"}, blocked: bw, make: s.bwrapRow},
		{Row: Row{RowBwrapBootstrap, "bubblewrap as `bwrap`, running awf's interpreter bootstrap (`isolate.BootstrapArgv`: the preloaded imports) with the script handed on stdin, as a cold direct sandbox runs it", "process wall time"}, blocked: bw, make: s.bwrapBootstrapRow},
		{Row: Row{RowDirectCold, "awf direct (libcontainer), `Runtime.Run`", timings}, blocked: rt("direct"), make: s.coldRow("direct")},
		{Row: Row{RowDirectColdFDM, "awf direct, `Runtime.Run`, with the host's cgroup2 mounted `favordynmods` for the sample (a host setting awf never changes; the row sets it around each sample and restores the host's options)", timings}, blocked: fdm, make: s.fdmRow},
		{Row: Row{RowDirectWarm, "awf direct, a sandbox prepared ahead: `Exec` + `Destroy`", warmT}, blocked: rt("direct"), make: s.warmRow("direct")},
		{Row: Row{RowGvisorCold, "awf gvisor (runsc), `Runtime.Run`", timings}, blocked: rt("gvisor"), make: s.coldRow("gvisor")},
		{Row: Row{RowGvisorWarm, "awf gvisor, a sandbox prepared ahead: `Exec` + `Destroy`", warmT}, blocked: rt("gvisor"), make: s.warmRow("gvisor")},
		{Row: Row{RowDocker, "awf docker (the private Engine), `Runtime.Run`", timings}, blocked: rt("docker"), make: s.coldRow("docker")},
		{Row: Row{RowReference, "the reference's approach: `cp -a` of the whole repository, then `docker run` with the reference's flags (copytree into `/query`, then the script), `docker rm -f`, remove the copy", "wall time from the copy to the copy's removal"}, blocked: ref, make: s.referenceRow},
	}
}

// procRunner runs a process per sample and checks the answer in out.
type procRunner struct {
	argv []string
	dir  string
	env  []string
	out  string // "" = no answer to check
	want string
	pre  func() error
	// stdin, when set, is the process's standard input.
	stdin []byte
}

func (p *procRunner) once(ctx context.Context) (sample, error) {
	if p.pre != nil {
		if err := p.pre(); err != nil {
			return sample{}, err
		}
	}
	if p.out != "" {
		_ = os.Remove(p.out)
	}
	cmd := exec.CommandContext(ctx, p.argv[0], p.argv[1:]...)
	cmd.Dir, cmd.Env = p.dir, p.env
	if p.stdin != nil {
		cmd.Stdin = bytes.NewReader(p.stdin)
	}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errb, &errb
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %v: %s", p.argv[0], err, tail(errb.String()))
	}
	if p.out != "" {
		if err := checkAnswer(p.out, p.want); err != nil {
			return sample{}, err
		}
	}
	return sample{proc: d, wall: d}, nil
}

func (p *procRunner) close() {}

func checkAnswer(path, want string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	if string(b) != want {
		return fmt.Errorf("answer %q, want %q", b, want)
	}
	return nil
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 400 {
		s = "…" + s[len(s)-400:]
	}
	return s
}

var hostEnv = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}

// hostRow: the script with the host interpreter in a scratch directory
// whose ./repo is the repository.
func (s *suite) hostRow(r *benchRepo, w Workload) (runner, error) {
	dir, err := os.MkdirTemp(s.work, "host-")
	if err != nil {
		return nil, err
	}
	if err := os.Symlink(r.dir, filepath.Join(dir, "repo")); err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "query-script.py")
	if err := os.WriteFile(script, []byte(w.Script), 0o444); err != nil {
		return nil, err
	}
	return &procRunner{argv: []string{"/usr/bin/python3", "-I", "-S", "-B", script}, dir: dir, env: hostEnv, out: filepath.Join(dir, "out"), want: w.Want}, nil
}

func (s *suite) passRow(*benchRepo, Workload) (runner, error) {
	return &procRunner{argv: []string{"/usr/bin/python3", "-c", "pass"}, dir: "/", env: hostEnv}, nil
}

// bwrapRow: bubblewrap with flags equivalent to the direct sandbox's
// namespaces and mounts, over the same root filesystem.
func (s *suite) bwrapRow(r *benchRepo, w Workload) (runner, error) {
	return s.bwrap(r, w, false)
}

// bwrapBootstrapRow: the same bubblewrap sandbox running awf's bootstrap,
// which reads the script from descriptor 0 in HandScript's framing.
func (s *suite) bwrapBootstrapRow(r *benchRepo, w Workload) (runner, error) {
	return s.bwrap(r, w, true)
}

func (s *suite) bwrap(r *benchRepo, w Workload, bootstrap bool) (runner, error) {
	dir, err := os.MkdirTemp(s.work, "bwrap-")
	if err != nil {
		return nil, err
	}
	awf := filepath.Join(dir, "awf")
	if err := os.Mkdir(awf, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(awf, "query-script.py"), []byte(w.Script), 0o444); err != nil {
		return nil, err
	}
	// /query is a host directory bound in (the answer is read from it);
	// emptied before each run.
	query := filepath.Join(dir, "query")
	lim := isolate.DefaultLimits()
	argv := []string{"bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
		"--uid", "65534", "--gid", "65534", "--cap-drop", "ALL", "--hostname", "sandbox",
		"--ro-bind", s.env.RootFS, "/", "--proc", "/proc", "--dev", "/dev",
		"--size", fmt.Sprint(lim.TmpTmpfsBytes), "--tmpfs", "/tmp",
		"--bind", query, "/query", "--ro-bind", r.dir, "/query/repo",
		"--ro-bind", awf, "/awf", "--clearenv", "--setenv", "PATH", "/usr/bin", "--setenv", "LANG", "C.UTF-8",
		"--chdir", "/query"}
	var stdin []byte
	if bootstrap {
		argv = append(argv, isolate.BootstrapArgv(0)...)
		var b bytes.Buffer
		if err := isolate.HandScript(&b, []byte(w.Script)); err != nil {
			return nil, err
		}
		stdin = b.Bytes()
	} else {
		argv = append(argv, "/usr/bin/python3", "-I", "-S", "-B", isolate.ScriptPath)
	}
	pre := func() error {
		if err := os.RemoveAll(query); err != nil {
			return err
		}
		if err := os.Mkdir(query, 0o777); err != nil {
			return err
		}
		return os.Chmod(query, 0o777)
	}
	return &procRunner{argv: argv, dir: "/", env: hostEnv, out: filepath.Join(query, "out"), want: w.Want, pre: pre, stdin: stdin}, nil
}

// coldRunner runs Runtime.Run per sample.
type coldRunner struct {
	s    *suite
	rt   isolate.Runtime
	tpl  isolate.Template
	w    Workload
	name string
}

func (s *suite) coldRow(name string) func(*benchRepo, Workload) (runner, error) {
	return func(r *benchRepo, w Workload) (runner, error) {
		return &coldRunner{s: s, rt: s.rts[name], tpl: s.template(name, r), w: w, name: name}, nil
	}
}

func (c *coldRunner) once(ctx context.Context) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	t0 := time.Now()
	o := c.rt.Run(ctx, isolate.Spec{Template: c.tpl, Job: isolate.Job{InvocationID: c.s.nextID("cold"), Script: []byte(c.w.Script)}})
	wall := time.Since(t0)
	if err := checkOutcome(o, c.w.Want); err != nil {
		return sample{}, err
	}
	return sample{proc: sum(o.Timings), wall: wall}, nil
}

func (c *coldRunner) close() {}

func sum(t isolate.Timings) time.Duration { return t.Prepare + t.Start + t.Run + t.Read + t.Destroy }

func checkOutcome(o isolate.Outcome, want string) error {
	if o.Kind != isolate.KindOK {
		return fmt.Errorf("outcome %s: %s %s", o.Kind, o.Detail, tail(string(o.Stderr)))
	}
	if string(o.Output) != want {
		return fmt.Errorf("answer %q, want %q", o.Output, want)
	}
	return nil
}

// warmRunner keeps one sandbox prepared ahead: a sample is Exec + Destroy,
// and the next sandbox is prepared right after, outside the window, as a
// pool refills after the response.
//
// Prepare returns while the prepared interpreter is still importing its
// preloads (tens of ms here); a pool refilled between two requests has
// finished them. The runner waits settleAfterRefill after each refill, so
// that a warm sample never includes its own refill's imports and no other
// row's sample runs beside them: without it, in a run of few rows the warm
// row's p95 rose from about 11 to 45 ms, and alternating two repositories
// back to back put one sandbox's imports in the other's samples.
type warmRunner struct {
	s    *suite
	rt   isolate.Runtime
	tpl  isolate.Template
	w    Workload
	next isolate.Sandbox
}

func (s *suite) warmRow(name string) func(*benchRepo, Workload) (runner, error) {
	return func(r *benchRepo, w Workload) (runner, error) {
		return &warmRunner{s: s, rt: s.rts[name], tpl: s.template(name, r), w: w}, nil
	}
}

// settleAfterRefill is how long a warm runner leaves a fresh sandbox
// before it may be measured.
const settleAfterRefill = 200 * time.Millisecond

func (c *warmRunner) refill(ctx context.Context) error {
	sb, err := c.rt.Prepare(ctx, c.tpl)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	c.next = sb
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(settleAfterRefill):
	}
	return nil
}

func (c *warmRunner) once(ctx context.Context) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if c.next == nil {
		if err := c.refill(ctx); err != nil {
			return sample{}, err
		}
	}
	sb := c.next
	c.next = nil
	t0 := time.Now()
	o := sb.Exec(ctx, isolate.Job{InvocationID: c.s.nextID("warm"), Script: []byte(c.w.Script)})
	t1 := time.Now()
	derr := sb.Destroy(ctx)
	destroy := time.Since(t1)
	wall := time.Since(t0)
	if derr != nil {
		return sample{}, fmt.Errorf("destroy: %w", derr)
	}
	if err := checkOutcome(o, c.w.Want); err != nil {
		return sample{}, err
	}
	o.Timings.Destroy = destroy
	if err := c.refill(ctx); err != nil {
		return sample{}, err
	}
	return sample{proc: sum(o.Timings), wall: wall}, nil
}

func (c *warmRunner) close() {
	if c.next != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.next.Destroy(ctx)
		c.next = nil
	}
}
