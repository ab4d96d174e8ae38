package isolatetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/isolate/workspace/residency"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/rootfs"
)

// This file is the test support the backends' suites share: the rootfs
// every package builds once, the checks that nothing of a runtime is
// left, and the jobs whose expected outcomes do not depend on the backend.
// A backend keeps in its own tests only what is its own.

// RootFS is the rootfs a backend's TestMain builds once for its tests.
type RootFS struct {
	Dir    string // the rootfs directory
	Digest string // its digest at build time
	tmp    string
}

// BuildRootFS builds the project's rootfs in a fresh temporary directory
// named after prefix. Remove takes it away.
func BuildRootFS(prefix string) (*RootFS, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, fmt.Errorf("rootfs temp dir: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := &RootFS{Dir: filepath.Join(dir, "root"), tmp: dir}
	if r.Digest, err = rootfs.Build(ctx, rootfs.Options{Out: r.Dir}); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("rootfs build: %w", err)
	}
	return r, nil
}

// Remove deletes the rootfs.
func (r *RootFS) Remove() { _ = os.RemoveAll(r.tmp) }

// WithRootFS is the rootfs part of a backend's TestMain: it builds the
// rootfs (BuildRootFS), returns run's exit code with it, and removes it
// afterwards. A build that fails is reported on stderr and is exit code 1:
// no test of the package can run without it.
func WithRootFS(prefix string, run func(*RootFS) int) int {
	r, err := BuildRootFS(prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer r.Remove()
	return run(r)
}

// RandomID returns 32 random hex digits: a run id no other test uses.
func RandomID(t testing.TB) string {
	var b [16]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

// Open opens a backend's runtime for a test with open (the backend's New)
// and h, whose RunID and StateDir become the test's own (RandomID, a
// temporary directory), and returns it as the backend's type R, whose
// fields its tests read.
func Open[R isolate.Runtime](t testing.TB, open func(isolate.HostConfig) (isolate.Runtime, error), h isolate.HostConfig) R {
	t.Helper()
	h.RunID, h.StateDir = RandomID(t), t.TempDir()
	rt, err := open(h)
	require.NoError(t, err)
	return rt.(R)
}

// Policy returns the project's default seccomp policy.
func Policy(t testing.TB) *policy.Policy {
	t.Helper()
	p, err := policy.Default()
	require.NoError(t, err, "the default seccomp policy must load")
	return p
}

// LastCPU is the host's last CPU, where awf run pins the sandboxes, away
// from the agent's. A host with one CPU fails: there is nothing to split.
func LastCPU(t testing.TB) string {
	t.Helper()
	var set unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &set))
	require.GreaterOrEqual(t, set.Count(), 2, "CPU separation needs a host with two or more CPUs")
	last := 0
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			last = i
		}
	}
	return strconv.Itoa(last)
}

// RequireNoWorkspaceLeftovers checks that nothing a workspace backend made
// under its state directory dir remains: no loop device, no workspace, no
// mount. The runtime must be closed first.
func RequireNoWorkspaceLeftovers(t testing.TB, dir string) {
	t.Helper()
	loops, err := workspace.LoopDevicesOf(dir)
	require.NoError(t, err)
	require.Empty(t, loops, "loop devices left")
	ents, err := os.ReadDir(dir)
	if err == nil {
		require.Empty(t, ents, "workspaces left in %s", dir)
	}
	mi, err := os.ReadFile("/proc/thread-self/mountinfo")
	require.NoError(t, err)
	require.NotContains(t, string(mi), dir, "mounts left below the state dir")
}

// Snapshot maps every path under dir to its mode and content or link
// target.
func Snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		v := fi.Mode().String()
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v += " -> " + l
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		m[rel] = v
		return nil
	}))
	return m
}

// InspectScript reports, from inside a sandbox, the job's ids, working
// directory, capabilities, no_new_privs and seccomp mode, network
// interfaces, which of /usr, /tmp and the script take a write, and what
// /query holds.
const InspectScript = `import json, os
st = {}
for line in open('/proc/self/status'):
    k, _, v = line.partition(':')
    st[k] = v.strip()
def writable(p):
    try:
        open(p, 'w').close()
        return True
    except OSError:
        return False
out = {
    'uid': os.getuid(), 'gid': os.getgid(), 'cwd': os.getcwd(),
    'capeff': st.get('CapEff'), 'capbnd': st.get('CapBnd'),
    'nnp': st.get('NoNewPrivs'), 'seccomp': st.get('Seccomp'),
    'ifaces': sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]),
    'root_writable': writable('/usr/x'), 'tmp_writable': writable('/tmp/x'),
    'script_writable': writable('/awf/query-script.py'),
    'query': sorted(os.listdir('/query')),
}
open('/query/out', 'w').write(json.dumps(out))
`

