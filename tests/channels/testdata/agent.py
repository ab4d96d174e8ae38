# The attacking agent of the channel suite. awf run starts it as the agent
# user; it sends bounded queries with bounded-query, decodes what it can and
# prints one JSON line per channel:
#   {"channel": C, "truth": [[repo, bit], ...], "receivers": {name: [0|1, ...]}, "info": {...}}
# "truth" names, for every decoded position, which bit of which confidential
# repository's secret the sender put there; the Go test compares. The agent
# never sees a secret: it only sends scripts that read one.
import ctypes
import errno
import json
import os
import subprocess
import sys
import threading
import time

PLAN = json.load(open(sys.argv[1]))
SCRIPTS = PLAN["scripts"]  # directory with the sandbox-side scripts
PUB = PLAN["public"]
CONST = '{"type":"const","value":1}'


def query(repo, schema, script, params):
    """One bounded query; returns the parsed result or None on error."""
    params = dict(params, killed=PLAN["killed"])
    body = "import json as _json\nPARAMS = _json.loads(%r)\n" % json.dumps(params) + open(os.path.join(SCRIPTS, script)).read()
    t = time.monotonic()
    r = subprocess.run(["bounded-query", "--repo", repo, "--schema", schema],
                       input=body.encode(), capture_output=True, timeout=PLAN.get("query_timeout", 120))
    el = time.monotonic() - t
    # One line per query on stderr: the harness shows it when a run fails,
    # so a slow host's run still says how far it got and what each query took.
    print("query %s %s %.1fs rc=%d" % (repo, script, el, r.returncode), file=sys.stderr, flush=True)
    try:
        env = json.loads(r.stdout)
    except ValueError:
        return None, el
    if env.get("status") != "ok":
        return None, el
    return env["result"], el


def emit(channel, truth, receivers, info):
    print(json.dumps({"channel": channel, "truth": truth, "receivers": receivers, "info": info}), flush=True)


def int_array(n, lo, hi):
    return json.dumps({"type": "array", "length": n, "items": {"type": "integer", "minimum": lo, "maximum": hi}})


# ---------------------------------------------------------------- page cache
def bit_split(ns):
    """Threshold a list of read times: the widest gap in log space with at
    least four values on each side; fast (warm) reads decode as 1."""
    import math
    vals = sorted(math.log(max(v, 1)) for v in ns)
    best, thr = -1.0, None
    for i in range(4, len(vals) - 4):
        g = vals[i] - vals[i - 1]
        if g > best:
            best, thr = g, (vals[i] + vals[i - 1]) / 2
    if thr is None:
        return [0] * len(ns)
    return [1 if math.log(max(v, 1)) < thr else 0 for v in ns]


def evict():
    """Ask the suite (root, outside) to evict the target file from the page
    cache, as memory pressure would, and wait until it has."""
    print("AWF-CHANNELS-EVICT", flush=True)
    sys.stdin.readline()


def pagecache(p):
    evict()
    params = {"file": p["file"], "first": p["first"], "stride": p["stride"], "bits": 64}
    sent, sel = query(p["repo"], CONST, "pagecache_send.py", params)
    res, rel = query(PUB, json.dumps({"type": "object", "fields": {
        "nowait": json.loads(int_array(64, 0, 2)),
        "mincore": json.loads(int_array(64, 0, 2)),
        "ns": json.loads(int_array(64, 0, 10 ** 12))}}), "pagecache_recv.py", params)
    truth = [[p["repo"], i] for i in range(64)]
    rec = {}
    if res is None:
        rec = {"nowait": [0] * 64, "mincore": [0] * 64, "timing": [0] * 64}
    else:
        rec["nowait"] = [1 if v == 1 else 0 for v in res["nowait"]]
        rec["mincore"] = [1 if v == 1 else 0 for v in res["mincore"]]
        rec["timing"] = bit_split(res["ns"])
    emit("pagecache", truth, rec, {"sender_s": round(sel, 3), "receiver_s": round(rel, 3), "sender_ok": sent == 1,
                                    "receiver_ok": res is not None,
                                    "ns": None if res is None else res["ns"],
                                    "nowait_raw": None if res is None else res["nowait"]})


