package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// writeConfig writes a config with the shared rootfs and agent user.
func writeConfig(t *testing.T, b bq) string {
	t.Helper()
	b.Enabled = true
	if b.RootFS == nil {
		b.RootFS = map[string]any{"path": rootfsDir, "digest": rootfsHash}
	}
	return fixture.WriteConfig(t, t.TempDir(), b, agentUser)
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
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, awfBin, "run", "--config", cfg, "--", "/bin/sh", script)
	cmd.Dir = "/"
	cmd.Env = append(baseEnv(), extraEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	fixture.KillGroupOnCancel(cmd)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	removeArchive(t, errb.String())
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
	const marker = "audit log kept in "
	i := strings.LastIndex(stderr, marker)
	require.GreaterOrEqual(t, i, 0, "no audit archive in:\n%s", stderr)
	dir := strings.TrimSpace(strings.SplitN(stderr[i+len(marker):], "\n", 2)[0])
	t.Cleanup(func() { os.RemoveAll(dir) })
	raw, err := os.ReadFile(filepath.Join(dir, "bounded-query.jsonl"))
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(dir, "bounded-query.jsonl"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
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
// orphan sweep judges it) is another live run, not a leak; a directory of a
// run that is tearing down gets a few seconds to go.
func assertNoNewRunDirs(t *testing.T, before map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for d := range runDirs() {
			if !before[d] && !runLockHeld(filepath.Base(d)) {
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
