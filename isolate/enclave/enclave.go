// Package enclave builds the network of one bounded-agent enclave: exactly
// one peer, the API proxy, by two independent layers.
//
// Layer one is the namespace. Each invocation gets two network namespaces
// that awf creates and removes: the enclave's, whose only link is one end
// of a veth pair, and the proxy end's, which holds the other end and the
// proxy's listening socket and nothing else. The link has link-local
// addresses on a /30 (ProxyAddr and EnclaveAddr) and only the connected
// route: no default route, no DNS, no IPv6 (disabled by sysctl in both
// namespaces), no forwarding. The listener is opened from a thread inside
// the proxy end's namespace and handed to the API proxy process, which
// never enters it (apiproxy.SendListener).
//
// Layer two is eBPF (see bpf.go): cgroup socket hooks on the enclave's
// cgroup, and a tc ingress filter on the proxy end of the link. Either
// layer alone leaves nothing reachable but the proxy's address and port;
// the seccomp policy of the loop is meant as a third control that refuses
// raw, packet, netlink and vsock sockets outright (vsock, which is not
// namespaced, only it can refuse), and is not in place yet: the policy
// language allows no socket beyond AF_UNIX.
package enclave

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
)

// Prefix starts the name of every resource an enclave creates: namespaces
// in NetNSDir and cgroups in the cgroup v2 tree. Sweep finds leftovers by it.
const Prefix = "awfenc-"

// The link's addresses. Every enclave uses the same ones: each pair of
// namespaces is its own world, and none of these addresses exists on the
// host. They are functions, not variables: the proxy's address is what the
// enclave's eBPF pins allow, and no importer may change it.

// ProxyAddr is the proxy end's address on the link.
func ProxyAddr() netip.Addr { return netip.MustParseAddr("169.254.77.1") }

// EnclaveAddr is the enclave end's address on the link.
func EnclaveAddr() netip.Addr { return netip.MustParseAddr("169.254.77.2") }

// linkBits is the prefix length of the link: a /30, the two addresses and
// nothing else.
const linkBits = 30

// DefaultPort is the proxy's port on the link.
const DefaultPort = 8080

// Interface names inside the two namespaces (each namespace has its own
// name space for links, so every enclave uses the same names).
const (
	proxyLink   = "awfproxy0"
	enclaveLink = "eth0"
)

// Options configure New.
type Options struct {
	// RunID names the broker run; Sweep keeps the live run's resources.
	RunID string
	// Name names the invocation. RunID and Name together are unique.
	Name string
	// Port is the proxy's port on the link (0 = DefaultPort).
	Port uint16
	// Weaken removes layers. It exists only so that tests can prove each
	// layer alone blocks everything but the proxy; nothing reachable from
	// configuration or from a request may set it.
	Weaken Weakening
}

// Weakening lists the layers tests may remove. The zero value removes
// nothing.
type Weakening struct {
	// Routed makes the namespace lead beyond the proxy, as a shared or
	// bridged network would: IPv6 on, forwarding on in the proxy end, a
	// default route, and a neighbour namespace behind the proxy end with
	// its own addresses (NeighbourAddr, NeighbourAddr6).
	Routed bool
	// NoCgroupBPF attaches no cgroup socket hook.
	NoCgroupBPF bool
	// NoLinkBPF attaches no link filter.
	NoLinkBPF bool
}

// The addresses a Routed enclave can reach besides the proxy (test only).

// NeighbourAddr is the neighbour namespace's IPv4 address.
func NeighbourAddr() netip.Addr { return netip.MustParseAddr("169.254.78.2") }

// NeighbourAddr6 is the neighbour namespace's IPv6 address.
func NeighbourAddr6() netip.Addr { return netip.MustParseAddr("fd00:78::2") }

// ProxyAddr6 is the proxy end's IPv6 address when Routed turns IPv6 on.
func ProxyAddr6() netip.Addr { return netip.MustParseAddr("fd00:77::1") }

func enclaveAddr6() netip.Addr { return netip.MustParseAddr("fd00:77::2") }
func routerAddr() netip.Addr   { return netip.MustParseAddr("169.254.78.1") }
func routerAddr6() netip.Addr  { return netip.MustParseAddr("fd00:78::1") }

