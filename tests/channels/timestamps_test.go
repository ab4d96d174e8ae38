package channels

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fakeprovider"
	"github.com/awf-project/awf/tests/fixture"
)

// The timestamp channel: the agent is frozen from a metered request's debit
// until its bucket has passed, so it cannot time the job while it runs. But
// if awf changes the metadata of something the agent can see at one of the
// job's lifecycle moments (a namespace bind-mounted into a host directory
// when the sandbox starts, a temporary directory removed at teardown), the
// agent reads the exact moment back after the thaw with stat(2), and the
// bucket is defeated: a confidential script that sleeps a secret number of
// milliseconds sends it at once.
//
// The agent (testdata/timestamps_agent.py) snapshots its whole view (every
// directory and file to depth 6 except /proc and its own paths: mtime,
// ctime, nlink, size, the entry names of each directory, and statvfs free
// counts of every mount point) around two metered requests, each window
// covering the request and a pause after its answer (teardown and a pool
// refill), after a control window and each followed by one of the same
// length with no request. What changed in both request windows and in no control
// window fails the test. Everything else is logged as noise: on a quiet
// host a change seen once could still be awf's, so read the log.

// timestampCase is one metered request the agent makes.
type timestampCase struct {
	name string
	kind string // "query" or "agent"
}

var timestampCases = []timestampCase{
	{"query", "query"},
	{"bounded-agent", "agent"},
}

// timestampJob is one metered request as the agent saw it: the differences
// across it and in the pause after it, and for each changed timestamp its
// distance in ms from the request's start.
type timestampJob struct {
	Status    string             `json:"status"`
	Envelope  map[string]any     `json:"envelope"`
	Elapsed   float64            `json:"elapsed_s"`
	RequestMS float64            `json:"request_ms"`
	Diff      map[string][2]any  `json:"diff"`
	Offsets   map[string]float64 `json:"offsets_ms"`
}

// timestampReport is the agent's one line.
type timestampReport struct {
	Own       []string            `json:"own"`
	Entries   int                 `json:"entries"`
	Truncated bool                `json:"truncated"`
	Jobs      []timestampJob      `json:"jobs"`
	Controls  []map[string][2]any `json:"controls"`
}

var timestampBins struct {
	once sync.Once
	err  error
}

// buildTimestampBins builds bounded-agent and agent-loop beside awf, as the
// Makefile does (the loop static, without cgo), once.
func buildTimestampBins(t *testing.T) {
	t.Helper()
	timestampBins.once.Do(func() {
		for c, env := range map[string][]string{
			"bounded-agent": {"CGO_ENABLED=1", "GOFLAGS=-tags=seccomp"},
			"agent-loop":    {"CGO_ENABLED=0", "GOFLAGS="},
		} {
			if *prebuilt != "" {
				if _, err := os.Stat(filepath.Join(binDir, c)); err == nil {
					continue
				}
			}
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, c), "github.com/awf-project/awf/cmd/"+c)
			cmd.Env = append(os.Environ(), env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				timestampBins.err = fmt.Errorf("build %s: %v\n%s", c, err, out)
				return
			}
		}
	})
	require.NoError(t, timestampBins.err)
}

const timestampOpenAIKey = "sk-channels-timestamps-key-0000"

func TestTimestamps(t *testing.T) {
	for _, rc := range runtimeCases {
		t.Run(rc.name, func(t *testing.T) {
			dockerSocket := fixture.RequireRuntime(t, rc.name)
			for _, tc := range timestampCases {
				// docker cannot run an enclave (preflight refuses it), so
				// bounded agents run on direct and gvisor only.
				if tc.kind == "agent" && rc.name == "docker" {
					continue
				}
				t.Run(tc.name, func(t *testing.T) { runTimestamps(t, rc.name, dockerSocket, tc) })
			}
		})
	}
}

// runTimestamps fails when awf changes what the agent sees at a metered
// job's lifecycle moments. A candidate change must show in two runs of the
// case, each with its own two requests and control windows: a lifecycle
// channel repeats in every run, while another job that happens to create
// and remove something in both of one run's request windows (a concurrent
// test package's Engine directory under /run) does not repeat its timing.
func runTimestamps(t *testing.T, runtime, dockerSocket string, tc timestampCase) {
	leaks, secretMS := timestampLeaks(t, runtime, dockerSocket, tc)
	if len(leaks) > 0 {
		t.Logf("%d candidate changes; measuring the case again to tell awf's from another job's", len(leaks))
		again, _ := timestampLeaks(t, runtime, dockerSocket, tc)
		for _, k := range sortedLeakKeys(leaks) {
			if _, ok := again[k]; !ok {
				t.Logf("not repeated in the second run (another job's): %s", leaks[k])
				delete(leaks, k)
			}
		}
	}
	var lines []string
	for _, k := range sortedLeakKeys(leaks) {
		lines = append(lines, leaks[k])
	}
	require.Empty(t, lines, "awf changed what the agent sees at the metered job's lifecycle moments, in both requests of two runs "+
		"(the script slept a secret %d ms in the first; a timestamp at a fixed distance from that is the channel):\n%s", secretMS, strings.Join(lines, "\n"))
}

func sortedLeakKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// timestampLeaks runs the case once: the agent walks its view around two
// metered requests and two control windows. It returns each change both
// requests made that neither control window shows, by key, and the
// secret the script slept.
func timestampLeaks(t *testing.T, runtime, dockerSocket string, tc timestampCase) (map[string]string, int) {
	dir, err := os.MkdirTemp(workDir, "ts-"+runtime+"-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	secretMS := 200 + int(randUint64(t)%600)
	repoDir := filepath.Join(dir, "repo")
	// The agent's working directory holds its scripts and plan; the
	// repository lies beside it (a hidden source may not overlap it).
	agentDir := filepath.Join(dir, "agent")
	require.NoError(t, os.Mkdir(agentDir, 0o755))
	makeRepo(t, repoDir, map[string]string{"secret": fmt.Sprintf("%d\n", secretMS), "README.md": "# r\n"})
	for _, f := range []string{"timestamps_agent.py", "timestamps_send.py"} {
		raw, err := scripts.ReadFile("testdata/" + f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(agentDir, f), raw, 0o644))
	}
	bqs := map[string]any{
		"enabled": true, "runtime": runtime, "maxInvocations": 10, "timeout": 60,
		"privateRepos": []map[string]any{{"repo": "secret/ts", "sensitivity": "confidential", "source": repoDir}},
		"rootfs":       map[string]any{"path": rootfsDir, "digest": rootfsHash},
	}
	if dockerSocket != "" {
		bqs["dockerSocket"] = dockerSocket
	}
	doc := map[string]any{"boundedQueries": bqs, "agent": map[string]any{"user": agentUser}}
	env := []string{"PATH=" + binDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	job := map[string]any{"kind": "query", "repo": "secret/ts"}
	if tc.kind == "agent" {
		buildTimestampBins(t)
		fake := fakeprovider.New(t,
			fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "list_files", Args: map[string]any{"path": "."}},
			fakeprovider.Turn{Kind: fakeprovider.Finish, Args: map[string]any{"result": true}},
			fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "list_files", Args: map[string]any{"path": "."}},
			fakeprovider.Turn{Kind: fakeprovider.Finish, Args: map[string]any{"result": true}})
		ca := filepath.Join(dir, "fake-ca.pem")
		require.NoError(t, os.WriteFile(ca, fake.CertPEM(), 0o644))
		doc["apiProxy"] = map[string]any{"targets": map[string]any{"openai": map[string]any{"baseUrl": fake.URL(), "model": "gpt-4o-mini"}}}
		ba := map[string]any{"enabled": true, "model": "gpt-4o-mini", "runtime": runtime, "timeout": 30, "maxInvocations": 4,
			// internal: metered (the agent is frozen) like confidential, and
			// its 64 bits pay for two invocations of 5 bits each.
			"privateRepos": []map[string]any{{"repo": "secret/ag", "sensitivity": "internal", "source": repoDir}}}
		doc["boundedAgents"] = ba
		env = append(env, "OPENAI_API_KEY="+timestampOpenAIKey, "SSL_CERT_FILE="+ca)
		job = map[string]any{"kind": "agent", "repo": "secret/ag"}
	}
	raw, err := json.Marshal(doc)
	require.NoError(t, err)
	cfg := filepath.Join(dir, "awf.json")
	require.NoError(t, os.WriteFile(cfg, raw, 0o600))
	plan, err := json.Marshal(map[string]any{"scripts": agentDir, "job": job, "pause": 4, "depth": 6,
		"query_timeout": queryLimit.Seconds()})
	require.NoError(t, err)
	planPath := filepath.Join(agentDir, "plan.json")
	require.NoError(t, os.WriteFile(planPath, plan, 0o644))

	rep, stderr := runTimestampAgent(t, agentDir, cfg, planPath, env)
	require.False(t, rep.Truncated, "the agent's walk stopped at its entry limit")
	require.Len(t, rep.Jobs, 2)
	control := map[string][2]any{}
	for _, c := range rep.Controls {
		for k, v := range c {
			control[k] = v
		}
	}
	for i, j := range rep.Jobs {
		require.Equal(t, "ok", j.Status, "metered request %d did not answer: %v\nawf run: %s\naudit: %s", i, j.Envelope, stderr, auditOf(stderr))
		t.Logf("runtime=%s case=%s request %d: secret_ms=%d, answered after %.0f ms", runtime, tc.name, i, secretMS, j.RequestMS)
	}
	t.Logf("walked %d entries; the agent's own paths, not walked: %v", rep.Entries, rep.Own)

	// A change is awf's when both requests made it and neither control
	// window (nor a change of a directory above it) shows it: the host's
	// own activity (other jobs writing /tmp, a checkout's .git) is not
	// reproducible, a job's lifecycle is.
	leaks := map[string]string{}
	var noise []string
	first, second := rep.Jobs[0], rep.Jobs[1]
	for _, k := range sortedKeys(first.Diff) {
		line := fmt.Sprintf("%s %v -> %v", k, first.Diff[k][0], first.Diff[k][1])
		for _, what := range []string{"mtime", "ctime"} {
			if ms, ok := first.Offsets[k+" "+what]; ok {
				line += fmt.Sprintf(" (%s %.1f ms after the request started", what, ms)
				if ms2, ok := second.Offsets[k+" "+what]; ok {
					line += fmt.Sprintf("; %.1f ms in the second request", ms2)
				}
				line += ")"
			}
		}
		_, again := second.Diff[k]
		switch {
		case again && runtime == "docker" && strings.HasPrefix(k, "S "):
			// The Engine keeps each container's state on its data root's
			// filesystem (here /, as /var/lib/docker is on a default
			// install), which awf does not choose: its free counts move
			// with every container. A count, not a timestamp; a residual
			// of the docker runtime (docs/security.md).
			noise = append(noise, "RESIDUAL (docker: the Engine's data root filesystem): "+line)
		case noisy(control, k):
			noise = append(noise, "host noise (also changed without a request): "+line)
		case !again:
			noise = append(noise, "changed in the first request's window only: "+line)
		default:
			leaks[k] = line
		}
	}
	for _, k := range sortedKeys(second.Diff) {
		if _, ok := first.Diff[k]; !ok {
			noise = append(noise, fmt.Sprintf("changed in the second request's window only: %s %v -> %v", k, second.Diff[k][0], second.Diff[k][1]))
		}
	}
	for _, l := range noise {
		t.Log(l)
	}
	for _, k := range sortedLeakKeys(leaks) {
		t.Logf("changed in both requests: %s", leaks[k])
	}
	return leaks, secretMS
}

