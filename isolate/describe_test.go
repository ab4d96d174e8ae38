package isolate_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/hostview"
	"github.com/awf-project/awf/policy"
)

func describe(t *testing.T, tpl isolate.Template) *specs.Spec {
	t.Helper()
	d, err := isolate.Describe(tpl, isolate.Job{}, isolate.HostConfig{SandboxCPUs: "1"})
	require.NoError(t, err)
	return d
}

func template(t *testing.T) isolate.Template {
	p, err := policy.Default()
	require.NoError(t, err)
	return isolate.Template{RootFS: "/root", Repo: "/seed", Limits: isolate.DefaultLimits(), Policy: p}
}

// TestDescribeFailsClosed: no policy, no sandbox.
func TestDescribeFailsClosed(t *testing.T) {
	tpl := template(t)
	tpl.Policy = nil
	_, err := isolate.Describe(tpl, isolate.Job{}, isolate.HostConfig{})
	require.Error(t, err)
	tpl = template(t)
	tpl.Limits.Pids = 0
	_, err = isolate.Describe(tpl, isolate.Job{}, isolate.HostConfig{})
	require.Error(t, err)
}

// TestEveryWritableMountIsNoexec: every mount but the read-only root is
// noexec and nosuid, and nodev but /dev; the script directory is read-only.
func TestEveryWritableMountIsNoexec(t *testing.T) {
	d := describe(t, template(t))
	dsts := []string{}
	for _, m := range d.Mounts {
		f := isolate.FlagsOf(m)
		dsts = append(dsts, m.Destination)
		assert.True(t, f.NoExec && f.NoSuid, "%s: %s", m.Destination, f)
		assert.True(t, f.NoDev || m.Destination == isolate.DevDir, "%s: %s", m.Destination, f)
	}
	assert.Equal(t, []string{"/dev", "/dev/shm", "/tmp", "/query", "/query/repo", "/awf"}, dsts)
	assert.True(t, isolate.FlagsOf(d.Mounts[5]).ReadOnly)
	assert.True(t, d.Root.Readonly)
	assert.NotContains(t, dsts, "/proc", "no procfs: its inode numbers are a host-wide counter")
	assert.Equal(t, hostview.SandboxMaskPaths(), d.Linux.MaskedPaths)
	assert.Equal(t, isolate.Hostname, d.Hostname)
	assert.Equal(t, uint32(65534), d.Process.User.UID)
	assert.Equal(t, "1", d.Linux.Resources.CPU.Cpus)
	assert.Empty(t, d.Process.Capabilities.Bounding, "no capability, the bounding set cleared")
	assert.NotNil(t, d.Process.Capabilities.Bounding)
	assert.True(t, d.Process.NoNewPrivileges)
}

// TestDevShmRule: /dev/shm is 8 MiB, or the /tmp limit when smaller.
func TestDevShmRule(t *testing.T) {
	l := isolate.DefaultLimits()
	assert.Equal(t, int64(8<<20), isolate.DevShmBytes(l))
	l.TmpTmpfsBytes = 2 << 20
	assert.Equal(t, int64(2<<20), isolate.DevShmBytes(l))
}

// TestDescribeIsFresh: a caller may change what it gets.
func TestDescribeIsFresh(t *testing.T) {
	a := describe(t, template(t))
	a.Process.Env[0] = "X=1"
	a.Linux.MaskedPaths[0] = "/x"
	b := describe(t, template(t))
	assert.Equal(t, "PATH=/usr/bin", b.Process.Env[0])
	assert.NotEqual(t, "/x", b.Linux.MaskedPaths[0])
	dv := isolate.Deviations()
	dv[0].Backend = "x"
	assert.NotEqual(t, "x", isolate.Deviations()[0].Backend)
}

// TestDeviationsDocumented keeps docs/runtimes.md's table of deviations
// equal to isolate.Deviations.
func TestDeviationsDocumented(t *testing.T) {
	raw, err := os.ReadFile("../docs/runtimes.md")
	require.NoError(t, err)
	const begin, end = "<!-- deviations:begin -->\n", "<!-- deviations:end -->"
	doc := string(raw)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	require.True(t, i >= 0 && j > i, "docs/runtimes.md has no deviations table between %q and %q", begin, end)
	assert.Equal(t, isolate.DeviationsMarkdown(), doc[i+len(begin):j], "docs/runtimes.md's deviations table differs from isolate.Deviations(); paste DeviationsMarkdown()")
	for _, d := range isolate.Deviations() {
		assert.True(t, slices.Contains([]string{"gvisor", "docker"}, d.Backend), d.Backend)
		assert.NotEmpty(t, d.Instead)
		assert.NotEmpty(t, d.Why)
	}
}
