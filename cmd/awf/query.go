package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/staging"
)

const queryUsage = `usage: awf query --config FILE|- --repo OWNER/NAME --schema SCHEMA
                 [--output-bytes N] SCRIPT|-

The operator's dry run of one bounded query, for query authors. It stages
the repository exactly as awf run would (the same configuration entry, ref,
single-commit shallow clone and scrubbing, the same root filesystem, runtime,
limits and seccomp policy), runs SCRIPT once in a fresh sandbox, and prints
what the agent never sees: the outcome kind, the exit status and signal, the
system call the seccomp policy killed (by name, from the kernel's seccomp
log), stdout and stderr (the first N bytes of each, default 4096), the
validated answer, the envelope the agent would have got, and its charge.
SCHEMA is the schema JSON text, "-" for standard input, or "@PATH"; SCRIPT
is a path or "-". Nothing is charged, no timing bucket applies, no audit
record is written, and everything staged is removed at the end. Root only.
Exits 0 when the agent would get an ok envelope, 1 when it would get the
error envelope or awf query itself fails, 2 on usage errors.
`

// queryOutputBytes bounds each of stdout and stderr as awf query prints them.
const queryOutputBytes = 4096

// cmdQuery implements "awf query".
func cmdQuery(ctx context.Context, e env) int {
	fs := e.flags("awf query", queryUsage)
	cfgPath := fs.String("config", "", "configuration file, or - for standard input")
	repo := fs.String("repo", "", "the configured repository to query (owner/name)")
	schemaArg := fs.String("schema", "", "schema JSON text, - or @PATH")
	outBytes := fs.Int("output-bytes", queryOutputBytes, "bytes of stdout and of stderr to print")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	if *cfgPath == "" || *repo == "" || *schemaArg == "" || fs.NArg() != 1 || *outBytes < 0 {
		fmt.Fprint(e.stderr, queryUsage)
		return 2
	}
	if countStdin(*cfgPath, *schemaArg, fs.Arg(0)) > 1 {
		fmt.Fprint(e.stderr, "awf query: at most one of --config, --schema and SCRIPT can be - (standard input)\n")
		return 2
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(e.stderr, "awf query: "+format+"\n", args...)
		return 1
	}
	if os.Geteuid() != 0 {
		return fail("run as root: awf query stages repositories and builds sandboxes as awf run does")
	}
	cfg, err := config.LoadFile(*cfgPath, e.stdin)
	if err != nil {
		return fail("%v", err)
	}
	bq := cfg.BoundedQueries
	if !bq.Enabled {
		return fail("boundedQueries.enabled is not true in %s: awf run would start no broker", *cfgPath)
	}
	var entry *config.Repo
	var slugs []string
	for i := range bq.PrivateRepos {
		slugs = append(slugs, bq.PrivateRepos[i].Repo)
		if staging.NormalizeSlug(bq.PrivateRepos[i].Repo) == staging.NormalizeSlug(*repo) {
			entry = &bq.PrivateRepos[i]
		}
	}
	if entry == nil {
		return fail("%s is not a configured repository (configured: %s)", *repo, strings.Join(slugs, ", "))
	}
	schemaText, err := readArgSource(*schemaArg, e.stdin)
	if err != nil {
		return fail("schema: %v", err)
	}
	script, err := readScriptArg(fs.Arg(0), e.stdin)
	if err != nil {
		return fail("script: %v", err)
	}
	// The broker's own request checks, on the request the CLI would send.
	req, err := proto.ValidateRequest(staging.NormalizeSlug(entry.Repo), proto.EncodeSchemaHeader(schemaText), script)
	if err != nil {
		fmt.Fprintf(e.stdout, "request: refused: %v\nenvelope: %s\n", err, proto.ErrorEnvelope)
		return 1
	}

	q, err := prepareQuery(ctx, cfg, *entry, e.stderr)
	if q != nil {
		defer func() {
			if cerr := q.close(context.WithoutCancel(ctx)); cerr != nil {
				fmt.Fprintf(e.stderr, "awf query: cleanup: %v\n", cerr)
			}
		}()
	}
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(e.stderr, "awf: running the script (runtime %s, wall limit %v)\n", q.rt.Name(), q.tmpl.Limits.Wall)
	kmsg := openKmsg()
	var jobPID atomic.Int64
	out := q.run(ctx, req.Script, func(pid int) { jobPID.Store(int64(pid)) })
	kills := kmsg.seccompKills()
	kills.jobPID = int(jobPID.Load())
	return printQuery(e.stdout, q, req, out, kills, *outBytes)
}

