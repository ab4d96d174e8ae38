package host

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
)

// fakeHandoff stands in for the API proxy: it serves the handed-over
// listener with one line per connection.
type fakeHandoff struct {
	mu          sync.Mutex
	listened    []string
	unlistened  []string
	listenErr   error
	unlistenErr error
}

func (f *fakeHandoff) Listen(_ context.Context, l *net.TCPListener) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listenErr != nil {
		return "", f.listenErr
	}
	f.listened = append(f.listened, l.Addr().String())
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("proxy\n"))
			c.Close()
		}
	}()
	return "listener-1", nil
}

func (f *fakeHandoff) Unlisten(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unlistened = append(f.unlistened, id)
	return f.unlistenErr
}

func testEnclave(id string) broker.Enclave {
	return broker.Enclave{InvocationID: id, SeedDir: "/s", LoopBinary: "/l", UID: 65534, GID: 65534, NoNewPrivileges: true,
		Limits: isolate.DefaultLimits(), Proxy: netip.MustParseAddrPort("169.254.77.1:8080"), ResultBytes: 8192}
}

// testRunID is a fresh run id per test, so that the enclave sweep of any
// other run keeps these namespaces.
func testRunID() string { return NewRunID() }

func requireRootNetNS(t *testing.T) {
	t.Helper()
	require.Equal(t, 0, os.Geteuid(), "enclave networks need root (namespaces, veth, eBPF)")
}

func TestEnclaveRuntimeBuildsTheNetworkAndHandsOverTheLink(t *testing.T) {
	requireRootNetNS(t)
	h := &fakeHandoff{}
	var sawNetNS string
	r := &enclaveRuntime{runID: testRunID(), proxy: h, newNetwork: enclave.New,
		sandbox: func(ctx context.Context, tp isolate.Template, e broker.Enclave) broker.EnclaveOutcome {
			require.NotNil(t, tp.Network)
			assert.Equal(t, e.Proxy, tp.Network.Peer)
			assert.NotNil(t, tp.Network.Confine, "the backend confines the job's first process")
			sawNetNS = tp.Network.NetNS
			_, err := os.Stat(sawNetNS)
			require.NoError(t, err)
			// From inside the enclave's namespace the proxy answers.
			var line string
			require.NoError(t, enclave.InNetNS(sawNetNS, func() error {
				c, err := net.DialTimeout("tcp", e.Proxy.String(), 3*time.Second)
				if err != nil {
					return err
				}
				defer c.Close()
				line, err = bufio.NewReader(c).ReadString('\n')
				return err
			}))
			assert.Equal(t, "proxy\n", line)
			return broker.EnclaveOutcome{Outcome: isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}}
		}}
	out := r.RunEnclave(context.Background(), isolate.Template{}, testEnclave("0123456789abcdef01234567"))
	assert.Equal(t, isolate.KindOK, out.Kind, out.Detail)
	assert.Equal(t, []string{"169.254.77.1:8080"}, h.listened)
	assert.Equal(t, []string{"listener-1"}, h.unlistened, "the proxy lets go of the link")
	_, err := os.Stat(sawNetNS)
	assert.True(t, errors.Is(err, os.ErrNotExist), "the enclave's namespace outlived the invocation")
}

func TestEnclaveRuntimeFailsClosed(t *testing.T) {
	requireRootNetNS(t)
	ran := false
	sandbox := func(context.Context, isolate.Template, broker.Enclave) broker.EnclaveOutcome {
		ran = true
		return broker.EnclaveOutcome{Outcome: isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}}
	}
	t.Run("hand-off refused", func(t *testing.T) {
		ran = false
		r := &enclaveRuntime{runID: testRunID(), proxy: &fakeHandoff{listenErr: errors.New("proxy gone")}, newNetwork: enclave.New, sandbox: sandbox}
		out := r.RunEnclave(context.Background(), isolate.Template{}, testEnclave("aa"))
		assert.Equal(t, isolate.KindLaunchFailed, out.Kind)
		assert.False(t, ran)
	})
	t.Run("unlisten fails: the answer is withheld", func(t *testing.T) {
		ran = false
		r := &enclaveRuntime{runID: testRunID(), proxy: &fakeHandoff{unlistenErr: errors.New("proxy gone")}, newNetwork: enclave.New, sandbox: sandbox}
		out := r.RunEnclave(context.Background(), isolate.Template{}, testEnclave("bb"))
		assert.True(t, ran)
		assert.Equal(t, isolate.KindCleanupFailed, out.Kind)
		assert.Contains(t, out.Detail, "outcome was ok")
	})
	t.Run("an enclave without its controls never gets a network", func(t *testing.T) {
		ran = false
		called := false
		r := &enclaveRuntime{runID: "x", proxy: &fakeHandoff{}, sandbox: sandbox,
			newNetwork: func(context.Context, enclave.Options) (*enclave.Enclave, error) {
				called = true
				return nil, errors.New("no")
			}}
		e := testEnclave("cc")
		e.UID = 0
		assert.Equal(t, isolate.KindLaunchFailed, r.RunEnclave(context.Background(), isolate.Template{}, e).Kind)
		assert.Equal(t, isolate.KindLaunchFailed, r.RunEnclave(context.Background(), isolate.Template{Weaken: isolate.Weakening{NoNetNS: true}}, testEnclave("cc")).Kind)
		assert.False(t, called)
		assert.False(t, ran)
	})
}