// Inspected decodes InspectScript's answer and checks what every backend
// must show: the nobody ids, /query as the working directory, no
// capabilities, loopback only, a read-only root and script, a writable
// /tmp, and the shared rootfs unchanged.
func Inspected(t *testing.T, o isolate.Outcome, root *RootFS) map[string]any {
	t.Helper()
	require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal(o.Output, &got))
	assert.Equal(t, float64(65534), got["uid"])
	assert.Equal(t, float64(65534), got["gid"])
	assert.Equal(t, "/query", got["cwd"])
	assert.Equal(t, "0000000000000000", got["capeff"])
	assert.Equal(t, "0000000000000000", got["capbnd"])
	assert.Equal(t, []any{"lo"}, got["ifaces"])
	assert.Equal(t, false, got["root_writable"])
	assert.Equal(t, true, got["tmp_writable"])
	assert.Equal(t, false, got["script_writable"])
	_, err := rootfs.Verify(context.Background(), root.Dir, root.Digest)
	assert.NoError(t, err, "the shared rootfs must not change")
	return got
}

// LimitCase is one job that drives a limit, and the outcome it must get.
type LimitCase struct {
	Name   string
	Script string
	Limits func(*isolate.Limits)
	Weaken isolate.Weakening
	Want   isolate.Kind
	Stderr string // when set, stderr must contain it
}

// CommonLimitCases are the limit jobs whose outcome is the same on every
// backend; each backend adds the ones it differs in.
func CommonLimitCases() []LimitCase {
	return []LimitCase{
		{Name: "thread bomb", Want: isolate.KindPidsLimit,
			Limits: func(l *isolate.Limits) { l.Pids = 16 },
			Script: "import threading\nev = threading.Event()\nwhile True:\n    threading.Thread(target=ev.wait, daemon=True).start()\n"},
		{Name: "file size", Want: isolate.KindFileSizeLimit,
			Limits: func(l *isolate.Limits) { l.FileSizeBytes = 8 << 20 },
			Script: "c = b'x' * (1 << 20)\nwith open('/query/big', 'wb') as f:\n    for _ in range(32):\n        f.write(c)\n"},
		{Name: "sleep past the deadline", Want: isolate.KindTimeout,
			Limits: func(l *isolate.Limits) { l.Wall = time.Second },
			Script: "import time\nwhile True:\n    time.sleep(1)\n"},
		{Name: "nonzero exit", Want: isolate.KindNonzeroExit, Script: "raise SystemExit(3)\n"},
		{Name: "tmp is size-capped", Want: isolate.KindNonzeroExit, Stderr: "No space left on device",
			Limits: func(l *isolate.Limits) { l.TmpTmpfsBytes = 4 << 20 },
			Script: "c = b'x' * (1 << 20)\nwith open('/tmp/big', 'wb') as f:\n    for _ in range(8):\n        f.write(c)\n        f.flush()\n"},
		{Name: "query is size-capped", Want: isolate.KindNonzeroExit, Stderr: "No space left on device",
			Limits: func(l *isolate.Limits) { l.QueryTmpfsBytes = 4 << 20 },
			Script: "c = b'x' * (1 << 20)\nwith open('/query/big', 'wb') as f:\n    for _ in range(8):\n        f.write(c)\n        f.flush()\n"},
		{Name: "no output", Want: isolate.KindOutputMissing, Script: "pass\n"},
		{Name: "output too large", Want: isolate.KindOutputTooLarge,
			Script: "open('/query/out', 'w').write('x' * 9000)\n"},
		{Name: "output is a directory", Want: isolate.KindOutputInvalid,
			Script: "import os\nos.mkdir('/query/out')\n"},
		{Name: "output is a symlink", Want: isolate.KindOutputInvalid, Weaken: isolate.Weakening{NoSeccomp: true},
			Script: "import os\nos.symlink('/etc/passwd', '/query/out')\n"},
	}
}

