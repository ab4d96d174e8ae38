package docker

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// TestRootfsImportIsReportedOnce: the rootfs import, which takes seconds
// on a first run, happens when the runtime is warmed (not inside the first
// query) and says so in one progress line naming the rootfs, the image and
// the time it took; a query after it and a runtime that finds the image
// already in the Engine print nothing.
func TestRootfsImportIsReportedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	r := newTestRuntimeWith(t, isolate.HostConfig{Progress: &progress})
	tag := strings.TrimPrefix(testRootDigest, "sha256:")
	ref := rootfsRepo + ":" + tag

	// Whatever an earlier test imported, a foreign image under the tag
	// makes this runtime import the rootfs again.
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "other"), []byte("x"), 0o644))
	layer, err := treeDigest(ctx, other)
	require.NoError(t, err)
	forged, err := r.eng.importTree(ctx, other, rootfsRepo, tag, layer, map[string]string{labelRootfsDigest: testRootDigest})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = r.eng.call(context.Background(), http.MethodDelete, "/images/"+forged, url.Values{"force": {"1"}}, nil, nil)
	})

	tpl := template(t, r, "")
	require.NoError(t, r.Warm(ctx, tpl))
	lines := strings.Split(strings.TrimSuffix(progress.String(), "\n"), "\n")
	require.Len(t, lines, 1, "one progress line: %q", progress.String())
	t.Log(lines[0])
	assert.Regexp(t, `^awf: docker: imported the sandbox root filesystem `+regexp.QuoteMeta(testRoot)+` into the Engine as image `+ref+` in [0-9]+\.[0-9]s \(once: later runs reuse it\)$`, lines[0])

	o := run(t, r, tpl, "open('/query/out', 'w').write('1')\n")
	require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
	assert.Len(t, strings.Split(strings.TrimSuffix(progress.String(), "\n"), "\n"), 1, "the first query imports nothing")

	var again bytes.Buffer
	r2 := newTestRuntimeWith(t, isolate.HostConfig{Progress: &again})
	require.NoError(t, r2.Warm(ctx, template(t, r2, "")))
	assert.Empty(t, again.String(), "the Engine already holds the verified image")
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
