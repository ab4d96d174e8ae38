package verify

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParentDirs: the leftover scan looks for the awf parent in every v1
// hierarchy and in the v2 tree, below a delegated base however deep (a
// systemd unit sits two levels down: system.slice/awf.service), once each.
func TestParentDirs(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"memory/awf", "pids/awf", "system.slice/awf.service/awf", "awf.service/awf"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	at := func(ds ...string) []string {
		var out []string
		for _, d := range ds {
			out = append(out, filepath.Join(root, d))
		}
		return out
	}
	tests := []struct {
		name, base string
		want       []string
	}{
		{"no delegated base", "", at("awf", "awf.service/awf", "memory/awf", "pids/awf")},
		{"a unit two levels down", "system.slice/awf.service", at("awf.service/awf", "memory/awf", "pids/awf", "system.slice/awf.service/awf")},
		{"a unit one level down is listed once", "awf.service", at("awf.service/awf", "memory/awf", "pids/awf")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, parentDirs(root, tc.base, "awf"))
		})
	}
}
