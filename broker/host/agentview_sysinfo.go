package host

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysinfo(2) answers from the kernel's live state: load averages, free,
// shared and buffer memory, free swap and the number of threads on the
// host. A sandbox moves every one of them, and the load averages stay up
// for minutes after it ends, so an agent thawed after a query could still
// read what the query's script did. /proc can be frozen by mounts; a
// system call cannot. So the shim puts a seccomp filter on the agent that
// hands each native sysinfo call to the shim (SECCOMP_RET_USER_NOTIF), and
// the shim writes back the values it read when the agent started. Only the
// uptime moves on, from the shim's own clock: it is the time, which the
// agent can read anyway. The compat and x32 entry points, whose struct has
// another layout, fail with ENOSYS, as on a kernel built without them.
//
// The filter is the agent's: every process it starts inherits it, and no
// process can remove it. One cost: a process of the agent cannot install a
// seccomp filter with its own listener (the kernel allows one listener in
// a chain and answers EBUSY); plain filters still work.

// The same filter closes a second host-wide counter. Since Linux 6.9 the
// inode number of a pidfd comes from one counter that every task created on
// the host moves, a sandbox's threads included, so an agent thawed after a
// query could open a pidfd and read how many tasks the query made. The
// agent gets no pidfd: pidfd_open and clone3 (whose flags sit in memory the
// filter cannot read) fail with ENOSYS, as on an older kernel, and glibc,
// Go and libuv fall back to clone; clone with CLONE_PIDFD fails with
// EINVAL; SO_PEERPIDFD and SO_PASSPIDFD (a pidfd of a socket's peer) fail
// with ENOPROTOOPT. 32-bit compat processes get the same answers, and the
// x32 ABI, which nothing on a CI host uses, gets ENOSYS for every call.

// sysinfoABI names the system call numbers the filter handles for GOARCH.
type sysinfoABI struct {
	native, nr uint32 // the native audit arch and sysinfo's number
	x32        bool   // whether the native arch has the x32 ABI (bit 30 of the number)
	compat     uint32 // the 32-bit audit arch
	// calls of each ABI, native first
	sys, compatSys abiCalls
}

// abiCalls are one ABI's numbers of the calls that can hand out a pidfd.
type abiCalls struct {
	sysinfo, clone, clone3, pidfdOpen, getsockopt, setsockopt uint32
	socketcall                                                uint32 // noSyscall if the ABI has none
}

// noSyscall is a number no system call has.
const noSyscall = 0xffffffff

// Socket options that hand out a pidfd of the peer (Linux 6.5).
const (
	soPassPidfd = 76
	soPeerPidfd = 77
	clonePidfd  = 0x1000
)

func sysinfoABIFor(goarch string) (sysinfoABI, error) {
	i386 := abiCalls{sysinfo: 116, clone: 120, clone3: 435, pidfdOpen: 434, getsockopt: 365, setsockopt: 366, socketcall: 102}
	switch goarch {
	case "amd64":
		return sysinfoABI{native: unix.AUDIT_ARCH_X86_64, nr: 99, x32: true, compat: unix.AUDIT_ARCH_I386,
			sys:       abiCalls{sysinfo: 99, clone: 56, clone3: 435, pidfdOpen: 434, getsockopt: 55, setsockopt: 54, socketcall: noSyscall},
			compatSys: i386}, nil
	case "arm64":
		return sysinfoABI{native: unix.AUDIT_ARCH_AARCH64, nr: 179, compat: unix.AUDIT_ARCH_ARM,
			sys:       abiCalls{sysinfo: 179, clone: 220, clone3: 435, pidfdOpen: 434, getsockopt: 209, setsockopt: 208, socketcall: noSyscall},
			compatSys: abiCalls{sysinfo: 116, clone: 120, clone3: 435, pidfdOpen: 434, getsockopt: 295, setsockopt: 294, socketcall: noSyscall}}, nil
	}
	return sysinfoABI{}, fmt.Errorf("agent shim: no sysinfo filter for %s", goarch)
}

// bpfProg assembles a classic BPF program with forward jumps to labels.
type bpfProg struct {
	ins    []unix.SockFilter
	labels map[string]int
	fix    []bpfFix
}

type bpfFix struct {
	at     int
	jt, jf string // "" = next instruction
}

func (p *bpfProg) label(name string) { p.labels[name] = len(p.ins) }

func (p *bpfProg) stmt(code uint16, k uint32) {
	p.ins = append(p.ins, unix.SockFilter{Code: code, K: k})
}

func (p *bpfProg) jump(code uint16, k uint32, jt, jf string) {
	p.fix = append(p.fix, bpfFix{at: len(p.ins), jt: jt, jf: jf})
	p.ins = append(p.ins, unix.SockFilter{Code: code, K: k})
}

func (p *bpfProg) assemble() []unix.SockFilter {
	for _, f := range p.fix {
		off := func(l string) uint8 {
			if l == "" {
				return 0
			}
			to, ok := p.labels[l]
			if !ok || to <= f.at || to-f.at-1 > 255 {
				panic("agent shim: bad filter label " + l)
			}
			return uint8(to - f.at - 1)
		}
		p.ins[f.at].Jt, p.ins[f.at].Jf = off(f.jt), off(f.jf)
	}
	return p.ins
}

