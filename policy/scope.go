package policy

import (
	_ "embed"

	"golang.org/x/sys/unix"
)

// Scopes a policy header can declare. A policy without a scope line is a
// query policy: its jobs (scripts) have no network at all, so no socket
// beyond AF_UNIX may ever be allowed in it (checkAllow).
const (
	// ScopeQuery is the implicit scope of a policy without a scope line.
	ScopeQuery = ""
	// ScopeEnclaveLoop is the bounded-agent enclave's fixed loop (and the
	// probe verify runs in its place). Its one peer is the API proxy over
	// TCP/IPv4, so exactly one socket shape may be allowed: AF_INET,
	// SOCK_STREAM (with SOCK_CLOEXEC and SOCK_NONBLOCK, nothing else) and
	// protocol 0 or IPPROTO_TCP. The network namespace and the eBPF hooks
	// decide where that socket can go; the policy keeps every other stack
	// (raw, packet, netlink, vsock, IPv6, UDP, Unix) out of the loop's reach.
	ScopeEnclaveLoop = "enclave-loop"
)

// scopes are the scope names the parser accepts.
var scopes = map[string]bool{ScopeEnclaveLoop: true}

// sockTypeMask is the kernel's SOCK_TYPE_MASK: socket(2) takes the type
// from these bits and refuses (EINVAL) any flag bit but SOCK_CLOEXEC and
// SOCK_NONBLOCK.
const sockTypeMask = 0xf

// enclaveLoopNeverAllowed are socket calls an enclave-loop policy may not
// allow: the loop only dials out, it never accepts a peer or names itself.
var enclaveLoopNeverAllowed = map[string]string{
	"bind": "the loop dials the proxy and never names a local address", "listen": "the loop accepts no peer",
	"accept": "the loop accepts no peer", "accept4": "the loop accepts no peer",
	"socketpair": "the loop needs no local socket pair",
}

// checkEnclaveLoopAllow applies the enclave-loop scope's socket invariants
// to one allow rule; it reports whether the rule is a socket rule the
// scope decided (so the query invariants do not apply to it).
func (ps *parser) checkEnclaveLoopAllow(r Rule) bool {
	if why, ok := enclaveLoopNeverAllowed[r.Syscall]; ok {
		ps.errorf(r.Col, "%s may not be allowed in an %s policy (%s)", r.Syscall, ScopeEnclaveLoop, why)
		return true
	}
	if r.Syscall != "socket" {
		return false
	}
	if !enclaveLoopSocket(r) {
		ps.errorf(r.Col, "socket may only be allowed in an %s policy as arg0 == AF_INET && arg1 & 0xf == SOCK_STREAM (flags at most SOCK_CLOEXEC|SOCK_NONBLOCK) && arg2 in {0, IPPROTO_TCP}, with nothing else compared", ScopeEnclaveLoop)
	}
	return true
}

// enclaveLoopSocket reports whether r admits only TCP over IPv4: every
// argument triple it matches is one the kernel reads as AF_INET,
// SOCK_STREAM and protocol 0 or IPPROTO_TCP (for AF_INET stream sockets
// protocol 0 is TCP; SCTP and MPTCP need their own protocol numbers).
func enclaveLoopSocket(r Rule) bool {
	if len(r.Conds) != 3 {
		return false
	}
	fam, ok0 := condOn(r, 0)
	typ, ok1 := condOn(r, 1)
	proto, ok2 := condOn(r, 2)
	if !ok0 || !ok1 || !ok2 {
		return false
	}
	// The kernel reads family and protocol as 32-bit ints: a mask must keep
	// all of their bits, and each admitted value must be the wanted one.
	whole := func(c Cond, allowed ...uint64) bool {
		if c.Op != OpEq || (c.HasMask && c.Mask&0xffffffff != 0xffffffff) || len(c.Values) == 0 {
			return false
		}
		for _, v := range c.Values {
			found := false
			for _, a := range allowed {
				found = found || v == a
			}
			if !found {
				return false
			}
		}
		return true
	}
	if !whole(fam, unix.AF_INET) || !whole(proto, 0, unix.IPPROTO_TCP) {
		return false
	}
	// The type: the comparison must see the type bits, and each value must
	// say SOCK_STREAM with no flag the kernel does not accept.
	if typ.Op != OpEq || (typ.HasMask && typ.Mask&sockTypeMask != sockTypeMask) || len(typ.Values) == 0 {
		return false
	}
	for _, v := range typ.Values {
		if v&sockTypeMask != unix.SOCK_STREAM || v&^uint64(sockTypeMask|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK) != 0 {
			return false
		}
	}
	return true
}

// disjointOnSomeArg reports whether two rules can never match the same
// call: some argument is compared by both, and their value sets on it do
// not meet (both unmasked, as ranges of one 64-bit number, or equalities,
// masked or not, whose values differ on a bit both compare). Whatever precedence
// libseccomp gives them, no call sees both, so a reviewer can read each
// rule alone: "allow socket if arg0 == AF_INET && arg1 & 0xf == SOCK_STREAM
// && ..." next to "errno EPERM socket if arg0 != AF_INET".
func disjointOnSomeArg(a, b Rule) bool {
	for _, ca := range a.Conds {
		cb, ok := condOn(b, ca.Arg)
		if !ok {
			continue
		}
		if unmaskedOnSameArg(ca, cb) {
			if _, _, overlap := firstOverlap(condIntervals(ca), condIntervals(cb)); !overlap {
				return true
			}
			continue
		}
		if ca.Op == OpEq && cb.Op == OpEq && (ca.HasMask || cb.HasMask) || sameShape(ca, cb) {
			// x & ma == va and x & mb == vb can both hold only if va and vb
			// agree on the bits both masks keep (an unmasked equality keeps
			// every bit).
			both := eqMask(ca) & eqMask(cb)
			common := false
			for _, va := range ca.Values {
				for _, vb := range cb.Values {
					common = common || (va^vb)&both == 0
				}
			}
			if !common {
				return true
			}
		}
	}
	return false
}

// eqMask is the bits an equality compares: its mask, or all 64.
func eqMask(c Cond) uint64 {
	if c.HasMask {
		return c.Mask
	}
	return ^uint64(0)
}

//go:embed agent-loop.policy
var agentLoopSource []byte

// AgentLoopName is the name of the embedded enclave-loop policy.
const AgentLoopName = "agent-loop.policy"

// AgentLoop returns the embedded policy of the bounded-agent enclave's loop
// (policy/agent-loop.policy, scope enclave-loop).
func AgentLoop() (*Policy, error) {
	return Parse(AgentLoopName, agentLoopSource)
}
