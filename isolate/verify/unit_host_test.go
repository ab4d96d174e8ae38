package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/cgroupfs"
	"github.com/awf-project/awf/isolate/sbx"
)

func TestCheckKernel(t *testing.T) {
	cases := []struct {
		rel  string
		want Status
	}{
		{"6.18.44-fc-v769", Pass},
		{"5.15.0-91-generic", Pass},
		{"5.10.0-28-amd64", Warn},
		{"5.4.0-1", Fail},
		{"4.19.0", Fail},
		{"garbage", Fail},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, checkKernel(tc.rel, "x86_64").Status, tc.rel)
	}
}

func TestClassifyCgroup(t *testing.T) {
	all := []string{"cpu", "cpuset", "io", "memory", "pids"}
	cases := []struct {
		name     string
		f        cgroupFacts
		mode     string
		status   Status
		evidence string
	}{
		// The mode is the runtimes' (cgroupfs.Mode): v2-delegated only where
		// they place their cgroups below a delegated subtree.
		{"v2 inside a delegated unit", cgroupFacts{RootMagic: unix.CGROUP2_SUPER_MAGIC, V2Controllers: all, Base: "system.slice/awf.service", Parent: "awf"}, cgroupfs.ModeV2Delegated, Pass, `its cgroups go below "/system.slice/awf.service/awf"`},
		{"v2 inside a delegated unit lacking a controller", cgroupFacts{RootMagic: unix.CGROUP2_SUPER_MAGIC, V2Controllers: []string{"memory", "pids"}, Base: "awf.service", Parent: "awf"}, cgroupfs.ModeV2Delegated, Fail, "cpu"},
		{"v2 with a delegated parent", cgroupFacts{RootMagic: unix.CGROUP2_SUPER_MAGIC, V2Controllers: all, Parent: "awf", ParentExists: true, ParentSubtree: []string{"cpu", "memory", "pids"}}, cgroupfs.ModeV2, Pass, "delegated parent"},
		{"v2 with systemd's delegation mark", cgroupFacts{RootMagic: unix.CGROUP2_SUPER_MAGIC, V2Controllers: all, Parent: "awf", Delegated: true}, cgroupfs.ModeV2, Pass, "delegated parent"},
		{"v2 without a parent", cgroupFacts{RootMagic: unix.CGROUP2_SUPER_MAGIC, V2Controllers: all, Parent: "awf"}, cgroupfs.ModeV2, Warn, "not delegated"},
		{"v2 parent without controllers", cgroupFacts{RootMagic: unix.CGROUP2_SUPER_MAGIC, V2Controllers: all, Parent: "awf", ParentExists: true, ParentSubtree: []string{"cpu"}}, cgroupfs.ModeV2, Warn, "does not delegate"},
		{"hybrid is a warning with its reason", cgroupFacts{RootMagic: unix.TMPFS_MAGIC, UnifiedMagic: unix.CGROUP2_SUPER_MAGIC, V1Controllers: []string{"cpu", "memory", "pids"}}, cgroupfs.ModeHybrid, Warn, "deprecated v1 path"},
		{"v1 is a warning with its reason", cgroupFacts{RootMagic: unix.TMPFS_MAGIC, V1Controllers: []string{"cpu", "memory", "pids"}}, cgroupfs.ModeV1, Warn, "v1 only"},
		{"a missing controller fails", cgroupFacts{RootMagic: unix.CGROUP2_SUPER_MAGIC, V2Controllers: []string{"cpu", "memory"}}, cgroupfs.ModeV2, Fail, "pids"},
		{"no cgroup mount fails", cgroupFacts{RootMagic: 0x1234}, "none", Fail, "not a cgroup mount"},
		{"hybrid without favordynmods says how to remove the attach's wait", cgroupFacts{RootMagic: unix.TMPFS_MAGIC, UnifiedMagic: unix.CGROUP2_SUPER_MAGIC, V1Controllers: []string{"cpu", "memory", "pids"}, Cgroup2: &cgroupfs.Cgroup2Mount{Point: "/sys/fs/cgroup/unified"}}, cgroupfs.ModeHybrid, Warn, "`mount -o remount,favordynmods /sys/fs/cgroup/unified` removes the wait"},
		{"v2 with favordynmods says the attach does not wait", cgroupFacts{RootMagic: unix.CGROUP2_SUPER_MAGIC, V2Controllers: all, Parent: "awf", Delegated: true, Cgroup2: &cgroupfs.Cgroup2Mount{Point: "/sys/fs/cgroup", FavorDynmods: true}}, cgroupfs.ModeV2, Pass, "does not wait for an RCU grace period"},
		{"no cgroup2 mount: the wait is said, without a remedy", cgroupFacts{RootMagic: unix.TMPFS_MAGIC, V1Controllers: []string{"cpu", "memory", "pids"}}, cgroupfs.ModeV1, Warn, "no cgroup2 mount to set favordynmods on"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, mode := classifyCgroup(tc.f)
			assert.Equal(t, tc.mode, mode)
			assert.Equal(t, tc.status, r.Status, r.Evidence)
			assert.Contains(t, r.Evidence, tc.evidence)
		})
	}
}

