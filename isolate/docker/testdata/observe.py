# Prints, as one JSON object on stdout, what a script can observe of its
# container: its mounts, /awf, /tmp and /query, the files the Engine writes
# into /etc, its command line, environment, identity, limits and
# descriptors. TestPreparedLooksCold runs it in a container created long
# before its job and in a cold run, and wants the same bytes.
import json
import os
import resource
import stat
import sys


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


mounts = []
for line in read("/proc/self/mountinfo").splitlines():
    # id parent major:minor root mountpoint options [optional...] - type source superoptions
    pre, post = line.split(" - ", 1)
    f = pre.split()
    fstype, _source, superopts = post.split(" ", 2)
    if fstype == "overlay":
        superopts = "(paths)"
    mounts.append([f[4], f[5], fstype, superopts])
# The Engine mounts the binds of one depth in no fixed order, in every
# container alike (six cold runs gave four orders): the set is what a job
# is given.
mounts.sort()

status = {}
for line in read("/proc/self/status").splitlines():
    k, _, v = line.partition(":")
    if k in ("Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "Seccomp_filters", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "Cpus_allowed_list"):
        status[k] = v.strip()

fds = []
for fd in range(0, 1024):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    fds.append([fd, stat.filemode(st.st_mode)])

obs = {
    "mounts": mounts,
    "awf": listing("/awf"),
    "tmp": [entry("/tmp"), listing("/tmp")],
    "query": [entry("/query"), listing("/query")],
    "repo": entry("/query/repo"),
    "etc": {n: read("/etc/" + n) for n in ("hostname", "hosts", "resolv.conf")},
    "argv": sys.argv,
    "orig_argv": sys.orig_argv,
    "flags": repr(sys.flags),
    "env": dict(os.environ),
    "cwd": os.getcwd(),
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()],
    "pids": [os.getpid(), os.getppid(), os.getpgrp(), os.getsid(0)],
    "status": status,
    "cgroup": read("/proc/self/cgroup"),
    "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")},
    "fds": fds,
    "uname": list(os.uname())[:2],
}
print(json.dumps(obs, sort_keys=True))
open("/query/out", "w").write('{"ok": true}')
