package gvisor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

func TestProbeChoosesAWorkingPlatform(t *testing.T) {
	r := newTestRuntime(t)
	r.platform, r.unimpl = "", nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, r.Probe(ctx))
	assert.Contains(t, []string{"kvm", "ptrace"}, r.Platform())
	t.Logf("platform: %s", r.Platform())
}

func TestFailClosedWhenRunscMissing(t *testing.T) {
	for _, p := range []string{"/nonexistent/runsc", "/etc/hostname", "relative/runsc", "/bin/false"} {
		r, err := New(isolate.HostConfig{RunID: isolatetest.RandomID(t), StateDir: t.TempDir(), RunscPath: p})
		require.NoError(t, err)
		t.Run(p, func(t *testing.T) { isolatetest.FailsClosedWithout(t, r, testRoot, "runsc") })
	}
}
