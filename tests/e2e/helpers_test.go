package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/tests/fixture"
)

// repo is one privateRepos entry for a test config.
type repo struct {
	Repo        string `json:"repo"`
	Sensitivity string `json:"sensitivity"`
	Source      string `json:"source,omitempty"`
}

// bq is the boundedQueries block of a test config.
type bq struct {
	Enabled        bool           `json:"enabled"`
	PrivateRepos   []repo         `json:"privateRepos"`
	Runtime        string         `json:"runtime,omitempty"`
	Timeout        int            `json:"timeout,omitempty"`
	MaxInvocations int            `json:"maxInvocations,omitempty"`
	RootFS         map[string]any `json:"rootfs,omitempty"`
	DockerSocket   string         `json:"dockerSocket,omitempty"`
}

// local returns a repo staged from the shared local repository.
func local(slug, sensitivity string) repo {
	return repo{Repo: slug, Sensitivity: sensitivity, Source: repoDir}
}

// sharedRootFS is the rootfs block of the suite's one rootfs.
func sharedRootFS() map[string]any { return map[string]any{"path": rootfsDir, "digest": rootfsHash} }

// writeDoc writes the configuration document doc as awf.json (0600) in a
// temporary directory of the test and returns its path.
func writeDoc(t *testing.T, doc map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(doc)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "awf.json")
	require.NoError(t, os.WriteFile(p, raw, 0o600))
	return p
}

// enabled is b enabled, on the shared rootfs unless it names its own.
func enabled(b bq) bq {
	b.Enabled = true
	if b.RootFS == nil {
		b.RootFS = sharedRootFS()
	}
	return b
}

// writeConfig writes a config with the shared rootfs and agent user.
func writeConfig(t *testing.T, b bq) string {
	t.Helper()
	return fixture.WriteConfig(t, t.TempDir(), enabled(b), agentUser)
}

// agentScript writes a shell script the agent user can read and run.
func agentScript(t *testing.T, body string) string {
	t.Helper()
	return fixture.AgentScript(t, "awf-e2e-agent-", body)
}

// result is what one awf run produced.
type result struct {
	stdout, stderr string
	code           int
}

// awfRun runs "awf run --config cfg -- /bin/sh script" and returns its output.
func awfRun(t *testing.T, cfg, script string, extraEnv ...string) result {
	t.Helper()
	return awfRunIn(t, "/", cfg, script, extraEnv...)
}

// awfRunIn is awfRun from the working directory dir.
func awfRunIn(t *testing.T, dir, cfg, script string, extraEnv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, awfBin, "run", "--config", cfg, "--", "/bin/sh", script)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), extraEnv...)
	fixture.KillGroupOnCancel(cmd)
	r := runCmd(t, cmd)
	removeArchive(t, r.stderr)
	return r
}

// runCmd runs cmd and returns its output and exit status; a command that
// could not run at all fails the test.
func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// removeArchive removes, at the end of the test, the audit archive that awf
// reported keeping.
func removeArchive(t *testing.T, stderr string) { fixture.RemoveArchive(t, stderr) }

func baseEnv() []string { return fixture.BaseEnv() }

// lines returns the "KEY value" lines the agent printed, by key.
func lines(stdout string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(stdout, "\n") {
		k, v, ok := strings.Cut(l, " ")
		if ok {
			m[k] = v
		}
	}
	return m
}

// auditRecords reads the archived audit log named in awf's stderr.
func auditRecords(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	return jsonLines(t, archivedLog(t, stderr, "bounded-query.jsonl"))
}

// archivedLog reads the log name (0600, as every log awf keeps) of the
// audit archive named in awf's stderr, which the test's cleanup removes.
func archivedLog(t *testing.T, stderr, name string) []byte {
	t.Helper()
	const marker = "audit log kept in "
	i := strings.LastIndex(stderr, marker)
	require.GreaterOrEqual(t, i, 0, "no audit archive in:\n%s", stderr)
	dir := strings.TrimSpace(strings.SplitN(stderr[i+len(marker):], "\n", 2)[0])
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, name)
	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
	raw, err := os.ReadFile(p)
	require.NoError(t, err)
	return raw
}

