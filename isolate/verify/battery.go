package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/pool"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/proto"
)

// Battery returns every in-sandbox probe in the order verify runs them.
// ctl/plant runs before fs/earlier-invocations, which looks for its files.
func Battery() []Probe {
	var ps []Probe
	ps = append(ps, controlProbes()...)
	ps = append(ps, networkProbes()...)
	ps = append(ps, filesystemProbes()...)
	ps = append(ps, privilegeProbes()...)
	ps = append(ps, limitProbes()...)
	return ps
}

// RuntimeChecks returns the IDs of the results verify adds to each runtime's
// battery besides the probes: the loaded filter, the seed's integrity and
// the leftover checks. It returns a fresh slice each call.
func RuntimeChecks() []string {
	return []string{
		"filter/loaded", "filter/denylist", "fs/seed-unchanged",
		"leftover/processes", "leftover/cgroups", "leftover/mounts", "leftover/state",
	}
}

// filterProbe is the job whose live process verify reads the filter from.
var filterProbe = func() Probe {
	p := wantProbe("filter/loaded",
		"Reads the seccomp filter of a live sandboxed process with PTRACE_SECCOMP_GET_FILTER, decodes it and compares it with the golden table of the policy in use.",
		"The filter the kernel enforces is not the reviewed policy.", sObj("alive", sBool), `{"alive":true}`)
	p.Group = "filter"
	return p
}()

// battery runs the probes in one runtime.
type battery struct {
	name     string
	rt       isolate.Runtime
	traits   traits
	base     isolate.Template
	fx       *fixture
	prm      params
	pol      *policy.Policy
	arch     string
	scan     *leftoverScanner
	tally    leftoverTally
	seq      int
	progress func(Result)
}

// runAll executes the probes and the runtime checks and returns their results.
func (b *battery) runAll(ctx context.Context, probes []Probe, withFilter bool) []Result {
	var out []Result
	emit := func(r Result) {
		out = append(out, r)
		if b.progress != nil {
			b.progress(r)
		}
	}
	for _, p := range probes {
		if ctx.Err() != nil {
			emit(Result{ID: p.ID, Group: p.Group, Status: Fail, Evidence: "not run: " + ctx.Err().Error()})
			continue
		}
		r, _ := b.runProbe(ctx, p, nil)
		emit(r)
	}
	if withFilter {
		for _, r := range b.filterResults(ctx) {
			emit(r)
		}
	}
	emit(b.seedUnchanged())
	for _, r := range b.tally.results() {
		emit(r)
	}
	return out
}

