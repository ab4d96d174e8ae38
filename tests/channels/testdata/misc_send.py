# Sender for the other named objects a sandbox might share with a later one:
# for every secret bit that is 1, create object i of each kind (SysV shm,
# semaphore and message queue keys, files in /dev/shm, /tmp and /var/tmp, a
# key in uid 65534's user keyring, an abstract Unix socket held by a child
# that tries to outlive the sandbox).
import ctypes
import os
import socket
import time

KILLED = set(PARAMS["killed"])
secret = int(open("/query/repo/secret").read().strip(), 16)
libc = ctypes.CDLL(None, use_errno=True)
tag, base, n = PARAMS["tag"], PARAMS["base"], PARAMS["bits"]
ones = [i for i in range(n) if (secret >> i) & 1]
for i in ones:
    for call, args in (("shmget", (4096, 0o1000 | 0o666)), ("semget", (1, 0o1000 | 0o666)), ("msgget", (0o1000 | 0o666,))):
        if call not in KILLED:
            getattr(libc, call)(base + i, *args)
    for d in ("/dev/shm", "/tmp", "/var/tmp"):
        try:
            open("%s/awf-ch-%s-%d" % (d, tag, i), "w").close()
        except OSError:
            pass
    desc = ("awf-ch-%s-%d" % (tag, i)).encode()
    kid = libc.syscall(248, b"user", desc, b"1", 1, -4) if "add_key" not in KILLED else -1
    if kid > 0 and "keyctl" not in KILLED:
        libc.syscall(250, 15, kid, 600)
open("/query/out", "w").write("1")
try:
    if "socket" in KILLED:
        raise OSError("socket is killed by the policy")
    socks = []
    for i in ones:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\0awf-ch-%s-%d" % (tag, i))
        s.listen(1)
        socks.append(s)
    if "fork" not in KILLED and "clone" not in KILLED and os.fork() == 0:
        os.setsid()
        time.sleep(5)
        os._exit(0)
except OSError:
    pass
