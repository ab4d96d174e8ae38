package enclave

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The second layer is eBPF, written with cilium/ebpf's assembler (the host
// has no BPF compiler, and the programs are a few comparisons each):
//
//   - cgroup hooks on the enclave's cgroup: sock_create admits only
//     AF_INET/SOCK_STREAM/TCP sockets (no UDP, raw, ICMP or IPv6 socket),
//     connect4 admits only the proxy's address and port, and connect6,
//     sendmsg4 and sendmsg6 refuse everything. They act on the host
//     kernel's sockets, so they cover the direct backend.
//   - a tc clsact ingress filter on the proxy end of the link: every frame
//     from the enclave is dropped unless it is ARP, which the link needs,
//     or an unfragmented IPv4 TCP segment from the enclave's address to
//     the proxy's address and port. It sees frames, not sockets, so it
//     also covers gvisor, whose own network stack never calls the host's
//     connect.

// Return values of the programs.
const (
	cgroupAllow = 1
	cgroupDeny  = 0
	tcPass      = 0 // TC_ACT_OK
	tcDrop      = 2 // TC_ACT_SHOT
)

// Offsets in the contexts the kernel gives the programs (uapi/linux/bpf.h).
const (
	sockFamily   = 4  // struct bpf_sock.family
	sockType     = 8  // struct bpf_sock.type
	sockProtocol = 12 // struct bpf_sock.protocol

	saUserIP4  = 4  // struct bpf_sock_addr.user_ip4
	saUserPort = 24 // struct bpf_sock_addr.user_port
	saType     = 32 // struct bpf_sock_addr.type
	saProtocol = 36 // struct bpf_sock_addr.protocol

	skbData    = 76 // struct __sk_buff.data
	skbDataEnd = 80 // struct __sk_buff.data_end
)

// Packet offsets for an Ethernet frame carrying IPv4 without options.
const (
	ethType   = 12
	ipVerIHL  = 14
	ipFrag    = 20
	ipProto   = 23
	ipSrc     = 26
	ipDst     = 30
	tcpDport  = 36
	tcpHdrEnd = 54
)

// be16 and be32 return the value a native-endian load of the network-order
// bytes of v reads, for comparing loaded packet and socket fields.
func be16(v uint16) int32 {
	return int32(binary.NativeEndian.Uint16([]byte{byte(v >> 8), byte(v)}))
}

func be32(a netip.Addr) int32 {
	b := a.As4()
	return int32(binary.NativeEndian.Uint32(b[:]))
}

// portField is user_port as a native-endian u32 load reads it: the port in
// network order in the field's first two bytes.
func portField(p uint16) int32 {
	return int32(binary.NativeEndian.Uint32([]byte{byte(p >> 8), byte(p), 0, 0}))
}

// denyAll is a program that refuses every call it is attached to.
func denyAll() asm.Instructions {
	return asm.Instructions{asm.Mov.Imm(asm.R0, cgroupDeny), asm.Return()}
}

// sockCreate admits only AF_INET stream sockets of protocol TCP.
func sockCreate() asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, sockFamily, asm.Word),
		asm.JNE.Imm32(asm.R2, unix.AF_INET, "deny"),
		asm.LoadMem(asm.R2, asm.R1, sockType, asm.Word),
		asm.JNE.Imm32(asm.R2, unix.SOCK_STREAM, "deny"),
		asm.LoadMem(asm.R2, asm.R1, sockProtocol, asm.Word),
		asm.JNE.Imm32(asm.R2, unix.IPPROTO_TCP, "deny"),
		asm.Mov.Imm(asm.R0, cgroupAllow),
		asm.Return(),
		asm.Mov.Imm(asm.R0, cgroupDeny).WithSymbol("deny"),
		asm.Return(),
	}
}

