package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate/enclave"
)

var (
	probeOnce sync.Once
	probeDir  string // holds probeBin; removed by removeEnclaveProbe
	probeBin  string
	probeErr  error
)

// enclaveProbe builds cmd/enclave-probe once, statically, into a
// directory that the package's TestMain removes (removeEnclaveProbe).
func enclaveProbe(t *testing.T) string {
	t.Helper()
	probeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "awf-verify-enclave-probe-")
		if err != nil {
			probeErr = err
			return
		}
		probeDir = dir
		probeBin = filepath.Join(dir, "enclave-probe")
		cmd := exec.Command("go", "build", "-o", probeBin, "github.com/awf-project/awf/cmd/enclave-probe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			probeErr = err
			probeBin = string(out)
		}
	})
	require.NoError(t, probeErr, "build enclave-probe: %s", probeBin)
	return probeBin
}

// removeEnclaveProbe removes what enclaveProbe built, if it built
// anything. TestMain calls it once every test has ended.
func removeEnclaveProbe() {
	if probeDir != "" {
		os.RemoveAll(probeDir)
	}
}

// runEnclave runs RunEnclave in one runtime with w (and without the
// seccomp policy when noPolicy) and returns its report. Only a gvisor
// whose host component (runsc) is absent skips, saying BLOCKED; a runtime
// that is installed but BLOCKED for any other reason fails.
func runEnclave(t *testing.T, name string, w enclave.Weakening, noPolicy bool) RuntimeReport {
	t.Helper()
	if _, err := exec.LookPath("runsc"); err != nil && name == "gvisor" {
		t.Skip("BLOCKED: runsc is not installed on this host")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunEnclave(ctx, EnclaveOptions{Runtimes: []string{name}, ProbeBinary: enclaveProbe(t), Weaken: w, NoPolicy: noPolicy})
	require.NoError(t, err)
	require.Len(t, rep.Runtimes, 1)
	rr := rep.Runtimes[0]
	require.NotEqual(t, Blocked, rr.Status, "%s is installed but BLOCKED: %s", name, rr.Reason)
	return rr
}

// failing lists the IDs of rr's results that are not PASS. Without the
// policy (noPolicy) it leaves out the policy layer's own results:
// enclave/policy, and vsock, which only the policy can refuse
// (isolate/enclave's TestVsockNeedsThePolicy).
func failing(rr RuntimeReport, noPolicy bool) []string {
	var out []string
	for _, r := range rr.Results {
		if r.Status != Pass && !(noPolicy && (r.ID == "enclave/policy" || r.ID == "enclave/"+enclave.VsockID)) {
			out = append(out, r.ID+": "+string(r.Status)+" "+r.Evidence)
		}
	}
	return out
}

// TestEnclaveVerify is awf isolate verify --enclave on direct and gvisor:
// from inside a real enclave the proxy answers and nothing else does, and
// the enclave leaves nothing behind. On gvisor the job's sockets are the
// Sentry's netstack on the enclave's link (--network=sandbox).
func TestEnclaveVerify(t *testing.T) {
	for _, name := range []string{"direct", "gvisor"} {
		t.Run(name, func(t *testing.T) {
			rr := runEnclave(t, name, enclave.Weakening{}, false)
			assert.Empty(t, failing(rr, false))
			ids := map[string]Status{}
			for _, r := range rr.Results {
				ids[r.ID] = r.Status
			}
			assert.Equal(t, Pass, ids["enclave/proxy"])
			assert.Equal(t, Pass, ids["enclave/leftovers"])
			assert.Equal(t, Pass, ids["enclave/policy"], "the probe ran under agent-loop.policy and every refused socket said EPERM")
			assert.Equal(t, Pass, ids["enclave/"+enclave.VsockID])
		})
	}
}

// TestEnclaveEachLayerAlone reruns the probes from inside real enclaves
// with each network layer alone, without the seccomp policy. On gvisor the
// job's sockets are the Sentry's, which host cgroup hooks never see: its
// eBPF layer is the link filter, so the cgroup hooks are not a layer there
// and are not run alone.
func TestEnclaveEachLayerAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		w        enclave.Weakening
		runtimes []string
	}{
		{"namespace alone", enclave.Weakening{NoCgroupBPF: true, NoLinkBPF: true}, []string{"direct", "gvisor"}},
		{"link filter alone", enclave.Weakening{Routed: true, NoCgroupBPF: true}, []string{"direct", "gvisor"}},
		{"cgroup hooks alone", enclave.Weakening{Routed: true, NoLinkBPF: true}, []string{"direct"}},
	} {
		for _, name := range tc.runtimes {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				rr := runEnclave(t, name, tc.w, true)
				assert.Empty(t, failing(rr, true))
			})
		}
	}
}

// TestEnclavePolicyAlone: agent-loop.policy alone, in a namespace that
// leads beyond the proxy with no eBPF, still refuses every socket that is
// not TCP over IPv4 (raw, packet, netlink, vsock, IPv6, UDP, Unix), and
// the vsock to the hypervisor with it. TCP over IPv4 is the one socket it
// allows, so where that goes is the other layers' concern: the neighbour's
// TCP decoy is reached here, which shows the policy is not mistaken for a
// destination filter.
func TestEnclavePolicyAlone(t *testing.T) {
	for _, name := range []string{"direct", "gvisor"} {
		t.Run(name, func(t *testing.T) {
			rr := runEnclave(t, name, enclave.Weakening{Routed: true, NoCgroupBPF: true, NoLinkBPF: true}, false)
			ids := map[string]Result{}
			for _, r := range rr.Results {
				ids[r.ID] = r
			}
			assert.Equal(t, Pass, ids["enclave/policy"].Status, "%s", ids["enclave/policy"].Evidence)
			for _, id := range []string{enclave.VsockID, "proxy-host-dns", "neighbour-dns", "neighbour-tcp6", "neighbour-udp6", "proxy-host-tcp6",
				"family-raw", "family-packet", "family-netlink", "family-vsock-socket", "family-udp-socket", "family-tcp6-socket", "family-unix-socket"} {
				assert.Equal(t, Pass, ids["enclave/"+id].Status, "%s: %s", id, ids["enclave/"+id].Evidence)
			}
			assert.Equal(t, Fail, ids["enclave/neighbour-tcp"].Status, "TCP over IPv4 is allowed by the policy: %s", ids["enclave/neighbour-tcp"].Evidence)
		})
	}
}

// TestEnclaveProbesCanFail is the positive control: in a namespace that
// leads beyond the proxy with no eBPF, the probes from inside a real
// enclave, without the seccomp policy, reach the decoys and verify says
// FAIL.
func TestEnclaveProbesCanFail(t *testing.T) {
	for _, name := range []string{"direct", "gvisor"} {
		t.Run(name, func(t *testing.T) {
			rr := runEnclave(t, name, enclave.Weakening{Routed: true, NoCgroupBPF: true, NoLinkBPF: true}, true)
			got := strings.Join(failing(rr, true), "\n")
			for _, id := range []string{"proxy-host-other-port", "proxy-host-dns", "neighbour-tcp", "neighbour-dns"} {
				assert.Contains(t, got, "enclave/"+id+":", "%s was not reached", id)
			}
			assert.NotContains(t, got, "enclave/proxy:")
			assert.NotContains(t, got, "enclave/leftovers:")
		})
	}
}
