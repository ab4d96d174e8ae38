package verify

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// fakeRuntime is an isolate.Runtime that never builds a sandbox: it answers
// each probe through respond. It proves the battery, the verdicts, the
// report and the leftover checks without a real backend.
type fakeRuntime struct {
	name     string
	h        isolate.HostConfig
	probeErr error
	respond  func(r *fakeRuntime, p Probe, s isolate.Spec) isolate.Outcome
	// prepareErr fails every Prepare; prepared and ran count Prepares and
	// the jobs a prepared sandbox ran.
	prepareErr    error
	prepared, ran int
}

func (f *fakeRuntime) Name() string                    { return f.name }
func (f *fakeRuntime) Probe(ctx context.Context) error { return f.probeErr }
func (f *fakeRuntime) Prepare(ctx context.Context, t isolate.Template) (isolate.Sandbox, error) {
	if f.prepareErr != nil {
		return nil, f.prepareErr
	}
	f.prepared++
	return &fakeSandbox{f: f, t: t}, nil
}

// fakeSandbox is what the warm pool prepares ahead from a fakeRuntime: its
// one Exec answers like Run.
type fakeSandbox struct {
	f    *fakeRuntime
	t    isolate.Template
	used bool
}

func (s *fakeSandbox) Exec(ctx context.Context, j isolate.Job) isolate.Outcome {
	if s.used {
		return isolate.Err(isolate.KindLaunchFailed, "fake: sandbox already used")
	}
	s.used = true
	s.f.ran++
	return s.f.Run(ctx, isolate.Spec{Template: s.t, Job: j})
}

func (s *fakeSandbox) Destroy(context.Context) error   { return nil }
func (f *fakeRuntime) Sweep(ctx context.Context) error { return nil }
func (f *fakeRuntime) Usable() error                   { return nil }
func (f *fakeRuntime) Close() error                    { return nil }

func (f *fakeRuntime) Run(ctx context.Context, s isolate.Spec) isolate.Outcome {
	id := probeIDOf(s.Job.Script)
	for _, p := range append(Battery(), filterProbe) {
		if p.ID == id {
			return f.respond(f, p, s)
		}
	}
	return isolate.Err(isolate.KindLaunchFailed, "fake: unknown script")
}

// probeIDOf finds the "# probe ID" line a rendered script carries.
func probeIDOf(script []byte) string {
	sc := bufio.NewScanner(strings.NewReader(string(script)))
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "# probe "); ok {
			return id
		}
	}
	return ""
}

// passing answers every probe with its documented passing outcome.
func passing(_ *fakeRuntime, p Probe, _ isolate.Spec) isolate.Outcome {
	if p.exampleKind != "" {
		return isolate.Outcome{Kind: p.exampleKind, Detail: "fake"}
	}
	return isolate.Outcome{Kind: isolate.KindOK, Output: []byte(p.example)}
}

func openFake(f *fakeRuntime) func(string, isolate.HostConfig) (isolate.Runtime, error) {
	return func(name string, h isolate.HostConfig) (isolate.Runtime, error) {
		f.name, f.h = name, h
		return f, nil
	}
}

// everyProbe selects the whole battery without the loaded-filter job, which
// needs a real sandboxed process.
var everyProbe = []string{"ctl/", "net/", "fs/", "priv/", "limit/"}

func runFake(t *testing.T, f *fakeRuntime, probes []string) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Runtimes: []string{"direct"}, Required: []string{"direct"}, RootFS: testRootFS,
		Probes: probes, Open: openFake(f), Environ: []string{}})
	require.NoError(t, err)
	require.Len(t, rep.Runtimes, 1)
	return rep
}

func results(rep *Report) map[string]Result {
	m := map[string]Result{}
	for _, r := range rep.Runtimes[0].Results {
		m[r.ID] = r
	}
	return m
}