// namePattern keeps names safe in paths and cgroup names. A run ID has no
// '.', which separates it from the invocation's name in every resource's
// name (Prefix + run + "." + name), so that Sweep can tell runs apart.
var (
	namePattern  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })
	runIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`) })
)

// Enclave is the network of one invocation. Close removes all of it.
type Enclave struct {
	base      string // Prefix + run + "-" + name
	netNS     string // the enclave's namespace
	proxyNS   string // the proxy end's namespace
	neighbour string // Routed only: the namespace behind the proxy end
	proxy     netip.AddrPort
	weaken    Weakening
	listener  *net.TCPListener
	made      []string // the namespaces New created, which Close removes

	mu        sync.Mutex
	cgroups   map[string]bool // v2 cgroups the hooks are attached to
	ownCgroup string          // the cgroup this enclave created, if any
	links     []link.Link
	closed    bool
}

// New builds the network of one enclave: both namespaces, the link, the
// proxy's listener and the link filter. The cgroup hooks are attached by
// Confine, once the backend knows the job's first process. On failure
// everything created is removed.
func New(ctx context.Context, o Options) (_ *Enclave, err error) {
	if !runIDPattern().MatchString(o.RunID) || !namePattern().MatchString(o.Name) {
		return nil, fmt.Errorf("enclave: run %q or name %q is not a plain name", o.RunID, o.Name)
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	base := Prefix + o.RunID + "." + o.Name
	e := &Enclave{
		base: base, netNS: filepath.Join(NetNSDir, base+"-e"), proxyNS: filepath.Join(NetNSDir, base+"-p"),
		proxy: netip.AddrPortFrom(ProxyAddr(), o.Port), weaken: o.Weaken, cgroups: map[string]bool{},
	}
	defer func() {
		if err != nil {
			if cerr := e.Close(); cerr != nil {
				err = fmt.Errorf("%w (and cleanup: %v)", err, cerr)
			}
			err = fmt.Errorf("enclave %s: %w", base, err)
		}
	}()
	nss := []string{e.netNS, e.proxyNS}
	if o.Weaken.Routed {
		e.neighbour = filepath.Join(NetNSDir, base+"-n")
		nss = append(nss, e.neighbour)
	}
	for _, p := range nss {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := createNetNS(p, e.sysctls(p)); err != nil {
			return nil, err
		}
		e.made = append(e.made, p)
	}
	if err := e.configure(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := InNetNS(e.proxyNS, func() error {
		l, err := net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(e.proxy))
		e.listener = l
		return err
	}); err != nil {
		return nil, fmt.Errorf("proxy listener: %w", err)
	}
	if !o.Weaken.NoLinkBPF {
		idx, err := linkIndex(e.proxyNS, proxyLink)
		if err != nil {
			return nil, err
		}
		if err := attachLinkIngress(e.proxyNS, idx, EnclaveAddr(), e.proxy); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// sysctls are the settings of the namespace at ns, written when it is
// created (before any link exists in it, so that every link inherits them).
func (e *Enclave) sysctls(ns string) [][2]string {
	if !e.weaken.Routed {
		return [][2]string{
			{"ipv6/conf/all/disable_ipv6", "1"}, {"ipv6/conf/default/disable_ipv6", "1"},
			{"ipv4/ip_forward", "0"}, {"ipv4/conf/all/forwarding", "0"},
		}
	}
	// Routed: IPv6 on, without duplicate address detection, so that the
	// link-local addresses neighbour discovery needs are usable at once.
	kv := [][2]string{
		{"ipv6/conf/all/disable_ipv6", "0"}, {"ipv6/conf/default/disable_ipv6", "0"},
		{"ipv6/conf/all/accept_dad", "0"}, {"ipv6/conf/default/accept_dad", "0"},
	}
	if ns == e.proxyNS {
		kv = append(kv, [2]string{"ipv4/ip_forward", "1"}, [2]string{"ipv6/conf/all/forwarding", "1"})
	}
	return kv
}

// configure creates the link and gives it its addresses (the namespaces
// have their sysctls already).
func (e *Enclave) configure() error {
	if err := veth(e.proxyNS, proxyLink, e.netNS, enclaveLink); err != nil {
		return err
	}
	addrs := map[string][]netip.Prefix{
		e.proxyNS: {netip.PrefixFrom(ProxyAddr(), linkBits)},
		e.netNS:   {netip.PrefixFrom(EnclaveAddr(), linkBits)},
	}
	var routes map[string][]netip.Addr
	if e.weaken.Routed {
		const routerLink = "awfrouter0"
		if err := veth(e.proxyNS, routerLink, e.neighbour, enclaveLink); err != nil {
			return err
		}
		addrs[e.proxyNS] = append(addrs[e.proxyNS], netip.PrefixFrom(ProxyAddr6(), 64))
		addrs[e.netNS] = append(addrs[e.netNS], netip.PrefixFrom(enclaveAddr6(), 64))
		addrs[e.neighbour] = []netip.Prefix{netip.PrefixFrom(NeighbourAddr(), linkBits), netip.PrefixFrom(NeighbourAddr6(), 64)}
		if err := setAddrs(e.proxyNS, routerLink, []netip.Prefix{netip.PrefixFrom(routerAddr(), linkBits), netip.PrefixFrom(routerAddr6(), 64)}); err != nil {
			return err
		}
		routes = map[string][]netip.Addr{e.netNS: {ProxyAddr(), ProxyAddr6()}, e.neighbour: {routerAddr(), routerAddr6()}}
	}
	if err := setAddrs(e.proxyNS, proxyLink, addrs[e.proxyNS]); err != nil {
		return err
	}
	if err := setAddrs(e.netNS, enclaveLink, addrs[e.netNS]); err != nil {
		return err
	}
	if e.neighbour != "" {
		if err := setAddrs(e.neighbour, enclaveLink, addrs[e.neighbour]); err != nil {
			return err
		}
	}
	for ns, gws := range routes {
		if err := defaultRoutes(ns, enclaveLink, gws); err != nil {
			return err
		}
	}
	return nil
}

// handle opens a netlink handle that works in the namespace at path;
// done closes it and the namespace.
func handle(path string) (h *netlink.Handle, done func(), err error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open netns %s: %w", path, err)
	}
	h, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		ns.Close()
		return nil, nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	return h, func() { h.Close(); ns.Close() }, nil
}

// linkIn is handle with link name of that namespace.
func linkIn(path, name string) (*netlink.Handle, netlink.Link, func(), error) {
	h, done, err := handle(path)
	if err != nil {
		return nil, nil, nil, err
	}
	l, err := h.LinkByName(name)
	if err != nil {
		done()
		return nil, nil, nil, fmt.Errorf("link %s in %s: %w", name, path, err)
	}
	return h, l, done, nil
}

// veth creates a veth pair with one end, a, in namespace nsA and the
// other, b, in nsB.
func veth(nsA, a, nsB, b string) error {
	h, done, err := handle(nsA)
	if err != nil {
		return err
	}
	defer done()
	peer, err := netns.GetFromPath(nsB)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", nsB, err)
	}
	defer peer.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a, MTU: 1500}, PeerName: b, PeerNamespace: netlink.NsFd(int(peer))}
	if err := h.LinkAdd(v); err != nil {
		return fmt.Errorf("create link %s: %w", a, err)
	}
	return nil
}

// setAddrs brings lo and the link up in the namespace at path and gives
// the link its addresses. IPv6 addresses (Routed only) skip duplicate
// address detection, so they are usable at once.
func setAddrs(path, name string, ps []netip.Prefix) error {
	h, l, done, err := linkIn(path, name)
	if err != nil {
		return err
	}
	defer done()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("lo in %s: %w", path, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("lo up in %s: %w", path, err)
	}
	for _, p := range ps {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(l, a); err != nil {
			return fmt.Errorf("address %s on %s: %w", p, name, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("link %s up: %w", name, err)
	}
	return nil
}

// defaultRoutes adds a default route through each gateway (Routed only).
func defaultRoutes(path, name string, gws []netip.Addr) error {
	h, l, done, err := linkIn(path, name)
	if err != nil {
		return err
	}
	defer done()
	for _, gw := range gws {
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw.AsSlice()}
		if gw.Is6() {
			r.Family = netlink.FAMILY_V6
		}
		if err := h.RouteAdd(r); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
	}
	return nil
}

// linkIndex returns the index of link name in the namespace at path.
func linkIndex(path, name string) (int, error) {
	_, l, done, err := linkIn(path, name)
	if err != nil {
		return 0, err
	}
	defer done()
	return l.Attrs().Index, nil
}

// Proxy is the proxy's address and port as the enclave reaches it.
func (e *Enclave) Proxy() netip.AddrPort { return e.proxy }

// Endpoint is the proxy's base URL as the loop sees it.
func (e *Enclave) Endpoint() string { return "http://" + e.proxy.String() }

// NetNS is the path of the enclave's network namespace.
func (e *Enclave) NetNS() string { return e.netNS }

// ProxyNetNS is the path of the proxy end's network namespace.
func (e *Enclave) ProxyNetNS() string { return e.proxyNS }

// NeighbourNetNS is the namespace behind the proxy end of a Routed
// enclave, "" otherwise.
func (e *Enclave) NeighbourNetNS() string { return e.neighbour }

// Listener is the proxy's listening socket, in the proxy end's namespace.
// It stays the enclave's: a caller that hands it over (apiproxy.SendListener
// duplicates it) still lets Close close this copy.
func (e *Enclave) Listener() *net.TCPListener { return e.listener }

// Network is the enclave's network as the sandbox description carries it.
func (e *Enclave) Network() *isolate.Network {
	return &isolate.Network{NetNS: e.netNS, Peer: e.proxy, Confine: e.Confine}
}

// Confine puts the job's first process pid under the cgroup hooks before
// it runs anything. sandboxCgroup is the sandbox's own cgroup v2 directory
// when it has one (a cgroup v2 host): the hooks are attached there. On a
// hybrid host the sandbox's cgroups are v1 only, so the enclave makes a
// cgroup of its own in the v2 tree, attaches the hooks to it and moves pid
// into it; the process's v1 cgroups, which hold its limits, are unchanged,
// and its children inherit both.
func (e *Enclave) Confine(pid int, sandboxCgroup string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("enclave: closed")
	}
	dir := sandboxCgroup
	if dir == "" {
		d, err := e.ownCgroupLocked()
		if err != nil {
			return err
		}
		dir = d
	} else if err := e.attachLocked(dir); err != nil {
		return err
	}
	if dir == e.ownCgroup {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0o644); err != nil {
			return fmt.Errorf("enclave: move %d into %s: %w", pid, dir, err)
		}
	}
	return nil
}

// OwnCgroup returns the enclave's own cgroup v2 directory, with the hooks
// attached (unless weakened), creating it on first use. A process placed
// in it at birth (clone3 CLONE_INTO_CGROUP, SysProcAttr.CgroupFD) is under
// the hooks from its first instruction.
func (e *Enclave) OwnCgroup() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return "", errors.New("enclave: closed")
	}
	return e.ownCgroupLocked()
}

func (e *Enclave) ownCgroupLocked() (string, error) {
	if e.ownCgroup == "" {
		root, err := cgroup2Root()
		if err != nil {
			return "", err
		}
		d := filepath.Join(root, e.base)
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", fmt.Errorf("enclave: cgroup: %w", err)
		}
		e.ownCgroup = d
	}
	return e.ownCgroup, e.attachLocked(e.ownCgroup)
}

// attachLocked attaches the cgroup hooks to dir once.
func (e *Enclave) attachLocked(dir string) error {
	if e.weaken.NoCgroupBPF || e.cgroups[dir] {
		return nil
	}
	ls, err := attachCgroup(dir, e.proxy)
	if err != nil {
		return fmt.Errorf("enclave: %w", err)
	}
	e.links = append(e.links, ls...)
	e.cgroups[dir] = true
	return nil
}

// Close removes everything the enclave created: the hooks and filter, the
// listener, the namespaces (and with them the links) and its cgroup. It is
// safe to call more than once. The sandbox must be gone first, and the API
// proxy's copy of the listener closed: a cgroup with a process in it cannot
// be removed, and a namespace lives while a socket in it does.
func (e *Enclave) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	var errs []error
	if e.listener != nil {
		if err := e.listener.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
		e.listener = nil
	}
	// The cgroup and the link go first and the hooks and filter after: a
	// program detached from a live cgroup or interface waits for the
	// kernel's grace periods, one detached from a removed one does not.
	if e.ownCgroup != "" {
		if err := os.Remove(e.ownCgroup); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", e.ownCgroup, err))
		} else {
			e.ownCgroup = ""
		}
	}
	// The namespaces end, and the link with them, when their last user
	// does: the kernel tears them down off this path (deleting the link
	// here would wait about 25 ms for the kernel's grace periods). Their
	// users are this enclave's mounts and listener, the API proxy's copy of
	// the listener and its connections, which the broker takes back first,
	// and the sandbox, which is gone.
	for _, p := range e.made {
		errs = append(errs, removeNetNS(p))
	}
	e.made = nil
	errs = append(errs, closeLinks(e.links))
	e.links = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("enclave %s: close: %w", e.base, err)
	}
	return nil
}

// deleteLinks deletes every veth in the namespace at path.
func deleteLinks(path string) error {
	h, done, err := handle(path)
	if err != nil {
		return err
	}
	defer done()
	ls, err := h.LinkList()
	if err != nil {
		return fmt.Errorf("links in %s: %w", path, err)
	}
	var errs []error
	for _, l := range ls {
		if l.Type() == "veth" {
			if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
				errs = append(errs, fmt.Errorf("delete %s: %w", l.Attrs().Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// cgroup2Root is the cgroup v2 mount: /sys/fs/cgroup on a v2 host,
// /sys/fs/cgroup/unified on a hybrid one.
func cgroup2Root() (string, error) {
	for _, p := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(p, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return p, nil
		}
	}
	return "", errors.New("enclave: no cgroup v2 hierarchy: the cgroup socket hooks need one")
}