// jsonLines parses a JSONL log, one object a line.
func jsonLines(t *testing.T, raw []byte) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		recs = append(recs, r)
	}
	return recs
}

// queryRecords keeps invocation and per-invocation failure records in order.
func queryRecords(recs []map[string]any) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["kind"] == "invocation" || (r["kind"] == "failure" && len(r["invocationId"].(string)) == 24) {
			out = append(out, r)
		}
	}
	return out
}

// runDirs lists the run directories that exist now.
func runDirs() map[string]bool {
	m := map[string]bool{}
	for _, d := range []string{"/var/lib/awf/private", "/run/awf-ingress"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			m[filepath.Join(d, e.Name())] = true
		}
	}
	return m
}

// assertNoNewRunDirs checks that no private root or ingress directory was
// left behind since before was taken. go test runs other packages' awf runs
// (tests/faults, tests/channels) at the same time on the same bases, so a
// new directory whose run still holds its lifetime lock (run.lock, as the
// orphan sweep judges it) is another live run, not a leak, as is one of a
// live run in another mount namespace (runElsewhere); a directory of a run
// that is tearing down gets a few seconds to go.
func assertNoNewRunDirs(t *testing.T, before map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for d := range runDirs() {
			if id := filepath.Base(d); !before[d] && !runLockHeld(id) && !runElsewhere(id) {
				left = append(left, d)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, d := range left {
				t.Errorf("run directory left behind: %s", d)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runElsewhere reports whether run id is a live run of another mount
// namespace whose private root this one cannot see: tests/faults' full-disk
// case starts awf run in a mount namespace of its own, with a small tmpfs
// over the private base, so only its ingress directory is visible here. A
// run of this package's (its private root visible here) never qualifies.
func runElsewhere(id string) bool {
	if _, err := os.Stat(filepath.Join("/var/lib/awf/private", id)); err == nil {
		return false
	}
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return false
	}
	for _, pid := range hostProcesses(id) {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && ns != self {
			return true
		}
	}
	return false
}

// hostProcesses lists the pids of the host's processes whose command line
// (its NUL-separated arguments) contains every one of parts.
func hostProcesses(parts ...string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		all := true
		for _, part := range parts {
			all = all && strings.Contains(string(b), part)
		}
		if all {
			pids = append(pids, pid)
		}
	}
	return pids
}

// runLockHeld reports whether the run id's lifetime lock is held by a live
// awf run. It reads /proc/locks rather than trying the lock, which could
// make a run that is just starting fail to take its own.
func runLockHeld(id string) bool {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join("/var/lib/awf/private", id, "run.lock"), &st); err != nil {
		return false
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	// Each line: "N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END";
	// the device is in hex.
	want := fmt.Sprintf(":%d", st.Ino)
	dev := fmt.Sprintf("%02x:%02x", unix.Major(st.Dev), unix.Minor(st.Dev))
	for _, l := range strings.Split(string(locks), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[1] == "FLOCK" && strings.HasSuffix(f[5], want) && strings.HasPrefix(f[5], dev+":") {
			return true
		}
	}
	return false
}

// cliHelper is an agent-side shell function fn that runs the agent CLI cli
// with its arguments after the first, then prints "NAME rc=<status>
// stderr=<bytes> <stdout line>", NAME being its first argument.
func cliHelper(fn, cli string) string {
	return fmt.Sprintf(`
%s() {
  name=$1; shift
  err=$(mktemp)
  out=$(%s "$@" 2>"$err")
  rc=$?
  echo "$name rc=$rc stderr=$(wc -c <"$err") $out"
  rm -f "$err"
}
`, fn, cli)
}