func TestFakeBatteryPasses(t *testing.T) {
	rep := runFake(t, &fakeRuntime{respond: passing}, everyProbe)
	rs := results(rep)
	assert.Len(t, rs, len(Battery())+len(RuntimeChecks())-2, "every probe plus seed and leftover checks")
	for id, r := range rs {
		assert.Equal(t, Pass, r.Status, "%s: %s", id, r.Evidence)
	}
	assert.Equal(t, Pass, rep.Runtimes[0].Status)
}

// TestFakeProbesRunPooled proves that every probe runs in a sandbox the warm
// pool prepared ahead, and that a pool that cannot prepare one fails the
// probe instead of falling back to a cold run.
func TestFakeProbesRunPooled(t *testing.T) {
	f := &fakeRuntime{respond: passing}
	rep := runFake(t, f, everyProbe)
	n := 0
	for _, r := range rep.Runtimes[0].Results {
		if r.Kind == "" {
			assert.Empty(t, r.Path, "%s is a runtime check, not a sandbox", r.ID)
			continue
		}
		n++
		assert.Equal(t, PathPooled, r.Path, r.ID)
	}
	assert.Equal(t, len(Battery()), n, "every probe ran")
	assert.Equal(t, n, f.prepared, "one prepared sandbox per probe")
	assert.Equal(t, n, f.ran, "each ran its probe in the sandbox prepared for it")
	var text strings.Builder
	require.NoError(t, rep.WriteText(&text))
	assert.Contains(t, text.String(), fmt.Sprintf("path: pooled (%d probes)\n", n))

	broken := &fakeRuntime{respond: passing, prepareErr: errors.New("no sandbox")}
	rep = runFake(t, broken, everyProbe)
	for _, p := range Battery() {
		r := results(rep)[p.ID]
		assert.Equal(t, Fail, r.Status, p.ID)
		if p.exampleKind == "" {
			assert.Contains(t, r.Evidence, "prepare ahead", p.ID)
		}
		assert.Equal(t, PathPooled, r.Path, p.ID)
	}
	assert.Zero(t, broken.ran, "nothing ran cold")
}

func TestFakeBrokenSandboxFailsEverything(t *testing.T) {
	rep := runFake(t, &fakeRuntime{respond: func(_ *fakeRuntime, p Probe, _ isolate.Spec) isolate.Outcome {
		return isolate.Outcome{Kind: isolate.KindNonzeroExit, Detail: "exit status 1", Stderr: []byte("Traceback\n")}
	}}, everyProbe)
	for _, p := range Battery() {
		r := results(rep)[p.ID]
		assert.Equal(t, Fail, r.Status, "%s must fail when the sandbox cannot run it: %s", p.ID, r.Evidence)
	}
	assert.False(t, rep.OK)
	assert.Equal(t, 1, rep.ExitCode())
}

func TestFakeWorkingAttacksFail(t *testing.T) {
	// Every errno field answers "ok": the attack worked.
	rep := runFake(t, &fakeRuntime{respond: func(_ *fakeRuntime, p Probe, _ isolate.Spec) isolate.Outcome {
		if p.example == "" {
			return isolate.Outcome{Kind: isolate.KindOK, Output: []byte(`true`)}
		}
		out := p.example
		for _, e := range errnoVocab[1:] {
			out = strings.ReplaceAll(out, `"`+e+`"`, `"ok"`)
		}
		return isolate.Outcome{Kind: isolate.KindOK, Output: []byte(out)}
	}}, []string{"priv/unshare-userns", "priv/keyctl", "priv/bpf", "fs/write-root", "net/socket-netlink", "limit/memory", "limit/timeout"})
	for id, r := range results(rep) {
		if strings.HasPrefix(id, "leftover/") || id == "fs/seed-unchanged" {
			continue
		}
		assert.Equal(t, Fail, r.Status, "%s: %s", id, r.Evidence)
	}
}

