// Package isolatetest is the conformance suite every sandbox backend runs:
// a rendering test that compares the sandbox a backend would build with
// isolate.Describe's description, allowing only isolate.Deviations, and a
// behavioural suite that reads the same controls from inside a sandbox.
// It is imported by tests only.
package isolatetest

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// Controls are the controls of a sandbox that have drifted between backends
// before: each backend's rendering test extracts them from what it would
// hand to its runtime (libcontainer's configuration, the bundle, the
// Engine's create request) and compares them with the description's.
type Controls struct {
	Hostname string
	Env      []string
	// Mounts maps each destination to its effective flags.
	Mounts map[string]isolate.MountFlags
	// MaskedPaths are the paths masked inside the sandbox.
	MaskedPaths []string
}

// ControlsOf reads the controls of a description.
func ControlsOf(d *specs.Spec) Controls {
	c := Controls{Hostname: d.Hostname, Env: slices.Clone(d.Process.Env), Mounts: map[string]isolate.MountFlags{}}
	for _, m := range d.Mounts {
		c.Mounts[m.Destination] = isolate.FlagsOf(m)
	}
	if d.Linux != nil {
		c.MaskedPaths = slices.Clone(d.Linux.MaskedPaths)
	}
	return c
}

// Compare checks that got, backend's rendering, has every control of want,
// the description's: the same hostname and environment, every mount with
// at least its flags and the same size where the rendering bounds one, and
// the same masked paths, unless backend declares the field in
// isolate.Deviations. A declared deviation must be real: the test fails if
// the backend renders the field as described after all.
func Compare(t testing.TB, backend string, want, got Controls) {
	t.Helper()
	assert.Equal(t, want.Hostname, got.Hostname, "%s: hostname", backend)
	assert.Equal(t, want.Env, got.Env, "%s: environment", backend)
	for dst, w := range want.Mounts {
		g, ok := got.Mounts[dst]
		if dst == isolate.DevDir && isolate.Deviates(backend, isolate.FieldDev) {
			assert.False(t, ok && g.NoExec, "%s: declares a deviation of /dev that it does not have", backend)
			continue
		}
		if !assert.True(t, ok, "%s: no mount at %s", backend, dst) {
			continue
		}
		assert.True(t, !w.ReadOnly || g.ReadOnly, "%s: %s must be read-only (got %s)", backend, dst, g)
		assert.True(t, !w.NoExec || g.NoExec, "%s: %s must be noexec (got %s)", backend, dst, g)
		assert.True(t, !w.NoSuid || g.NoSuid, "%s: %s must be nosuid (got %s)", backend, dst, g)
		assert.True(t, !w.NoDev || g.NoDev, "%s: %s must be nodev (got %s)", backend, dst, g)
		if w.Size > 0 && g.Size > 0 {
			assert.Equal(t, w.Size, g.Size, "%s: size of %s", backend, dst)
		}
	}
	if isolate.Deviates(backend, isolate.FieldMaskedPaths) {
		assert.Empty(t, got.MaskedPaths, "%s: declares that it masks nothing, yet renders masks", backend)
	} else {
		assert.Equal(t, want.MaskedPaths, got.MaskedPaths, "%s: masked paths", backend)
	}
}

// Templates are the templates every rendering test renders: with and
// without a repository view, default and small limits (so that a size rule
// such as /dev/shm's minimum shows).
func Templates(rootfs, repo string, p isolate.Template) []isolate.Template {
	small := p
	small.Limits.TmpTmpfsBytes = 4 << 20
	small.Limits.QueryTmpfsBytes = 2 << 20
	small.Repo = repo
	noRepo := p
	noRepo.Repo = ""
	withRepo := p
	withRepo.Repo = repo
	out := []isolate.Template{noRepo, withRepo, small}
	for i := range out {
		out[i].RootFS = rootfs
	}
	return out
}

// RenderCase is one template of the rendering tests with its description.
type RenderCase struct {
	Template isolate.Template
	Desc     *specs.Spec
}

// RenderCases are Templates(rootfs, repo, ...) over the default policy,
// each with its description on a host whose sandbox CPUs are "1": the
// cases that the docker and gvisor rendering tests render and compare, so
// that both compare the same descriptions.
func RenderCases(t testing.TB, rootfs, repo string) []RenderCase {
	t.Helper()
	base := isolate.Template{RunID: "render", Limits: isolate.DefaultLimits(), Policy: Policy(t)}
	var out []RenderCase
	for _, tpl := range Templates(rootfs, repo, base) {
		d, err := isolate.Describe(tpl, isolate.Job{}, isolate.HostConfig{SandboxCPUs: "1"})
		require.NoError(t, err)
		out = append(out, RenderCase{Template: tpl, Desc: d})
	}
	return out
}
