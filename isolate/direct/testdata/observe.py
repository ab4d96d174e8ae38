# Prints, as one JSON object on stdout, what a script can observe of how it
# was launched. TestPreparedAheadLooksCold runs it in a sandbox prepared long
# before its job and in a cold run, and wants the same bytes.
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
import threading

fds = []
for fd in range(0, 1024):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    fds.append([fd, st.st_mode, st.st_rdev, os.get_inheritable(fd), os.get_blocking(fd)])

umask = os.umask(0o22)
os.umask(umask)

rlimits = {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")}
handlers = {s.name: repr(signal.getsignal(s)) for s in signal.Signals}

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
    "rlimits": rlimits,
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()],
    "umask": umask,
    "signals": handlers,
    "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "pids": [os.getpid(), os.getppid(), os.getpgrp(), os.getsid(0)],
    "affinity": sorted(os.sched_getaffinity(0)),
    "threads": threading.active_count(),
    "uname": list(os.uname()),
    "recursion": sys.getrecursionlimit(),
}
print(json.dumps(obs, sort_keys=True))
open("/query/out", "w").write('{"ok": true}')