// RunLimitCases runs each case on a template from tpl and checks its
// outcome kind, that no output is returned unless the case wants KindOK,
// and its stderr; then that the runtime is still usable.
func RunLimitCases(t *testing.T, rt isolate.Runtime, cases []LimitCase, tpl func(testing.TB) isolate.Template, run func(*testing.T, isolate.Template, string) isolate.Outcome) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			tp := tpl(t)
			if c.Limits != nil {
				c.Limits(&tp.Limits)
			}
			tp.Weaken = c.Weaken
			o := run(t, tp, c.Script)
			assert.Equal(t, c.Want, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
			if c.Want != isolate.KindOK {
				assert.Nil(t, o.Output)
			}
			if c.Stderr != "" {
				assert.Contains(t, string(o.Stderr), c.Stderr)
			}
		})
	}
	require.NoError(t, rt.Usable())
}

// RepoWritesNeverReachTheSeed changes, adds and removes files of the
// repository view in a sandbox and checks that the job saw the seed and
// its own changes, and that the seed is unchanged. run runs a script over
// a template whose repository is the given seed.
func RepoWritesNeverReachTheSeed(t *testing.T, run func(t *testing.T, seed, script string) isolate.Outcome) {
	seed := filepath.Join(t.TempDir(), "seed")
	require.NoError(t, os.MkdirAll(filepath.Join(seed, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o444))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "src", "a.py"), []byte("x = 1\n"), 0o444))
	require.NoError(t, os.Symlink("README", filepath.Join(seed, "link")))
	before := Snapshot(t, seed)
	script := `import os, json
r = '/query/repo'
seen = sorted(os.listdir(r))
readme = open(r + '/README').read()
open(r + '/README', 'w').write('changed')
os.remove(r + '/src/a.py')
open(r + '/new', 'w').write('new')
os.remove(r + '/link')
open('/query/out', 'w').write(json.dumps({'seen': seen, 'readme': readme, 'after': sorted(os.listdir(r))}))
`
	o := run(t, seed, script)
	require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
	var got struct {
		Seen   []string `json:"seen"`
		Readme string   `json:"readme"`
		After  []string `json:"after"`
	}
	require.NoError(t, json.Unmarshal(o.Output, &got))
	assert.Equal(t, []string{"README", "link", "src"}, got.Seen)
	assert.Equal(t, "hello\n", got.Readme)
	assert.Equal(t, []string{"README", "new", "src"}, got.After)
	assert.Equal(t, before, Snapshot(t, seed), "the seed changed")
}

// NilPolicyFailsClosed checks that a template without a seccomp policy
// does not launch.
func NilPolicyFailsClosed(t *testing.T, tpl isolate.Template, run func(*testing.T, isolate.Template, string) isolate.Outcome) {
	tpl.Policy = nil
	o := run(t, tpl, "open('/query/out','w').write('1')\n")
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind)
	assert.Contains(t, o.Detail, "policy")
}

// SingleUse checks that a sandbox runs one job only and that Destroy is
// idempotent; leftovers then checks that nothing of the runtime remains.
func SingleUse(t *testing.T, rt isolate.Runtime, tpl isolate.Template, leftovers func()) {
	ctx := context.Background()
	sb, err := rt.Prepare(ctx, tpl)
	require.NoError(t, err)
	o := sb.Exec(ctx, isolate.Job{InvocationID: "one", Script: []byte("open('/query/out','w').write('1')\n")})
	require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
	assert.Equal(t, []byte("1"), o.Output)
	o = sb.Exec(ctx, isolate.Job{InvocationID: "two", Script: []byte("pass\n")})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind)
	require.NoError(t, sb.Destroy(ctx))
	require.NoError(t, sb.Destroy(ctx))
	leftovers()
}

