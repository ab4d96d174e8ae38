package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/policy"
)

const dockerDefaultProfile = "../../policy/testdata/docker-default.json"

// TestPolicyImportAndDiffWithDocker: import prints a draft lint refuses
// until reviewed; diff compares a .policy with Docker JSON by decisions, on
// either side; the summary shows awf allows nothing Docker denies.
func TestPolicyImportAndDiffWithDocker(t *testing.T) {
	rc, out, errOut := runAWF(t, "", "policy", "import", dockerDefaultProfile)
	require.Equal(t, 0, rc, errOut)
	assert.Contains(t, out, "default errno EPERM : reason needed")
	assert.Contains(t, out, "allow ptrace : reason needed")
	draft := filepath.Join(t.TempDir(), "draft.policy")
	require.NoError(t, os.WriteFile(draft, []byte(out), 0o600))
	rc, out, _ = runAWF(t, "", "policy", "lint", draft)
	assert.Equal(t, 1, rc, "an unreviewed draft must not lint clean")
	assert.Contains(t, out, "error: reason needed: imported rule ptrace has no reviewed reason")

	rc, out, errOut = runAWF(t, "", "policy", "diff", "../../policy/python3.policy", dockerDefaultProfile)
	require.Equal(t, 1, rc, errOut)
	assert.Contains(t, out, "docker seccomp JSON, resolved for no capabilities")
	assert.Contains(t, out, "- kill ptrace (x86_64) : ")
	assert.Contains(t, out, "+ allow ptrace (x86_64) : reason needed (syscalls[1])")
	assert.Contains(t, out, "+ allow ptrace (aarch64) : reason needed (syscalls[1])")

	// Either side, and the reverse diff is the mirror image.
	rc, rev, _ := runAWF(t, "", "policy", "diff", dockerDefaultProfile, "@default", "--arch", "x86_64")
	require.Equal(t, 1, rc)
	assert.Contains(t, rev, "- allow ptrace (x86_64) : reason needed (syscalls[1])")
	assert.NotContains(t, rev, "(aarch64)")

	rc, out, _ = runAWF(t, "", "policy", "diff", "@default", dockerDefaultProfile, "--summary")
	require.Equal(t, 1, rc)
	assert.Contains(t, out, "## @default allows, "+dockerDefaultProfile+" denies: 0\n")
	assert.Regexp(t, `## `+dockerDefaultProfile+` allows, @default denies: \d+`, out)
	assert.Contains(t, out, "  x86_64 ptrace: deny [kill] vs allow [allow]")

	// An export diffs clean against its own policy, as JSON on either side.
	rc, exported, errOut := runAWF(t, "", "policy", "export", "@default", "--format", "docker")
	require.Equal(t, 0, rc, errOut)
	js := filepath.Join(t.TempDir(), "awf.json")
	require.NoError(t, os.WriteFile(js, []byte(exported), 0o600))
	rc, out, errOut = runAWF(t, "", "policy", "diff", "@default", js)
	assert.Equal(t, 0, rc, "%s%s", out, errOut)
	assert.Equal(t, 1, strings.Count(out, "\n"), "only the format note: %s", out)
}

// TestPolicyDiffComparesCommonArches: an OCI export holds the host's
// architecture only; without --arch the diff compares the architectures both
// sides cover and reports the other as one line of its own, instead of a
// table of "deny" rows the export never claimed.
func TestPolicyDiffComparesCommonArches(t *testing.T) {
	rc, exported, errOut := runAWF(t, "", "policy", "export", "@default", "--format", "oci")
	require.Equal(t, 0, rc, errOut)
	js := filepath.Join(t.TempDir(), "oci.json")
	require.NoError(t, os.WriteFile(js, []byte(exported), 0o600))
	p, err := policy.Default()
	require.NoError(t, err)
	host, err := policy.NativeArch()
	require.NoError(t, err)
	var other string
	for _, a := range p.Arches {
		if a != host {
			other = a
		}
	}
	require.NotEmpty(t, other)

	rc, out, errOut := runAWF(t, "", "policy", "diff", js, "@default")
	assert.Equal(t, 1, rc, "a missing architecture is a difference: %s%s", out, errOut)
	assert.Contains(t, out, "+ arch "+other+" : only @default covers it; its decisions are not compared\n")
	assert.Equal(t, 2, strings.Count(out, "\n"), "the format note and the arch line, no decision differs: %s", out)

	rc, out, _ = runAWF(t, "", "policy", "diff", "@default", js, "--summary")
	assert.Equal(t, 1, rc)
	assert.Contains(t, out, "- arch "+other+" : only @default covers it")
	assert.Contains(t, out, "## @default allows, "+js+" denies: 0\n")
	assert.Contains(t, out, "## "+js+" allows, @default denies: 0\n")

	rc, out, _ = runAWF(t, "", "policy", "diff", "@default", js, "--arch", host)
	assert.Equal(t, 0, rc, out)
}

func TestPolicyImportRefusesBadJSON(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"defaultAction": "SCMP_ACT_ERRNO", "defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}`), 0o600))
	rc, _, errOut := runAWF(t, "", "policy", "import", p)
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, `duplicate key "defaultAction"`)
	rc, _, errOut = runAWF(t, "", "policy", "diff", "@default", p)
	assert.Equal(t, 2, rc)
	assert.Contains(t, errOut, `duplicate key "defaultAction"`)
}

func TestPolicyTableOfDockerProfile(t *testing.T) {
	rc, out, errOut := runAWF(t, "", "policy", "table", dockerDefaultProfile, "--arch", "aarch64")
	require.Equal(t, 0, rc, errOut)
	assert.Contains(t, out, "# default: errno EPERM")
	assert.Regexp(t, `(?m)^aarch64\s+ptrace\s+allow$`, out)
	assert.Regexp(t, `(?m)^aarch64\s+mount\s+errno EPERM$`, out)
	assert.NotRegexp(t, `(?m)^x86_64\s`, out)
}