func TestFakeSeccompKillAtStep(t *testing.T) {
	rep := runFake(t, &fakeRuntime{respond: func(_ *fakeRuntime, p Probe, _ isolate.Spec) isolate.Outcome {
		return isolate.Outcome{Kind: isolate.KindSeccompKill, Signal: "SIGSYS", Stderr: []byte("AWF-STEP unshare\n")}
	}}, []string{"priv/unshare-userns", "ctl/python"})
	rs := results(rep)
	assert.Equal(t, Pass, rs["priv/unshare-userns"].Status)
	assert.Contains(t, rs["priv/unshare-userns"].Evidence, `"unshare"`)
	assert.Equal(t, Fail, rs["ctl/python"].Status)
}

func TestFakeListenerHitFails(t *testing.T) {
	// The script claims it was refused, but the host listener saw it.
	rep := runFake(t, &fakeRuntime{respond: func(f *fakeRuntime, p Probe, s isolate.Spec) isolate.Outcome {
		port := portFrom(t, s.Job.Script)
		c, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(port))
		require.NoError(t, err)
		c.Close()
		time.Sleep(50 * time.Millisecond)
		return isolate.Outcome{Kind: isolate.KindOK, Output: []byte(`{"socket":"ok","connect":"ECONNREFUSED"}`)}
	}}, []string{"net/tcp-host"})
	r := results(rep)["net/tcp-host"]
	assert.Equal(t, Fail, r.Status, r.Evidence)
	assert.Contains(t, r.Evidence, "host saw 1")
}

// portFrom reads the port the tcp probe connects to.
func portFrom(t *testing.T, script []byte) int {
	t.Helper()
	s := string(script)
	i := strings.Index(s, `("127.0.0.1", `)
	require.GreaterOrEqual(t, i, 0)
	rest := s[i+len(`("127.0.0.1", `):]
	n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ')')])
	require.NoError(t, err)
	return n
}

func TestFakeStateLeftover(t *testing.T) {
	rep := runFake(t, &fakeRuntime{respond: func(f *fakeRuntime, p Probe, s isolate.Spec) isolate.Outcome {
		if p.ID == "priv/ids" {
			_ = os.WriteFile(filepath.Join(f.h.StateDir, "sandbox-"+s.Job.InvocationID), nil, 0o600)
		}
		return passing(f, p, s)
	}}, []string{"ctl/python", "priv/ids", "priv/caps"})
	r := results(rep)["leftover/state"]
	assert.Equal(t, Fail, r.Status)
	assert.Contains(t, r.Evidence, "priv/ids")
	assert.Contains(t, r.Evidence, "sandbox-v")
}