// sysinfoFilter is the classic BPF program described above.
func sysinfoFilter(abi sysinfoABI) []unix.SockFilter {
	const (
		ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		// offsets in struct seccomp_data (little-endian low words)
		offNr   = 0
		offArch = 4
		offArg0 = 16
		offArg1 = 24
		offArg2 = 32
	)
	p := &bpfProg{labels: map[string]int{}}
	// calls emits the checks of one ABI; nr is loaded.
	calls := func(c abiCalls, prefix string, sysinfo string) {
		p.jump(jeq, c.sysinfo, sysinfo, "")
		p.jump(jeq, c.pidfdOpen, "enosys", "")
		p.jump(jeq, c.clone3, "enosys", "")
		p.jump(jeq, c.socketcall, "enosys", "")
		p.jump(jeq, c.clone, prefix+"clone", "")
		p.jump(jeq, c.getsockopt, prefix+"sockopt", "")
		p.jump(jeq, c.setsockopt, prefix+"sockopt", "allow")
		p.label(prefix + "clone")
		p.stmt(ldAbs, offArg0)
		p.jump(jset, clonePidfd, "einval", "allow")
		p.label(prefix + "sockopt")
		p.stmt(ldAbs, offArg1)
		p.jump(jeq, unix.SOL_SOCKET, "", "allow")
		p.stmt(ldAbs, offArg2)
		p.jump(jeq, soPassPidfd, "enoprotoopt", "")
		p.jump(jeq, soPeerPidfd, "enoprotoopt", "allow")
	}
	p.stmt(ldAbs, offArch)
	p.jump(jeq, abi.native, "", "compat")
	p.stmt(ldAbs, offNr)
	if abi.x32 {
		p.jump(jge, 0x40000000, "enosys", "")
	}
	calls(abi.sys, "n", "notify")
	p.label("compat")
	p.jump(jeq, abi.compat, "", "allow")
	p.stmt(ldAbs, offNr)
	calls(abi.compatSys, "c", "enosys")
	p.label("notify")
	p.stmt(ret, unix.SECCOMP_RET_USER_NOTIF)
	p.label("enosys")
	p.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	p.label("einval")
	p.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EINVAL))
	p.label("enoprotoopt")
	p.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOPROTOOPT))
	p.label("allow")
	p.stmt(ret, unix.SECCOMP_RET_ALLOW)
	return p.assemble()
}

// seccompNotif is struct seccomp_notif.
type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

// seccompNotifResp is struct seccomp_notif_resp.
type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// frozenSysinfo answers the agent's sysinfo calls.
type frozenSysinfo struct {
	info  unix.Sysinfo_t
	taken time.Time // monotonic, for the uptime
}

// freezeSysinfo reads sysinfo now.
func freezeSysinfo() (frozenSysinfo, error) {
	var f frozenSysinfo
	if err := unix.Sysinfo(&f.info); err != nil {
		return f, fmt.Errorf("agent shim: sysinfo: %w", err)
	}
	f.taken = time.Now()
	return f, nil
}

// installSysinfoFilter loads the filter on the calling thread, which must
// be the locked thread that starts the agent (the filter is not
// synchronised to the shim's other threads), and returns the listener.
func installSysinfoFilter() (int, error) {
	abi, err := sysinfoABIFor(runtime.GOARCH)
	if err != nil {
		return -1, err
	}
	f := sysinfoFilter(abi)
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	fd, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(f)
	if e != 0 {
		return -1, fmt.Errorf("agent shim: sysinfo filter: %w", e)
	}
	unix.CloseOnExec(int(fd))
	return int(fd), nil
}

// serveSysinfo answers notifications on listener until it fails for good.
// It runs for the shim's life; the shim's own locked thread carries the
// filter too, so the listener never loses its last user before the shim
// exits.
// If it ever stops, it closes the listener, so that the agent's sysinfo
// calls fail with ENOSYS instead of waiting for an answer.
func serveSysinfo(listener int, f frozenSysinfo, abi sysinfoABI) {
	defer unix.Close(listener)
	for {
		var req seccompNotif
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&req)))
		switch {
		case e == unix.EINTR || e == unix.ENOENT: // a signal; or the caller died before we read it
			continue
		case e != 0:
			return
		}
		resp := seccompNotifResp{ID: req.ID}
		if req.Arch != abi.native || uint32(req.Nr) != abi.nr {
			resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		} else if err := f.writeTo(listener, req); err != nil {
			resp.Error = -int32(unix.EFAULT)
		}
		_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	}
}

// writeTo writes the frozen struct where req's caller asked. It opens the
// caller's memory first and then checks that the notification is still
// live, so a pid reused after the caller died cannot be written to.
func (f frozenSysinfo) writeTo(listener int, req seccompNotif) error {
	mem, err := os.OpenFile("/proc/"+strconv.FormatUint(uint64(req.Pid), 10)+"/mem", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	id := req.ID
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id))); e != 0 {
		return e
	}
	info := f.info
	info.Uptime += int64(time.Since(f.taken) / time.Second)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&info)), unsafe.Sizeof(info))
	addr := req.Args[0]
	if addr > 1<<62 {
		return errors.New("address out of range")
	}
	_, err = mem.WriteAt(b, int64(addr))
	return err
}