// connect4 admits a connect only to the proxy's address and port, from a
// TCP stream socket.
func connect4(proxy netip.AddrPort) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, saUserIP4, asm.Word),
		asm.JNE.Imm32(asm.R2, be32(proxy.Addr()), "deny"),
		asm.LoadMem(asm.R2, asm.R1, saUserPort, asm.Word),
		asm.JNE.Imm32(asm.R2, portField(proxy.Port()), "deny"),
		asm.LoadMem(asm.R2, asm.R1, saType, asm.Word),
		asm.JNE.Imm32(asm.R2, unix.SOCK_STREAM, "deny"),
		asm.LoadMem(asm.R2, asm.R1, saProtocol, asm.Word),
		asm.JNE.Imm32(asm.R2, unix.IPPROTO_TCP, "deny"),
		asm.Mov.Imm(asm.R0, cgroupAllow),
		asm.Return(),
		asm.Mov.Imm(asm.R0, cgroupDeny).WithSymbol("deny"),
		asm.Return(),
	}
}

// linkIngress passes ARP and IPv4 TCP from src to the proxy, drops every
// other frame: IPv6, other ethertypes, VLAN tags, IP options, fragments,
// other protocols, addresses and ports.
func linkIngress(src netip.Addr, proxy netip.AddrPort) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, skbData, asm.Word),
		asm.LoadMem(asm.R3, asm.R1, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, ipVerIHL),
		asm.JGT.Reg(asm.R4, asm.R3, "drop"),
		asm.LoadMem(asm.R5, asm.R2, ethType, asm.Half),
		asm.JEq.Imm32(asm.R5, be16(unix.ETH_P_ARP), "pass"),
		asm.JNE.Imm32(asm.R5, be16(unix.ETH_P_IP), "drop"),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, tcpHdrEnd),
		asm.JGT.Reg(asm.R4, asm.R3, "drop"),
		asm.LoadMem(asm.R5, asm.R2, ipVerIHL, asm.Byte),
		asm.JNE.Imm32(asm.R5, 0x45, "drop"),
		asm.LoadMem(asm.R5, asm.R2, ipFrag, asm.Half),
		asm.And.Imm32(asm.R5, be16(0x3fff)), // more-fragments and offset
		asm.JNE.Imm32(asm.R5, 0, "drop"),
		asm.LoadMem(asm.R5, asm.R2, ipProto, asm.Byte),
		asm.JNE.Imm32(asm.R5, unix.IPPROTO_TCP, "drop"),
		asm.LoadMem(asm.R5, asm.R2, ipSrc, asm.Word),
		asm.JNE.Imm32(asm.R5, be32(src), "drop"),
		asm.LoadMem(asm.R5, asm.R2, ipDst, asm.Word),
		asm.JNE.Imm32(asm.R5, be32(proxy.Addr()), "drop"),
		asm.LoadMem(asm.R5, asm.R2, tcpDport, asm.Half),
		asm.JNE.Imm32(asm.R5, be16(proxy.Port()), "drop"),
		asm.Mov.Imm(asm.R0, tcPass).WithSymbol("pass"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, tcDrop).WithSymbol("drop"),
		asm.Return(),
	}
}

// cgroupHooks are the cgroup programs of one enclave, each with where it
// attaches.
type cgroupHook struct {
	name   string
	typ    ebpf.ProgramType
	attach ebpf.AttachType
	insns  asm.Instructions
}

func cgroupHooks(proxy netip.AddrPort) []cgroupHook {
	return []cgroupHook{
		{"awf_sock_create", ebpf.CGroupSock, ebpf.AttachCGroupInetSockCreate, sockCreate()},
		{"awf_connect4", ebpf.CGroupSockAddr, ebpf.AttachCGroupInet4Connect, connect4(proxy)},
		{"awf_connect6", ebpf.CGroupSockAddr, ebpf.AttachCGroupInet6Connect, denyAll()},
		{"awf_sendmsg4", ebpf.CGroupSockAddr, ebpf.AttachCGroupUDP4Sendmsg, denyAll()},
		{"awf_sendmsg6", ebpf.CGroupSockAddr, ebpf.AttachCGroupUDP6Sendmsg, denyAll()},
	}
}

// loadProgram loads one program; the verifier's log is in the error.
func loadProgram(name string, typ ebpf.ProgramType, attach ebpf.AttachType, insns asm.Instructions) (*ebpf.Program, error) {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: typ, AttachType: attach, Instructions: insns, License: "Apache-2.0",
	})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load %s: %+v", name, ve)
		}
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	return p, nil
}

