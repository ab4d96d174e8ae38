package bench

import "github.com/awf-project/awf/isolate/isolatetest"

// The workloads' scripts. Each runs with /query (or, on the host, a scratch
// directory) as its working directory, the repository at ./repo, and
// writes its answer to ./out; the same bytes run in every row.

// ScriptTrivial answers a boolean.
const ScriptTrivial = `import os
open("out", "w").write("true" if os.path.isdir("repo") else "false")
`

// ScriptGitLog counts the commits reachable from HEAD ("git log" piped to a
// count), reading .git directly: the sandbox's root filesystem has Python
// and no git binary. It reads loose objects and version-2 pack indexes
// (a commit stored as a delta is refused: "git repack" keeps commits whole).
const ScriptGitLog = `import os, zlib, struct
g = os.path.join("repo", ".git")
def ref(name):
    p = os.path.join(g, name)
    if os.path.exists(p):
        return open(p).read().strip()
    for line in open(os.path.join(g, "packed-refs")):
        f = line.split()
        if len(f) == 2 and f[1] == name:
            return f[0]
    raise KeyError(name)
packs = []
pd = os.path.join(g, "objects", "pack")
for n in sorted(os.listdir(pd)) if os.path.isdir(pd) else []:
    if n.endswith(".idx"):
        idx = open(os.path.join(pd, n), "rb").read()
        assert idx[:8] == b"\377tOc\0\0\0\2"
        count = struct.unpack(">I", idx[8 + 255 * 4:8 + 256 * 4])[0]
        packs.append((idx, count, os.path.join(pd, n[:-4] + ".pack")))
def packed(h):
    want = bytes.fromhex(h)
    for idx, count, pack in packs:
        lo = struct.unpack(">I", idx[8 + (want[0] - 1) * 4:8 + want[0] * 4])[0] if want[0] else 0
        hi = struct.unpack(">I", idx[8 + want[0] * 4:12 + want[0] * 4])[0]
        base = 8 + 256 * 4
        while lo < hi:
            mid = (lo + hi) // 2
            s = idx[base + mid * 20:base + mid * 20 + 20]
            if s == want:
                off = struct.unpack(">I", idx[base + count * 24 + mid * 4:base + count * 24 + mid * 4 + 4])[0]
                assert off < 0x80000000
                with open(pack, "rb") as f:
                    f.seek(off)
                    data = f.read(1 << 16)
                c = data[0]
                assert (c >> 4) & 7 == 1, "not a whole commit"
                i = 1
                while c & 0x80:
                    c = data[i]
                    i += 1
                return zlib.decompressobj().decompress(data[i:])
            if s < want:
                lo = mid + 1
            else:
                hi = mid
    raise KeyError(h)
def commit(h):
    p = os.path.join(g, "objects", h[:2], h[2:])
    if os.path.exists(p):
        return zlib.decompress(open(p, "rb").read()).partition(b"\0")[2]
    return packed(h)
head = open(os.path.join(g, "HEAD")).read().strip()
todo = [ref(head[5:]) if head.startswith("ref: ") else head]
seen = set()
while todo:
    h = todo.pop()
    if h in seen:
        continue
    seen.add(h)
    for line in commit(h).split(b"\n"):
        if not line:
            break
        if line.startswith(b"parent "):
            todo.append(line[7:].decode())
open("out", "w").write(str(len(seen)))
`

// ScriptTreeWalk hashes every file of the working tree (not .git), in a
// stable order, and answers a boolean: the one tree walk the backends'
// benchmarks run too.
const ScriptTreeWalk = isolatetest.TreeWalkScript

// Workload is one script and the answer it must give.
type Workload struct {
	ID     string
	Script string
	Want   string
}

// Workloads returns the three workloads in report order.
func Workloads() []Workload {
	return []Workload{
		{ID: WorkTrivial, Script: ScriptTrivial, Want: "true"},
		{ID: WorkGitLog, Script: ScriptGitLog, Want: "1"},
		{ID: WorkTreeWalk, Script: ScriptTreeWalk, Want: "true"},
	}
}
