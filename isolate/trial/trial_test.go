package trial

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/policy"
)

func TestTemplateIsBoundedAndHasNoPolicy(t *testing.T) {
	tpl := Template("run1", 3*time.Second)
	assert.Equal(t, "run1", tpl.RunID)
	assert.Nil(t, tpl.Policy, "the backend brings the trial's filter")
	assert.Equal(t, 3*time.Second, tpl.Limits.Wall)
	assert.Equal(t, int64(64<<20), tpl.Limits.MemoryBytes)
	assert.Equal(t, 16, int(tpl.Limits.Pids))
	require.NoError(t, tpl.Limits.Validate())
}

func TestBuildRoot(t *testing.T) {
	for _, exists := range []bool{true, false} {
		dir := filepath.Join(t.TempDir(), "root")
		if exists {
			require.NoError(t, os.Mkdir(dir, 0o755))
		}
		require.NoError(t, BuildRoot(dir))
		for _, d := range mountPoints {
			fi, err := os.Stat(filepath.Join(dir, d))
			require.NoError(t, err)
			assert.True(t, fi.IsDir(), d)
		}
		fi, err := os.Stat(filepath.Join(dir, program))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o555), fi.Mode().Perm())
		assert.Equal(t, program, Job().Argv[0])
	}
}

func TestDescribe(t *testing.T) {
	p, err := policy.Default()
	require.NoError(t, err)
	l := isolate.DefaultLimits()
	for _, tc := range []struct {
		name   string
		tpl    isolate.Template
		policy string // the description's policy annotation
	}{
		{name: "trial: no policy, the backend's own filter", tpl: Template("r", time.Second)},
		{name: "query: its policy", tpl: isolate.Template{RunID: "r", Limits: l, Policy: p}, policy: p.Name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Describe(tc.tpl, nil, "1")
			require.NoError(t, err)
			assert.Equal(t, tc.policy, d.Annotations[isolate.AnnotationPolicy])
			assert.Equal(t, isolate.DefaultArgv(), d.Process.Args)
			assert.Equal(t, "1", d.Linux.Resources.CPU.Cpus)
		})
	}
}

// fakeSandbox returns a fixed outcome and records Destroy.
type fakeSandbox struct {
	out       isolate.Outcome
	destroy   error
	destroyed bool
	job       isolate.Job
}

func (f *fakeSandbox) Exec(_ context.Context, job isolate.Job) isolate.Outcome {
	f.job = job
	return f.out
}

func (f *fakeSandbox) Destroy(context.Context) error { f.destroyed = true; return f.destroy }

func TestRun(t *testing.T) {
	gone := errors.New("destroy failed")
	for _, tc := range []struct {
		name    string
		out     isolate.Outcome
		destroy error
		want    string // "" for a pass, else in the error
	}{
		{name: "pass", out: isolate.Outcome{Kind: isolate.KindNonzeroExit, ExitCode: Exit}},
		{name: "zero exit", out: isolate.Outcome{Kind: isolate.KindOK}, want: "probe container gave ok (exit 0)"},
		{name: "other exit", out: isolate.Outcome{Kind: isolate.KindNonzeroExit, ExitCode: 1, Stderr: []byte(" no \n")}, want: "(exit 1):  no"},
		{name: "launch failed", out: isolate.Err(isolate.KindLaunchFailed, "nope"), want: "nope"},
		{name: "destroy fails", out: isolate.Outcome{Kind: isolate.KindNonzeroExit, ExitCode: Exit}, destroy: gone, want: gone.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := &fakeSandbox{out: tc.out, destroy: tc.destroy}
			err := Run(context.Background(), sb, time.Second)
			assert.True(t, sb.destroyed, "the trial's sandbox is destroyed")
			assert.Equal(t, Job(), sb.job)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}
