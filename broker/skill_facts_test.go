package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// TestSkillSandboxFacts checks that SKILL.md tells a query author the facts
// awf query would otherwise have to show them: the Python version, what the
// policy kills and refuses, the shallow clone, the sizes, and awf query.
func TestSkillSandboxFacts(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr", "lib", "python3.11"), 0o755))
	f := SandboxFactsFor(root, 256<<20)
	assert.Equal(t, "3.11", f.Python)
	assert.Equal(t, int64(256<<20), f.Limits.MemoryBytes)
	def := isolate.DefaultLimits()
	assert.Equal(t, def.TmpTmpfsBytes, f.Limits.TmpTmpfsBytes)
	assert.Equal(t, def.MemoryBytes, SandboxFactsFor(root, 0).Limits.MemoryBytes, "0 is the default memory")
	assert.Empty(t, SandboxFactsFor(t.TempDir(), 0).Python, "no python3.N directory: unknown")

	s := SkillWith([]SkillRepo{{"o/int", "internal"}}, 30, 32, f)
	for _, want := range []string{
		"Python 3 (3.11), standard library only",
		"a single-commit shallow clone of\n  its configured ref (one commit: no history, no other branches or tags)",
		"changes go to a 256 MiB layer",
		"`os.fork`, `os.system` and anything else that forks are killed by the\n  seccomp policy",
		"`subprocess`, `os.pipe`, `socket` and `asyncio` raise PermissionError",
		"`/tmp` is a 16 MiB tmpfs (noexec), `/query` a 64 MiB one; memory 256 MiB, at most 128 processes",
		"files at most 64 MiB each",
		"(at most 8192 bytes)",
		"30 s time limit",
		"ask your operator to run it with `awf query`",
	} {
		assert.Contains(t, s, want)
	}
	// Skill is SkillWith with the default facts and no Python version.
	d := Skill([]SkillRepo{{"o/int", "internal"}}, 30, 32)
	assert.Contains(t, d, "- Python 3, standard library only")
	assert.Contains(t, d, "memory 512 MiB")
}
