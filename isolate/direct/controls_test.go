package direct_test

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/staging"
)

// probeScript reports, from inside the sandbox, the state of every control
// it can see. The sandbox has no /proc (see mounts in config.go), so
// capabilities, seccomp and interfaces are read from the host (jobView).
const probeScript = `import os, json, sys
r = {}
r["proc"] = os.listdir("/proc")
r["sys"] = os.listdir("/sys")
r["ids"] = [os.getuid(), os.geteuid(), os.getgid(), os.getegid()]
r["groups"] = os.getgroups()
r["visible"] = [p for p in sys.argv[1:] + ["/etc/shadow", "/root", "/home", "/usr/local", "/var", "/bin/sh",
    "/sys/fs/cgroup", "/usr/lib/python3/dist-packages"] if os.path.lexists(p)]
def write_errnos(paths):
    out = {}
    for p in paths:
        try:
            with open(p, "w") as f:
                f.write("x")
            out[p] = 0
        except OSError as e:
            out[p] = e.errno
    return out
r["readonly"] = write_errnos(("/usr/bin/x", "/etc/x", "/x", "/awf/x", "/awf/query-script.py"))
r["writable"] = write_errnos(("/tmp/x", "/query/x", "/query/repo/x"))
r["hostname"] = os.uname().nodename
r["pid"] = os.getpid()
r["root"] = sorted(os.listdir("/"))
r["cwd"] = os.getcwd()
r["env"] = sorted(os.environ)
json.dump(r, open("/query/out", "w"))
`

// TestControlsFromInside runs the probe under every control and checks each
// one from inside the sandbox.
func TestControlsFromInside(t *testing.T) {
	e := newEnv(t)
	secret := filepath.Join(t.TempDir(), "host-secret")
	require.NoError(t, os.WriteFile(secret, []byte("secret"), 0o644))
	tpl := e.template(t, seedRepo(t))
	script := "import sys\nsys.argv = ['probe', " + fmt.Sprintf("%q", secret) + "]\n" + probeScript
	var job map[string]any
	m := decodeOut(t, e.runWatched(t, tpl, script, &job))

	assert.Equal(t, []any{}, m["proc"], "no /proc: its inode numbers come from a host-wide counter")
	assert.Equal(t, []any{}, m["sys"], "no /sys")
	assert.Equal(t, []string{"lo"}, job["ifaces"], "only the loopback interface")
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		assert.Equal(t, "0000000000000000", job[k], k)
	}
	assert.Equal(t, "1", job["NoNewPrivs"])
	assert.Equal(t, "2", job["Seccomp"], "seccomp filter mode")
	assert.Equal(t, []any{65534.0, 65534.0, 65534.0, 65534.0}, m["ids"])
	assert.Empty(t, m["groups"])
	assert.Empty(t, m["visible"], "host paths visible in the sandbox")
	for p, errno := range m["readonly"].(map[string]any) {
		assert.Equal(t, 30.0, errno, "%s must be read-only (EROFS)", p)
	}
	for p, errno := range m["writable"].(map[string]any) {
		assert.Equal(t, 0.0, errno, "%s must be writable", p)
	}
	assert.Equal(t, "sandbox", m["hostname"])
	assert.Equal(t, 1.0, m["pid"], "the job is init of its own pid namespace")
	assert.Equal(t, []any{"awf", "dev", "etc", "lib", "lib64", "probe", "proc", "query", "sys", "tmp", "usr"}, m["root"])
	assert.Equal(t, isolate.QueryDir, m["cwd"])
	assert.Equal(t, []any{"HOME", "LANG", "PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"}, m["env"])
}

// TestNetworkIsolated proves a host listener on 127.0.0.1 is unreachable:
// under the policy the socket call itself is refused (EPERM: every socket
// draws from the host-wide inode counter), and with the filter removed the
// separate network namespace still refuses the connection.
func TestNetworkIsolated(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf(`import socket, json
try:
    socket.create_connection(("127.0.0.1", %d), timeout=5).close()
    r = "connected"
except OSError as e:
    r = e.errno
json.dump({"connect": r}, open("/query/out", "w"))
`, port)

	m := decodeOut(t, e.run(t, e.template(t, ""), script))
	assert.Equal(t, 1.0, m["connect"], "EPERM: the policy refuses every socket")

	tpl := e.template(t, "")
	tpl.Weaken.NoSeccomp = true
	m = decodeOut(t, e.run(t, tpl, script))
	assert.Equal(t, 111.0, m["connect"], "ECONNREFUSED: the host's loopback is another namespace")
}

// seedRepo creates a small seed as staging leaves one: owned by root, files
// 0444, directories 0555.
func seedRepo(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "seed")
	writeSeed(t, dir, map[string]string{"a.txt": "seed a\n", "sub/b.txt": "seed b\n"})
	return dir
}

