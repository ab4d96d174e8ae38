# Receiver for the host-counter channels: read every host counter a script
# can reach, by name, in PARAMS["names"] order (0 when unreadable).
import ctypes
import json
import os

KILLED = set(PARAMS["killed"])
vals = {}


def put(k, v):
    vals[k] = int(v)


def next_batch():
    """The host-wide inode counter (get_next_ino hands each CPU batches of
    1024): make pipes until the inode number jumps to a fresh batch and
    return its start, which is the shared counter at that moment."""
    if "pipe2" in KILLED:
        return 0
    last = None
    held = []
    try:
        for _ in range(2100):
            a, b = os.pipe()
            held += [a, b]
            ino = os.fstat(a).st_ino
            if last is not None and ino != last + 1:
                return ino
            last = ino
            if len(held) > 200:
                for fd in held:
                    os.close(fd)
                held = []
    except OSError:
        return 0
    finally:
        for fd in held:
            os.close(fd)
    return 0


put("ino:batch0", next_batch())
put("ino:batch1", next_batch())
try:
    put("ino:proc_self", os.stat("/proc/self").st_ino)
    put("ino:proc_thread_self", os.stat("/proc/thread-self").st_ino)
except OSError:
    pass


def kv_file(path, prefix, sep=None, scale=1):
    try:
        with open(path) as f:
            for line in f:
                p = line.replace(":", " ").split()
                if len(p) >= 2 and p[1].lstrip("-").isdigit():
                    put(prefix + p[0], int(p[1]) * scale)
    except OSError:
        pass


try:
    with open("/proc/stat") as f:
        for line in f:
            p = line.split()
            if p[0] == "cpu":
                for i, n in enumerate(["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]):
                    put("stat:cpu_" + n, p[1 + i])
            elif p[0] in ("processes", "ctxt", "intr", "procs_running", "procs_blocked", "softirq"):
                put("stat:" + p[0], p[1])
except OSError:
    pass
kv_file("/proc/vmstat", "vmstat:")
kv_file("/proc/meminfo", "meminfo:")
for name, fields in (("dentry-state", ["nr_dentry", "nr_unused", "age_limit", "want_pages", "nr_negative"]),
                     ("inode-nr", ["nr_inodes", "nr_free"]), ("file-nr", ["allocated", "unused", "max"])):
    try:
        p = open("/proc/sys/fs/" + name).read().split()
        for i, n in enumerate(fields):
            put("fs:%s:%s" % (name, n), p[i])
    except (OSError, IndexError):
        pass
try:
    p = open("/proc/loadavg").read().split()
    for i in range(3):
        put("loadavg:%d" % i, float(p[i]) * 100)
    put("loadavg:running", p[3].split("/")[0])
    put("loadavg:threads", p[3].split("/")[1])
    put("loadavg:last_pid", p[4])
except (OSError, IndexError, ValueError):
    pass
try:
    rd = sr = wr = sw = 0
    for line in open("/proc/diskstats"):
        p = line.split()
        rd, sr, wr, sw = rd + int(p[3]), sr + int(p[5]), wr + int(p[7]), sw + int(p[9])
    put("disk:reads", rd)
    put("disk:sectors_read", sr)
    put("disk:writes", wr)
    put("disk:sectors_written", sw)
except (OSError, IndexError, ValueError):
    pass
for res in ("cpu", "memory", "io"):
    try:
        for line in open("/proc/pressure/" + res):
            p = line.split()
            put("pressure:%s:%s" % (res, p[0]), p[-1].split("=")[1])
    except (OSError, IndexError, ValueError):
        pass
for k in ("entropy_avail", "ns_last_pid"):
    for d in ("/proc/sys/kernel/random/", "/proc/sys/kernel/"):
        try:
            put("kernel:" + k, open(d + k).read().split()[0])
        except (OSError, IndexError):
            pass
try:
    tot = 0
    for line in open("/proc/buddyinfo"):
        tot += sum(int(x) for x in line.split()[4:])
    put("buddyinfo:blocks", tot)
except (OSError, ValueError):
    pass


class SI(ctypes.Structure):
    _fields_ = [("uptime", ctypes.c_long), ("loads", ctypes.c_ulong * 3), ("totalram", ctypes.c_ulong),
                ("freeram", ctypes.c_ulong), ("sharedram", ctypes.c_ulong), ("bufferram", ctypes.c_ulong),
                ("totalswap", ctypes.c_ulong), ("freeswap", ctypes.c_ulong), ("procs", ctypes.c_ushort),
                ("pad", ctypes.c_ushort), ("totalhigh", ctypes.c_ulong), ("freehigh", ctypes.c_ulong),
                ("mem_unit", ctypes.c_uint), ("_f", ctypes.c_char * 8)]


try:
    if "sysinfo" in KILLED:
        raise OSError("sysinfo is killed by the policy")
    si = SI()
    if ctypes.CDLL(None).sysinfo(ctypes.byref(si)) == 0:
        put("sysinfo:procs", si.procs)
        put("sysinfo:freeram", si.freeram * si.mem_unit // 4096)
        put("sysinfo:load1", si.loads[0])
except Exception:
    pass
lim = 2 ** 53 - 1
json.dump([max(-lim, min(lim, vals.get(n, 0))) for n in PARAMS["names"]], open("/query/out", "w"))
