package docker

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/isolate/workspace"
)

// createdContainer is the part of a container's inspect reply these tests
// read.
type createdContainer struct {
	Name   string                  `json:"Name"`
	State  struct{ Status string } `json:"State"`
	Config struct {
		Cmd    []string          `json:"Cmd"`
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

// inspectNamed inspects the container named name on r's Engine; ok is
// false when the Engine does not know it.
func inspectNamed(t *testing.T, r *Runtime, name string) (c createdContainer, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := r.eng.call(ctx, http.MethodGet, "/containers/"+name+"/json", nil, nil, &c)
	if isNotFound(err) {
		return c, false
	}
	require.NoError(t, err)
	return c, true
}

// TestPrepareCreatesTheContainer: Prepare leaves a created, stopped
// container for the default argv, labelled for the sweep and with no
// invocation (Exec records that in the journal); Exec runs the job in it;
// Destroy of a sandbox that ran nothing removes it too.
func TestPrepareCreatesTheContainer(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, exec := range []bool{true, false} {
		sb, err := r.Prepare(ctx, tpl)
		require.NoError(t, err)
		s := sb.(*sandbox)
		name := s.ws.Journal.Container
		c, ok := inspectNamed(t, r, name)
		require.True(t, ok, "Prepare created no container %s", name)
		assert.Equal(t, "created", c.State.Status)
		assert.Equal(t, isolate.DefaultArgv(), c.Config.Cmd)
		// The image's own labels (its digests) come with it.
		for k, v := range map[string]string{labelRun: r.runID, labelSandbox: s.ws.Journal.SandboxID, labelState: r.stateTag, labelBackend: Name} {
			assert.Equal(t, v, c.Config.Labels[k], "label %s", k)
		}
		assert.NotContains(t, c.Config.Labels, "awf.invocation", "the invocation is not known at Prepare")
		if exec {
			o := sb.Exec(ctx, isolate.Job{InvocationID: "inv-created", Script: []byte("open('/query/out', 'w').write('[1]')\n")})
			require.Equal(t, isolate.KindOK, o.Kind, "%s: %s", o.Detail, o.Stderr)
			assert.Equal(t, "[1]", string(o.Output))
			j, err := workspace.ReadJournal(s.ws.Dir)
			require.NoError(t, err)
			assert.Equal(t, "inv-created", j.InvocationID, "the invocation is in the journal")
		}
		require.NoError(t, sb.Destroy(ctx))
		_, ok = inspectNamed(t, r, name)
		assert.False(t, ok, "Destroy left container %s (exec %v)", name, exec)
	}
}

// TestPreparedLooksCold runs isolatetest's observation script in a sandbox
// whose container was created well before its job, and in a cold run, and
// wants the same observations from both.
func TestPreparedLooksCold(t *testing.T) {
	r := newTestRuntime(t)
	seed := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(seed, "a.txt"), []byte("a\n"), 0o444))
	got := isolatetest.PreparedLooksCold(t, r, template(t, r, seed), func() { time.Sleep(2 * time.Second) })

	// And what both see is the description's container.
	var obs struct {
		OrigArgv []string                   `json:"orig_argv"`
		Awf      map[string][]any           `json:"awf"`
		Tmp      []json.RawMessage          `json:"tmp"`
		Mounts   [][]string                 `json:"mounts"`
		Status   map[string]string          `json:"status"`
		Etc      map[string]json.RawMessage `json:"etc"`
	}
	require.NoError(t, json.Unmarshal(got, &obs))
	assert.Equal(t, isolate.DefaultArgv(), obs.OrigArgv)
	assert.Equal(t, []string{filepath.Base(isolate.ScriptPath)}, keys(obs.Awf))
	assert.JSONEq(t, `{}`, string(obs.Tmp[1]), "/tmp is empty")
	assert.Equal(t, "2", obs.Status["Seccomp"])
	assert.Equal(t, "1", obs.Status["NoNewPrivs"])
	var points []string
	for _, m := range obs.Mounts {
		points = append(points, m[0])
	}
	for _, p := range []string{"/awf", "/tmp", isolate.QueryDir, isolate.RepoDir} {
		assert.Contains(t, points, p)
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestExecOtherArgvRecreates: a job whose argv is not the default runs in
// a container created for that argv, under the sandbox's one container
// name, and Destroy leaves neither; Run creates it for that argv at once.
func TestExecOtherArgvRecreates(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := r.Prepare(ctx, tpl)
	require.NoError(t, err)
	name := sb.(*sandbox).ws.Journal.Container
	before, ok := inspectNamed(t, r, name)
	require.True(t, ok)

	argv := []string{"/usr/bin/python3", "-I", "-S", isolate.ScriptPath}
	o := sb.Exec(ctx, isolate.Job{InvocationID: "argv", Argv: argv,
		Script: []byte("import json, sys\nopen('/query/out', 'w').write(json.dumps(sys.orig_argv))\n")})
	require.Equal(t, isolate.KindOK, o.Kind, "%s: %s", o.Detail, o.Stderr)
	var got []string
	require.NoError(t, json.Unmarshal(o.Output, &got))
	assert.Equal(t, argv, got)
	after, ok := inspectNamed(t, r, name)
	require.True(t, ok)
	assert.Equal(t, argv, after.Config.Cmd)
	assert.Equal(t, before.Name, after.Name)
	assert.Len(t, containersOf(t, r), 1, "the prepared container was replaced, not kept")
	require.NoError(t, sb.Destroy(ctx))
	assert.Empty(t, containersOf(t, r))

	o = r.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "argv-run", Argv: argv,
		Script: []byte("import json, sys\nopen('/query/out', 'w').write(json.dumps(sys.orig_argv))\n")}})
	require.Equal(t, isolate.KindOK, o.Kind, "%s: %s", o.Detail, o.Stderr)
	require.NoError(t, json.Unmarshal(o.Output, &got))
	assert.Equal(t, argv, got)
	assert.Empty(t, containersOf(t, r))
}

