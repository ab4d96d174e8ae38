package ghactions

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/sysuser"
	"github.com/awf-project/awf/tests/fixture"
)

// runner plays GitHub's part for the example workflow on this host: it
// evaluates the few expressions the example uses, runs each run: step in bash
// with GitHub's flags, runs the composite action's steps for its uses:, and
// stands in for checkout, setup-go and upload-artifact.
type runner struct {
	t         *testing.T
	ctx       context.Context
	root      string // this checkout
	workspace string
	temp      string // RUNNER_TEMP
	summary   string // GITHUB_STEP_SUMMARY
	pathEnv   string // PATH, with the sudo stand-in first
	outputs   map[string]map[string]string
	failed    bool // a step failed: only if: always() steps run
	log       strings.Builder
}

// expr evaluates one ${{ }} expression of the example.
func (r *runner) expr(e string, inputs map[string]string) string {
	e = strings.TrimSpace(e)
	switch {
	case strings.HasPrefix(e, "inputs."):
		v, ok := inputs[strings.TrimPrefix(e, "inputs.")]
		require.True(r.t, ok, "unknown input in %q", e)
		return v
	case strings.HasPrefix(e, "secrets."):
		return "" // no GitHub secret here: the configuration stages a local source
	case e == "github.workspace":
		return r.workspace
	}
	if m := outputRef.FindStringSubmatch(e); m != nil && m[0] == e {
		return r.outputs[m[1]][m[2]]
	}
	r.t.Fatalf("the test does not evaluate the expression %q", e)
	return ""
}

func (r *runner) expand(s string, inputs map[string]string) string {
	return exprRef.ReplaceAllStringFunc(s, func(m string) string {
		return r.expr(exprRef.FindStringSubmatch(m)[1], inputs)
	})
}

// cond evaluates an if: of the example: always(), success() (the default)
// and a step output compared with the empty string, joined by &&.
func (r *runner) cond(s string) bool {
	if s == "" {
		return !r.failed
	}
	always := false
	for _, term := range strings.Split(s, "&&") {
		term = strings.TrimSpace(term)
		switch {
		case term == "always()":
			always = true
		case term == "success()":
			if r.failed {
				return false
			}
		case strings.HasSuffix(term, "!= ''"):
			if r.expr(strings.TrimSuffix(term, "!= ''"), nil) == "" {
				return false
			}
		default:
			r.t.Fatalf("the test does not evaluate the condition %q", s)
		}
	}
	return always || !r.failed
}

// bash runs one run: script as GitHub does (bash --noprofile --norc -eo
// pipefail FILE), with env, and records its GITHUB_OUTPUT under id.
func (r *runner) bash(id, name, script string, env map[string]string) error {
	dir := r.t.TempDir()
	file := filepath.Join(dir, "step.sh")
	out := filepath.Join(dir, "output")
	require.NoError(r.t, os.WriteFile(file, []byte(script), 0o700))
	require.NoError(r.t, os.WriteFile(out, nil, 0o600))
	cmd := exec.CommandContext(r.ctx, "bash", "--noprofile", "--norc", "-eo", "pipefail", file)
	cmd.Dir = r.workspace
	cmd.Env = append(os.Environ(), "PATH="+r.pathEnv, "GITHUB_ACTIONS=true", "GITHUB_WORKSPACE="+r.workspace,
		"RUNNER_TEMP="+r.temp, "GITHUB_STEP_SUMMARY="+r.summary, "GITHUB_OUTPUT="+out, "GITHUB_RUN_ID=4242")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	b, err := cmd.CombinedOutput()
	fmt.Fprintf(&r.log, "=== step %s\n%s", name, b)
	if id != "" {
		data, rerr := os.ReadFile(out)
		require.NoError(r.t, rerr)
		r.outputs[id] = map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				r.outputs[id][k] = v
			}
		}
	}
	return err
}

// step runs one workflow step.
func (r *runner) step(s step, a action) {
	if !r.cond(s.If) {
		fmt.Fprintf(&r.log, "=== step %s: skipped (if: %s)\n", s.Name, s.If)
		return
	}
	with := map[string]string{}
	for k, v := range s.With {
		with[k] = r.expand(v, nil)
	}
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = r.expand(v, nil)
	}
	var err error
	switch {
	case strings.HasPrefix(s.Uses, "actions/checkout@"):
		err = r.checkout(with)
	case strings.HasPrefix(s.Uses, "actions/setup-go@"):
		// The host's go stands in: it must be what go.mod asks for.
		_, err = exec.LookPath("go")
	case s.Uses == actionUses:
		err = r.composite(s.ID, a, with, env)
	case strings.HasPrefix(s.Uses, "actions/upload-artifact@"):
		for _, p := range strings.Split(strings.TrimSpace(with["path"]), "\n") {
			p = strings.TrimSpace(p)
			if !filepath.IsAbs(p) {
				p = filepath.Join(r.workspace, p)
			}
			if fi, serr := os.Stat(p); serr != nil || (fi.Mode().IsRegular() && fi.Size() == 0) {
				err = fmt.Errorf("artifact %s: missing or empty (%v)", p, serr)
			}
		}
		fmt.Fprintf(&r.log, "=== step %s: upload %q\n", s.Name, with["path"])
	case s.Run != "":
		err = r.bash(s.ID, s.Name, r.expand(s.Run, nil), env)
	default:
		r.t.Fatalf("step %q: no stand-in for %s", s.Name, s.Uses)
	}
	if err != nil {
		r.failed = true
		fmt.Fprintf(&r.log, "=== step %s FAILED: %v\n", s.Name, err)
	}
}

