// Command enclave-probe is the network probe awf isolate verify --enclave
// runs inside a real bounded-agent enclave. It is a small static binary,
// like the loop, so it runs under the same kind of seccomp policy with no
// interpreter in the root. It reads one JSON Spec from its only argument,
// tries every target concurrently, and writes one JSON object (target id
// to result) to Spec.Out. It decides nothing: the host compares the
// results, and its own decoys' logs, with what each target must give.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker/agentloop"
)

// Spec is the probe's argument.
type Spec struct {
	Out       string   `json:"out"`
	TimeoutMs int      `json:"timeoutMs"`
	Targets   []Target `json:"targets"`
}

// Target is one thing to try. Kinds: tcp and udp (Addr is host:port, IPv4
// or IPv6), unix (Addr is a path, "@name" for the abstract namespace),
// vsock (Addr is the port on the host's CID), and the socket families raw,
// packet, netlink and vsock-socket (only socket(2) is tried).
type Target struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Addr string `json:"addr,omitempty"`
}

// Results. Anything else is "<step>:<errno name>".
const (
	Exchanged = "exchanged" // connected and the peer sent bytes
	Connected = "connected" // connected, nothing received
	Reply     = "reply"     // a datagram came back
	Sent      = "sent"      // a datagram left, nothing came back
	Open      = "open"      // the socket could be created
)

func main() {
	// Started ahead as the loop is (direct), it waits for its start.
	if err := agentloop.AwaitHandedStart(); err != nil {
		fmt.Fprintln(os.Stderr, "enclave-probe:", err)
		os.Exit(2)
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: enclave-probe SPEC-JSON")
		os.Exit(2)
	}
	var s Spec
	if err := json.Unmarshal([]byte(os.Args[1]), &s); err != nil || s.Out == "" {
		fmt.Fprintln(os.Stderr, "enclave-probe: bad spec")
		os.Exit(2)
	}
	if s.TimeoutMs <= 0 || s.TimeoutMs > 10000 {
		s.TimeoutMs = 1000
	}
	res := run(s)
	b, _ := json.Marshal(res)
	if err := os.WriteFile(s.Out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "enclave-probe:", err)
		os.Exit(1)
	}
}

func run(s Spec) map[string]string {
	timeout := time.Duration(s.TimeoutMs) * time.Millisecond
	var mu sync.Mutex
	res := map[string]string{}
	var wg sync.WaitGroup
	for _, t := range s.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := try(t, timeout)
			mu.Lock()
			res[t.ID] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	return res
}

func try(t Target, timeout time.Duration) string {
	switch t.Kind {
	case "tcp", "unix":
		return stream(t.Kind, t.Addr, timeout)
	case "udp":
		return datagram(t.Addr, timeout)
	case "vsock":
		return vsock(t.Addr)
	case "raw":
		return socketOnly(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	case "packet":
		return socketOnly(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	case "netlink":
		return socketOnly(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	case "vsock-socket":
		return socketOnly(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	case "udp-socket":
		return socketOnly(unix.AF_INET, unix.SOCK_DGRAM, 0)
	case "tcp6-socket":
		return socketOnly(unix.AF_INET6, unix.SOCK_STREAM, 0)
	case "unix-socket":
		return socketOnly(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	}
	return "unknown-kind"
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func stream(network, addr string, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return "connect:" + errName(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	_, _ = c.Write([]byte("probe\n"))
	buf := make([]byte, 64)
	if n, _ := c.Read(buf); n > 0 {
		return Exchanged
	}
	return Connected
}

func datagram(addr string, timeout time.Duration) string {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "socket:" + errName(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("probe\n")); err != nil {
		return "send:" + errName(err)
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64)
	if n, err := c.Read(buf); n > 0 {
		return Reply
	} else if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return "recv:" + errName(err)
	}
	return Sent
}

func vsock(port string) string {
	var p uint32
	if _, err := fmt.Sscan(port, &p); err != nil {
		return "bad-port"
	}
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "socket:" + errName(err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_HOST, Port: p}); err != nil {
		return "connect:" + errName(err)
	}
	return Connected
}

func socketOnly(family, typ, proto int) string {
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return "socket:" + errName(err)
	}
	unix.Close(fd)
	return Open
}

// errName is the errno name of err, "timeout" for a deadline, or "error".
func errName(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		if n := unix.ErrnoName(en); n != "" {
			return n
		}
		return fmt.Sprintf("errno%d", int(en))
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return "timeout"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "error"
}