func TestCheckSeccompAndOpenat2(t *testing.T) {
	full := []string{"kill_process", "kill_thread", "trap", "errno", "user_notif", "trace", "log", "allow"}
	assert.Equal(t, Pass, checkSeccomp(full, "0").Status)
	assert.Equal(t, Warn, checkSeccomp(full, "2").Status)
	assert.Equal(t, Fail, checkSeccomp([]string{"allow", "errno"}, "0").Status)
	assert.Equal(t, Fail, checkSeccomp(full, "").Status)
	assert.Equal(t, Pass, checkOpenat2(nil).Status)
	assert.Equal(t, Fail, checkOpenat2(unix.ENOSYS).Status)
	require.NoError(t, tryOpenat2(), "this host supports openat2")
}

func TestCheckUsernsAndOverlay(t *testing.T) {
	on := usernsFacts{MaxUserNS: "1000"}
	off := usernsFacts{MaxUserNS: "1000", UnprivClone: "0"}
	assert.True(t, on.enabled())
	assert.False(t, off.enabled())
	assert.False(t, usernsFacts{MaxUserNS: "0"}.enabled())
	assert.Contains(t, checkUserns(on).Evidence, "enabled")
	assert.Contains(t, checkUserns(off).Evidence, "disabled")
	assert.Equal(t, Warn, checkOverlay(overlayFacts{}).Status)
	assert.Equal(t, Pass, checkOverlay(overlayFacts{Available: true, Params: map[string]string{"index": "N"}}).Status)
}

func TestCredentialNames(t *testing.T) {
	env := []string{"PATH=/bin", "GITHUB_TOKEN=x", "MY_API_KEY=y", "SSH_AUTH_SOCK=/s", "HOME=/root", "db_password=z", "GITHUB_TOKEN=dup"}
	assert.Equal(t, []string{"GITHUB_TOKEN", "MY_API_KEY", "SSH_AUTH_SOCK", "db_password"}, credentialNames(env))
	r := checkTokenEnv(env)
	assert.Equal(t, Warn, r.Status)
	assert.NotContains(t, r.Evidence, "=x", "values are never reported")
	assert.Equal(t, Pass, checkTokenEnv([]string{"PATH=/bin"}).Status)
}

