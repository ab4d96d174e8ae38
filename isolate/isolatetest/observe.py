# Prints, as one JSON object on stdout, what a script can observe of how it
# was launched and of its sandbox: the interpreter's state (loaded modules,
# globals, frames, argv, flags, paths), its descriptors, environment, cwd,
# identity, limits, umask, signal dispositions, affinity and threads, its
# mounts, /awf, /tmp and /query, /etc/hostname, hosts and resolv.conf (the
# Engine writes them for docker), and what /proc/self/status says of its
# privileges. PreparedLooksCold runs it in a
# sandbox prepared long before its job and in a cold run, and wants the
# same bytes. The first lines run before any import of the script's own.
import sys

modules = sorted(sys.modules)
names = sorted(globals())
depth = 0
frame = sys._getframe()
while frame.f_back is not None:
    frame = frame.f_back
    depth += 1
del frame

import json
import os
import resource
import signal
import stat
import threading


def entry(p):
    try:
        st = os.lstat(p)
    except OSError as e:
        return ["error", e.errno]
    return [stat.filemode(st.st_mode), st.st_uid, st.st_gid, st.st_nlink, st.st_size if not stat.S_ISDIR(st.st_mode) else 0]


def listing(d):
    try:
        return {n: entry(os.path.join(d, n)) for n in sorted(os.listdir(d))}
    except OSError as e:
        return ["error", e.errno]


def read(p):
    try:
        with open(p) as f:
            return f.read()
    except OSError as e:
        return ["error", e.errno]


def mount(line):
    # id parent major:minor root mountpoint options [optional...] - type source superoptions
    pre, post = line.split(" - ", 1)
    f = pre.split()
    fstype, _source, superopts = post.split(" ", 2)
    if fstype == "overlay":
        superopts = "(paths)"
    return [f[4], f[5], fstype, superopts]


# The Engine mounts the binds of one depth in no fixed order, in every
# container alike (six cold runs gave four orders): the set is what a job
# is given. (Where /proc/self hides them, the error is what it shows.)
info = read("/proc/self/mountinfo")
mounts = info if isinstance(info, list) else sorted(mount(line) for line in info.splitlines())

STATUS = ("Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "Seccomp_filters", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "Cpus_allowed_list")
info = read("/proc/self/status")
status = info if isinstance(info, list) else {k: v.strip() for k, _, v in (line.partition(":") for line in info.splitlines()) if k in STATUS}
del info

fds = []
for fd in range(0, 1024):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    fds.append([fd, stat.filemode(st.st_mode), st.st_rdev, os.get_inheritable(fd), os.get_blocking(fd)])

umask = os.umask(0o22)
os.umask(umask)

obs = {
    "modules": modules,
    "globals": names,
    "depth": depth,
    "name": __name__,
    "file": __file__,
    "loader": type(__loader__).__name__,
    "argv": sys.argv,
    "orig_argv": sys.orig_argv,
    "executable": sys.executable,
    "path": sys.path,
    "flags": repr(sys.flags),
    "fds": fds,
    "proc_fd": os.path.exists("/proc/self/fd"),
    "stdio": [f.isatty() for f in (sys.stdin, sys.stdout, sys.stderr)],
    "env": dict(os.environ),
    "cwd": os.getcwd(),
    "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")},
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()],
    "umask": umask,
    "signals": {s.name: repr(signal.getsignal(s)) for s in signal.Signals},
    "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "pids": [os.getpid(), os.getppid(), os.getpgrp(), os.getsid(0)],
    "affinity": sorted(os.sched_getaffinity(0)),
    "threads": threading.active_count(),
    "uname": list(os.uname()),
    "recursion": sys.getrecursionlimit(),
    "mounts": mounts,
    "awf": listing("/awf"),
    "tmp": [entry("/tmp"), listing("/tmp")],
    "query": [entry("/query"), listing("/query")],
    "repo": entry("/query/repo"),
    "etc": {n: read("/etc/" + n) for n in ("hostname", "hosts", "resolv.conf")},
    "status": status,
    "cgroup": read("/proc/self/cgroup"),
}
print(json.dumps(obs, sort_keys=True))
open("/query/out", "w").write('{"ok": true}')