// checkout stands in for actions/checkout: the agent's repository is already
// in the workspace; awf is a clone of this checkout's HEAD with the example
// files of the working tree (the ones under test) copied over.
func (r *runner) checkout(with map[string]string) error {
	if with["repository"] == "" {
		return nil
	}
	dest := filepath.Join(r.workspace, with["path"])
	if out, err := exec.CommandContext(r.ctx, "git", "clone", "-q", "--no-hardlinks", r.root, dest).CombinedOutput(); err != nil {
		return fmt.Errorf("clone: %v: %s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(dest, exampleDir), 0o755); err != nil {
		return err
	}
	for _, f := range []string{"action.yml", "workflow.yml"} {
		b, err := os.ReadFile(filepath.Join(r.root, exampleDir, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dest, exampleDir, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// composite runs the action's steps with its inputs, as GitHub does, and
// sets the action's outputs as the calling step's.
func (r *runner) composite(id string, a action, with, env map[string]string) error {
	inputs := map[string]string{}
	for k, in := range a.Inputs {
		inputs[k] = in.Default
	}
	for k, v := range with {
		inputs[k] = v
	}
	ids := map[string]bool{}
	var firstErr error
	for _, s := range a.Runs.Steps {
		if firstErr != nil && !strings.Contains(s.If, "always()") {
			continue
		}
		senv := map[string]string{}
		for k, v := range env {
			senv[k] = v
		}
		for k, v := range s.Env {
			senv[k] = r.expand(v, inputs)
		}
		sid := s.ID
		if sid != "" {
			sid = "action." + sid
			ids[s.ID] = true
		}
		if err := r.bash(sid, "action: "+s.Name, s.Run, senv); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if id != "" {
		r.outputs[id] = map[string]string{}
		for k, out := range a.Outputs {
			m := outputRef.FindStringSubmatch(out.Value)
			r.outputs[id][k] = r.outputs["action."+m[1]][m[2]]
		}
	}
	return firstErr
}

// TestWorkflowRunsAsScript runs docs/examples/github/workflow.yml and its
// composite action on this host as a GitHub runner would: build, validate,
// awf run with an agent asking two bounded questions, the job summary, the
// audit artifact and the self-test reports. Then a bad configuration stops
// at validation with ::error:: annotations.
func TestWorkflowRunsAsScript(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the workflow's awf steps run as root (sudo): run this test as root")
	}
	w, a := loadExamples(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	const agentUser = "awf-gha-test"
	if _, err := sysuser.Lookup(agentUser); errors.Is(err, sysuser.ErrUnknown) {
		require.NoError(t, sysuser.Create(ctx, agentUser))
		t.Cleanup(func() { assert.NoError(t, sysuser.Remove(context.Background(), agentUser)) })
	}

	// The agent user runs in the workspace: every directory above it must
	// let it through (t.TempDir's parent is 0700).
	base := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(base), 0o755))
	require.NoError(t, os.Chmod(base, 0o755))
	// The private repository, in a root-only directory (GitHub's stand-in).
	private := filepath.Join(base, "private")
	require.NoError(t, os.Mkdir(private, 0o700))
	repo := filepath.Join(private, "service")
	require.NoError(t, os.MkdirAll(repo, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "SECURITY.md"), []byte("Report to security@example.com\n"), 0o644))
	gitIn(t, repo, "init", "-q", "-b", "main")
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "-c", "user.email=dev@example.com", "-c", "user.name=dev", "commit", "-q", "-m", "start")

	// The agent's repository: the configuration and the agent's script.
	ws := filepath.Join(base, "workspace")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".github"), 0o755))
	cfg := fmt.Sprintf(`{
  "boundedQueries": {
    "enabled": true,
    "privateRepos": [ { "repo": "example-org/service", "sensitivity": "internal", "source": %q } ],
    "runtime": "direct",
    "timeout": 30,
    "maxInvocations": 8
  },
  "agent": { "user": %q }
}
`, repo, agentUser)
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".github", "awf.json"), []byte(cfg), 0o644))
	agent := `#!/bin/sh
set -e
a=$(bounded-query --repo example-org/service --schema '{"type":"boolean"}' <<'EOF'
import json, os
json.dump(os.path.isfile('/query/repo/SECURITY.md'), open('/query/out', 'w'))
EOF
)
echo "agent: SECURITY.md: $a"
[ "$a" = '{"status":"ok","result":true}' ]
b=$(bounded-query --repo example-org/service --schema '{"type":"boolean"}' <<'EOF'
open('/query/repo/Dockerfile').read()
EOF
)
echo "agent: Dockerfile: $b"
[ "$b" = '{"status":"error"}' ]
`
	require.NoError(t, os.WriteFile(filepath.Join(ws, "agent.sh"), []byte(agent), 0o755))
	require.NoError(t, os.Chmod(ws, 0o755))

	// sudo: this test already runs as root; the stand-in keeps the
	// environment as sudo -E does and runs the command.
	shim := filepath.Join(base, "shim")
	require.NoError(t, os.Mkdir(shim, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(shim, "sudo"), []byte("#!/bin/sh\n[ \"$1\" = -E ] && shift\nexec \"$@\"\n"), 0o755))

	temp := filepath.Join(base, "runner-temp")
	require.NoError(t, os.Mkdir(temp, 0o755))
	r := &runner{t: t, ctx: ctx, root: repoRoot(t), workspace: ws, temp: temp,
		summary: filepath.Join(base, "step-summary.md"), pathEnv: shim + ":" + os.Getenv("PATH"),
		outputs: map[string]map[string]string{}}
	require.NoError(t, os.WriteFile(r.summary, nil, 0o644))
	var j job
	for _, jj := range w.Jobs {
		j = jj
	}
	for _, s := range j.Steps {
		r.step(s, a)
	}
	// awf keeps the run's audit log in the host's archive, as it must for
	// an operator; the action copied it for the job (audit-dir). The test's
	// run is not an operator's: its archive goes with the test.
	fixture.RemoveArchive(t, r.log.String())
	t.Log(r.log.String())
	require.False(t, r.failed, "a step failed (log above)")

	assert.Equal(t, "0", r.outputs["awf"]["exit-code"], "the agent's status")
	auditDir := r.outputs["awf"]["audit-dir"]
	require.NotEmpty(t, auditDir)
	recs, err := os.ReadFile(filepath.Join(auditDir, "bounded-query.jsonl"))
	require.NoError(t, err, "the audit artifact holds the audit log")
	assert.Contains(t, string(recs), `"kind":"invocation"`)
	assert.Contains(t, string(recs), `"kind":"failure"`)
	summary, err := os.ReadFile(r.summary)
	require.NoError(t, err)
	assert.Contains(t, string(summary), "## awf bounded queries")
	assert.Contains(t, string(summary), "example-org/service")
	assert.Contains(t, string(summary), "4242", "the CI run id reaches the audit summary")

	var junit struct {
		XMLName xml.Name
	}
	b, err := os.ReadFile(filepath.Join(ws, "awf-verify.xml"))
	require.NoError(t, err)
	require.NoError(t, xml.Unmarshal(b, &junit))
	assert.Contains(t, []string{"testsuites", "testsuite"}, junit.XMLName.Local)
	var sarif struct {
		Version string `json:"version"`
		Runs    []any  `json:"runs"`
	}
	b, err = os.ReadFile(filepath.Join(ws, "awf-verify.sarif"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &sarif))
	assert.Equal(t, "2.1.0", sarif.Version)
	assert.NotEmpty(t, sarif.Runs)

	t.Run("bad config stops at validate with annotations", func(t *testing.T) {
		bad := strings.Replace(cfg, agentUser, "no-such-user-awf", 1)
		require.NoError(t, os.WriteFile(filepath.Join(ws, ".github", "bad.json"), []byte(bad), 0o644))
		r.log.Reset()
		r.failed = false
		with := map[string]string{"awf-dir": ".awf", "config": ".github/bad.json", "command": "./agent.sh"}
		err := r.composite("bad", action{Inputs: a.Inputs, Outputs: a.Outputs, Runs: struct {
			Using string `yaml:"using"`
			Steps []step `yaml:"steps"`
		}{Using: a.Runs.Using, Steps: a.Runs.Steps[1:]}}, with, nil)
		require.Error(t, err, r.log.String())
		assert.Regexp(t, `(?m)^::error title=awf config validate::.*no-such-user-awf`, r.log.String())
		assert.NotContains(t, r.log.String(), "=== step action: Run the agent", "nothing runs after a failed validation")
	})
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
}
