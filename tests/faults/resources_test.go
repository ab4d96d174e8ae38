package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/tests/fixture"
)

// Helpers of the resource fault cases (full disk, rootfs removed, wedged
// runtime, sequential leaks): an awf run in a mount namespace of its own,
// gates the agent waits on, and what the run holds while it lives.

// configWith writes an awf config like writeConfig, for a repository of
// the given sensitivity (public is unmetered: many queries fit) on the
// rootfs at rfs ("" = the suite's).
func configWith(t *testing.T, rt string, maxInvocations int, sensitivity, rfs string, timeout int) string {
	t.Helper()
	sock := ""
	if rt == "docker" {
		sock = testDockerSocket(t)
	}
	return configOn(t, rt, sock, maxInvocations, sensitivity, rfs, timeout)
}

// configOn is configWith with the docker runtime on the Engine at sock.
func configOn(t *testing.T, rt, sock string, maxInvocations int, sensitivity, rfs string, timeout int) string {
	t.Helper()
	if rfs == "" {
		rfs = rootfsDir
	}
	b := map[string]any{
		"enabled":        true,
		"runtime":        rt,
		"timeout":        timeout,
		"maxInvocations": maxInvocations,
		"privateRepos":   []map[string]any{{"repo": "demo/app", "sensitivity": sensitivity, "source": repoDir}},
		"rootfs":         map[string]any{"path": rfs, "digest": rootfsHash},
	}
	if sock != "" {
		b["dockerSocket"] = sock
	}
	return fixture.WriteConfig(t, t.TempDir(), b, agentUser)
}

// testDockerSocket is the private Engine's socket (AWF_TEST_DOCKER_SOCKET;
// make test starts it with tests/setup/dockerd.sh).
func testDockerSocket(t *testing.T) string {
	t.Helper()
	sock := os.Getenv("AWF_TEST_DOCKER_SOCKET")
	fi, err := os.Stat(sock)
	require.True(t, sock != "" && err == nil && fi.Mode()&os.ModeSocket != 0,
		"no Docker daemon at AWF_TEST_DOCKER_SOCKET=%q: start one with tests/setup/dockerd.sh start (make test does)", sock)
	return sock
}

// allRuntimes are runtimes(t) and docker, on the private Engine, where
// dockerd is installed.
func allRuntimes(t *testing.T) []string {
	rts := runtimes(t)
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Log("BLOCKED: dockerd is not installed on this host; the docker cases cannot run")
		return rts
	}
	return append(rts, "docker")
}

// engineClient talks to the Engine at sock.
func engineClient(sock string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
}

// pingEngine reports whether the Engine at sock answers.
func pingEngine(sock string) bool {
	resp, err := engineClient(sock).Get("http://docker/_ping")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// engineContainer is a container as the Engine lists it.
type engineContainer struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	State  string            `json:"State"`
	Labels map[string]string `json:"Labels"`
}