func TestCheckPrivateRoot(t *testing.T) {
	root := func(mode os.FileMode) ancestorInfo { return ancestorInfo{Path: "/", Mode: mode} }
	cases := []struct {
		name string
		anc  []ancestorInfo
		want Status
	}{
		{"root-owned 0700 root", []ancestorInfo{root(0o755), {Path: "/var", Mode: 0o755}, {Path: "/var/awf", Mode: 0o700}}, Pass},
		{"not created yet", []ancestorInfo{root(0o755), {Path: "/var", Mode: 0o755}}, Pass},
		{"world-writable parent", []ancestorInfo{root(0o755), {Path: "/var", Mode: 0o777}}, Fail},
		{"group-writable parent", []ancestorInfo{root(0o755), {Path: "/var", Mode: 0o775}}, Fail},
		{"sticky world-writable parent", []ancestorInfo{root(0o755), {Path: "/var", Mode: 0o777 | os.ModeSticky}}, Warn},
		{"parent owned by a user", []ancestorInfo{root(0o755), {Path: "/var", Mode: 0o755, UID: 1000}}, Fail},
		{"symlinked parent", []ancestorInfo{root(0o755), {Path: "/var", Mode: os.ModeSymlink | 0o777}}, Fail},
		{"root too open", []ancestorInfo{root(0o755), {Path: "/var", Mode: 0o755}, {Path: "/var/awf", Mode: 0o755}}, Fail},
		{"stat error", []ancestorInfo{{Path: "/", Err: errors.New("boom")}}, Fail},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := checkPrivateRoot("/var/awf", tc.anc)
			assert.Equal(t, tc.want, r.Status, r.Evidence)
		})
	}
	// gatherAncestors on a real tree.
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700))
	anc := gatherAncestors(filepath.Join(dir, "missing", "deeper"))
	require.NotEmpty(t, anc)
	assert.Equal(t, "/", anc[0].Path)
	assert.Equal(t, dir, anc[len(anc)-1].Path)
}

// fakeEngine serves GET /info, at any API version, on a Unix socket.
func fakeEngine(t *testing.T, runtimes map[string]any) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/info") {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ServerVersion": "99.0.0", "Runtimes": runtimes})
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

func TestDockerChecks(t *testing.T) {
	ctx := context.Background()
	sock := fakeEngine(t, map[string]any{"runc": map[string]any{}, "runsc": map[string]any{}})
	r := checkDocker(ctx, sock)
	assert.Equal(t, Pass, r.Status, r.Evidence)
	assert.Contains(t, r.Evidence, "runsc registered")
	assert.Contains(t, r.Evidence, "Docker Engine 99.0.0 at "+sock)
	missing := filepath.Join(t.TempDir(), "none.sock")
	assert.Equal(t, Warn, checkDocker(ctx, missing).Status)

	h := checkEngineSockets(ctx, []string{missing, sock})
	assert.Equal(t, Warn, h.Status)
	assert.Contains(t, h.Evidence, sock)
	assert.Equal(t, Pass, checkEngineSockets(ctx, []string{missing}).Status)

	c := engineSocketCandidates("/x/docker.sock", []string{"DOCKER_HOST=unix:///y/d.sock", "DOCKER_HOST=tcp://1.2.3.4"})
	assert.Contains(t, c, "/x/docker.sock")
	assert.Contains(t, c, "/y/d.sock")
	assert.Contains(t, c, "/var/run/docker.sock")
}

func TestCheckHostRuns(t *testing.T) {
	facts, rs := CheckHost(context.Background(), HostOptions{PrivateRoot: "/var/lib/awf-verify-test-absent", Environ: []string{}})
	assert.NotEmpty(t, facts.Kernel)
	assert.NotEmpty(t, facts.CgroupMode)
	ids := map[string]bool{}
	for _, r := range rs {
		ids[r.ID] = true
		assert.Contains(t, []Status{Pass, Warn, Fail}, r.Status, r.ID)
		assert.NotEmpty(t, r.Evidence, r.ID)
	}
	for _, id := range []string{"host/kernel", "host/cgroup", "host/overlayfs", "host/seccomp", "host/openat2", "host/userns", "host/runsc", "host/docker", "hazard/docker-sock", "hazard/token-env", "hazard/private-root"} {
		assert.True(t, ids[id], id)
	}
}

