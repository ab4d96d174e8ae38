# Receiver (public repository): test the residency of each page three ways.
# First the time of a one-byte read of the second copy (first+i*stride+
# stride/2), in descending page order so that readahead cannot warm a page
# before it is timed; then mincore over a fresh mapping of the first copy
# (1 resident, 0 not, 2 refused); then preadv2(RWF_NOWAIT) on the first
# copy (1 resident, 0 EAGAIN, 2 refused), last because a miss starts
# readahead.
import ctypes
import json
import os
import time

KILLED = set(PARAMS["killed"])
n = PARAMS["bits"]
pages = [PARAMS["first"] + i * PARAMS["stride"] for i in range(n)]
timed = [p + PARAMS["stride"] // 2 for p in pages]
fd = os.open(PARAMS["file"], os.O_RDONLY)
size = os.fstat(fd).st_size
ns = [0] * n
for i in reversed(range(n)):
    t = time.perf_counter_ns()
    os.pread(fd, 1, timed[i] * 4096)
    ns[i] = time.perf_counter_ns() - t
minc = [2] * n
try:
    if "mincore" in KILLED:
        raise OSError("mincore is killed by the policy")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    addr = libc.mmap(None, size, 1, 1, fd, 0)
    if addr not in (None, ctypes.c_void_p(-1).value):
        vec = (ctypes.c_ubyte * ((size + 4095) // 4096))()
        if libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) == 0:
            minc = [vec[p] & 1 for p in pages]
        libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(size))
except Exception:
    pass
nowait = []
for p in pages if "preadv2" not in KILLED else []:
    try:
        os.preadv(fd, [bytearray(1)], p * 4096, os.RWF_NOWAIT)
        nowait.append(1)
    except BlockingIOError:
        nowait.append(0)
    except OSError:
        nowait.append(2)
nowait += [2] * (n - len(nowait))
json.dump({"nowait": nowait, "mincore": minc, "ns": ns}, open("/query/out", "w"))
