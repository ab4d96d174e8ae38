package verify

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
)

// configuredTestLimits are a configuration's limits, unlike the defaults.
func configuredTestLimits() isolate.Limits {
	l := isolate.DefaultLimits()
	l.MemoryBytes, l.Wall, l.CPUMilli = 256<<20, 5*time.Second, 500
	return l
}

// TestConfiguredProbes checks that every config/ probe runs under exactly
// the configured limits, renders them into its script, compiles, and that
// its example passes.
func TestConfiguredProbes(t *testing.T) {
	l := configuredTestLimits()
	ps := ConfiguredProbes(l)
	require.Len(t, ps, 7)
	dir := t.TempDir()
	var paths []string
	seen := map[string]bool{}
	for _, id := range append(RuntimeChecks(), "filter/loaded") {
		seen[id] = true
	}
	for _, p := range Battery() {
		seen[p.ID] = true
	}
	for _, p := range ps {
		t.Run(p.ID, func(t *testing.T) {
			assert.True(t, strings.HasPrefix(p.ID, "config/"))
			assert.False(t, seen[p.ID], "duplicate id")
			assert.Equal(t, l, p.effectiveLimits(), "a configured probe runs under the configuration's limits")
			assert.NotEmpty(t, p.OnFail)
			prm := testParams()
			prm.Limits = p.effectiveLimits()
			b, err := p.render(prm)
			require.NoError(t, err)
			path := filepath.Join(dir, strings.ReplaceAll(p.ID, "/", "_")+".py")
			require.NoError(t, os.WriteFile(path, b, 0o644))
			paths = append(paths, path)
			s, err := proto.ParseSchema([]byte(p.schema))
			require.NoError(t, err)
			if p.example != "" {
				canon, err := s.CheckResult([]byte(p.example))
				require.NoError(t, err)
				st, ev := p.check(exampleCtx(t, p, canon))
				assert.Equal(t, Pass, st, ev)
			}
		})
	}
	rendered, err := os.ReadFile(filepath.Join(dir, "config_memory.py"))
	require.NoError(t, err)
	assert.Contains(t, string(rendered), "2 * 268435456", "the memory bomb is sized from the configured limit")
	args := append([]string{"-I", "-S", "-B", "-c", "import sys, ast\nfor p in sys.argv[1:]:\n    ast.parse(open(p).read(), p)"}, paths...)
	out, err := exec.Command("/usr/bin/python3", args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestCheckCPUQuota covers the CPU verdicts, gVisor's clock included.
func TestCheckCPUQuota(t *testing.T) {
	cases := []struct {
		name, runtime string
		quota         int64
		answer        string
		want          Status
	}{
		{"under the quota", "direct", 500, `{"milli":480,"cpus":2,"threads":1}`, Pass},
		{"busy host", "docker", 500, `{"milli":210,"cpus":2,"threads":1}`, Pass},
		{"over the quota", "direct", 500, `{"milli":700,"cpus":2,"threads":1}`, Fail},
		{"cpuset binds first", "direct", 1000, `{"milli":990,"cpus":1,"threads":2}`, NotApplicable},
		{"more than the cpuset", "direct", 1000, `{"milli":1500,"cpus":1,"threads":2}`, Fail},
		{"quota of two CPUs", "direct", 2000, `{"milli":2300,"cpus":4,"threads":3}`, Fail},
		// The Sentry's clock: 1474 milli on a one-CPU cpuset was measured.
		{"gvisor", "gvisor", 1000, `{"milli":1474,"cpus":1,"threads":2}`, Warn},
	}
	p := ConfiguredProbes(configuredTestLimits())[6]
	require.Equal(t, "config/cpu", p.ID)
	s, err := proto.ParseSchema([]byte(p.schema))
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			canon, err := s.CheckResult([]byte(tc.answer))
			require.NoError(t, err)
			c := exampleCtx(t, p, canon)
			c.runtime = tc.runtime
			c.limits.CPUMilli = tc.quota
			st, ev := checkCPUQuota(c)
			assert.Equal(t, tc.want, st, ev)
		})
	}
	c := exampleCtx(t, p, []byte(`{"milli":1,"cpus":1,"threads":1}`))
	c.out.Kind = isolate.KindTimeout
	st, _ := checkCPUQuota(c)
	assert.Equal(t, Fail, st, "a spinner that does not answer fails")
}
