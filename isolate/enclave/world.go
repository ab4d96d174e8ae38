package enclave

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// A World is what a network probe of an enclave runs against: the proxy
// (served by the world itself, standing in for the API proxy) and decoys,
// real listeners on every address the enclave must not reach, each
// counting what arrives. A probe whose connect fails proves little if
// nothing listened there; a decoy that logs nothing proves the probe's
// bytes never arrived, whatever the probe itself reports.
//
// The decoys are on the host's loopback (and on HostAddrs when given), on
// abstract and filesystem Unix sockets of the host, and, for a Routed
// enclave, on the proxy end's other ports and on a neighbour behind it.
// An unweakened proxy end holds nothing but the proxy's listener, as in
// production, so no decoy is put there.
type World struct {
	e       *Enclave
	targets []Target
	decoys  map[string]*decoy
	proxied atomic.Int64
	closers []func() error
	wg      sync.WaitGroup
}

// Target is one thing a probe tries; the fields are the probe's JSON.
type Target struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Addr string `json:"addr,omitempty"`
	// Family targets only try socket(2): the seccomp policy must refuse
	// them; the network layers have nothing to say about a socket that
	// reaches nothing.
	Family bool `json:"-"`
	// Filesystem targets are host paths: the sandbox's mount namespace, not
	// the network, keeps them out of reach, so they are judged only for a
	// probe that runs in a real sandbox.
	Filesystem bool `json:"-"`
	// PolicyOnly targets are out of both network layers' reach: vsock is
	// not network-namespaced and no inet hook sees it, so on a virtual
	// machine with a vsock transport only the seccomp policy keeps the
	// hypervisor's services out of reach.
	PolicyOnly bool `json:"-"`
}

// VsockID is the target that tries the hypervisor's vsock (CID 2).
const VsockID = "vsock-host"

// CheckOptions say which controls a probe ran under.
type CheckOptions struct {
	// Policy: the probe ran under the enclave's seccomp policy.
	Policy bool
	// Sandbox: the probe ran in a real sandbox (its own mount namespace).
	Sandbox bool
}

// ProbeSpec is the argument of cmd/enclave-probe.
type ProbeSpec struct {
	Out       string   `json:"out"`
	TimeoutMs int      `json:"timeoutMs"`
	Targets   []Target `json:"targets"`
}

// The probe's results that mean something arrived (see cmd/enclave-probe).
const (
	ResultExchanged = "exchanged"
	ResultConnected = "connected"
	ResultReply     = "reply"
	ResultOpen      = "open"
)

// ProxyID is the target that must be reached.
const ProxyID = "proxy"

type decoy struct {
	hits atomic.Int64
}

// WorldOptions configure NewWorld.
type WorldOptions struct {
	// HostAddrs are host addresses to put decoys on besides loopback
	// (verify passes the host's own; tests pass none and stay on loopback).
	HostAddrs []netip.Addr
}

// NewWorld starts the proxy stand-in on e's listener and every decoy.
func NewWorld(e *Enclave, o WorldOptions) (_ *World, err error) {
	w := &World{e: e, decoys: map[string]*decoy{}}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	w.targets = append(w.targets, Target{ID: ProxyID, Kind: "tcp", Addr: e.Proxy().String()})
	w.serveProxy(e.Listener())
	host := func(fn func() error) error { return fn() }
	in := func(ns string) func(func() error) error {
		return func(fn func() error) error { return InNetNS(ns, fn) }
	}
	// The host's loopback and addresses.
	for _, d := range []struct{ id, network, addr string }{
		{"host-loopback-tcp", "tcp", "127.0.0.1:0"},
		{"host-loopback-udp", "udp", "127.0.0.1:0"},
		{"host-loopback-tcp6", "tcp", "[::1]:0"},
	} {
		if err := w.decoy(host, d.id, d.network, d.addr); err != nil && d.id != "host-loopback-tcp6" {
			return nil, err
		}
	}
	for i, a := range o.HostAddrs {
		if err := w.decoy(host, fmt.Sprintf("host-address-%d", i), "tcp", netip.AddrPortFrom(a, 0).String()); err != nil {
			return nil, err
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tag := hex.EncodeToString(rnd[:])
	if err := w.decoy(host, "host-abstract-unix", "unix", "@"+Prefix+"decoy-"+tag); err != nil {
		return nil, err
	}
	if err := w.decoy(host, "host-unix-path", "unix", filepath.Join(os.TempDir(), Prefix+"decoy-"+tag+".sock")); err != nil {
		return nil, err
	}
	// Beyond the proxy, only where the namespace leads there.
	beyond := []struct {
		id, network, addr string
		ns                string
	}{
		{"proxy-host-other-port", "tcp", netip.AddrPortFrom(ProxyAddr(), e.Proxy().Port()+1).String(), e.ProxyNetNS()},
		{"proxy-host-dns", "udp", netip.AddrPortFrom(ProxyAddr(), 53).String(), e.ProxyNetNS()},
		{"proxy-host-tcp6", "tcp", netip.AddrPortFrom(ProxyAddr6(), e.Proxy().Port()).String(), e.ProxyNetNS()},
		{"neighbour-tcp", "tcp", netip.AddrPortFrom(NeighbourAddr(), 80).String(), e.NeighbourNetNS()},
		{"neighbour-dns", "udp", netip.AddrPortFrom(NeighbourAddr(), 53).String(), e.NeighbourNetNS()},
		{"neighbour-tcp6", "tcp", netip.AddrPortFrom(NeighbourAddr6(), 80).String(), e.NeighbourNetNS()},
		{"neighbour-udp6", "udp", netip.AddrPortFrom(NeighbourAddr6(), 53).String(), e.NeighbourNetNS()},
	}
	for _, b := range beyond {
		if e.weaken.Routed {
			if err := w.decoy(in(b.ns), b.id, b.network, b.addr); err != nil {
				return nil, err
			}
			continue
		}
		w.targets = append(w.targets, Target{ID: b.id, Kind: b.network, Addr: b.addr})
	}
	w.targets = append(w.targets,
		Target{ID: "link-local-metadata", Kind: "tcp", Addr: "169.254.169.254:80"},
		Target{ID: "link-local-other", Kind: "tcp", Addr: "169.254.1.1:80"},
		Target{ID: "link-broadcast", Kind: "udp", Addr: "169.254.77.3:53"},
		Target{ID: VsockID, Kind: "vsock", Addr: "9999", PolicyOnly: true},
	)
	for _, f := range []string{"raw", "packet", "netlink", "vsock-socket", "udp-socket", "tcp6-socket", "unix-socket"} {
		w.targets = append(w.targets, Target{ID: "family-" + f, Kind: f, Family: true})
	}
	return w, nil
}

// serveProxy answers every connection on l with one line, each within a
// deadline.
func (w *World) serveProxy(l *net.TCPListener) {
	w.answerEach(l, &w.proxied, "awf-proxy\n", 5*time.Second)
}

// answerEach serves l until it is closed: it counts each connection in n,
// writes line to it and closes it. A non-zero limit is the deadline of each
// connection.
func (w *World) answerEach(l net.Listener, n *atomic.Int64, line string, limit time.Duration) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			if limit > 0 {
				_ = c.SetDeadline(time.Now().Add(limit))
			}
			_, _ = c.Write([]byte(line))
			c.Close()
		}
	}()
}

