package enclave

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// probeBin is cmd/enclave-probe, built once by TestMain.
var probeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "enclave-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The probe runs as uid 65534: it must be able to reach its binary.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	probeBin = filepath.Join(dir, "enclave-probe")
	// AWF_ENCLAVE_PROBE names a prebuilt probe, for a test binary run where
	// there is no toolchain (the cgroup v2 VM).
	if pre := os.Getenv("AWF_ENCLAVE_PROBE"); pre != "" {
		b, err := os.ReadFile(pre)
		if err == nil {
			err = os.WriteFile(probeBin, b, 0o755)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "enclave-probe:", err)
			os.Exit(1)
		}
	} else {
		cmd := exec.Command("go", "build", "-o", probeBin, "github.com/awf-project/awf/cmd/enclave-probe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build enclave-probe: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	if left := Leftovers(""); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "enclave resources left after the tests: %v\n", left)
		code = 1
	}
	os.Exit(code)
}

// newEnclave builds an enclave for one test and removes it at the end,
// failing the test if anything of it is left.
func newEnclave(t *testing.T, w Weakening) *Enclave {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := fmt.Sprintf("test%d", os.Getpid())
	e, err := New(ctx, Options{RunID: run, Name: fmt.Sprintf("n%d", time.Now().UnixNano()%1e9), Weaken: w})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, e.Close())
		assert.Empty(t, Resources(run), "enclave resources left after Close")
	})
	return e
}

// probeChild runs cmd/enclave-probe against w as uid 65534 with no
// capabilities, in e's namespace and, from birth, in e's cgroup.
func probeChild(t *testing.T, e *Enclave, w *World) map[string]string {
	t.Helper()
	dir, err := os.MkdirTemp(filepath.Dir(probeBin), "out-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	require.NoError(t, os.Chmod(dir, 0o777))
	out := filepath.Join(dir, "out.json")
	spec, err := json.Marshal(w.Spec(out))
	require.NoError(t, err)
	cg, err := e.OwnCgroup()
	require.NoError(t, err)
	cgfd, err := unix.Open(cg, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(cgfd)
	var combined []byte
	err = InNetNS(e.NetNS(), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, probeBin, string(spec))
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential:  &syscall.Credential{Uid: 65534, Gid: 65534},
			UseCgroupFD: true, CgroupFD: cgfd,
		}
		var err error
		combined, err = cmd.CombinedOutput()
		return err
	})
	require.NoError(t, err, "probe: %s", combined)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	res := map[string]string{}
	require.NoError(t, json.Unmarshal(b, &res))
	return res
}

// TestEachLayerAloneAllowsOnlyTheProxy runs the probe battery with every
// layer, then with each network layer alone: the namespace alone (no
// eBPF), the cgroup hooks alone and the link filter alone (each in a
// namespace that leads beyond the proxy, to decoys on the proxy end's
// other ports and on a neighbour, over IPv4 and IPv6). Each must leave the
// proxy reachable and nothing else.
func TestEachLayerAloneAllowsOnlyTheProxy(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Weakening
	}{
		{"all layers", Weakening{}},
		{"namespace alone", Weakening{NoCgroupBPF: true, NoLinkBPF: true}},
		{"cgroup hooks alone", Weakening{Routed: true, NoLinkBPF: true}},
		{"link filter alone", Weakening{Routed: true, NoCgroupBPF: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnclave(t, tc.w)
			w, err := NewWorld(e, WorldOptions{})
			require.NoError(t, err)
			defer w.Close()
			res := probeChild(t, e, w)
			fs := w.Check(res, CheckOptions{})
			assert.Empty(t, withoutVsock(Failed(fs)), "results: %v", res)
			assert.Len(t, fs, len(w.Targets()))
		})
	}
}

// TestRoutedWithoutFiltersReachesDecoys is the positive control: with the
// namespace leading beyond the proxy and no eBPF, the same probes reach the
// decoys, so the passes above are not vacuous.
func TestRoutedWithoutFiltersReachesDecoys(t *testing.T) {
	e := newEnclave(t, Weakening{Routed: true, NoCgroupBPF: true, NoLinkBPF: true})
	w, err := NewWorld(e, WorldOptions{})
	require.NoError(t, err)
	defer w.Close()
	res := probeChild(t, e, w)
	failed := map[string]bool{}
	for _, f := range Failed(w.Check(res, CheckOptions{})) {
		failed[f.ID] = true
	}
	for _, id := range []string{"proxy-host-other-port", "proxy-host-dns", "proxy-host-tcp6", "neighbour-tcp", "neighbour-dns", "neighbour-tcp6", "neighbour-udp6"} {
		assert.True(t, failed[id], "%s was not reached without the filters: %s", id, res[id])
	}
	assert.False(t, failed[ProxyID], "proxy: %s", res[ProxyID])
}

