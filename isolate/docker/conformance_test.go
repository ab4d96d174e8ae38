package docker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestConformance reads the description's controls from inside a
// container: the same job and expectations as every backend's.
func TestConformance(t *testing.T) {
	r := newTestRuntime(t)
	seed := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(seed, "a.txt"), []byte("a\n"), 0o444))
	isolatetest.Behaviour(t, Name, template(t, r, seed), func(tpl isolate.Template, script string) isolate.Outcome {
		return run(t, r, tpl, script)
	})
}
