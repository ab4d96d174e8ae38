# CPython standard-library workload run under the compiled python3.policy.
# It prints one line per step and "OK" at the end; any denied system call
# kills it (SIGSYS) or raises. The "refused ok" step checks that the calls the
# policy answers with EPERM (page cache, inode counter) fail cleanly.
import asyncio
import collections
import csv
import datetime
import io
import itertools
import logging
import mmap
import pwd
import socket
import subprocess  # import only: the policy has no fork
import bz2
import concurrent.futures
import gzip
import hashlib
import json
import lzma
import os
import pathlib
import random
import re
import shutil
import sqlite3
import sys
import tarfile
import tempfile
import threading
import time
import uuid
import zipfile

root = sys.argv[1]

# Tree walk and hashing.
h = hashlib.sha256()
files = 0
for d, dirs, names in os.walk(root):
    dirs.sort()
    for n in sorted(names):
        p = os.path.join(d, n)
        if os.path.islink(p) or not os.path.isfile(p):
            continue
        with open(p, "rb") as fh:
            h.update(fh.read())
        files += 1
assert files > 0, "walk found no files"
print("walk", files, h.hexdigest()[:16])
print("glob", len(list(pathlib.Path(root).rglob("*.py"))))

# json and re.
doc = {"a": [1, 2, {"b": "c"}], "n": None, "s": "\u00e9"}
assert json.loads(json.dumps(doc)) == doc
assert re.findall(r"\d+", "a1b22c333") == ["1", "22", "333"]
print("json re ok")

# Compression round trips.
data = b"hello awf " * 4096
assert gzip.decompress(gzip.compress(data)) == data
assert bz2.decompress(bz2.compress(data)) == data
assert lzma.decompress(lzma.compress(data)) == data
print("gzip bz2 lzma ok")

# sqlite in memory.
db = sqlite3.connect(":memory:")
db.execute("create table t(x integer, y text)")
db.executemany("insert into t values (?, ?)", [(i, str(i)) for i in range(1000)])
assert db.execute("select count(*), sum(x) from t").fetchone() == (1000, 499500)
db.close()
print("sqlite ok")

# Threads.
digests = []
lock = threading.Lock()


def work(i):
    d = hashlib.md5(str(i).encode()).hexdigest()
    with lock:
        digests.append(d)


threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert len(digests) == 8
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    assert sum(ex.map(lambda x: x * x, range(100))) == 328350
print("threads ok")

# Temporary files, copies, archives.
td = tempfile.mkdtemp()
p = os.path.join(td, "f.txt")
with open(p, "w") as fh:
    fh.write("x" * 10000)
shutil.copy2(p, p + ".2")
os.replace(p + ".2", p + ".3")
os.makedirs(os.path.join(td, "a", "b", "c"), exist_ok=True)
with zipfile.ZipFile(os.path.join(td, "z.zip"), "w", zipfile.ZIP_DEFLATED) as z:
    z.write(p, "f.txt")
with tarfile.open(os.path.join(td, "t.tgz"), "w:gz") as t:
    t.add(p, "f.txt")
shutil.rmtree(td)
print("files ok")

# Odds and ends: randomness, sleeping, logging, csv, dates, name lookups
# (glibc tries the nscd socket first, gets EPERM and reads the files).
uuid.uuid4()
random.random()
os.urandom(16)
time.sleep(0.01)
log = io.StringIO()
logging.basicConfig(stream=log, level=logging.INFO)
logging.getLogger("workload").info("hello")
assert "hello" in log.getvalue()
out = io.StringIO()
csv.writer(out).writerows([["a", 1], ["b", 2]])
assert list(csv.reader(io.StringIO(out.getvalue()))) == [["a", "1"], ["b", "2"]]
assert datetime.datetime(2026, 1, 2).isoformat() == "2026-01-02T00:00:00"
assert collections.Counter("abca")["a"] == 2
assert list(itertools.islice(itertools.count(), 3)) == [0, 1, 2]
try:
    pwd.getpwuid(os.getuid())
except KeyError:
    pass
print("misc ok")


def refused(fn):
    try:
        fn()
    except PermissionError:
        return True
    return False


# Page cache: no eviction, prefetch or residency probe; plain reads and
# private or file-backed mappings still work.
me = os.path.abspath(__file__)
fd = os.open(me, os.O_RDONLY)
buf = bytearray(16)
assert os.preadv(fd, [buf], 0) == 16
assert refused(lambda: os.preadv(fd, [buf], 0, os.RWF_NOWAIT))
assert refused(lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED))
with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as m:
    assert m[:1] == b"#"
    m.madvise(mmap.MADV_SEQUENTIAL)
    assert refused(lambda: m.madvise(mmap.MADV_WILLNEED))
os.close(fd)
with mmap.mmap(-1, 1 << 16, flags=mmap.MAP_PRIVATE) as m:
    m[0] = 1
    m.madvise(mmap.MADV_DONTNEED)
assert refused(lambda: mmap.mmap(-1, 1 << 16))  # MAP_SHARED|MAP_ANONYMOUS
# Host-wide inode counter: no pipes or sockets, so no asyncio event loop.
assert refused(os.pipe)
assert refused(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
assert refused(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
assert refused(socket.socketpair)
assert refused(asyncio.new_event_loop)
print("refused ok")
sys.stdout.flush()
print("OK")