// TestPrepareCutShortLeavesNothing ends Prepare's context at a spread of
// points, the create in flight among them: a Prepare that fails leaves no
// container (not even one the Engine finishes after the call gave up) and
// no workspace; one that succeeds destroys cleanly.
func TestPrepareCutShortLeavesNothing(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, "")
	// The runtime's stores (the rootfs image, the views) exist from Warm
	// on; they are not a sandbox's.
	require.NoError(t, r.Warm(context.Background(), tpl))
	stores, err := workspace.List(r.dir)
	require.NoError(t, err)
	// One full Prepare, for the range of deadlines to try.
	t0 := time.Now()
	sb, err := r.Prepare(context.Background(), tpl)
	require.NoError(t, err)
	full := time.Since(t0)
	require.NoError(t, sb.Destroy(context.Background()))

	failed, inCreate := 0, 0
	const steps = 12
	for i := range steps {
		d := full * time.Duration(i) / (steps - 2)
		ctx, cancel := context.WithTimeout(context.Background(), d)
		sb, err := r.Prepare(ctx, tpl)
		cancel()
		if err == nil {
			require.NoError(t, sb.Destroy(context.Background()))
		} else {
			failed++
			if strings.Contains(err.Error(), "create:") {
				inCreate++
				t.Logf("deadline %v: %v", d, err)
			}
		}
		assert.Empty(t, containersOf(t, r), "deadline %v: %v", d, err)
		ents, err := workspace.List(r.dir)
		require.NoError(t, err)
		assert.Equal(t, stores, ents, "deadline %v left a workspace", d)
	}
	t.Logf("a full Prepare took %v; %d of %d cut short failed, %d of them in the create", full, failed, steps, inCreate)
	require.NoError(t, r.Usable())
}