// RootPageCacheNotShared is the page-cache channel between two
// invocations. The host first drops the carrier files from its page cache
// (evict, as memory pressure does to rarely read files); the sender then
// loads the first page of each file its secret's set bits name, and the
// receiver times each page's first read (and uses mincore where the policy
// allows it). No two sandboxes share a page cache whose residency can
// change (a superblock of their own, or a root whose pages are always
// resident), so the receiver must decode at chance; on the shared root this
// decoded 64/64 on every runtime. The probe run by control as one
// invocation, up to controlTries times, must decode its secrets above
// chance (residency.ControlPassed), so the receiver is known to work on
// this host: control is run itself where the root's pages can be cold, and
// a host run over an evictable tree where they cannot. run runs the script
// of one mode as one invocation; later names one in the failure messages
// ("container", "invocation").
func RootPageCacheNotShared(t *testing.T, controlTries int, later string, evict func(), control, run func(residency.Mode, []byte) isolate.Outcome) {
	probe := func(run func(residency.Mode, []byte) isolate.Outcome, mode residency.Mode, secret uint64) isolate.Outcome {
		t.Helper()
		o := run(mode, residency.Script(mode, secret))
		require.Equal(t, isolate.KindOK, o.Kind, "%s: %s\nstderr: %s", mode, o.Detail, o.Stderr)
		return o
	}
	correct, passed := 0, false
	for try := 1; try <= controlTries && !passed; try++ {
		secret, err := residency.Secret()
		require.NoError(t, err)
		evict()
		res, err := residency.Parse(probe(control, residency.Both, secret).Output)
		require.NoError(t, err)
		got := residency.Correct(res.Timing, secret)
		correct += got
		passed = residency.ControlPassed(correct, try, controlTries)
		t.Logf("positive control (one invocation), try %d: %d/64 by timing, %d/%d pooled (at least %d passes), ns %v",
			try, got, correct, try*residency.Bits, residency.AboveChance(try*residency.Bits, residency.Alpha/float64(controlTries)), res.Ns)
	}
	require.True(t, passed,
		"the receiver cannot tell a page it loaded itself: the probe proves nothing here")

	secret, err := residency.Secret()
	require.NoError(t, err)
	evict()
	probe(run, residency.Send, secret)
	res, err := residency.Parse(probe(run, residency.Recv, 0).Output)
	require.NoError(t, err)
	got := residency.Correct(res.Timing, secret)
	t.Logf("two invocations: %d/64 by timing, ns %v", got, res.Ns)
	require.LessOrEqual(t, got, residency.ChanceMax, "a later %s reads the pages an earlier one loaded", later)
	if res.Mincore != nil {
		require.LessOrEqual(t, residency.Correct(*res.Mincore, secret), residency.ChanceMax, "mincore shows an earlier %s's pages", later)
	}
}

// Crash is a backend's side of SweepRemovesWhatACrashLeft, for one
// crashed runtime: its state directory, how to tell that the busy job's
// sandbox runs (within Wait), how to open another runtime over the same
// state directory (Open gets the run id and state dir and adds the
// backend's own host fields), the time a sweep may take, and Swept, the
// backend's own check (nil: none) that the sweep left nothing beyond an
// empty state directory.
type Crash struct {
	StateDir  string
	Running   func() bool
	Wait      time.Duration
	Open      func(isolate.HostConfig) (isolate.Runtime, error)
	SweepTime time.Duration
	Swept     func()
}

// SweepRemovesWhatACrashLeft leaves one prepared sandbox and one running
// job behind on a fresh runtime of b, as a crashed broker would, and
// sweeps them from another runtime over the same state dir: the running
// job fails, the state dir is empty (and Swept finds nothing left), and the
// crashed runtime's handles still destroy cleanly.
func SweepRemovesWhatACrashLeft[R isolate.Runtime](t *testing.T, b Backend[R]) {
	ctx := context.Background()
	r := b.New(t)
	c := b.Crash(t, r)
	tpl := b.Template(t, r, "")
	idle, err := r.Prepare(ctx, tpl)
	require.NoError(t, err)
	busy, err := r.Prepare(ctx, tpl)
	require.NoError(t, err)
	done := make(chan isolate.Outcome, 1)
	go func() {
		done <- busy.Exec(ctx, isolate.Job{InvocationID: "busy", Script: []byte("import time\ntime.sleep(600)\n")})
	}()
	require.Eventually(t, c.Running, c.Wait, 20*time.Millisecond)

	after, err := c.Open(isolate.HostConfig{RunID: RandomID(t), StateDir: filepath.Dir(c.StateDir)})
	require.NoError(t, err)
	sctx, cancel := context.WithTimeout(ctx, c.SweepTime)
	defer cancel()
	require.NoError(t, after.Sweep(sctx))
	o := <-done
	assert.NotEqual(t, isolate.KindOK, o.Kind)
	// The crashed runtime's job may still have been tearing down while
	// the sweep ran; let any removal it raced with finish, then sweep again.
	require.NoError(t, after.Sweep(sctx))
	if c.Swept != nil {
		c.Swept()
	}
	ents, err := os.ReadDir(c.StateDir)
	require.NoError(t, err)
	assert.Empty(t, ents)
	require.NoError(t, idle.Destroy(ctx))
	require.NoError(t, busy.Destroy(ctx))
	b.Leftovers(t, r)
}