func TestReportExitAndRendering(t *testing.T) {
	mk := func(checks []Status, rts ...RuntimeReport) *Report {
		r := &Report{Version: ReportVersion}
		for i, s := range checks {
			r.Checks = append(r.Checks, Result{ID: "host/" + string(rune('a'+i)), Status: s})
		}
		r.Runtimes = rts
		r.computeOK()
		return r
	}
	pass := RuntimeReport{Name: "direct", Status: Pass}
	fail := RuntimeReport{Name: "direct", Status: Fail}
	blocked := RuntimeReport{Name: "gvisor", Status: Blocked, Reason: "runsc not found"}
	blockedReq := RuntimeReport{Name: "gvisor", Status: Blocked, Required: true, Reason: "runsc not found"}
	assert.Equal(t, 0, mk([]Status{Pass, Warn}, pass).ExitCode())
	assert.Equal(t, 1, mk([]Status{Fail}, pass).ExitCode())
	assert.Equal(t, 1, mk(nil, fail).ExitCode())
	assert.Equal(t, 0, mk(nil, pass, blocked).ExitCode(), "BLOCKED that is not required does not fail")
	assert.Equal(t, 1, mk(nil, pass, blockedReq).ExitCode(), "--require turns BLOCKED into failure")

	rr := RuntimeReport{Name: "direct", Results: []Result{{ID: "a", Status: Pass}, {ID: "b", Status: Warn}, {ID: "c", Status: NotApplicable}}}
	rr.finish(0)
	assert.Equal(t, Warn, rr.Status)
	assert.Equal(t, 1, rr.Summary[NotApplicable])

	rep := mk([]Status{Warn}, rr, blocked)
	var txt, js bytes.Buffer
	require.NoError(t, rep.WriteText(&txt))
	assert.Contains(t, txt.String(), "runtime gvisor: BLOCKED (not required")
	assert.Contains(t, txt.String(), "verdict: PASS")
	require.NoError(t, rep.WriteJSON(&js))
	var back map[string]any
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	assert.EqualValues(t, ReportVersion, back["version"])
	assert.Equal(t, true, back["ok"])
}

func TestBlockedReportListsEveryProbe(t *testing.T) {
	rr := blockedReport("sbx", "no sbx", Battery())
	assert.Equal(t, Blocked, rr.Status)
	assert.Len(t, rr.Results, len(Battery())+len(RuntimeChecks()))
	assert.Equal(t, "no sbx", rr.Reason)
	for _, r := range rr.Results {
		assert.Equal(t, Blocked, r.Status)
	}
}

// TestSbxControlsAreStructured: the sbx runtime's report carries the seed's
// structured list, one object per control with exactly control, required,
// supported and evidence, and its reason names exactly the required
// controls that list finds unsupported: one list, not two.
func TestSbxControlsAreStructured(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Runtimes: []string{"sbx"}, RootFS: testRootFS, Probes: []string{"ctl/python"}, Environ: []string{}})
	require.NoError(t, err)
	rr := rep.Runtimes[0]
	require.Equal(t, Blocked, rr.Status)
	require.Len(t, rr.Controls, len(sbx.Controls()))
	var missing []string
	for i, c := range rr.Controls {
		assert.Equal(t, sbx.Controls()[i].Name, c.Control)
		assert.True(t, c.Required, c.Control)
		assert.NotEmpty(t, c.Evidence, c.Control)
		if !c.Supported {
			missing = append(missing, c.Control)
		}
	}
	require.NotEmpty(t, missing)
	assert.Equal(t, "missing controls: "+strings.Join(missing, ", "), rr.Reason)
	assert.NotContains(t, rr.Reason, "{", "no JSON inside the reason")

	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	require.NoError(t, validateReport(t, js.Bytes()))
	var back struct {
		Runtimes []struct {
			Controls []map[string]any `json:"controls"`
		} `json:"runtimes"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	for _, c := range back.Runtimes[0].Controls {
		keys := make([]string, 0, len(c))
		for k := range c {
			keys = append(keys, k)
		}
		assert.ElementsMatch(t, []string{"control", "required", "supported", "evidence"}, keys)
	}

	// A probe that finds every control supported still leaves the runtime
	// BLOCKED on the audited list.
	tr := traits{missing: []string{"x"}, controls: func(context.Context) []sbx.ControlStatus {
		return []sbx.ControlStatus{{Control: "a", Required: true, Supported: true, Evidence: "e"}}
	}}
	reason, cs := tr.blocking(ctx)
	assert.Equal(t, "missing controls: x", reason)
	assert.Len(t, cs, 1)
}
