package policy

import (
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// The symbolic constants a policy may use in conditions. The values are the
// asm-generic ones, which x86_64 and aarch64 share. Each family is also used
// to label decision-table cases for the syscall arguments it belongs to.
var (
	cloneFlags = map[string]uint64{
		"CLONE_VM": unix.CLONE_VM, "CLONE_FS": unix.CLONE_FS, "CLONE_FILES": unix.CLONE_FILES,
		"CLONE_SIGHAND": unix.CLONE_SIGHAND, "CLONE_PIDFD": unix.CLONE_PIDFD,
		"CLONE_PTRACE": unix.CLONE_PTRACE, "CLONE_VFORK": unix.CLONE_VFORK,
		"CLONE_PARENT": unix.CLONE_PARENT, "CLONE_THREAD": unix.CLONE_THREAD,
		"CLONE_NEWNS": unix.CLONE_NEWNS, "CLONE_SYSVSEM": unix.CLONE_SYSVSEM,
		"CLONE_SETTLS": unix.CLONE_SETTLS, "CLONE_PARENT_SETTID": unix.CLONE_PARENT_SETTID,
		"CLONE_CHILD_CLEARTID": unix.CLONE_CHILD_CLEARTID, "CLONE_UNTRACED": unix.CLONE_UNTRACED,
		"CLONE_CHILD_SETTID": unix.CLONE_CHILD_SETTID, "CLONE_NEWCGROUP": unix.CLONE_NEWCGROUP,
		"CLONE_NEWUTS": unix.CLONE_NEWUTS, "CLONE_NEWIPC": unix.CLONE_NEWIPC,
		"CLONE_NEWUSER": unix.CLONE_NEWUSER, "CLONE_NEWPID": unix.CLONE_NEWPID,
		"CLONE_NEWNET": unix.CLONE_NEWNET, "CLONE_IO": unix.CLONE_IO,
	}
	addressFamilies = map[string]uint64{
		"AF_UNSPEC": unix.AF_UNSPEC, "AF_UNIX": unix.AF_UNIX, "AF_INET": unix.AF_INET,
		"AF_INET6": unix.AF_INET6, "AF_NETLINK": unix.AF_NETLINK, "AF_PACKET": unix.AF_PACKET,
		"AF_KEY": unix.AF_KEY, "AF_ALG": unix.AF_ALG, "AF_VSOCK": unix.AF_VSOCK,
		"AF_BLUETOOTH": unix.AF_BLUETOOTH, "AF_XDP": unix.AF_XDP, "AF_CAN": unix.AF_CAN,
		"AF_TIPC": unix.AF_TIPC, "AF_RDS": unix.AF_RDS,
	}
	// socketTypes are the socket(2) type bits an enclave-loop policy names
	// (scope.go): the stream type and the two flags the kernel accepts.
	socketTypes = map[string]uint64{
		"SOCK_STREAM": unix.SOCK_STREAM, "SOCK_NONBLOCK": unix.SOCK_NONBLOCK, "SOCK_CLOEXEC": unix.SOCK_CLOEXEC,
	}
	socketProtocols = map[string]uint64{"IPPROTO_TCP": unix.IPPROTO_TCP}
	// prctlOptions are the prctl(2) options a policy names: the Go runtime
	// names its anonymous mappings with PR_SET_VMA and ignores a failure.
	prctlOptions = map[string]uint64{"PR_SET_VMA": unix.PR_SET_VMA}

	ioctlCommands = map[string]uint64{
		"TCGETS": unix.TCGETS, "TCSETS": unix.TCSETS, "TIOCGWINSZ": unix.TIOCGWINSZ,
		"TIOCSWINSZ": unix.TIOCSWINSZ, "FIONREAD": 0x541B, "FIONBIO": 0x5421,
		"FIOCLEX": 0x5451, "FIONCLEX": 0x5450, "FIOASYNC": 0x5452,
		"TIOCSTI": unix.TIOCSTI, "TIOCLINUX": 0x541C, "TIOCSETD": unix.TIOCSETD,
		"TIOCGPGRP": unix.TIOCGPGRP, "TIOCSCTTY": unix.TIOCSCTTY, "TIOCCONS": unix.TIOCCONS,
	}
	fcntlCommands = map[string]uint64{
		"F_DUPFD": unix.F_DUPFD, "F_GETFD": unix.F_GETFD, "F_SETFD": unix.F_SETFD,
		"F_GETFL": unix.F_GETFL, "F_SETFL": unix.F_SETFL, "F_GETLK": unix.F_GETLK,
		"F_SETLK": unix.F_SETLK, "F_SETLKW": unix.F_SETLKW, "F_SETOWN": unix.F_SETOWN,
		"F_GETOWN": unix.F_GETOWN, "F_SETSIG": unix.F_SETSIG, "F_GETSIG": unix.F_GETSIG,
		"F_OFD_GETLK": unix.F_OFD_GETLK, "F_OFD_SETLK": unix.F_OFD_SETLK,
		"F_OFD_SETLKW": unix.F_OFD_SETLKW, "F_SETLEASE": unix.F_SETLEASE,
		"F_GETLEASE": unix.F_GETLEASE, "F_NOTIFY": unix.F_NOTIFY,
		"F_DUPFD_CLOEXEC": unix.F_DUPFD_CLOEXEC, "F_SETPIPE_SZ": unix.F_SETPIPE_SZ,
		"F_GETPIPE_SZ": unix.F_GETPIPE_SZ, "F_ADD_SEALS": unix.F_ADD_SEALS,
		"F_GET_SEALS": unix.F_GET_SEALS,
	}
	madviseAdvice = map[string]uint64{
		"MADV_NORMAL": unix.MADV_NORMAL, "MADV_RANDOM": unix.MADV_RANDOM,
		"MADV_SEQUENTIAL": unix.MADV_SEQUENTIAL, "MADV_WILLNEED": unix.MADV_WILLNEED,
		"MADV_DONTNEED": unix.MADV_DONTNEED, "MADV_FREE": unix.MADV_FREE,
		"MADV_REMOVE": unix.MADV_REMOVE, "MADV_DONTFORK": unix.MADV_DONTFORK,
		"MADV_DOFORK": unix.MADV_DOFORK, "MADV_MERGEABLE": unix.MADV_MERGEABLE,
		"MADV_UNMERGEABLE": unix.MADV_UNMERGEABLE, "MADV_HUGEPAGE": unix.MADV_HUGEPAGE,
		"MADV_NOHUGEPAGE": unix.MADV_NOHUGEPAGE, "MADV_DONTDUMP": unix.MADV_DONTDUMP,
		"MADV_DODUMP": unix.MADV_DODUMP, "MADV_WIPEONFORK": unix.MADV_WIPEONFORK,
		"MADV_KEEPONFORK": unix.MADV_KEEPONFORK, "MADV_COLD": unix.MADV_COLD,
		"MADV_PAGEOUT": unix.MADV_PAGEOUT, "MADV_POPULATE_READ": unix.MADV_POPULATE_READ,
		"MADV_POPULATE_WRITE": unix.MADV_POPULATE_WRITE, "MADV_DONTNEED_LOCKED": unix.MADV_DONTNEED_LOCKED,
		"MADV_COLLAPSE": unix.MADV_COLLAPSE, "MADV_HWPOISON": unix.MADV_HWPOISON,
		"MADV_SOFT_OFFLINE": 101, "MADV_GUARD_INSTALL": unix.MADV_GUARD_INSTALL,
		"MADV_GUARD_REMOVE": unix.MADV_GUARD_REMOVE,
	}
	// mmapFlags are the mmap(2) flag bits the policy tests: the sharing type
	// and whether the mapping has a file.
	mmapFlags = map[string]uint64{
		"MAP_SHARED": unix.MAP_SHARED, "MAP_PRIVATE": unix.MAP_PRIVATE,
		"MAP_ANONYMOUS": unix.MAP_ANONYMOUS,
	}
)

// constantFamilies lists every family; a name must be unique across them.
var constantFamilies = []map[string]uint64{cloneFlags, addressFamilies, socketTypes, socketProtocols, prctlOptions, ioctlCommands, fcntlCommands, madviseAdvice, mmapFlags}

// lookupConstant resolves a symbolic constant name.
func lookupConstant(name string) (uint64, bool) {
	for _, fam := range constantFamilies {
		if v, ok := fam[name]; ok {
			return v, true
		}
	}
	return 0, false
}

// argFamily says which constant family labels a syscall argument, and whether
// the argument is a flag set (labelled bit by bit) or an enumeration.
func argFamily(syscall string, arg uint) (fam map[string]uint64, flags bool) {
	switch {
	case syscall == "clone" && arg == 0:
		return cloneFlags, true
	case (syscall == "socket" || syscall == "socketpair") && arg == 0:
		return addressFamilies, false
	case syscall == "socket" && arg == 1:
		return socketTypes, true
	case syscall == "socket" && arg == 2:
		return socketProtocols, false
	case syscall == "prctl" && arg == 0:
		return prctlOptions, false
	case syscall == "ioctl" && arg == 1:
		return ioctlCommands, false
	case syscall == "fcntl" && arg == 1:
		return fcntlCommands, false
	case syscall == "madvise" && arg == 2:
		return madviseAdvice, false
	case syscall == "mmap" && arg == 3:
		return mmapFlags, true
	}
	return nil, false
}

// labelValue names v for syscall's argument arg, "" when nothing fits.
func labelValue(syscall string, arg uint, v uint64) string {
	fam, flags := argFamily(syscall, arg)
	if fam == nil {
		return ""
	}
	names := make([]string, 0, len(fam))
	for n := range fam {
		names = append(names, n)
	}
	sort.Strings(names)
	if !flags {
		for _, n := range names {
			if fam[n] == v {
				return n
			}
		}
		return ""
	}
	if v == 0 {
		return ""
	}
	var parts []string
	rest := v
	// Order bits from low to high so labels are stable.
	sort.Slice(names, func(i, j int) bool { return fam[names[i]] < fam[names[j]] })
	for _, n := range names {
		bit := fam[n]
		if bit != 0 && bit&(bit-1) == 0 && v&bit != 0 {
			parts = append(parts, n)
			rest &^= bit
		}
	}
	if rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", rest))
	}
	return strings.Join(parts, "|")
}
