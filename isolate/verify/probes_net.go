package verify

import (
	"fmt"
	"slices"
	"strings"
)

// networkProbes try to reach anything outside the sandbox's own, empty
// network namespace.
func networkProbes() []Probe {
	socketFamily := func(id, title, call string) Probe {
		p := blockedProbe(id, title, "The sandbox can open this socket family: kernel attack surface, and a channel if the family reaches outside.",
			`{"socket":"EPERM"}`, "socket")
		p.body = "import socket\ndef f():\n    s = " + call + "\n    s.close()\nanswer({\"socket\": attempt(\"socket\", f)})\n"
		return p
	}
	// hostConnect is a TCP connect to one of verify's listeners on the
	// host's loopback, judged by what the listener saw.
	hostConnect := func(id, title, onFail, listener string) Probe {
		return Probe{ID: id, Title: title, OnFail: onFail, schema: errnoFields("socket", "connect"),
			check: checkListener(listener, "socket", "connect"), example: `{"socket":"EPERM","connect":"other"}`}
	}
	return inGroup("network", []Probe{
		{
			ID:     "net/interfaces",
			Title:  "Lists the network interfaces in /proc/net/dev (from the host where the sandbox has no /proc): only lo may exist.",
			OnFail: "The sandbox shares a network namespace with the host or another container.",
			schema: sObj("state", sEnum("lo-only", "none", "other", "unreadable"), "count", sInt(0, 64)),
			check: func(c *probeCtx) (Status, string) {
				if c.str("state") == "unreadable" && c.job.ifaces != nil {
					if other := slices.DeleteFunc(slices.Clone(c.job.ifaces), func(s string) bool { return s == "lo" }); len(other) > 0 {
						return Fail, fmt.Sprintf("%d interfaces besides lo in the job's namespace: the host network namespace is shared", len(other)) + fromHost
					}
					return Pass, "interfaces: " + strings.Join(c.job.ifaces, " ") + fromHost
				}
				if c.str("state") == "other" {
					return Fail, fmt.Sprintf("%d interfaces besides lo are visible: the host network namespace is shared", c.num("count"))
				}
				return Pass, "interfaces: " + c.str("state")
			},
			example: `{"state":"lo-only","count":1}`,
		},
		{
			ID:     "net/routes",
			Title:  "Counts the usable routes in /proc/net/route and /proc/net/ipv6_route (from the host where the sandbox has no /proc): none may leave through a device other than lo.",
			OnFail: "The sandbox has a route out: it shares or was given a network.",
			schema: sObj("v4", sInt(-1, 64), "v6", sInt(-1, 64)),
			check: func(c *probeCtx) (Status, string) {
				if c.num("v4") == -1 && c.num("v6") == -1 {
					switch v4, v6 := c.job.routes4, c.job.routes6; {
					case v4 < 0 && v6 < 0:
						return Fail, "the route tables can be read neither from inside nor from the host"
					case v4 > 0 || v6 > 0:
						return Fail, fmt.Sprintf("v4=%d, v6=%d usable routes through a device other than lo", v4, v6) + fromHost
					}
					return Pass, "v4=0 v6=0" + fromHost
				}
				// One table alone may be missing (IPv6 disabled): it has no route.
				if v4, v6 := c.num("v4"), c.num("v6"); v4 > 0 || v6 > 0 {
					return Fail, fmt.Sprintf("v4=%d, v6=%d usable routes through a device other than lo", v4, v6)
				}
				return Pass, fmt.Sprintf("v4=%d v6=%d", max(c.num("v4"), 0), max(c.num("v6"), 0))
			},
			example: `{"v4":0,"v6":0}`,
		},
		hostConnect("net/tcp-host", "Opens an AF_INET socket and connects to a listener verify runs on the host's 127.0.0.1.",
			"The sandbox reached a host service over TCP: no network isolation.", "tcp4"),
		hostConnect("net/tcp6-host", "Opens an AF_INET6 socket and connects to the host's [::1] (to verify's listener when the host has IPv6 loopback).",
			"The sandbox reached a host service over IPv6: no network isolation.", "tcp6"),
		{
			ID:     "net/udp-host",
			Title:  "Sends a UDP datagram to a responder verify runs on the host's 127.0.0.1 and waits for the reply.",
			OnFail: "The sandbox exchanged datagrams with the host: no network isolation.",
			schema: sObj("socket", sErrno, "send", sErrno, "reply", sBool),
			check: func(c *probeCtx) (Status, string) {
				if c.flag("reply") || c.hits["udp"] > 0 {
					return Fail, fmt.Sprintf("a datagram crossed to the host (host saw %d, reply received %v)", c.hits["udp"], c.flag("reply"))
				}
				return Pass, fmt.Sprintf("no datagram reached the host: socket=%s send=%s", c.str("socket"), c.str("send"))
			},
			example: `{"socket":"EPERM","send":"other","reply":false}`,
		},
		{
			ID:     "net/dns",
			Title:  "Reads /etc/resolv.conf and sends a DNS query to a resolver verify runs on the host's loopback.",
			OnFail: "The sandbox can resolve names through the host: DNS is an exfiltration channel.",
			schema: sObj("resolv_conf", sEnum("absent", "none", "loopback", "network", "unreadable"), "query", sEnum(append([]string{"answered", "garbled"}, errnoVocab...)...)),
			check: func(c *probeCtx) (Status, string) {
				if oneOf(c.str("query"), "answered", "garbled") || c.hits["dns"] > 0 {
					return Fail, fmt.Sprintf("a DNS query reached the host resolver (host saw %d, answer %s)", c.hits["dns"], c.str("query"))
				}
				if c.str("resolv_conf") == "network" {
					return Warn, "no DNS query got out, but the root filesystem names a network resolver in /etc/resolv.conf"
				}
				return Pass, fmt.Sprintf("no DNS query got out (query=%s, resolv.conf %s)", c.str("query"), c.str("resolv_conf"))
			},
			example: `{"resolv_conf":"absent","query":"EPERM"}`,
		},
		{
			// The policy refuses socket() itself (every socket draws from the
			// host-wide inode counter), so the connect attempt alone would
			// prove only the filter. /proc/net/unix lists the sockets of the
			// network namespace, abstract names included, and needs no
			// socket: seeing verify's listener there proves the namespace is
			// shared even while the filter holds.
			ID:     "net/abstract-unix",
			Title:  "Looks for the abstract Unix socket verify listens on in the host's network namespace in /proc/net/unix (from the host where the sandbox has no /proc), and connects to it.",
			OnFail: "Abstract Unix sockets are shared with the host: any host service on one is reachable.",
			schema: sObj("socket", sErrno, "connect", sErrno, "listed", sEnum("visible", "hidden", "unreadable")),
			check: func(c *probeCtx) (Status, string) {
				st, ev := checkListener("abstract", "socket", "connect")(c)
				if c.str("listed") == "unreadable" && c.job.unixNames != nil && st == Pass {
					if slices.Contains(c.job.unixNames, c.fx.abstract.addr) {
						return Fail, "verify's abstract socket is listed in the job's /proc/net/unix: the sandbox shares the host's network namespace (" + ev + ")" + fromHost
					}
					return Pass, ev + "; the job's /proc/net/unix: listener hidden" + fromHost
				}
				switch {
				case st != Pass:
					return st, ev
				case c.str("listed") == "visible":
					return Fail, "verify's abstract socket is listed in /proc/net/unix: the sandbox shares the host's network namespace (" + ev + ")"
				}
				return Pass, ev + "; /proc/net/unix: listener " + c.str("listed")
			},
			example: `{"socket":"EPERM","connect":"other","listed":"hidden"}`,
		},
		wantProbe("net/engine-sockets", "Looks for container-engine and awf sockets (docker.sock, containerd, podman, the broker socket).",
			"A root-equivalent or broker socket is visible inside the sandbox.", sObj("visible", sInt(0, 16)), `{"visible":0}`),
		socketFamily("net/socket-netlink", "Opens an AF_NETLINK (NETLINK_ROUTE) socket.", "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)"),
		socketFamily("net/socket-packet", "Opens an AF_PACKET raw socket.", "socket.socket(17, socket.SOCK_RAW, 0)"),
		socketFamily("net/socket-raw", "Opens an AF_INET raw ICMP socket.", "socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)"),
		socketFamily("net/socket-vsock", "Opens an AF_VSOCK socket (host and sibling-VM channel).", "socket.socket(40, socket.SOCK_STREAM, 0)"),
		socketFamily("net/socket-alg", "Opens an AF_ALG socket (kernel crypto API).", "socket.socket(38, socket.SOCK_SEQPACKET, 0)"),
		socketFamily("net/socket-key", "Opens an AF_KEY socket (IPsec key management).", "socket.socket(15, socket.SOCK_RAW, 2)"),
	})
}

// checkListener passes when the socket or the connect failed and the host
// listener saw nothing during the probe.
func checkListener(name string, fields ...string) func(c *probeCtx) (Status, string) {
	return func(c *probeCtx) (Status, string) {
		how, _ := c.outcomes(fields, nil)
		if c.hits[name] > 0 || c.str(fields[len(fields)-1]) == "ok" {
			return Fail, fmt.Sprintf("connected to the host listener (%s; host saw %d connections)", strings.Join(how, " "), c.hits[name])
		}
		return Pass, "no connection reached the host: " + strings.Join(how, " ")
	}
}
