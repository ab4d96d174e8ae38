package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// TestLoadVerifyConfig derives verify's runtime, limits and host settings
// from a configuration as awf run does, and lets explicit flags win.
func TestLoadVerifyConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg.json")
	src := `{"agent":{"user":"nobody"},"boundedQueries":{"enabled":true,"runtime":"gvisor","timeout":7,"memoryLimit":"256m",` +
		`"runscPath":"/opt/runsc","privateRepos":[{"repo":"o/r","sensitivity":"internal","source":"` + dir + `"}]}}`
	require.NoError(t, os.WriteFile(cfg, []byte(src), 0o600))
	vc, err := loadVerifyConfig(cfg, strings.NewReader(""))
	require.NoError(t, err)
	want := isolate.DefaultLimits()
	want.MemoryBytes, want.Wall = 256<<20, 7*time.Second
	assert.Equal(t, want, vc.limits)

	var rts listFlag
	root, digest, runsc, sock := "", "", "", ""
	l := vc.apply(&rts, &root, &digest, &runsc, &sock)
	assert.Equal(t, listFlag{"gvisor"}, rts, "the configured runtime is verified")
	assert.Equal(t, "/opt/runsc", runsc)
	assert.Equal(t, want, *l)

	rts, runsc = listFlag{"direct"}, "/usr/bin/runsc"
	vc.apply(&rts, &root, &digest, &runsc, &sock)
	assert.Equal(t, listFlag{"direct"}, rts, "--runtime wins")
	assert.Equal(t, "/usr/bin/runsc", runsc, "--runsc wins")

	_, err = loadVerifyConfig(filepath.Join(dir, "missing.json"), strings.NewReader(""))
	require.Error(t, err)
	rc, _, errOut := runAWF(t, "", "isolate", "verify", "--config", filepath.Join(dir, "missing.json"))
	assert.Equal(t, 2, rc)
	assert.Contains(t, errOut, "config:")
}