// runProbe runs one probe through the runtime exactly as the broker runs a
// query: in a sandbox its warm pool prepared ahead (see run), then proto's
// strict parse, validation and canonicalisation of /query/out.
func (b *battery) runProbe(ctx context.Context, p Probe, onStart func(pid int)) (Result, isolate.Outcome) {
	res := Result{ID: p.ID, Group: p.Group}
	t0 := time.Now()
	fail := func(format string, args ...any) (Result, isolate.Outcome) {
		res.Status, res.Evidence = Fail, fmt.Sprintf(format, args...)
		res.Millis = time.Since(t0).Milliseconds()
		return res, isolate.Outcome{}
	}
	schema, err := proto.ParseSchema([]byte(p.schema))
	if err != nil {
		return fail("probe schema rejected: %v", err)
	}
	lim := p.effectiveLimits()
	prm := b.prm
	prm.Limits = lim
	script, err := p.render(prm)
	if err != nil {
		return fail("%v", err)
	}
	b.seq++
	inv := fmt.Sprintf("v%s-%03d", b.fx.tag(), b.seq)
	tmpl := b.base
	tmpl.Limits = lim
	si := &startInfo{}
	defer si.release()
	job := isolate.Job{
		InvocationID: inv,
		Script:       script,
		OnStart: func(pid int) {
			si.record(pid)
			if onStart != nil {
				onStart(pid)
			}
		},
	}
	before := b.fx.hits()
	ino0, err := hostInodeCounter()
	if err != nil {
		ino0 = -1
	}
	rctx, cancel := context.WithTimeout(ctx, lim.Wall+30*time.Second)
	out, path := b.run(rctx, isolate.Spec{Template: tmpl, Job: job})
	cancel()
	res.Path = path
	ino1, err := hostInodeCounter()
	if err != nil {
		ino1 = -1
	}
	runEnd := bootTicks()
	hits := b.fx.hits()
	for k := range hits {
		hits[k] -= before[k]
	}
	pid, _, _ := si.snapshot()
	b.tally.add(p.ID, b.scan.scan(inv, si, runEnd), pid != 0)
	if !b.scan.hasBaseline() {
		// The baseline follows the battery's first run, whichever job that
		// is (a probe, or the filter job when the selection holds no
		// probe), so that what the runtime keeps once per run is never a
		// leftover and everything after it is judged.
		b.scan.setBaseline()
	}

	res.Kind = string(out.Kind)
	c := &probeCtx{runtime: b.name, traits: b.traits, out: out, limits: lim, fx: b.fx, hits: hits, job: si.jobFacts(), inoBefore: ino0, inoAfter: ino1}
	if out.Kind == isolate.KindOK {
		canon, err := schema.CheckResult(out.Output)
		if err != nil {
			r, _ := fail("the answer was rejected by its schema: %v", err)
			r.Kind = res.Kind
			r.Millis = time.Since(t0).Milliseconds()
			return r, out
		}
		res.Answer = string(canon)
		dec := json.NewDecoder(bytes.NewReader(canon))
		dec.UseNumber()
		if err := dec.Decode(&c.answer); err != nil {
			// Scalar answers (a bare boolean) decode into a wrapper.
			c.answer = map[string]any{}
		}
	}
	res.Status, res.Evidence = b.judge(p, c)
	res.Millis = time.Since(t0).Milliseconds()
	return res, out
}

// run runs one job the way the broker runs a bounded query. A job with the
// default argv and no network (every battery probe) takes a sandbox that
// isolate/pool prepared ahead, with its interpreter already started and
// waiting for the script, and is then handed the script (PathPooled): the
// report then proves the controls on the path the broker's warm pool uses,
// not only on a cold Prepare. Any other job (another argv, an enclave) runs
// through Runtime.Run in a fresh sandbox (PathCold), as the broker runs it.
//
// The pool is built for this one job and holds one sandbox, so nothing
// prepared ahead waits beside the job or the leftover scan that follows it,
// and the host-side windows around the run (fixture hits, the inode counter,
// the leftovers) still cover the sandbox's whole life. A pool that cannot
// prepare ahead, or a take that was not served by the prepared sandbox, is
// a launch failure and never a silent fallback to the cold path.
func (b *battery) run(ctx context.Context, s isolate.Spec) (isolate.Outcome, string) {
	if !isolate.IsDefaultArgv(s.Job.Argv) || s.Template.Network != nil {
		return b.rt.Run(ctx, s), PathCold
	}
	p, err := pool.New(b.rt, 1, []isolate.Template{s.Template})
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "warm pool: %v", err), PathPooled
	}
	var out isolate.Outcome
	if _, err := p.Fill(ctx); err != nil {
		out = isolate.Err(isolate.KindLaunchFailed, "prepare ahead: %v", err)
	} else {
		out = p.Run(ctx, s)
		if st := p.Stats(); st.Warm != 1 || st.Cold != 0 {
			out = isolate.Err(isolate.KindLaunchFailed, "the warm pool did not serve the sandbox it prepared (warm %d, cold %d)", st.Warm, st.Cold)
		}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := p.Close(dctx); err != nil && out.Kind != isolate.KindCleanupFailed {
		out = isolate.Outcome{Kind: isolate.KindCleanupFailed, ExitCode: out.ExitCode, Detail: fmt.Sprintf("close the warm pool after %s: %v", out.Kind, err), Timings: out.Timings}
	}
	return out, PathPooled
}

