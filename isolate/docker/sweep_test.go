package docker

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestSweepRemovesWhatACrashLeft leaves a prepared sandbox and a running
// container behind, as a crashed broker would, and sweeps them from a fresh
// runtime over the same state dir.
func TestSweepRemovesWhatACrashLeft(t *testing.T) {
	r := newTestRuntime(t)
	isolatetest.SweepRemovesWhatACrashLeft(t, isolatetest.Crash{
		Runtime: r, Template: template(t, r, ""),
		Running: func() bool { return len(containersOf(t, r)) == 1 }, Wait: time.Minute,
		Fresh: func() isolate.Runtime {
			after, err := newRuntime(isolate.HostConfig{RunID: isolatetest.RandomID(t), StateDir: filepath.Dir(r.dir), DockerSocket: testSocket})
			require.NoError(t, err)
			return after
		},
		SweepTime: time.Minute,
		Swept: func() {
			assert.Empty(t, containersOf(t, r))
			ents, err := os.ReadDir(r.dir)
			require.NoError(t, err)
			assert.Empty(t, ents)
		},
		Leftovers: func() { requireNoLeftovers(t, r) },
	})
}

// TestRootfsImageIsVerified replaces the image under the rootfs tag with
// different content and checks that the backend notices and re-imports.
func TestRootfsImageIsVerified(t *testing.T) {
	r := newTestRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, _, _, err := r.eng.rootfsImage(ctx, testRoot)
	require.NoError(t, err)

	info, err := r.eng.inspectImage(ctx, id)
	require.NoError(t, err)
	digest := info.Config.Labels[labelRootfsDigest]
	require.NotEmpty(t, digest)
	tag := digest[len("sha256:"):]

	// Put a one-file image with forged labels under the same tag.
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "evil"), []byte("x"), 0o644))
	layer, err := treeDigest(ctx, other)
	require.NoError(t, err)
	forged, err := r.eng.importTree(ctx, other, rootfsRepo, tag, layer, map[string]string{labelRootfsDigest: digest, labelLayerDigest: info.Config.Labels[labelLayerDigest]})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = r.eng.call(context.Background(), http.MethodDelete, "/images/"+forged, url.Values{"force": {"1"}}, nil, nil)
	})

	again, _, _, err := r.eng.rootfsImage(ctx, testRoot)
	require.NoError(t, err)
	assert.NotEqual(t, forged, again, "the forged image is not used")
	got, err := r.eng.inspectImage(ctx, again)
	require.NoError(t, err)
	assert.Equal(t, info.RootFS.Layers, got.RootFS.Layers, "the image holds the rootfs again")
}