// labelledContainers lists the containers of the Engine at sock that
// carry label (key or key=value), running or not.
func labelledContainers(sock, label string) ([]engineContainer, error) {
	f := url.QueryEscape(`{"label":["` + label + `"]}`)
	resp, err := engineClient(sock).Get("http://docker/containers/json?all=1&filters=" + f)
	if err != nil {
		return nil, fmt.Errorf("the Engine at %s: %w", sock, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the Engine at %s: list containers: %s", sock, resp.Status)
	}
	var list []engineContainer
	return list, json.NewDecoder(resp.Body).Decode(&list)
}

// containers lists the containers of the Engine at sock that carry run
// runID's label, running or not.
func containers(t *testing.T, sock, runID string) []string {
	t.Helper()
	list, err := labelledContainers(sock, "awf.run="+runID)
	require.NoError(t, err)
	var out []string
	for _, x := range list {
		out = append(out, fmt.Sprintf("container %.12s %v %s", x.ID, x.Names, x.State))
	}
	return out
}

// assertNothingLeftOn is assertNothingLeft, and for docker also no
// container of the run on the private Engine.
func assertNothingLeftOn(t *testing.T, rt, runID string, since time.Time) {
	t.Helper()
	assertNothingLeft(t, runID, since)
	if rt == "docker" {
		assert.Empty(t, containers(t, testDockerSocket(t), runID), "containers of run %s left on the Engine", runID)
	}
}

var regexpBroker = regexp.MustCompile(`awf broker --serve `)

// sandboxEntry matches the name of a sandbox's entry under a private root
// and captures the sandbox's run-id-and-number part: direct's
// <run>-<instance>-<n>, gvisor's and docker's <run>-<16 hex>.
var sandboxEntry = regexp.MustCompile(`([0-9a-f]{32}-(?:[0-9a-f]{8}-[0-9]+|[0-9a-f]{16}|[0-9]+))(?:\.json)?$`)

// startRunPrivate starts awf run like startRun, but in a private mount
// namespace where mountPrivate (a shell line, "" for none) runs first: a
// small tmpfs over the private base, say. Only this run sees it, so the
// other runs of the host are neither filled nor swept. The namespace, and
// every mount in it, dies with the run's last process.
func startRunPrivate(t *testing.T, cfg, script, mountPrivate string) *run {
	t.Helper()
	sh := "set -e\n" + mountPrivate + "\nexec " + awfBin + ` run --config "$1" -- /bin/sh "$2"` + "\n"
	return startCmd(t, exec.Command("unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", sh, "awf-faults", cfg, script))
}

// gates are files the agent script waits for, in the script's own
// directory (the agent can read it): the test opens gate n when it is done
// with what it checks at that point.
type gates struct{ dir string }

func newGates(script string) gates { return gates{dir: filepath.Dir(script)} }

// wait is the shell line that blocks the agent until gate n is open.
func (g gates) wait(n int) string {
	return fmt.Sprintf("while [ ! -e %s/gate%d ]; do sleep 0.02; done\n", g.dir, n)
}

func (g gates) open(t *testing.T, n int) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(g.dir, fmt.Sprintf("gate%d", n)), nil, 0o644))
}

// privateDir is the run's private root as the awf run process pid sees it
// (through its root, so also inside a private mount namespace).
func privateDir(pid int, runID string) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/root", pid), privateBase, runID)
}

// queryResponses returns the responses the agent printed, in order.
func queryResponses(stdout string) []string {
	var out []string
	for _, l := range strings.Split(stdout, "\n") {
		if r, ok := strings.CutPrefix(l, "Q "); ok {
			out = append(out, r)
		}
	}
	return out
}

// answered returns the audit records that answer a counted request (an
// invocation, or a failure of one invocation), in order.
func answered(recs []map[string]any) []map[string]any {
	return collect(recs, func(r map[string]any) (map[string]any, bool) {
		id, _ := r["invocationId"].(string)
		return r, (r["kind"] == "invocation" || r["kind"] == "failure") && len(id) == 24
	})
}

// reasons returns the kind, or for a failure its reason, of each record.
func reasons(recs []map[string]any) []string {
	return collect(recs, func(r map[string]any) (string, bool) {
		if r["kind"] == "failure" {
			return r["reason"].(string), true
		}
		return r["kind"].(string), true
	})
}

// holdings is what a live run holds, counted from outside: its processes,
// the open fds of its awf, watchdog and broker processes, its mounts (in
// the broker's mount namespace, where sandboxes are built), its cgroups,
// the sandboxes with state under its private root (the warm pool's idle
// one: entries named <run>-<sequence number or 16 hex digits>, as
// workspaces, journals and runtime state are), and the bytes under its
// private root outside the audit directory (which grows by design, one
// record per answer) and outside those sandboxes' entries (their state
// names the sandbox and its processes, so its size varies by a few bytes
// from one sandbox to the next: a sandbox left behind shows in their count
// instead).
type holdings struct {
	procs, fds, mounts, cgroups, sandboxes int
	privateBytes                           int64
	detail                                 []string
}

func (h holdings) String() string {
	return fmt.Sprintf("procs=%d fds=%d mounts=%d cgroups=%d sandboxes=%d privateBytes=%d", h.procs, h.fds, h.mounts, h.cgroups, h.sandboxes, h.privateBytes)
}