// judge applies the probe's rule, with the shared handling of outcomes that
// are not ok: a seccomp kill during an attack step blocks the attack; any
// other failure is a FAIL with the runtime's detail.
func (b *battery) judge(p Probe, c *probeCtx) (Status, string) {
	out := c.out
	if out.Kind == isolate.KindOK || p.exampleKind != "" {
		return p.check(c)
	}
	if out.Kind == isolate.KindSeccompKill && slices.Contains([]string{"network", "filesystem", "privilege"}, p.Group) {
		if c.lastStep() != "" {
			return Pass, stepEvidence(c)
		}
		return Fail, "killed by seccomp before the first attack step: the probe could not run"
	}
	ev := fmt.Sprintf("outcome %s: %s", out.Kind, out.Detail)
	if tail := stderrTail(out.Stderr); tail != "" {
		ev += "; stderr: " + tail
	}
	return Fail, ev
}

// stderrTail is the last non-marker line of a probe's stderr, whole: the
// JSON report carries full evidence, and only the text table shortens it.
func stderrTail(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "AWF-STEP ") {
			return l
		}
	}
	return ""
}

// filterResults runs the loaded-filter job and returns filter/loaded and
// filter/denylist.
func (b *battery) filterResults(ctx context.Context) []Result {
	golden, gerr := b.pol.Table(b.arch)
	if b.traits.filterNA != "" {
		// Still run the job, so the runtime's leftovers are checked, but
		// the host pid's filter is not the policy.
		r, _ := b.runProbe(ctx, filterProbe, nil)
		na := Result{ID: "filter/loaded", Group: "filter", Status: NotApplicable, Evidence: b.traits.filterNA, Kind: r.Kind, Millis: r.Millis, Path: r.Path}
		if r.Status == Fail {
			na.Status, na.Evidence = Fail, "the filter job failed: "+r.Evidence
		}
		dl := checkDenylist(golden, "golden")
		if gerr != nil {
			dl = Result{ID: "filter/denylist", Group: "filter", Status: Fail, Evidence: gerr.Error()}
		}
		return []Result{na, dl}
	}
	var fr filterRead
	r, _ := b.runProbe(ctx, filterProbe, func(pid int) {
		fr.progs, fr.err = readFilters(ctx, pid)
		fr.done = true
	})
	if r.Status != Pass {
		r.Evidence = "the filter job failed: " + r.Evidence
		dl := Result{ID: "filter/denylist", Group: "filter", Status: Fail, Evidence: "no loaded filter to check"}
		return []Result{r, dl}
	}
	fres, loaded, ok := compareFilter(fr, b.pol, b.arch)
	fres.Kind, fres.Millis, fres.Path = r.Kind, r.Millis, r.Path
	if !ok {
		dl := Result{ID: "filter/denylist", Group: "filter", Status: Fail, Evidence: "no decoded loaded filter to check"}
		if fr.done && fr.err == nil && len(fr.progs) == 0 {
			dl.Evidence = "no filter is loaded, so nothing is denied"
		}
		return []Result{fres, dl}
	}
	return []Result{fres, checkDenylist(loaded, "loaded")}
}

// seedUnchanged proves from the host that no probe changed the seed.
func (b *battery) seedUnchanged() Result {
	r := Result{ID: "fs/seed-unchanged", Group: "filesystem"}
	d, err := treeDigest(b.fx.seed)
	switch {
	case err != nil:
		r.Status, r.Evidence = Fail, fmt.Sprintf("cannot hash the seed: %v", err)
	case d != b.fx.seedDigest:
		r.Status, r.Evidence = Fail, "the seed on the host changed during the battery: writes to /query/repo reached it"
	default:
		r.Status, r.Evidence = Pass, fmt.Sprintf("the seed on the host is unchanged after %d sandboxes wrote to their view of it (%s)", b.seq, d)
	}
	return r
}
