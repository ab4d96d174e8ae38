package isolatetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// behaviourScript reads, from inside a sandbox, the controls of the drift
// table: hostname, environment, and for each mount its statvfs flags and
// size, whether it takes a write, and whether a copied interpreter runs.
const behaviourScript = `import json, os, shutil, sys
def flags(d):
    try:
        s = os.statvfs(d)
    except OSError as e:
        return {"err": e.errno}
    return {"ro": bool(s.f_flag & 1), "nosuid": bool(s.f_flag & 2), "nodev": bool(s.f_flag & 4),
            "noexec": bool(s.f_flag & 8), "size": s.f_blocks * s.f_frsize}
def write(d):
    try:
        with open(os.path.join(d, "awf-write-probe"), "w") as f:
            f.write("x")
        return "ok"
    except OSError as e:
        return "errno:%d" % e.errno
res = {"hostname": os.uname().nodename, "env": sorted("%s=%s" % kv for kv in os.environ.items()), "mounts": {}}
for d in __DSTS__:
    res["mounts"][d] = flags(d)
    res["mounts"][d]["write"] = write(d)
res["root_ro"] = flags("/").get("ro", False)
def answer():
    with open("/query/out", "w") as f:
        json.dump(res, f)
# Executing a copy of the interpreter from each writable mount: a success
# replaces this process, whose successor records it; a refusal continues.
for d in __WRITABLE__:
    dst = os.path.join(d, "awf-exec-probe")
    try:
        shutil.copyfile(sys.executable, dst)
        os.chmod(dst, 0o755)
    except OSError as e:
        res["mounts"][d]["exec"] = "copy:%d" % e.errno
        continue
    res["mounts"][d]["exec"] = "ok"
    code = "import json; json.dump(" + json.dumps(res) + ", open('/query/out', 'w'))"
    answer()
    try:
        os.execv(dst, [dst, "-I", "-S", "-c", code])
    except OSError as e:
        res["mounts"][d]["exec"] = "errno:%d" % e.errno
answer()
`

// observed is what behaviourScript answers.
type observed struct {
	Hostname string   `json:"hostname"`
	Env      []string `json:"env"`
	RootRO   bool     `json:"root_ro"`
	Mounts   map[string]struct {
		Err    int    `json:"err"`
		RO     bool   `json:"ro"`
		NoSuid bool   `json:"nosuid"`
		NoDev  bool   `json:"nodev"`
		NoExec bool   `json:"noexec"`
		Size   int64  `json:"size"`
		Write  string `json:"write"`
		Exec   string `json:"exec"`
	} `json:"mounts"`
}

// Behaviour runs one job on backend through run and checks, from inside
// the sandbox, the controls of the description of tpl: the hostname, the
// whole environment, every mount's read-only, nosuid, nodev and noexec
// flags and size (where statvfs shows them), which mounts take writes, and
// that nothing copied into a writable mount runs (EACCES). Only the declared deviations are allowed.
func Behaviour(t *testing.T, backend string, tpl isolate.Template, run func(tpl isolate.Template, script string) isolate.Outcome) {
	t.Helper()
	d, err := isolate.Describe(tpl, isolate.Job{}, isolate.HostConfig{})
	require.NoError(t, err)
	want := ControlsOf(d)
	var dsts, writable []string
	for _, m := range d.Mounts {
		dsts = append(dsts, m.Destination)
		if !isolate.FlagsOf(m).ReadOnly && m.Destination != isolate.DevDir {
			writable = append(writable, m.Destination)
		}
	}
	pyList := func(ss []string) string { b, _ := json.Marshal(ss); return string(b) }
	o := run(tpl, strings.NewReplacer("__DSTS__", pyList(dsts), "__WRITABLE__", pyList(writable)).Replace(behaviourScript))
	require.Equal(t, isolate.KindOK, o.Kind, "%s: %s\nstderr: %s", backend, o.Detail, o.Stderr)
	var got observed
	require.NoError(t, json.Unmarshal(o.Output, &got), "%s: %s", backend, o.Output)
	assert.Equal(t, want.Hostname, got.Hostname, "%s: hostname", backend)
	env := slices.Clone(want.Env)
	if isolate.Deviates(backend, isolate.FieldEnv) {
		env = append(env, "HOSTNAME="+want.Hostname) // docker's
	}
	slices.Sort(env)
	assert.Equal(t, env, got.Env, "%s: environment", backend)
	// The Sentry's statvfs reports no mount flags (not even the read-only
	// root's): there, the flags are proven by what the mounts do.
	flagsShown := got.RootRO
	for _, dst := range dsts {
		w, g := want.Mounts[dst], got.Mounts[dst]
		if dst == isolate.DevDir && (isolate.Deviates(backend, isolate.FieldDev) || isolate.Deviates(backend, isolate.FieldDevices)) {
			continue // the runtime's own /dev
		}
		if !assert.Zero(t, g.Err, "%s: statvfs %s", backend, dst) {
			continue
		}
		if flagsShown {
			assert.Equal(t, w.ReadOnly, g.RO, "%s: %s read-only", backend, dst)
			assert.True(t, !w.NoExec || g.NoExec, "%s: %s must be noexec", backend, dst)
			assert.True(t, !w.NoSuid || g.NoSuid, "%s: %s must be nosuid", backend, dst)
			assert.True(t, !w.NoDev || g.NoDev, "%s: %s must be nodev", backend, dst)
		}
		// A size shows the mount's own filesystem: /awf's (a tmpfs of
		// isolate.ScriptDirBytes) is not the host disk's, whose free
		// blocks and inodes every host write moves.
		if w.Size > 0 {
			assert.Equal(t, w.Size, g.Size, "%s: size of %s", backend, dst)
		}
		if w.ReadOnly {
			// EROFS, or EACCES where the permission check comes first.
			assert.Contains(t, []string{"errno:30", "errno:13"}, g.Write, "%s: %s must refuse writes", backend, dst)
		} else if dst != isolate.DevDir {
			assert.Equal(t, "ok", g.Write, "%s: %s must be writable", backend, dst)
		}
		if slices.Contains(writable, dst) {
			assert.Equal(t, "errno:13", g.Exec, "%s: a binary copied into %s must not run (EACCES)", backend, dst)
		}
	}
}