// decoy listens on network/addr (from inside run's namespace) and adds a
// target for its real address.
func (w *World) decoy(run func(func() error) error, id, network, addr string) error {
	d := &decoy{}
	var bound string
	err := run(func() error {
		switch network {
		case "udp":
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return err
			}
			bound = pc.LocalAddr().String()
			w.closers = append(w.closers, pc.Close)
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				buf := make([]byte, 512)
				for {
					n, from, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					d.hits.Add(1)
					_, _ = pc.WriteTo(buf[:n], from)
				}
			}()
		default:
			l, err := net.Listen(network, addr)
			if err != nil {
				return err
			}
			bound = l.Addr().String()
			if network == "unix" && addr[0] != '@' {
				w.closers = append(w.closers, func() error { l.Close(); return os.Remove(addr) })
				if err := os.Chmod(addr, 0o777); err != nil {
					return err
				}
			} else {
				w.closers = append(w.closers, l.Close)
			}
			w.answerEach(l, &d.hits, "decoy\n", 0)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("decoy %s on %s: %w", id, addr, err)
	}
	if network == "unix" {
		bound = addr
	}
	w.decoys[id] = d
	w.targets = append(w.targets, Target{ID: id, Kind: network, Addr: bound, Filesystem: network == "unix" && addr[0] != '@'})
	return nil
}

// Targets returns the probe's targets.
func (w *World) Targets() []Target { return append([]Target(nil), w.targets...) }

// Spec is the probe's argument, writing its results to out.
func (w *World) Spec(out string) ProbeSpec {
	// Generous: a loaded host must not turn the proxy into a timeout.
	return ProbeSpec{Out: out, TimeoutMs: 3000, Targets: w.Targets()}
}

// Finding is the verdict on one target.
type Finding struct {
	ID     string
	Pass   bool
	Detail string
}

// Check judges a probe's results: the proxy must answer; nothing else may
// be reached, by the probe's account or by any decoy's; with policy, every
// family target's socket must have been refused. A missing result fails.
func (w *World) Check(results map[string]string, o CheckOptions) []Finding {
	var out []Finding
	for _, t := range w.targets {
		r, ok := results[t.ID]
		f := Finding{ID: t.ID, Detail: r}
		switch {
		case !ok:
			f.Detail = "no result"
		case t.ID == ProxyID:
			f.Pass = r == ResultExchanged
			f.Detail = "proxy: " + r
		case t.Family:
			f.Pass = !o.Policy || r != ResultOpen
			if !o.Policy {
				f.Detail += " (no policy: not judged)"
			}
		case t.PolicyOnly:
			// ECONNRESET is the hypervisor's answer: the connect arrived.
			reached := r == ResultConnected || r == ResultExchanged || r == "connect:ECONNRESET"
			f.Pass = !reached
			if reached {
				f.Detail += ": the hypervisor's vsock answers; only the seccomp policy can refuse AF_VSOCK"
			}
		case t.Filesystem && !o.Sandbox:
			f.Pass = true
			f.Detail += " (no sandbox: not judged)"
		default:
			hits := int64(0)
			if d := w.decoys[t.ID]; d != nil {
				hits = d.hits.Load()
			}
			f.Pass = hits == 0 && r != ResultExchanged && r != ResultConnected && r != ResultReply
			if w.decoys[t.ID] != nil {
				f.Detail += ", decoy saw " + strconv.FormatInt(hits, 10)
			}
		}
		out = append(out, f)
	}
	return out
}

// Failed returns the failing findings.
func Failed(fs []Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		if !f.Pass {
			out = append(out, f)
		}
	}
	return out
}

// Close stops the proxy stand-in and every decoy. The enclave's listener
// is closed by the enclave.
func (w *World) Close() error {
	var errs []error
	for _, c := range w.closers {
		if err := c(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	w.closers = nil
	return errors.Join(errs...)
}