func TestFakeProcessLeftover(t *testing.T) {
	// A "sandbox" whose process survives its run: a sleep in a new pid namespace.
	var keep []*exec.Cmd
	t.Cleanup(func() {
		for _, c := range keep {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	rep := runFake(t, &fakeRuntime{respond: func(f *fakeRuntime, p Probe, s isolate.Spec) isolate.Outcome {
		if p.ID == "priv/caps" {
			cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", "sleep", "30")
			require.NoError(t, cmd.Start())
			keep = append(keep, cmd)
			child := waitChild(t, cmd.Process.Pid)
			s.Job.OnStart(child)
		}
		return passing(f, p, s)
	}}, []string{"ctl/python", "priv/caps", "priv/ids"})
	r := results(rep)["leftover/processes"]
	assert.Equal(t, Fail, r.Status, r.Evidence)
	assert.Contains(t, r.Evidence, "priv/caps")
	assert.Contains(t, r.Evidence, "sleep")
}

// waitChild returns the first child of pid, waiting for it to appear.
func waitChild(t *testing.T, pid int) int {
	t.Helper()
	for i := 0; i < 200; i++ {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
		if f := strings.Fields(string(b)); len(f) > 0 {
			c, err := strconv.Atoi(f[0])
			require.NoError(t, err)
			if comm, _ := os.ReadFile("/proc/" + f[0] + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
				return c
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the child never appeared")
	return 0
}

func TestBlockedAndRequired(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(name string, h isolate.HostConfig) (isolate.Runtime, error) {
		switch name {
		case "gvisor":
			return nil, errors.New("gvisor: runsc not found")
		case "docker":
			return &fakeRuntime{name: name, probeErr: errors.New("docker: no daemon")}, nil
		case "sbx":
			return &fakeRuntime{name: name, respond: passing}, nil // claims success; must still be BLOCKED
		}
		return &fakeRuntime{name: name, respond: passing}, nil
	}
	run := func(required ...string) *Report {
		rep, err := Run(ctx, Options{Runtimes: []string{"direct", "gvisor", "docker", "sbx"}, Required: required,
			RootFS: testRootFS, Probes: []string{"ctl/python"}, Open: open, Environ: []string{}})
		require.NoError(t, err)
		return rep
	}
	rep := run()
	byName := map[string]RuntimeReport{}
	for _, r := range rep.Runtimes {
		byName[r.Name] = r
	}
	assert.Equal(t, Pass, byName["direct"].Status)
	assert.Equal(t, Blocked, byName["gvisor"].Status)
	assert.Contains(t, byName["gvisor"].Reason, "runsc not found")
	assert.Equal(t, Blocked, byName["docker"].Status)
	assert.Contains(t, byName["docker"].Reason, "no daemon")
	assert.Equal(t, Blocked, byName["sbx"].Status, "sbx is always BLOCKED")
	assert.Contains(t, byName["sbx"].Reason, "no network")
	hostFail := false
	for _, c := range rep.Checks {
		hostFail = hostFail || c.Status == Fail
	}
	assert.Equal(t, !hostFail, rep.OK, "BLOCKED runtimes that are not required do not fail the run")
	assert.False(t, run("gvisor").OK, "--require turns BLOCKED into failure")
}

// TestFakeSelectionLeftoversJudgeOnlyWhatRan runs selections whose first run
// creates what a runtime keeps once per run (the root image and its journal
// entry): it is not a leftover, whichever job runs first, and a selection
// of the filter checks alone judges the filter job only.
func TestFakeSelectionLeftoversJudgeOnlyWhatRan(t *testing.T) {
	perRun := func(f *fakeRuntime, p Probe, s isolate.Spec) isolate.Outcome {
		dir := filepath.Join(f.h.StateDir, "roots", f.h.RunID+"-img")
		require.NoError(t, os.MkdirAll(dir, 0o700))
		return passing(f, p, s)
	}
	for _, sel := range [][]string{{"filter/"}, {"filter/loaded"}, {"filter/denylist"}, {"ctl/python"}, {"ctl/python", "filter/"}} {
		t.Run(strings.Join(sel, ","), func(t *testing.T) {
			rep := runFake(t, &fakeRuntime{respond: perRun}, sel)
			rs := results(rep)
			for _, id := range []string{"leftover/processes", "leftover/cgroups", "leftover/mounts", "leftover/state"} {
				assert.Equal(t, Pass, rs[id].Status, "%s: %s", id, rs[id].Evidence)
			}
		})
	}
	// A second run's leftover is still found in a filter-only selection.
	rep := runFake(t, &fakeRuntime{respond: func(f *fakeRuntime, p Probe, s isolate.Spec) isolate.Outcome {
		_ = os.WriteFile(filepath.Join(f.h.StateDir, "sandbox-"+s.Job.InvocationID), nil, 0o600)
		return passing(f, p, s)
	}}, []string{"filter/"})
	r := results(rep)["leftover/state"]
	assert.Equal(t, Fail, r.Status, "an entry named after the invocation is a leftover even in the first run: %s", r.Evidence)
	assert.Contains(t, r.Evidence, "filter/loaded")
}
