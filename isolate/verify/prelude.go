package verify

// errnoVocab is the finite vocabulary of outcomes a probe step reports: "ok"
// when the call succeeded (the attack worked), an errno name when it
// failed, "masked" when a sensitive path opened but turned out to be a
// character device bound over it (the runtime's mask), or "other".
var errnoVocab = []string{
	"ok", "EPERM", "EACCES", "EROFS", "ENOENT", "ENOSYS", "EINVAL", "ENOSPC", "EFBIG",
	"EMFILE", "ENFILE", "EAGAIN", "ECONNREFUSED", "ENETUNREACH", "EHOSTUNREACH",
	"EADDRNOTAVAIL", "EAFNOSUPPORT", "EPROTONOSUPPORT", "ESOCKTNOSUPPORT", "EOPNOTSUPP",
	"EXDEV", "EBADF", "ENOTDIR", "EISDIR", "EEXIST", "ETIMEDOUT", "EBUSY", "ENODEV", "ENXIO",
	"ENOMEM", "ELOOP", "EFAULT", "ESRCH", "ENOTTY", "ECONNRESET", "EIO", "ENOTCONN",
	"ENOTSUP", "ESPIPE", "EDQUOT", "masked", "other",
}

// prelude is prepended to every probe script. It is standard library only
// and runs under /usr/bin/python3 -I -S -B as uid 65534.
//
// step() writes a marker line to stderr just before an attack so that a
// seccomp kill can be attributed to the attacked call and not to some
// earlier step. answer() writes the finite answer to the output file.
const prelude = `import os, sys, json, errno
QUERY = <% .Query | py %>
REPO = <% .Repo | py %>
OUT = <% .Out | py %>
KNOWN = set(<% .Errnos | py %>)

def ename(code):
    n = errno.errorcode.get(code or 0, "")
    return n if n in KNOWN else "other"

def oserr(e):
    return ename(getattr(e, "errno", 0))

def step(name):
    sys.stderr.write("AWF-STEP " + name + "\n")
    sys.stderr.flush()

def answer(obj):
    with open(OUT, "w") as f:
        json.dump(obj, f, separators=(",", ":"))

def masked(fd):
    """True when fd is a character device, i.e. /dev/null bound over a masked path."""
    import stat
    return stat.S_ISCHR(os.fstat(fd).st_mode)

def attempt(name, fn):
    step(name)
    try:
        return "masked" if fn() == "masked" else "ok"
    except OSError as e:
        return oserr(e)

_libc = None
def libc():
    global _libc
    if _libc is None:
        import ctypes
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc

# NR maps a system call's name to its number on this machine: one row a
# call, (x86_64, aarch64).
NR = {
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "chroot": (161, 51),
    "ptrace": (101, 117), "bpf": (321, 280), "add_key": (248, 217), "keyctl": (250, 219),
    "userfaultfd": (323, 282), "perf_event_open": (298, 241), "io_uring_setup": (425, 425),
    "clone": (56, 220), "clone3": (435, 435), "getpid": (39, 172), "memfd_create": (319, 279),
    "pidfd_open": (434, 434), "open_by_handle_at": (304, 265), "kexec_load": (246, 104),
    "init_module": (175, 105), "reboot": (169, 142), "swapon": (167, 224), "syslog": (103, 116),
    "process_vm_readv": (310, 270), "mknodat": (259, 33), "fsopen": (430, 430),
    "open_tree": (428, 428), "setuid": (105, 146),
}
_arch = {"x86_64": 0, "aarch64": 1}.get(os.uname().machine)
NR = {} if _arch is None else {n: v[_arch] for n, v in NR.items()}

def sysc(name, *args):
    """Make a raw system call; return ("ok", value) or (errno name, -1)."""
    import ctypes
    step(name)
    if name not in NR:
        return ("other", -1)
    conv = [a if not isinstance(a, int) else ctypes.c_long(a) for a in args]
    r = libc().syscall(ctypes.c_long(NR[name]), *conv)
    if r == -1:
        return (ename(ctypes.get_errno()), -1)
    return ("ok", r)

def write_open(p):
    """A step for attempt: open p for writing; "masked" when it is the /dev/null of a mask."""
    def f():
        fd = os.open(p, os.O_WRONLY)
        m = masked(fd)
        os.close(fd)
        return "masked" if m else None
    return f

def connect(family, addr):
    """Open a stream socket of family and connect it to addr: the errno outcome of each."""
    import socket
    res = {"socket": "ok", "connect": "other"}
    try:
        step("socket")
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(2)
        res["connect"] = attempt("connect", lambda: s.connect(addr))
    except OSError as e:
        res["socket"] = oserr(e)
    return res

def open_devnull(cap):
    """Open /dev/null until it fails or cap descriptors are open, close them all:
    (errno name of the failure or "ok", how many opened)."""
    fds, err = [], "ok"
    try:
        while len(fds) < cap:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        err = oserr(e)
    for fd in fds:
        os.close(fd)
    return err, len(fds)

def walk_names(top, skip=("/proc", "/sys", "/dev")):
    """Yield every path under top, without following links, skipping pseudo filesystems."""
    stack = [top]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                p = os.path.join(d, e.name)
                yield p, e
                try:
                    if e.is_dir(follow_symlinks=False) and p not in skip:
                        stack.append(p)
                except OSError:
                    pass
`