// TestNamespaceShape checks the first layer's construction: in the
// enclave's namespace one link besides lo, one IPv4 address, only the
// connected route, IPv6 and forwarding off in both namespaces.
func TestNamespaceShape(t *testing.T) {
	e := newEnclave(t, Weakening{})
	for _, ns := range []string{e.NetNS(), e.ProxyNetNS()} {
		err := InNetNS(ns, func() error {
			for k, want := range map[string]string{
				"ipv6/conf/all/disable_ipv6": "1", "ipv6/conf/default/disable_ipv6": "1", "ipv4/ip_forward": "0",
			} {
				b, err := os.ReadFile("/proc/sys/net/" + k)
				if err != nil {
					return err
				}
				if got := string(b[:len(b)-1]); got != want {
					return fmt.Errorf("%s = %s, want %s", k, got, want)
				}
			}
			return nil
		})
		require.NoError(t, err, ns)
	}
	h, done, err := handle(e.NetNS())
	require.NoError(t, err)
	defer done()
	links, err := h.LinkList()
	require.NoError(t, err)
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	assert.ElementsMatch(t, []string{"lo", enclaveLink}, names)
	routes, err := h.RouteList(nil, unix.AF_UNSPEC)
	require.NoError(t, err)
	require.Len(t, routes, 1, "routes: %v", routes)
	assert.Equal(t, "169.254.77.0/30", routes[0].Dst.String())
	assert.Nil(t, routes[0].Gw)
}

// TestSweepRemovesLeftovers leaves an enclave of another run behind, as a
// crashed broker would, and sweeps it.
func TestSweepRemovesLeftovers(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, Options{RunID: "crashed", Name: fmt.Sprint(os.Getpid())})
	require.NoError(t, err)
	_, err = e.OwnCgroup()
	require.NoError(t, err)
	defer e.Close()
	live, err := New(ctx, Options{RunID: "other-live", Name: fmt.Sprint(os.Getpid())})
	require.NoError(t, err)
	defer func() {
		assert.NoError(t, live.Close())
		assert.Empty(t, Resources("other-live"))
	}()
	require.NotEmpty(t, Resources("crashed"))
	require.NoError(t, SweepRuns(ctx, func(run string) bool { return run == "live-run" || run == "other-live" }))
	assert.Empty(t, Resources("crashed"))
	assert.Len(t, Resources("other-live"), 2, "a live run's enclave was swept")
}

// TestRunIDsAreSeparable: a run ID cannot hold the separator, so one run's
// sweep never mistakes another run's resources for its own.
func TestRunIDsAreSeparable(t *testing.T) {
	_, err := New(context.Background(), Options{RunID: "a.b", Name: "x"})
	require.Error(t, err)
	run, ok := runOf(Prefix + "verify-12ab.probe-e")
	assert.True(t, ok)
	assert.Equal(t, "verify-12ab", run)
	_, ok = runOf("awf-other")
	assert.False(t, ok)
}

// withoutVsock drops the vsock finding: no network layer can refuse vsock
// (TestVsockNeedsThePolicy), and these probes run without a policy.
func withoutVsock(fs []Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.ID != VsockID {
			out = append(out, f)
		}
	}
	return out
}

// TestVsockNeedsThePolicy: vsock is not network-namespaced. Where the host
// is a virtual machine with a vsock transport (this one is), a process in
// the enclave reaches the hypervisor with every network layer in place, and
// Check says so; only the seccomp policy can refuse AF_VSOCK.
func TestVsockNeedsThePolicy(t *testing.T) {
	e := newEnclave(t, Weakening{})
	w, err := NewWorld(e, WorldOptions{})
	require.NoError(t, err)
	defer w.Close()
	res := probeChild(t, e, w)
	var vs Finding
	for _, f := range w.Check(res, CheckOptions{}) {
		if f.ID == VsockID {
			vs = f
		}
	}
	if res[VsockID] == "connect:ECONNRESET" {
		assert.False(t, vs.Pass, "the hypervisor answered: %s", vs.Detail)
		return
	}
	assert.True(t, vs.Pass, "no vsock transport here, nothing reached: %s", vs.Detail)
}

// TestFailedNewRemovesWhatItMade: when New fails half-way (here the proxy
// end's name is taken), what it created is gone and what it did not create
// is left alone.
func TestFailedNewRemovesWhatItMade(t *testing.T) {
	run := fmt.Sprintf("test%d", os.Getpid())
	taken := filepath.Join(NetNSDir, Prefix+run+".taken-p")
	require.NoError(t, EnsureNetNSDir())
	require.NoError(t, os.WriteFile(taken, nil, 0o444))
	defer os.Remove(taken)
	_, err := New(context.Background(), Options{RunID: run, Name: "taken"})
	require.Error(t, err)
	_, err = os.Stat(filepath.Join(NetNSDir, Prefix+run+".taken-e"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the enclave's namespace was left behind")
	_, err = os.Stat(taken)
	assert.NoError(t, err, "a file New did not create was removed")
}
