package direct

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	devcfg "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/policy"
)

// TestRenderingMatchesDescription renders the libcontainer configuration
// and init process that Prepare would hand to libcontainer, and compares
// every control of the drift table with the description: direct declares
// no deviation.
func TestRenderingMatchesDescription(t *testing.T) {
	p, err := policy.Default()
	require.NoError(t, err)
	r := &Runtime{policies: map[*policy.Policy]*configs.Seccomp{}, cg: cgroupSetup{parentRel: "awf-render", cpus: "1"}}
	require.Empty(t, isolate.DeviationsOf(Name), "direct renders the description as it is")
	base := isolate.Template{RunID: "render", Limits: isolate.DefaultLimits(), Policy: p}
	for i, tpl := range isolatetest.Templates("/root-mount", "/seed", base) {
		d, err := r.describe(tpl, isolate.DefaultArgv())
		require.NoError(t, err)
		sc := newScratch("/scratch")
		lower := ""
		if tpl.Repo != "" {
			lower = "/view"
		}
		cfg, err := r.containerConfig("awf-render-"+strconv.Itoa(i), "/root-tree", lower, tpl, d, sc)
		require.NoError(t, err)
		proc := process(d, nil, nil)
		got := isolatetest.Controls{Hostname: cfg.Hostname, Env: proc.Env, Mounts: map[string]isolate.MountFlags{}, MaskedPaths: cfg.MaskPaths}
		for _, m := range cfg.Mounts {
			got.Mounts[m.Destination] = flagsOfConfig(m)
		}
		isolatetest.Compare(t, Name, isolatetest.ControlsOf(d), got)
		assert.Equal(t, d.Process.Args, proc.Args)
		assert.Equal(t, 65534, proc.UID)
		assert.Equal(t, "1", cfg.Cgroups.Resources.CpusetCpus)
		zero := slices.IndexFunc(cfg.Devices, func(dv *devcfg.Device) bool { return dv.Path == "/dev/zero" })
		require.GreaterOrEqual(t, zero, 0)
		assert.Equal(t, "rm", string(cfg.Devices[zero].Permissions), "/dev/zero is read-only")
	}
}

// flagsOfConfig reads a libcontainer mount's flags and tmpfs size (an
// overlay's size is its upper layer's scratch tmpfs, not an option).
func flagsOfConfig(m *configs.Mount) isolate.MountFlags {
	f := isolate.MountFlags{
		ReadOnly: m.Flags&unix.MS_RDONLY != 0, NoExec: m.Flags&unix.MS_NOEXEC != 0,
		NoSuid: m.Flags&unix.MS_NOSUID != 0, NoDev: m.Flags&unix.MS_NODEV != 0,
	}
	for _, o := range strings.Split(m.Data, ",") {
		if v, ok := strings.CutPrefix(o, "size="); ok {
			f.Size, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return f
}