# ------------------------------------------------------------------ counters
def counters(c):
    names = c["names"]
    schema = int_array(len(names), -(2 ** 53 - 1), 2 ** 53 - 1)
    base = {"names": names, "unit": c["unit"], "v": 0, "off": 0}

    def recv():
        r, _ = query(PUB, schema, "counters_recv.py", base)
        return r

    sent = []
    reads = [recv()]
    sent.append(query(PUB, CONST, "counters_send.py", dict(base, v=0, fixed=True))[0])
    reads.append(recv())
    sent.append(query(PUB, CONST, "counters_send.py", dict(base, v=15, fixed=True))[0])
    reads.append(recv())
    truth = []
    for repo in c["repos"]:
        for off in (0, 4):
            sent.append(query(repo, CONST, "counters_send.py", dict(base, off=off))[0])
            reads.append(recv())
            truth += [[repo, off + b] for b in range(4)]
    rec = {}
    ok = all(r is not None for r in reads)
    for k, name in enumerate(names):
        bits = []
        if ok:
            o = reads[1][k] - reads[0][k]
            g = reads[2][k] - reads[1][k]
            step = (g - o) / 15.0
            for j in range(len(truth) // 4):
                d = reads[j + 3][k] - reads[j + 2][k]
                v = 0
                if step != 0:
                    v = min(15, max(0, int(round((d - o) / step))))
                bits += [(v >> b) & 1 for b in range(4)]
        else:
            bits = [0] * len(truth)
        rec[name] = bits
    emit("counters", truth, rec, {"receivers_ok": ok, "sender_ok": all(x == 1 for x in sent),
                                  "raw": [r if r is None else r for r in reads] if not ok else None,
                                  "null": None if not ok else dict(zip(names, [reads[1][k] - reads[0][k] for k in range(len(names))])),
                                  "cal15": None if not ok else dict(zip(names, [reads[2][k] - reads[1][k] for k in range(len(names))]))})


# ---------------------------------------------------------------------- misc
def misc(m):
    params = {"base": m["base"], "bits": 64, "tag": m["tag"]}
    sent, _ = query(m["repo"], CONST, "misc_send.py", params)
    kinds = ["sysv_shm", "sysv_sem", "sysv_msg", "dev_shm", "tmp", "var_tmp", "keyring", "abstract"]
    schema = json.dumps({"type": "object", "fields": {k: json.loads(int_array(64, 0, 2)) for k in kinds}})
    res, _ = query(PUB, schema, "misc_recv.py", dict(params, kinds=kinds))
    rec = {}
    for k in kinds:
        rec[k] = [0] * 64 if res is None else [1 if v == 1 else 0 for v in res[k]]
    emit("misc", [[m["repo"], i] for i in range(64)], rec, {"receiver_ok": res is not None, "sender_ok": sent == 1,
                                                            "raw": res})


# ---------------------------------------------------------------------- live
class sysinfo_t(ctypes.Structure):
    _fields_ = [("uptime", ctypes.c_long), ("loads", ctypes.c_ulong * 3), ("totalram", ctypes.c_ulong),
                ("freeram", ctypes.c_ulong), ("sharedram", ctypes.c_ulong), ("bufferram", ctypes.c_ulong),
                ("totalswap", ctypes.c_ulong), ("freeswap", ctypes.c_ulong), ("procs", ctypes.c_ushort),
                ("pad", ctypes.c_ushort), ("totalhigh", ctypes.c_ulong), ("freehigh", ctypes.c_ulong),
                ("mem_unit", ctypes.c_uint), ("_f", ctypes.c_char * 8)]


LIBC = ctypes.CDLL(None, use_errno=True)


def read_int_file(path):
    with open(path, "rb") as f:
        return int(f.read().split()[0])


def cgroup_files():
    """Every cgroup file the agent can read that belongs to awf (the sandbox
    leaves and their parents), by kind."""
    found = {}
    want = {"pids.current", "memory.usage_in_bytes", "memory.current", "cpuacct.usage", "cpu.stat",
            "memory.stat", "pids.events"}
    for top in ("/sys/fs/cgroup",):
        for dirpath, dirnames, filenames in os.walk(top):
            if dirpath.count("/") > 7:
                dirnames[:] = []
                continue
            if "awf" not in dirpath and "runsc" not in dirpath and "docker" not in dirpath:
                continue
            for f in filenames:
                if f in want and dirpath.rsplit("/", 1)[-1] not in ("awf",):
                    found.setdefault(f, []).append(os.path.join(dirpath, f))
    return found


def sample(state):
    """One sample of every live signal: name -> number (missing ones absent)."""
    out = {}
    if state["scan_at"] <= time.monotonic():
        state["cg"] = cgroup_files()
        state["scan_at"] = time.monotonic() + 0.05
    for kind, paths in state["cg"].items():
        tot = None
        for p in paths:
            try:
                if kind == "cpu.stat":
                    with open(p) as f:
                        v = int(dict(l.split() for l in f if l.strip()).get("usage_usec", 0))
                elif kind == "memory.stat":
                    with open(p) as f:
                        d = dict(l.split()[:2] for l in f if l.strip())
                        v = int(d.get("rss", d.get("anon", 0)))
                elif kind == "pids.events":
                    continue
                else:
                    v = read_int_file(p)
            except (OSError, ValueError):
                continue
            tot = v if tot is None else tot + v
        if tot is not None:
            out["cg:" + kind] = tot
    try:
        with open("/proc/stat") as f:
            for l in f:
                p = l.split()
                if p[0] == "cpu":
                    out["stat:cpu_busy"] = sum(int(x) for x in p[1:4]) + sum(int(x) for x in p[6:9])
                elif p[0] in ("processes", "ctxt", "procs_running"):
                    out["stat:" + p[0]] = int(p[1])
    except OSError:
        pass
    try:
        with open("/proc/loadavg") as f:
            p = f.read().split()
            r, t = p[3].split("/")
            out["loadavg:running"] = int(r)
            out["loadavg:threads"] = int(t)
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for l in f:
                k, v = l.split(":")
                if k in ("MemFree", "MemAvailable", "AnonPages", "KernelStack"):
                    out["meminfo:" + k] = int(v.split()[0])
    except OSError:
        pass
    si = sysinfo_t()
    if LIBC.sysinfo(ctypes.byref(si)) == 0:
        out["sysinfo:procs"] = si.procs
        out["sysinfo:freeram"] = si.freeram * si.mem_unit
        out["sysinfo:load1"] = si.loads[0]
    return out


# The live sender's public training header (not secret: it only sets the clock).
TRAIN = [1, 0, 1, 1, 0, 0, 1, 0]

RATE = {"cg:cpuacct.usage", "cg:cpu.stat", "stat:cpu_busy", "stat:processes", "stat:ctxt"}


def decode_live(samples, t_send, pre_hi, pre_lo, slot, nbits):
    """Find the preamble (high for pre_hi, low for pre_lo seconds) in each
    signal and read one bit per slot after it."""
    names = set()
    for _, s in samples:
        names.update(s)
    out, info = {}, {}
    for name in sorted(names):
        pts = [(t, s[name]) for t, s in samples if name in s]
        if name in RATE:
            pts = [((pts[i][0] + pts[i + 1][0]) / 2, (pts[i + 1][1] - pts[i][1]) / max(pts[i + 1][0] - pts[i][0], 1e-6))
                   for i in range(len(pts) - 1)]
        if len(pts) < 10:
            out[name] = [0] * nbits
            info[name] = "no samples"
            continue
        ts = [p[0] for p in pts]
        xs = [p[1] for p in pts]

        def mean(a, b):
            import bisect
            i, j = bisect.bisect_left(ts, a), bisect.bisect_left(ts, b)
            if j <= i:
                return None
            return sum(xs[i:j]) / (j - i)

        # Lock onto the clock: every start time in the first 4 s that shows
        # a low-high-low preamble (either polarity) is tried; the one whose
        # training header decodes best, then with the strongest preamble, wins.
        ntr = len(TRAIN)
        best = None
        t = t_send + 0.03
        while t < t_send + 4.0:
            b = mean(max(t_send, t - 0.25), t - 0.01)
            h = mean(t + 0.05, t + pre_hi - 0.05)
            l = mean(t + pre_hi + 0.03, t + pre_hi + pre_lo - 0.03)
            if None not in (b, h, l) and (h - b) * (h - l) > 0:
                pol = 1 if h > l else -1
                start = t + pre_hi + pre_lo
                tm = [mean(start + i * slot + slot * 0.2, start + (i + 1) * slot - slot * 0.2) for i in range(ntr)]
                if None not in tm:
                    thr = (min(tm) + max(tm)) / 2
                    agree = sum(1 for m, want in zip(tm, TRAIN) if (1 if (m - thr) * pol > 0 else 0) == want)
                    key = (agree, min(abs(h - b), abs(h - l)))
                    if best is None or key > best[0]:
                        best = (key, t, pol)
            t += 0.01
        if best is None:
            out[name] = [0] * nbits
            info[name] = "no preamble"
            continue
        _, t0, pol = best
        # Each slot against a local threshold, the midpoint of the lowest and
        # highest slot means within eight slots: the host's own load drifts.
        start = t0 + pre_hi + pre_lo + ntr * slot
        ms = [mean(start + i * slot + slot * 0.2, start + (i + 1) * slot - slot * 0.2) for i in range(nbits)]
        bits = []
        for i, m in enumerate(ms):
            near = [x for x in ms[max(0, i - 8):i + 9] if x is not None]
            thr = (min(near) + max(near)) / 2 if near else 0
            bits.append(1 if m is not None and (m - thr) * pol > 0 else 0)
        info[name + ":train"] = best[0][0]
        out[name] = bits
        info[name] = "n=%d" % len(pts)
    return out, info


def mincore_pages(fd, size, pages):
    """Residency of the given pages of fd by mincore(2) over a fresh mapping."""
    LIBC.mmap.restype = ctypes.c_void_p
    LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    addr = LIBC.mmap(None, size, 1, 1, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        return [0] * len(pages)
    try:
        vec = (ctypes.c_ubyte * ((size + 4095) // 4096))()
        if LIBC.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) != 0:
            return [0] * len(pages)
        return [vec[p] & 1 for p in pages]
    finally:
        LIBC.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(size))


def residency(path, pages):
    """Host-side test of page residency of the shared rootfs, as the agent."""
    nowait, minc = [0] * len(pages), [0] * len(pages)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        return nowait, minc, "open: %s" % e.strerror
    try:
        minc = mincore_pages(fd, os.fstat(fd).st_size, pages)
        for i, p in enumerate(pages):
            try:
                os.preadv(fd, [bytearray(1)], p * 4096, os.RWF_NOWAIT)
                nowait[i] = 1
            except OSError:
                pass
    except (OSError, ValueError, TypeError, BufferError):
        pass
    finally:
        os.close(fd)
    return nowait, minc, "ok"


def live(lv):
    evict()
    params = {"pre_hi": lv["pre_hi"], "pre_lo": lv["pre_lo"], "slot": lv["slot"], "bits": 64, "train": TRAIN,
              "threads": lv["threads"], "mem_mb": lv["mem_mb"],
              "file": lv["file"], "first": lv["first"], "stride": lv["stride"]}
    state = {"scan_at": 0, "cg": {}}
    samples, stop = [], threading.Event()

    def poll():
        while not stop.is_set():
            samples.append((time.monotonic(), sample(state)))
            time.sleep(0.004)

    th = threading.Thread(target=poll, daemon=True)
    t_send = time.monotonic()
    th.start()
    sent, el = query(lv["repo"], CONST, "live_send.py", params)
    after = sample(state)
    stop.set()
    th.join()
    rec, info = decode_live(samples, t_send, lv["pre_hi"], lv["pre_lo"], lv["slot"], 64)
    pages = [lv["first"] + i * lv["stride"] for i in range(64)]
    for path in PLAN["rootfs_paths"]:
        nw, mc, why = residency(os.path.join(path, lv["file"].lstrip("/")), pages)
        rec["residency:nowait:" + path] = nw
        rec["residency:mincore:" + path] = mc
        info["residency:" + path] = why
    info["sender_s"] = round(el, 3)
    info["sender_ok"] = sent == 1
    info["samples"] = len(samples)
    info["cgroup_files"] = sorted(sum(state["cg"].values(), []))[:20]
    info["after"] = after
    emit("live", [[lv["repo"], i] for i in range(64)], rec, info)


for entry in PLAN["runs"]:
    {"pagecache": pagecache, "counters": counters, "misc": misc, "live": live}[entry["kind"]](entry)
