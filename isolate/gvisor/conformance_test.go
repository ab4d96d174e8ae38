package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestConformance reads the description's controls from inside a gVisor
// sandbox: the same job and expectations as every backend's.
func TestConformance(t *testing.T) {
	r := newTestRuntime(t)
	seed := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(seed, "a.txt"), []byte("a\n"), 0o444))
	isolatetest.Behaviour(t, Name, template(t, r, seed), func(tpl isolate.Template, script string) isolate.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return r.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "conformance", Script: []byte(script)}})
	})
}
