package isolatetest

import (
	"context"
	_ "embed"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// observeScript prints what a script can observe of how it was launched
// and of its sandbox (observe.py). It is embedded, not read from the
// working directory: the cgroup v2 VM runs the backends' compiled test
// binaries from elsewhere.
//
//go:embed observe.py
var observeScript []byte

// PreparedLooksCold runs one observation script (observe.py) in a sandbox
// of rt prepared well before its job (Prepare, then idle, which returns
// once the sandbox has waited as a pooled one would), and in a cold run,
// wants the same observations from both, and returns the prepared run's,
// observe.py's JSON object, for the backend's own checks of what a job
// sees.
func PreparedLooksCold(t *testing.T, rt isolate.Runtime, tpl isolate.Template, idle func()) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := rt.Prepare(ctx, tpl)
	require.NoError(t, err)
	defer func() { require.NoError(t, sb.Destroy(ctx)) }()
	idle()
	warm := sb.Exec(ctx, isolate.Job{InvocationID: "warm", Script: observeScript})
	require.NoError(t, sb.Destroy(ctx))
	require.Equal(t, isolate.KindOK, warm.Kind, "%s: %s", warm.Detail, warm.Stderr)

	cold := RunScript(t, rt, tpl, string(observeScript))
	require.Equal(t, isolate.KindOK, cold.Kind, "%s: %s", cold.Detail, cold.Stderr)

	assert.Empty(t, warm.Stderr)
	assert.Empty(t, cold.Stderr)
	require.JSONEq(t, string(cold.Stdout), string(warm.Stdout))
	return warm.Stdout
}