func measure(t *testing.T, awfPid int, runID string) holdings {
	t.Helper()
	var h holdings
	broker := findProc(t, runID, regexpBroker)
	for _, p := range procs() {
		if p == os.Getpid() {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p))
		if bytes.Contains([]byte(cmdline(p)), []byte(runID)) || bytes.Contains(b, []byte(runID)) || p == awfPid {
			if strings.HasPrefix(cmdline(p), "sleep ") {
				continue // the agent's own poll of its gate
			}
			h.procs++
			h.detail = append(h.detail, fmt.Sprintf("proc %d %.80s", p, cmdline(p)))
			if p == awfPid || p == broker || strings.Contains(cmdline(p), "run --watchdog") {
				ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
				h.fds += len(ents)
			}
		}
	}
	// The broker may share the host's mount namespace with other runs:
	// only the mounts that name this run (all of its own do) count.
	points, err := mountPoints(fmt.Sprintf("/proc/%d/mountinfo", broker), runID)
	require.NoError(t, err)
	for _, p := range points {
		h.mounts++
		h.detail = append(h.detail, "mount "+p)
	}
	cgs, err := host.RunCgroups(runID)
	require.NoError(t, err)
	for _, d := range cgs {
		h.cgroups++
		h.detail = append(h.detail, "cgroup "+d)
	}
	root := privateDir(awfPid, runID)
	sandboxes := map[string]bool{}
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == "audit" && filepath.Dir(p) == root {
			return filepath.SkipDir
		}
		if m := sandboxEntry.FindStringSubmatch(d.Name()); m != nil && strings.Contains(d.Name(), runID) {
			if !sandboxes[m[1]] {
				sandboxes[m[1]] = true
				h.sandboxes++
				h.detail = append(h.detail, "sandbox "+m[1])
			}
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			h.privateBytes += fi.Size()
		}
		return nil
	})
	return h
}

// barrierLine is a shell line with which the agent waits until the warm
// pool's refill after its last answer is over (boundedQueries.warmPool,
// default 1): the refill runs on the lane after the response, and a query
// for a repository that is not configured queues for that lane too, then
// needs no sandbox. The agent prints "B <response>" (barrierOut); the
// broker counts and audits it like any response.
const barrierLine = `r=$(printf 'pass\n' | bounded-query --repo demo/not-configured --schema '{"type":"boolean"}'); echo "B $r"` + "\n"

// barrierOut is what the agent prints for a barrier.
const barrierOut = "B " + errorEnv

// forceReclaim registers a clean-up that, if run runID's private root is
// still there when the test ends (it failed before the next run's start-up
// sweep), removes by force what of the run is left: its mounts, cgroups,
// private root and ingress directory. A kept root whose runtime cannot be
// swept (its Engine stopped with the test) would otherwise stop every later
// awf run's orphan sweep on this shared host. id is read when the clean-up
// runs.
func forceReclaim(t *testing.T, id *string) {
	t.Cleanup(func() {
		if *id == "" {
			return
		}
		if _, err := os.Stat(filepath.Join(privateBase, *id)); err != nil {
			return
		}
		t.Logf("force-reclaiming run %s after a failure", *id)
		reclaimRun(*id)
	})
}

// reclaimRun removes by force what of run runID is left: its processes,
// mounts (deepest first), cgroups (deepest first), private root and
// ingress directory.
func reclaimRun(runID string) {
	for _, p := range procs() {
		if p != os.Getpid() && strings.Contains(cmdline(p), runID) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	mounts, _ := mountPoints("/proc/self/mountinfo", runID) // best effort, as below
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
	var cgs []hostThing
	dirs, _ := host.RunCgroups(runID) // best effort: a failed test's cleanup
	for _, d := range dirs {
		cgs = append(cgs, hostThing{kind: "cgroup", path: d, what: d})
	}
	_ = reap(cgs)
	_ = exec.Command("chmod", "-R", "u+w", filepath.Join(privateBase, runID)).Run()
	_ = os.RemoveAll(filepath.Join(privateBase, runID))
	_ = os.RemoveAll(filepath.Join(ingressBase, runID))
}

// waitStdoutWithin is run.waitStdout with a deadline of d (waitStdout's
// is fixed): for a run that does many queries first.
func waitStdoutWithin(t *testing.T, r *run, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(r.stdout.String(), s) {
		select {
		case <-r.done:
			if strings.Contains(r.stdout.String(), s) {
				return
			}
			t.Fatalf("awf run exited before the agent printed %s\nstderr:\n%s", s, r.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not print %s within %v (%d responses by then)\nstderr:\n%s", s, d, len(queryResponses(r.stdout.String())), r.stderr.String())
		}
	}
}