// noisy reports whether key k (a kind letter, a space, a path) is host
// noise: it changed in the control window too, or a directory above it
// (other than /) did, as a shared /tmp does while other jobs run.
func noisy(control map[string][2]any, k string) bool {
	if _, ok := control[k]; ok {
		return true
	}
	p := k[2:]
	for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
		if _, ok := control["D "+d]; ok {
			return true
		}
		if _, ok := control["L "+d]; ok {
			return true
		}
	}
	return false
}

// auditOf returns the archived audit logs of a run, for a failure message.
func auditOf(stderr string) string {
	const marker = "audit log kept in "
	i := strings.LastIndex(stderr, marker)
	if i < 0 {
		return "(no archive)"
	}
	dir := strings.TrimSpace(strings.SplitN(stderr[i+len(marker):], "\n", 2)[0])
	var b strings.Builder
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		raw, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		fmt.Fprintf(&b, "%s:\n%s\n", e.Name(), raw)
	}
	return b.String()
}

func sortedKeys(m map[string][2]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// runTimestampAgent runs `awf run --config cfg -- python3 timestamps_agent.py
// plan` with env, in dir, and returns the agent's report and awf's stderr.
func runTimestampAgent(t *testing.T, dir, cfg, plan string, env []string) (timestampReport, string) {
	t.Helper()
	var rep *timestampReport
	stderr := runUnderAwf(t, 8*time.Minute, dir, env, cfg, filepath.Join(dir, "timestamps_agent.py"), plan, false, func(line string, _ io.Writer) bool {
		if !strings.HasPrefix(line, "{") || rep != nil {
			return false
		}
		var r timestampReport
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Errorf("agent report: %v", err)
			return true
		}
		rep = &r
		return true
	})
	require.NotNil(t, rep, "the agent printed no report; stderr: %s", stderr)
	return *rep, stderr
}
