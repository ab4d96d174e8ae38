# Sender for the live channels (the agent is the receiver): a preamble (high
# for pre_hi seconds, low for pre_lo), a known training header that lets the
# receiver lock onto the slot clock, then one slot per secret bit, high when
# the bit is 1. High = `threads` threads created afresh every slot (the
# thread count and the fork counter), mem_mb MiB touched (memory) and a
# spinning main thread (CPU time); low = sleep. It also leaves page first+i*stride of the shared rootfs file resident
# for the 1 bits and evicted for the 0 bits, for the agent to test after the
# answer.
import os
import threading
import time

secret = int(open("/query/repo/secret").read().strip(), 16)
P = PARAMS
KILLED = set(P["killed"])
fd = os.open(P["file"], os.O_RDONLY)
for i in range(P["bits"]):
    off = (P["first"] + i * P["stride"]) * 4096
    if (secret >> i) & 1:
        os.pread(fd, 1, off)
    elif "fadvise64" not in KILLED:
        try:
            os.posix_fadvise(fd, off, 4096, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass
MB = 1 << 20


def high(until):
    """threads sleeping threads (the thread count and the fork counter),
    mem_mb MiB touched (memory), and the main thread spinning (CPU time, the
    run queue). No other thread spins: it would hold the GIL and stretch
    every thread start to a switch interval."""
    stop = threading.Event()
    ts = []
    for _ in range(P["threads"]):
        try:
            t = threading.Thread(target=stop.wait)
            t.start()
            ts.append(t)
        except RuntimeError:
            break
    mem = bytearray(P["mem_mb"] * MB)
    for j in range(0, len(mem), 4096):
        if time.monotonic() >= until:
            break
        mem[j] = 1
    while time.monotonic() < until:
        pass
    stop.set()
    for t in ts:
        t.join()
    del mem


def low(until):
    d = until - time.monotonic()
    if d > 0:
        time.sleep(d)


t = time.monotonic()
high(t + P["pre_hi"])
low(t + P["pre_hi"] + P["pre_lo"])
t += P["pre_hi"] + P["pre_lo"]
# A public training header, then the secret.
bits = P["train"] + [(secret >> i) & 1 for i in range(P["bits"])]
for i, b in enumerate(bits):
    end = t + (i + 1) * P["slot"]
    (high if b else low)(end)
open("/query/out", "w").write("1")
