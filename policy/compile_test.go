package policy

import (
	"encoding/json"
	"testing"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLibcontainerConfig(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	cfg, err := p.Libcontainer()
	require.NoError(t, err)
	a := nativeInfo(t)
	assert.Equal(t, configs.KillProcess, cfg.DefaultAction)
	assert.Nil(t, cfg.DefaultErrnoRet)
	assert.Equal(t, []string{a.container}, cfg.Architectures)
	byName := map[string][]*configs.Syscall{}
	for _, sc := range cfg.Syscalls {
		_, ok := syscallNumber(sc.Name, a)
		assert.True(t, ok, "%s is not a %s syscall", sc.Name, a.name)
		byName[sc.Name] = append(byName[sc.Name], sc)
	}
	require.Len(t, byName["clone"], 1)
	assert.Equal(t, []*configs.Arg{{Index: 0, Value: 0x7e030100, ValueTwo: 0x10100, Op: configs.MaskEqualTo}}, byName["clone"][0].Args)
	assert.Len(t, byName["ioctl"], 6, "one entry per allowed ioctl command")
	require.Len(t, byName["clone3"], 1)
	require.NotNil(t, byName["clone3"][0].ErrnoRet)
	assert.Equal(t, uint(38), *byName["clone3"][0].ErrnoRet)
	assert.Equal(t, configs.KillProcess, byName["mount"][0].Action, "deny rules stay in the config (they place runc's ENOSYS tail)")
}

func TestOCIAndDockerMatchLibcontainer(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	cfg, err := p.Libcontainer()
	require.NoError(t, err)
	oci, err := p.OCI()
	require.NoError(t, err)
	assert.Equal(t, specs.ActKillProcess, oci.DefaultAction)
	require.Len(t, oci.Syscalls, len(cfg.Syscalls))
	acts := map[configs.Action]specs.LinuxSeccompAction{configs.Allow: specs.ActAllow, configs.KillProcess: specs.ActKillProcess, configs.Errno: specs.ActErrno}
	for i, sc := range cfg.Syscalls {
		o := oci.Syscalls[i]
		assert.Equal(t, []string{sc.Name}, o.Names)
		assert.Equal(t, acts[sc.Action], o.Action, sc.Name)
		assert.Equal(t, sc.ErrnoRet, o.ErrnoRet, sc.Name)
		require.Len(t, o.Args, len(sc.Args))
		for j, arg := range sc.Args {
			assert.Equal(t, specs.LinuxSeccompArg{Index: arg.Index, Value: arg.Value, ValueTwo: arg.ValueTwo, Op: ociOps[arg.Op]}, o.Args[j])
		}
	}
	raw, err := p.DockerJSON()
	require.NoError(t, err)
	var prof struct {
		DefaultAction string `json:"defaultAction"`
		ArchMap       []struct {
			Architecture     string   `json:"architecture"`
			SubArchitectures []string `json:"subArchitectures"`
		} `json:"archMap"`
		Syscalls []struct {
			Names    []string          `json:"names"`
			Action   string            `json:"action"`
			Args     []json.RawMessage `json:"args"`
			Comment  string            `json:"comment"`
			Includes *struct {
				Arches []string `json:"arches"`
			} `json:"includes"`
		} `json:"syscalls"`
	}
	require.NoError(t, json.Unmarshal(raw, &prof))
	assert.Equal(t, "SCMP_ACT_KILL_PROCESS", prof.DefaultAction)
	// Docker loads the archMap entry of the host, without compat ABIs.
	var mapped []string
	for _, m := range prof.ArchMap {
		mapped = append(mapped, m.Architecture)
		assert.Empty(t, m.SubArchitectures, m.Architecture)
	}
	assert.Contains(t, mapped, string(nativeInfo(t).oci))
	assert.Len(t, mapped, len(p.Arches))
	// On the host, Docker keeps the entries without includes and those
	// that include the host's arch: exactly libcontainer's rules.
	onHost := 0
	for _, sc := range prof.Syscalls {
		if sc.Includes == nil {
			onHost++
			continue
		}
		for _, a := range sc.Includes.Arches {
			if a == nativeInfo(t).goarch {
				onHost++
			}
		}
	}
	assert.Equal(t, len(cfg.Syscalls), onHost)
	for _, sc := range prof.Syscalls {
		assert.NotEmpty(t, sc.Comment, "%v carries its reason", sc.Names)
		assert.NotNil(t, sc.Args)
	}
}

func TestCompileRefusesUnreviewedArch(t *testing.T) {
	other := "aarch64"
	if n, _ := NativeArch(); n == "aarch64" {
		other = "x86_64"
	}
	p, err := Parse("t.policy", []byte("version 1\ndefault kill : fatal calls\narch "+other+"\ngroup g : g\nallow read : reading\n"))
	require.NoError(t, err)
	_, err = p.Libcontainer()
	assert.ErrorContains(t, err, "not reviewed for this host's architecture")
	_, err = p.OCI()
	assert.Error(t, err)
	_, err = p.DockerJSON()
	assert.Error(t, err)
	// Tables for the listed arch still work (cross-compiled through libseccomp).
	tb, err := p.Table(other)
	require.NoError(t, err)
	assert.NotEmpty(t, tb.Rows)
	_, err = p.BPF(nativeInfo(t).name)
	assert.ErrorContains(t, err, "not in the header")
}

func TestErrnoDefault(t *testing.T) {
	p, err := Parse("t.policy", []byte("version 1\ndefault errno EPERM : learn mode\narch x86_64\ngroup g : g\nallow read : reading\nkill ptrace : never\n"))
	require.NoError(t, err)
	tb, err := p.Table("x86_64")
	require.NoError(t, err)
	assert.Equal(t, "errno EPERM", tb.Default)
	for _, r := range tb.Rows {
		switch r.Syscall {
		case "read":
			assert.Equal(t, "allow", r.Action)
		case "ptrace":
			assert.Equal(t, "kill", r.Action)
		}
	}
	cfg := p.libcontainerFor(mustArch(t, "x86_64"))
	assert.Equal(t, configs.Errno, cfg.DefaultAction)
	require.NotNil(t, cfg.DefaultErrnoRet)
	assert.Equal(t, uint(1), *cfg.DefaultErrnoRet)
}