// countStdin counts the arguments that read standard input.
func countStdin(args ...string) int {
	n := 0
	for _, a := range args {
		if a == "-" {
			n++
		}
	}
	return n
}

// query is one prepared dry run: the staged seed and the open runtime.
type query struct {
	entry   config.Repo
	seed    staging.Seed
	tmpl    isolate.Template
	rt      isolate.Runtime
	private string   // the run's private root: lock, spec, seeds, state
	lock    *os.File // the run's lifetime lock, released last
}

// prepareQuery stages entry and opens the runtime as awf run and its broker
// do (host.Prepare, host.Serve): the same checks, rootfs, limits, policy and
// runtime host configuration. On error the returned query, if any, still
// needs close.
func prepareQuery(ctx context.Context, cfg *config.Config, entry config.Repo, progress io.Writer) (*query, error) {
	bq := cfg.BoundedQueries
	token := staging.ResolveToken(os.Getenv)
	if u := os.Getenv("GITHUB_SERVER_URL"); u != "" {
		if err := staging.ValidateServerURL(u); err != nil {
			return nil, fmt.Errorf("GITHUB_SERVER_URL: %w", err)
		}
	}
	if !strings.HasPrefix(entry.Source, "/") && token == "" {
		return nil, fmt.Errorf("%s is staged from %s but no staging credential is set (GH_TOKEN or GITHUB_TOKEN)", entry.Repo, sourceLabel(entry))
	}
	spec := host.Spec{Runtime: bq.Runtime, RunscPath: bq.RunscPath, DockerSocket: bq.DockerSocket, CgroupParent: isolate.DefaultCgroupParent,
		MemoryBytes: bq.MemoryBytes, TimeoutSeconds: bq.TimeoutSeconds, MaxInvocations: 1}
	switch bq.Runtime {
	case "docker":
		sock, from, err := host.DockerSocket(bq.DockerSocket, os.Getenv("DOCKER_HOST"))
		if err != nil {
			return nil, err
		}
		if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("the Docker host must be a local Unix socket: %s (%s) is not one; set boundedQueries.dockerSocket or DOCKER_HOST=unix:///path", sock, from)
		}
		spec.DockerSocket = sock
	case "gvisor":
		if bq.RunscPath == "" {
			if _, err := exec.LookPath("runsc"); err != nil {
				return nil, errors.New("runtime gvisor: runsc is not available; no fallback (install runsc or set boundedQueries.runscPath)")
			}
		}
	}
	// The broker pins sandboxes to its side of the CPU split.
	split, err := host.SplitCPUs()
	if err != nil {
		return nil, err
	}
	spec.AgentCgroup.CPUs = split
	if spec.RootFS, spec.RootFSDigest, err = host.ResolveRootFS(ctx, bq.RootFS, "", progress); err != nil {
		return nil, err
	}
	pol, err := policy.Default()
	if err != nil {
		return nil, err
	}
	limits := isolate.DefaultLimits()
	limits.MemoryBytes = bq.MemoryBytes
	limits.Wall = time.Duration(bq.TimeoutSeconds) * time.Second
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	// A run's own private root, lock and spec: if awf query is killed, the
	// next awf run's orphan sweep reclaims the seed and the sandbox.
	spec.Layout = host.NewLayout(host.NewRunID(), "", "", "")
	l := spec.Layout
	if err := os.MkdirAll(l.PrivateBase, 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(l.PrivateRoot, 0o700); err != nil {
		return nil, fmt.Errorf("private root: %w", err)
	}
	q := &query{entry: entry, private: l.PrivateRoot}
	if q.lock, err = os.OpenFile(l.LockPath, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600); err != nil {
		return q, fmt.Errorf("run lock: %w", err)
	}
	if err := unix.Flock(int(q.lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return q, fmt.Errorf("run lock: %w", err)
	}
	if err := host.WriteSpec(spec); err != nil {
		return q, err
	}
	fmt.Fprintf(progress, "awf: staging %s from %s (run %s)\n", entry.Repo, sourceLabel(entry), l.RunID)
	seeds, err := staging.Stage(ctx, staging.Options{
		PrivateRoot: l.PrivateRoot, RunID: l.RunID, Token: token, Progress: progress,
		ServerURL: os.Getenv("GITHUB_SERVER_URL"),
	}, []staging.Repo{{Slug: entry.Repo, Sensitivity: entry.Sensitivity, Source: entry.Source, Ref: entry.Ref}})
	if err != nil {
		return q, fmt.Errorf("staging: %w", err)
	}
	q.seed = seeds[0]
	h := spec.HostConfig()
	h.Progress = progress // the docker backend's first image import takes seconds
	rt, err := runtimes.Open(bq.Runtime, h)
	if err != nil {
		return q, fmt.Errorf("runtime %s: %w", bq.Runtime, err)
	}
	q.rt = rt
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := rt.Probe(pctx); err != nil {
		return q, fmt.Errorf("runtime %s cannot enforce every control here; no fallback: %w", bq.Runtime, err)
	}
	if err := rt.Sweep(ctx); err != nil {
		return q, fmt.Errorf("start-up sweep: %w", err)
	}
	q.tmpl = isolate.Template{RunID: l.RunID, RootFS: spec.RootFS, Repo: q.seed.Dir, Limits: limits, Policy: pol}
	if w, ok := rt.(isolate.Warmer); ok {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		if err := w.Warm(wctx, q.tmpl); err != nil {
			return q, fmt.Errorf("warm %s: %w", entry.Repo, err)
		}
	}
	return q, nil
}

func sourceLabel(p config.Repo) string {
	s := p.Source
	if s == "" {
		s = "GitHub"
	}
	if p.Ref != "" {
		s += " at " + p.Ref
	}
	return s
}

// run executes the script once, with the broker's deadline (the wall limit
// plus its grace for set-up and teardown).
func (q *query) run(ctx context.Context, script []byte, onStart func(hostPID int)) isolate.Outcome {
	rctx, cancel := context.WithTimeout(ctx, q.tmpl.Limits.Wall+30*time.Second)
	defer cancel()
	return q.rt.Run(rctx, isolate.Spec{Template: q.tmpl, Job: isolate.Job{InvocationID: "query", Script: script, OnStart: onStart}})
}

// close sweeps the runtime and removes the seed and the private directory.
func (q *query) close(ctx context.Context) error {
	var errs []error
	if q.rt != nil {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		errs = append(errs, q.rt.Sweep(sctx))
		cancel()
		errs = append(errs, q.rt.Close())
	}
	if _, err := os.Stat(filepath.Join(q.private, staging.SeedsDirName)); err == nil {
		errs = append(errs, staging.Release(ctx, q.private))
	}
	errs = append(errs, os.RemoveAll(q.private))
	if q.lock != nil {
		errs = append(errs, q.lock.Close())
	}
	return errors.Join(errs...)
}

// printQuery prints the dry run's report and returns the exit status.
func printQuery(w io.Writer, q *query, req *proto.Request, out isolate.Outcome, kills kernelKills, outBytes int) int {
	budget, metered, _ := proto.SensitivityBudget(q.seed.Sensitivity)
	fmt.Fprintf(w, "repo: %s (%s, commit %s, from %s)\n", q.seed.Repo, q.seed.Sensitivity, q.seed.Commit, sourceLabel(q.entry))
	fmt.Fprintf(w, "runtime: %s\n", q.rt.Name())
	fmt.Fprintf(w, "outcome: %s\n", out.Kind)
	sig := ""
	if out.Signal != "" {
		sig = " (signal " + out.Signal + ")"
	}
	fmt.Fprintf(w, "exit: %d%s\n", out.ExitCode, sig)
	if out.Detail != "" {
		fmt.Fprintf(w, "detail: %s\n", out.Detail)
	}
	if out.Kind == isolate.KindSeccompKill {
		fmt.Fprintf(w, "syscall: %s\n", kills.describe(q.rt.Name()))
	}
	code := 1
	envelope := []byte(proto.ErrorEnvelope)
	if out.Kind == isolate.KindOK {
		if canon, err := req.Schema.CheckResult(out.Output); err != nil {
			fmt.Fprintf(w, "answer: does not conform to the schema: %v\n", err)
			fmt.Fprintf(w, "/query/out: %s\n", bounded(out.Output, outBytes))
		} else {
			fmt.Fprintf(w, "answer: %s\n", canon)
			envelope, code = proto.OKEnvelope(canon), 0
		}
	} else {
		fmt.Fprintln(w, "answer: none (the outcome is not ok)")
	}
	fmt.Fprintf(w, "envelope: %s\n", envelope)
	charge := fmt.Sprintf("%d bits", req.Schema.ChargeBits())
	if metered {
		charge += fmt.Sprintf(" of the repository's %d-bit budget per run, charged whatever the outcome", budget)
	} else {
		charge += " (public repository: unmetered)"
	}
	fmt.Fprintf(w, "charge: %s (awf query charges nothing)\n", charge)
	t := out.Timings
	fmt.Fprintf(w, "timings: prepare %v, start %v, run %v, read %v, destroy %v (no timing bucket)\n",
		t.Prepare, t.Start, t.Run, t.Read, t.Destroy)
	for _, s := range []struct {
		name string
		b    []byte
	}{{"stdout", out.Stdout}, {"stderr", out.Stderr}} {
		fmt.Fprintf(w, "--- %s (%d bytes%s) ---\n%s", s.name, len(s.b), shownOf(len(s.b), outBytes), bounded(s.b, outBytes))
		if n := len(s.b); n > 0 && n <= outBytes && s.b[n-1] != '\n' {
			fmt.Fprintln(w)
		} else if n > outBytes {
			fmt.Fprintln(w)
		}
	}
	return code
}

func bounded(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func shownOf(total, n int) string {
	if total > n {
		return fmt.Sprintf(", the first %d shown", n)
	}
	return ""
}

// seccompKill is one kernel record of a process the seccomp policy killed.
type seccompKill struct {
	Syscall string // name, or "#NR" when libseccomp does not know it
	Number  int
	Arch    string
	Comm    string
	PID     int
}

// kernelKills is what the kernel log said during a run: the seccomp kills
// of every process on the host, the job's host pid when its runtime
// reported one, and how many audit records the kernel's log rate limit
// dropped meanwhile (another package's sandboxes, killed at the same
// moment, can use up the limit).
type kernelKills struct {
	all        []seccompKill
	jobPID     int
	suppressed int
}

// describe names the call that killed the job. With the job's pid it
// names the job's own kills only, never another process's; without it
// (a runtime that reports none) it names every kill on the host.
func (k kernelKills) describe(runtime string) string {
	kills := k.all
	others := 0
	if k.jobPID > 0 {
		kills = nil
		for _, x := range k.all {
			if x.PID == k.jobPID {
				kills = append(kills, x)
			}
		}
		others = len(k.all) - len(kills)
	}
	if len(kills) == 0 {
		switch {
		case runtime == "gvisor":
			return "not reported: under gvisor runsc enforces the policy itself and the host kernel logs nothing"
		case k.suppressed > 0:
			return fmt.Sprintf("not reported: the kernel's log rate limit dropped %d audit records during the run (%d other seccomp kills on this host were logged)", k.suppressed, others)
		}
		return "not reported: the kernel logged no seccomp kill of the job to /dev/kmsg during the run (with auditd running, see ausearch -m SECCOMP)"
	}
	seen := map[string]bool{}
	var names []string
	for _, x := range kills {
		d := fmt.Sprintf("%s (%s #%d, %s)", x.Syscall, x.Arch, x.Number, x.Comm)
		if !seen[d] {
			seen[d] = true
			names = append(names, d)
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	whose := "on this host"
	if k.jobPID > 0 {
		whose = "of the job"
	}
	return fmt.Sprintf("one of %s (the kernel logged %d seccomp kills %s during the run)", strings.Join(names, "; "), len(kills), whose)
}

// kmsgReader reads the kernel log records written after it was opened. It
// keeps the raw non-blocking descriptor: an os.File would make it blocking
// (Fd), and the last read must end with EAGAIN, not wait for a record.
type kmsgReader struct{ fd int }

// openKmsg opens /dev/kmsg positioned at its end; without it (fd -1: no
// kmsg, not root) the reader just reports no kills.
func openKmsg() kmsgReader {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return kmsgReader{fd: -1}
	}
	if _, err := unix.Seek(fd, 0, io.SeekEnd); err != nil {
		unix.Close(fd)
		return kmsgReader{fd: -1}
	}
	return kmsgReader{fd: fd}
}

var (
	kmsgSeccomp = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`type=1326 .*\bpid=(\d+) .*\bcomm="([^"]*)".*\bsig=(\d+) arch=([0-9a-f]+) syscall=(\d+)`)
	})
	// kauditd prints audit records (seccomp kills among them) to the kernel
	// log under printk's rate limit, and says how many it dropped.
	kmsgAuditSuppressed = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^kauditd_printk_skb: (\d+) callbacks suppressed`)
	})
	auditArches = map[string]struct {
		name string
		arch libseccomp.ScmpArch
	}{
		"c000003e": {"x86_64", libseccomp.ArchAMD64},
		"c00000b7": {"aarch64", libseccomp.ArchARM64},
		"40000003": {"i386", libseccomp.ArchX86},
	}
)

// seccompKills reads the records since openKmsg and returns the seccomp
// kills among them (SIGSYS) and the count of audit records the kernel's
// rate limit dropped, then closes the reader.
func (k kmsgReader) seccompKills() kernelKills {
	var kills kernelKills
	if k.fd < 0 {
		return kills
	}
	defer unix.Close(k.fd)
	buf := make([]byte, 8192)
	for {
		n, err := unix.Read(k.fd, buf)
		if err == unix.EPIPE { // records were overwritten: go on with the next
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		// "prio,seq,usec,flags;message\n" followed by continuation lines.
		sc := bufio.NewScanner(strings.NewReader(string(buf[:n])))
		if !sc.Scan() {
			continue
		}
		line := sc.Text()
		if _, msg, ok := strings.Cut(line, ";"); ok {
			if m := kmsgSeccomp().FindStringSubmatch(msg); m != nil && m[3] == strconv.Itoa(int(unix.SIGSYS)) {
				kills.all = append(kills.all, parseKill(m))
			} else if m := kmsgAuditSuppressed().FindStringSubmatch(msg); m != nil {
				n, _ := strconv.Atoi(m[1])
				kills.suppressed += n
			}
		}
	}
	return kills
}

func parseKill(m []string) seccompKill {
	pid, _ := strconv.Atoi(m[1])
	nr, _ := strconv.Atoi(m[5])
	k := seccompKill{PID: pid, Comm: m[2], Number: nr, Arch: m[4], Syscall: "#" + m[5]}
	if a, ok := auditArches[m[4]]; ok {
		k.Arch = a.name
		if name, err := libseccomp.ScmpSyscall(nr).GetNameByArch(a.arch); err == nil && name != "" {
			k.Syscall = name
		}
	}
	return k
}
