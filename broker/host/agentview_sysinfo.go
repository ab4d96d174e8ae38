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

// sysinfoABI names the system call numbers of sysinfo for GOARCH.
type sysinfoABI struct {
	native, nr       uint32 // the native audit arch and sysinfo's number
	x32nr            uint32 // sysinfo through the x32 ABI; noSyscall if none
	compat, compatNr uint32 // the 32-bit audit arch and its sysinfo
}

// noSyscall is a number no system call has.
const noSyscall = 0xffffffff

func sysinfoABIFor(goarch string) (sysinfoABI, error) {
	switch goarch {
	case "amd64":
		return sysinfoABI{native: unix.AUDIT_ARCH_X86_64, nr: 99, x32nr: 0x40000000 | 99, compat: unix.AUDIT_ARCH_I386, compatNr: 116}, nil
	case "arm64":
		return sysinfoABI{native: unix.AUDIT_ARCH_AARCH64, nr: 179, x32nr: noSyscall, compat: unix.AUDIT_ARCH_ARM, compatNr: 116}, nil
	}
	return sysinfoABI{}, fmt.Errorf("agent shim: no sysinfo filter for %s", goarch)
}

// sysinfoFilter is the classic BPF program described above.
func sysinfoFilter(abi sysinfoABI) []unix.SockFilter {
	const (
		ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		// offsets in struct seccomp_data
		offNr   = 0
		offArch = 4
	)
	return []unix.SockFilter{
		/* 0 */ {Code: ldAbs, K: offArch},
		/* 1 */ {Code: jeq, K: abi.native, Jt: 0, Jf: 4}, // → 2, else 6
		/* 2 */ {Code: ldAbs, K: offNr},
		/* 3 */ {Code: jeq, K: abi.nr, Jt: 0, Jf: 1}, // → 4, else 5
		/* 4 */ {Code: ret, K: unix.SECCOMP_RET_USER_NOTIF},
		/* 5 */ {Code: jeq, K: abi.x32nr, Jt: 3, Jf: 4}, // → 9, else 10
		/* 6 */ {Code: jeq, K: abi.compat, Jt: 0, Jf: 3}, // → 7, else 10
		/* 7 */ {Code: ldAbs, K: offNr},
		/* 8 */ {Code: jeq, K: abi.compatNr, Jt: 0, Jf: 1}, // → 9, else 10
		/* 9 */ {Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		/* 10 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW},
	}
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
