# Page-cache residency sender and receiver, run inside a sandbox.
#
# The test prepends MODE ("send", "recv" or "both") and SECRET (a 64-bit
# integer). Bit i of SECRET is carried by file i of FILES: the sender reads
# the first page of every file whose bit is 1, so that page is resident in
# whatever page cache that file lives in. The receiver never reads a file
# before it has tested it: first with mincore on a mapping (where the
# policy allows it), then by timing the first read of the page against a
# read of a resident page just before it. A resident page reads faster, so
# the faster half of the files decode as 1.
#
# One file per bit, not one page per bit of one file: a cold read also
# reads ahead the next pages of the same file. Only files of two pages or
# more: erofs stores a small file's data inline with its inode, so opening
# it would already load its one page.
import json
import os
import time

STDLIB = "/usr/lib/python3.11"
# Never imported by a bounded query's start-up or by this script. The Go
# side (Carriers) applies the same rule.
DIRS = ["email", "multiprocessing", "asyncio", "unittest", "lib2to3", "lib2to3/pgen2", "lib2to3/fixes",
        "xml/dom", "xml/sax", "xml/etree", "http", "urllib", "wsgiref"]
# The receiver's reference page: os.py is no carrier, and its first read
# (before the warm-up) makes it resident.
REF = "os.py"
WARMUP = 500


def files():
    out = []
    for d in DIRS:
        base = os.path.join(STDLIB, d)
        for n in sorted(os.listdir(base)):
            p = os.path.join(base, n)
            if n.endswith(".py") and os.stat(p).st_size >= 8192:
                out.append(p)
    if len(out) < 64:
        raise SystemExit("not enough carrier files: %d" % len(out))
    return out[:64]


def send(paths, secret):
    for i, p in enumerate(paths):
        if secret >> i & 1:
            fd = os.open(p, os.O_RDONLY)
            os.pread(fd, 4096, 0)
            os.close(fd)


def mincore_bits(paths):
    """Bit i is 1 when mincore says page 0 of file i is resident; None when
    the sandbox refuses mmap or mincore."""
    try:
        import ctypes
        import mmap
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    except Exception:
        return None
    bits = 0
    failed = ctypes.c_void_p(-1).value
    for i, p in enumerate(paths):
        fd = os.open(p, os.O_RDONLY)
        addr = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        os.close(fd)
        if addr is None or addr == failed:
            return None
        vec = ctypes.create_string_buffer(1)
        r = libc.mincore(addr, 4096, vec)
        libc.munmap(addr, 4096)
        if r != 0:
            return None
        bits |= (vec.raw[0] & 1) << i
    return bits


def timing_bits(paths):
    """Times the first read of page 0 of each file, less the time of a read
    of a resident page just before it; the faster half are 1.

    Where every read is a slow, jittery trip (gVisor's ptrace platform), a
    cold page costs a few microseconds more than a resident one and the
    cost of the trip itself drifts by more than that over the 64 reads.
    The reference read just before each carrier carries the same drift, so
    the difference keeps the page's cost and cancels most of the drift. The
    warm-up first settles the path (caches, CPU frequency, the sandbox's
    own first-use costs)."""
    ref = os.open(os.path.join(STDLIB, REF), os.O_RDONLY)
    for _ in range(WARMUP):
        os.pread(ref, 4096, 0)
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    t = []
    for fd in fds:
        t0 = time.perf_counter_ns()
        os.pread(ref, 4096, 0)
        t1 = time.perf_counter_ns()
        os.pread(fd, 4096, 0)
        t.append(time.perf_counter_ns() - t1 - (t1 - t0))
    for fd in fds:
        os.close(fd)
    os.close(ref)
    median = sorted(t)[len(t) // 2]
    bits = 0
    for i, dt in enumerate(t):
        if dt < median:
            bits |= 1 << i
    return bits, t


paths = files()
result = {}
if MODE in ("send", "both"):
    send(paths, SECRET)
if MODE in ("recv", "both"):
    m = mincore_bits(paths)
    bits, times = timing_bits(paths)
    result = {"timing": "%016x" % bits, "mincore": None if m is None else "%016x" % m, "ns": times}
with open("/query/out", "w") as f:
    json.dump(result, f)