// programKey names a loaded program: its name and what it was built for.
type programKey struct {
	name  string
	src   netip.Addr
	proxy netip.AddrPort
}

// programs are the programs loaded so far. A program is its instructions
// and nothing else (no maps, no state), and every enclave of a process
// attaches the same few (six per proxy address), so each is loaded and
// verified once and shared: a cgroup link and a tc filter each hold their
// own reference, so sharing changes nothing about what is attached where.
// They stay loaded for the life of the process.
var programs struct {
	mu sync.Mutex
	m  map[programKey]*ebpf.Program
}

// sharedProgram returns the loaded program for k, loading it on first use.
// The caller must not close it.
func sharedProgram(k programKey, typ ebpf.ProgramType, attach ebpf.AttachType, insns asm.Instructions) (*ebpf.Program, error) {
	programs.mu.Lock()
	defer programs.mu.Unlock()
	if p := programs.m[k]; p != nil {
		return p, nil
	}
	p, err := loadProgram(k.name, typ, attach, insns)
	if err != nil {
		return nil, err
	}
	if programs.m == nil {
		programs.m = map[programKey]*ebpf.Program{}
	}
	programs.m[k] = p
	return p, nil
}

// attachCgroup attaches each cgroup program (shared: sharedProgram) to the cgroup v2
// directory dir, as links: they detach when the links are closed, or when
// the broker dies and its descriptors with it.
func attachCgroup(dir string, proxy netip.AddrPort) ([]link.Link, error) {
	var links []link.Link
	fail := func(err error) ([]link.Link, error) {
		closeLinks(links)
		return nil, err
	}
	for _, h := range cgroupHooks(proxy) {
		p, err := sharedProgram(programKey{name: h.name, proxy: proxy}, h.typ, h.attach, h.insns)
		if err != nil {
			return fail(err)
		}
		// The link holds its own reference to the program.
		l, err := link.AttachCgroup(link.CgroupOptions{Path: dir, Attach: h.attach, Program: p})
		if err != nil {
			return fail(fmt.Errorf("attach %s to %s: %w", h.name, dir, err))
		}
		links = append(links, l)
	}
	return links, nil
}

// attachLinkIngress attaches the link program to the ingress
// of interface ifindex in the namespace at nsPath as a direct-action bpf
// filter on a clsact qdisc (tc's ingress hook, Linux 4.5 and later). A
// filter is not a link: it lives as long as its interface, so nothing has
// to be detached, and it ends with the namespace. (A tcx link, Linux 6.6,
// costs about 10 ms to attach and as much to detach, for the same hook.)
func attachLinkIngress(nsPath string, ifindex int, src netip.Addr, proxy netip.AddrPort) error {
	p, err := sharedProgram(programKey{name: "awf_link_in", src: src, proxy: proxy}, ebpf.SchedCLS, ebpf.AttachNone, linkIngress(src, proxy))
	if err != nil {
		return err
	}
	// The filter holds its own reference to the program.
	if err := clsactIngress(nsPath, ifindex, p); err != nil {
		return fmt.Errorf("attach link filter: %w", err)
	}
	return nil
}

// clsactIngress adds a clsact qdisc to interface ifindex in the namespace
// at nsPath and the program as its one ingress filter, in direct-action
// mode (its return value is the verdict: TC_ACT_OK or TC_ACT_SHOT).
func clsactIngress(nsPath string, ifindex int, p *ebpf.Program) error {
	h, done, err := handle(nsPath)
	if err != nil {
		return err
	}
	defer done()
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	if err := h.QdiscAdd(q); err != nil {
		return fmt.Errorf("clsact qdisc: %w", err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Priority: 1, Protocol: unix.ETH_P_ALL},
		Fd:          p.FD(), Name: "awf_link_in", DirectAction: true,
	}
	if err := h.FilterAdd(f); err != nil {
		return fmt.Errorf("ingress filter: %w", err)
	}
	return nil
}

func closeLinks(ls []link.Link) error {
	var errs []error
	for _, l := range ls {
		if l != nil {
			errs = append(errs, l.Close())
		}
	}
	return errors.Join(errs...)
}