// writeSeed creates dir with files (slash paths to contents) and makes it
// read-only the way staging does, checked by staging.VerifyReadOnly: files
// 0444 (0555 for names ending in .sh), directories 0555, all owned by root.
func writeSeed(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, 0, 0); err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return nil
		case d.IsDir():
			return nil // after its contents, below
		}
		if strings.HasSuffix(p, ".sh") {
			return os.Chmod(p, 0o555)
		}
		return os.Chmod(p, 0o444)
	})
	require.NoError(t, err)
	var dirs []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return err
	}))
	for i := len(dirs) - 1; i >= 0; i-- {
		require.NoError(t, os.Chmod(dirs[i], 0o555))
	}
	require.NoError(t, staging.VerifyReadOnly(context.Background(), dir), "the test seed must look staged")
}

// TestWeakeningsRemoveControls checks that each test-only weakening removes
// exactly the control it names, so probes elsewhere can prove they fail.
func TestWeakeningsRemoveControls(t *testing.T) {
	e := newEnv(t)
	script := okScript
	hostNet, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	cases := []struct {
		name  string
		w     isolate.Weakening
		check func(t *testing.T, m map[string]any)
	}{
		{"none", isolate.Weakening{}, func(t *testing.T, m map[string]any) {
			assert.Equal(t, "0000000000000000", m["CapBnd"])
			assert.Equal(t, "2", m["Seccomp"])
			assert.Equal(t, []string{"lo"}, m["ifaces"])
			assert.NotEqual(t, hostNet, m["netns"])
		}},
		{"nil caps", isolate.Weakening{NilCapsConfig: true}, func(t *testing.T, m map[string]any) {
			assert.NotEqual(t, "0000000000000000", m["CapBnd"])
			assert.Equal(t, "2", m["Seccomp"])
		}},
		{"no seccomp", isolate.Weakening{NoSeccomp: true}, func(t *testing.T, m map[string]any) {
			assert.Equal(t, "0", m["Seccomp"])
			assert.Equal(t, "0000000000000000", m["CapBnd"])
		}},
		{"no netns", isolate.Weakening{NoNetNS: true}, func(t *testing.T, m map[string]any) {
			assert.Equal(t, hostNet, m["netns"], "the host's network namespace")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tpl := e.template(t, "")
			tpl.Weaken = c.w
			var job map[string]any
			decodeOut(t, e.runWatched(t, tpl, script, &job))
			c.check(t, job)
		})
	}
	// The pids limit is visible from the host side of the live sandbox.
	for _, w := range []isolate.Weakening{{}, {NoPidsLimit: true}} {
		tpl := e.template(t, "")
		tpl.Weaken = w
		var pidsMax string
		ctx := context.Background()
		o := e.rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{Script: []byte(okScript), OnStart: func(pid int) {
			pidsMax = hostPidsMax(pid)
		}}})
		require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
		if w.NoPidsLimit {
			assert.Equal(t, "max", pidsMax)
		} else {
			assert.Equal(t, fmt.Sprint(tpl.Limits.Pids), pidsMax)
		}
	}
}

// runWatched runs script like run and stores in *job what the host sees of
// the job's process once it runs under every control: its status lines
// (Cap*, NoNewPrivs, Seccomp), its interfaces and its network namespace.
func (e *testEnv) runWatched(t testing.TB, tpl isolate.Template, script string, job *map[string]any) isolate.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := e.rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "inv1", Script: []byte(script), OnStart: func(pid int) {
		*job = jobView(pid)
	}}})
	t.Logf("outcome %s (exit %d %s): %s", o.Kind, o.ExitCode, o.Signal, o.Detail)
	e.assertIdle(t)
	require.NotNil(t, *job, "OnStart must run")
	return o
}

// jobView reads pid's status lines, interfaces and network namespace.
func jobView(pid int) map[string]any {
	m := map[string]any{}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	b, _ = os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
	var ifaces []string
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 {
		// The job is gone already: nothing to list (the caller's
		// assertions then fail on the missing facts, not on a panic).
		lines = nil
	} else {
		lines = lines[2:]
	}
	for _, l := range lines {
		if name, _, ok := strings.Cut(l, ":"); ok {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	sort.Strings(ifaces)
	m["ifaces"] = ifaces
	m["netns"], _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	return m
}

// hostPidsMax reads the pids limit of pid's cgroup from the host.
func hostPidsMax(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return err.Error()
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		dir := ""
		switch {
		case f[1] == "pids":
			dir = filepath.Join("/sys/fs/cgroup/pids", f[2])
		case f[0] == "0" && f[1] == "" && isV2():
			dir = filepath.Join("/sys/fs/cgroup", f[2])
		}
		if dir != "" {
			v, err := os.ReadFile(filepath.Join(dir, "pids.max"))
			if err != nil {
				return err.Error()
			}
			return strings.TrimSpace(string(v))
		}
	}
	return "no pids cgroup"
}

func isV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}
