package enclave

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// frame builds an Ethernet frame: IPv4 with a 20-byte header (ihl 5
// unless verIHL says otherwise) and a 20-byte TCP or UDP header.
func frame(ethType uint16, verIHL byte, frag uint16, proto byte, src, dst netip.Addr, dport uint16) []byte {
	b := make([]byte, 14+20+20)
	binary.BigEndian.PutUint16(b[12:], ethType)
	b[14] = verIHL
	binary.BigEndian.PutUint16(b[16:], 40)
	binary.BigEndian.PutUint16(b[20:], frag)
	b[22] = 64
	b[23] = proto
	s, d := src.As4(), dst.As4()
	copy(b[26:], s[:])
	copy(b[30:], d[:])
	binary.BigEndian.PutUint16(b[34:], 40000)
	binary.BigEndian.PutUint16(b[36:], dport)
	return b
}

// TestLinkFilterVerdicts runs the link program on crafted frames with the
// kernel's test runner: only ARP and unfragmented TCP from the enclave to
// the proxy's address and port pass.
func TestLinkFilterVerdicts(t *testing.T) {
	proxy := netip.AddrPortFrom(ProxyAddr(), DefaultPort)
	p, err := loadProgram("awf_link_in", ebpf.SchedCLS, ebpf.AttachNone, linkIngress(EnclaveAddr(), proxy))
	require.NoError(t, err)
	defer p.Close()
	ok := func() []byte {
		return frame(unix.ETH_P_IP, 0x45, 0, unix.IPPROTO_TCP, EnclaveAddr(), ProxyAddr(), DefaultPort)
	}
	arp := make([]byte, 42)
	binary.BigEndian.PutUint16(arp[12:], unix.ETH_P_ARP)
	for _, tc := range []struct {
		name string
		pkt  []byte
		want uint32
	}{
		{"tcp to the proxy", ok(), tcPass},
		{"arp", arp, tcPass},
		{"tcp to another port", frame(unix.ETH_P_IP, 0x45, 0, unix.IPPROTO_TCP, EnclaveAddr(), ProxyAddr(), DefaultPort+1), tcDrop},
		{"udp to the proxy's port", frame(unix.ETH_P_IP, 0x45, 0, unix.IPPROTO_UDP, EnclaveAddr(), ProxyAddr(), DefaultPort), tcDrop},
		{"icmp", frame(unix.ETH_P_IP, 0x45, 0, unix.IPPROTO_ICMP, EnclaveAddr(), ProxyAddr(), DefaultPort), tcDrop},
		{"tcp to another address", frame(unix.ETH_P_IP, 0x45, 0, unix.IPPROTO_TCP, EnclaveAddr(), NeighbourAddr(), DefaultPort), tcDrop},
		{"tcp from another address", frame(unix.ETH_P_IP, 0x45, 0, unix.IPPROTO_TCP, NeighbourAddr(), ProxyAddr(), DefaultPort), tcDrop},
		{"ip options", frame(unix.ETH_P_IP, 0x46, 0, unix.IPPROTO_TCP, EnclaveAddr(), ProxyAddr(), DefaultPort), tcDrop},
		{"first fragment", frame(unix.ETH_P_IP, 0x45, 0x2000, unix.IPPROTO_TCP, EnclaveAddr(), ProxyAddr(), DefaultPort), tcDrop},
		{"later fragment", frame(unix.ETH_P_IP, 0x45, 0x0001, unix.IPPROTO_TCP, EnclaveAddr(), ProxyAddr(), DefaultPort), tcDrop},
		{"don't fragment is fine", frame(unix.ETH_P_IP, 0x45, 0x4000, unix.IPPROTO_TCP, EnclaveAddr(), ProxyAddr(), DefaultPort), tcPass},
		{"ipv6", frame(unix.ETH_P_IPV6, 0x45, 0, unix.IPPROTO_TCP, EnclaveAddr(), ProxyAddr(), DefaultPort), tcDrop},
		{"vlan", frame(unix.ETH_P_8021Q, 0x45, 0, unix.IPPROTO_TCP, EnclaveAddr(), ProxyAddr(), DefaultPort), tcDrop},
		{"truncated tcp header", ok()[:40], tcDrop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Run(&ebpf.RunOptions{Data: tc.pkt})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