// OutputCapturedAndCapped runs a job that writes four times CaptureBytes
// to stdout, in pieces, and a short line to stderr, then answers: the job
// ends normally (an unread stream would have stalled it), stdout is
// captured up to exactly CaptureBytes, in order, and stderr whole. The
// capture is the audit log's; every backend keeps it alike.
func OutputCapturedAndCapped(t *testing.T, tpl isolate.Template, run func(isolate.Template, string) isolate.Outcome) {
	t.Helper()
	tpl.Limits.CaptureBytes = 16 << 10
	line := `0123456789abcdef0123456789abcde\n` // 32 bytes in Python
	script := fmt.Sprintf(`import os, sys
for i in range(%d):
    os.write(1, b"%s")
sys.stderr.write("done\n")
sys.stderr.flush()
open("/query/out", "w").write("true")
`, 4*tpl.Limits.CaptureBytes/32, line)
	o := run(tpl, script)
	require.Equal(t, isolate.KindOK, o.Kind, "%s\nstderr: %s", o.Detail, o.Stderr)
	require.Len(t, o.Stdout, int(tpl.Limits.CaptureBytes), "stdout is captured up to CaptureBytes")
	assert.Equal(t, strings.Repeat("0123456789abcdef0123456789abcde\n", int(tpl.Limits.CaptureBytes)/32), string(o.Stdout))
	assert.Equal(t, "done\n", string(o.Stderr))
}

// Conformance runs Behaviour for backend over the template tpl returns for
// a one-file seed.
func Conformance(t *testing.T, backend string, tpl func(seed string) isolate.Template, run func(isolate.Template, string) isolate.Outcome) {
	Behaviour(t, backend, tpl(OneFileSeed(t)), run)
}

// OneFileSeed returns a seed directory of one read-only file, a.txt.
func OneFileSeed(t testing.TB) string {
	seed := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(seed, "a.txt"), []byte("a\n"), 0o444))
	return seed
}

// SweepAtCleanup makes t's cleanup sweep rt within d and then run
// leftovers, the backend's check that nothing of rt remains.
func SweepAtCleanup(t testing.TB, rt isolate.Runtime, d time.Duration, leftovers func()) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		require.NoError(t, rt.Sweep(ctx))
		leftovers()
	})
}

// StartJob runs job on rt in the background and returns the job's host
// pid once it has started (Job.OnStart), with stop, which ends the job and
// waits until Run has returned. A job that ends before it starts fails t.
// The caller defers stop: the job runs until then (or ctx ends), so that
// it can be inspected from the host while it lives.
func StartJob(ctx context.Context, t testing.TB, rt isolate.Runtime, tpl isolate.Template, job isolate.Job) (pid int, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	pid, wait := BeginJob(ctx, t, rt, tpl, job)
	return pid, func() {
		cancel()
		wait()
	}
}

// BeginJob is StartJob for a job left to end on its own: wait returns its
// outcome once Run has returned.
func BeginJob(ctx context.Context, t testing.TB, rt isolate.Runtime, tpl isolate.Template, job isolate.Job) (pid int, wait func() isolate.Outcome) {
	t.Helper()
	pids := make(chan int, 1)
	done := make(chan isolate.Outcome, 1)
	job.OnStart = func(pid int) { pids <- pid }
	go func() { done <- rt.Run(ctx, isolate.Spec{Template: tpl, Job: job}) }()
	select {
	case pid = <-pids:
	case o := <-done:
		t.Fatalf("the job ended before it started: %s %s\nstderr: %s", o.Kind, o.Detail, o.Stderr)
	}
	return pid, func() isolate.Outcome { return <-done }
}

// FailsClosedWithout checks a runtime whose host component (the Engine's
// socket, the runsc binary) is missing or unusable: Probe fails and its
// error names what, and a Run launches nothing. rootfs is a valid root,
// so that only the component can be what fails.
func FailsClosedWithout(t *testing.T, rt isolate.Runtime, rootfs, what string) {
	t.Helper()
	perr := rt.Probe(context.Background())
	require.Error(t, perr, what)
	assert.Contains(t, perr.Error(), what)
	o := rt.Run(context.Background(), isolate.Spec{Template: isolate.Template{RunID: "x", RootFS: rootfs, Limits: isolate.DefaultLimits()}})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind, what)
}
