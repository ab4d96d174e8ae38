# The agent of the timestamp channel test (timestamps_test.go). awf run
# starts it as the agent user. It snapshots the metadata of everything it
# can see (every directory and file to a bounded depth: mtime, ctime, nlink,
# size, entry names; statvfs free counts of every mount point) around
# metered requests (a confidential bounded query whose script sleeps a
# secret number of milliseconds, or a bounded-agent invocation): right
# after the answer and again after a pause (teardown and a pool refill).
# It watches a control window first, makes two requests, each followed by
# a control window of the same length with no request (what the host
# changes on its own), and prints one JSON line: the differences of each
# window, and for every changed timestamp how far it lies from the start of
# its request. The agent never sees the secret; the Go test compares.
import json
import os
import subprocess
import sys
import time

PLAN = json.load(open(sys.argv[1]))
MAX_DEPTH = PLAN.get("depth", 6)
MAX_ENTRIES = 400000
SKIP_TOP = {"/proc"}


def own_paths():
    """The agent's own paths: it changes them itself, or awf made them for it."""
    own = {os.getcwd(), os.path.dirname(os.path.abspath(sys.argv[1]))}
    for k in ("HOME",):
        if os.environ.get(k):
            own.add(os.environ[k])
    for k, v in os.environ.items():
        if k.startswith("AWF_") and v.startswith("/"):
            own.add(v)
            own.add(os.path.dirname(v))
    return {os.path.normpath(p) for p in own if p and p != "/"}


OWN = own_paths()


def is_own(path):
    return any(path == o or path.startswith(o + "/") for o in OWN)


def rec(st):
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_nlink, st.st_size]


def mounts():
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                p = line.split()
                mp = p[4].replace("\\040", " ")
                if mp == "/proc" or mp.startswith("/proc/"):
                    continue
                out.append(mp)
    except OSError:
        pass
    return sorted(set(out))


def snapshot():
    snap = {}
    stack = [("/", 0)]
    n = 0
    while stack:
        d, depth = stack.pop()
        try:
            snap["D " + d] = rec(os.lstat(d))
        except OSError as e:
            snap["D " + d] = ["error", e.errno]
            continue
        if depth >= MAX_DEPTH:
            continue
        try:
            ents = list(os.scandir(d))
        except OSError:
            continue
        names = sorted(e.name for e in ents)
        snap["L " + d] = names
        for e in ents:
            p = os.path.join(d, e.name)
            if p in SKIP_TOP or is_own(p):
                continue
            n += 1
            if n > MAX_ENTRIES:
                snap["truncated"] = True
                return snap
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append((p, depth + 1))
                else:
                    snap["F " + p] = rec(e.stat(follow_symlinks=False))
            except OSError:
                pass
    for mp in mounts():
        if is_own(mp):
            continue
        try:
            v = os.statvfs(mp)
            snap["S " + mp] = [v.f_bfree, v.f_bavail, v.f_ffree, v.f_favail]
        except OSError:
            pass
    return snap


def diff(a, b):
    """Every key whose value differs, with both values."""
    out = {}
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            out[k] = [a.get(k), b.get(k)]
    return out


def request(job):
    t0 = time.time_ns()
    m0 = time.monotonic()
    if job["kind"] == "query":
        cmd = ["bounded-query", "--repo", job["repo"], "--schema", '{"type":"const","value":1}']
        body = open(os.path.join(PLAN["scripts"], "timestamps_send.py")).read()
    else:
        cmd = ["bounded-agent", "--repo", job["repo"], "--schema", '{"type":"boolean"}']
        body = "Does the repository have a README?"
    r = subprocess.run(cmd, input=body.encode(), capture_output=True, timeout=PLAN.get("query_timeout", 120))
    el = time.monotonic() - m0
    try:
        env = json.loads(r.stdout)
    except ValueError:
        env = {"status": "unparsed", "raw": r.stdout.decode(errors="replace")[:200]}
    return env, t0, time.time_ns(), el


def offsets(d, t0):
    """For each changed timestamp, its distance in ms from the request's start."""
    out = {}
    for k, (a, b) in d.items():
        if k[0] in "DF" and isinstance(a, list) and isinstance(b, list) and a and b and a[0] != "error" and b[0] != "error":
            for i, what in ((0, "mtime"), (1, "ctime")):
                if a[i] != b[i]:
                    out[k + " " + what] = round((b[i] - t0) / 1e6, 3)
    return out


def job_windows(pause):
    """One request: the window across it and the window after it (teardown
    and a pool refill), each a diff, with the offsets of changed timestamps."""
    a = snapshot()
    env, t0, t1, el = request(PLAN["job"])
    b = snapshot()
    time.sleep(max(pause, 1.5 * el))
    c = snapshot()
    d = diff(a, b)
    d.update({k: v for k, v in diff(b, c).items() if k not in d})
    off = offsets(diff(a, b), t0)
    off.update({k: v for k, v in offsets(diff(b, c), t0).items() if k not in off})
    return {"status": env.get("status"), "envelope": env, "elapsed_s": round(el, 3),
            "request_ms": round((t1 - t0) / 1e6, 3), "diff": d, "offsets_ms": off}


def control_window(pause):
    a = snapshot()
    time.sleep(pause)
    return diff(a, snapshot())


# A control window, then two requests, each followed by a control window of
# the same length with no request: a change awf makes at a job's lifecycle moments shows in both
# request windows; the host's own activity shows in the control windows.
pause = PLAN.get("pause", 4)
first = snapshot()
jobs, controls = [], [control_window(pause)]
for _ in range(2):
    jobs.append(job_windows(pause))
    controls.append(control_window(max(pause, 1.5 * jobs[-1]["elapsed_s"])))
print(json.dumps({
    "own": sorted(OWN), "entries": len(first), "truncated": bool(first.get("truncated")),
    "jobs": jobs, "controls": controls,
}), flush=True)
