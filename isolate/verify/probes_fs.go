package verify

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/awf-project/awf/isolate/hostview"
)

// filesystemProbes try to write outside the writable areas and to read
// anything of the host, of other seeds or of earlier invocations.
func filesystemProbes() []Probe {
	writeProbe := func(id, title string, paths ...string) Probe {
		body := "res = {}\n"
		var fields []string
		for i, p := range paths {
			f := fmt.Sprintf("w%d", i)
			fields = append(fields, f)
			body += fmt.Sprintf("def f%d():\n    fd = os.open(%q, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)\n    os.close(fd)\nres[%q] = attempt(%q, f%d)\n", i, p, f, f, i)
		}
		body += "answer(res)\n"
		return Probe{
			ID: id, Group: "filesystem", Title: title,
			OnFail:  "The script can change the shared root filesystem, which every later sandbox runs on.",
			body:    body,
			schema:  errnoFields(fields...),
			check:   checkPaths(paths, checkAllBlocked(fields...)),
			example: errnoExample(fields, "EROFS"),
		}
	}
	return []Probe{
		writeProbe("fs/write-root", "Creates a file in /.", "/awf-verify-probe"),
		writeProbe("fs/write-etc", "Creates /etc/awf-verify-probe and opens /etc/passwd for writing.", "/etc/awf-verify-probe", "/etc/passwd"),
		writeProbe("fs/write-usr", "Creates a file in /usr/bin and opens the interpreter for writing.", "/usr/bin/awf-verify-probe", "/usr/bin/python3"),
		writeProbe("fs/write-script", "Opens the query script for writing.", "/awf/query-script.py"),
		{
			ID: "fs/host-paths", Group: "filesystem",
			Title:  "Looks for host-only paths: files that exist on the host but not in the root filesystem, and verify's own work directory.",
			OnFail: "Host files are visible in the sandbox.",
			body: `paths = <% .HostOnly | py %>
seen = [i for i, p in enumerate(paths) if os.path.lexists(p)]
answer({"visible": len(seen), "first": seen[0] if seen else -1})
`,
			schema: sObj("visible", sInt(0, 64), "first", sInt(-1, 63)),
			check: func(c *probeCtx) (Status, string) {
				if n := c.num("visible"); n > 0 {
					first := c.num("first")
					name := "?"
					if hp := c.fx.hostOnlyPaths(); first >= 0 && int(first) < len(hp) {
						name = hp[first]
					}
					return Fail, fmt.Sprintf("%d host-only paths are visible, first %s", n, name)
				}
				return Pass, fmt.Sprintf("none of %d host-only paths is visible", len(c.fx.hostOnlyPaths()))
			},
			example: `{"visible":0,"first":-1}`,
		},
		{
			ID: "fs/proc-kcore", Group: "filesystem",
			Title:  "Reads /proc/kcore, /proc/kmsg and /proc/timer_list.",
			OnFail: "Kernel memory or logs are readable from the sandbox.",
			body: `def rd(p):
    def f():
        with open(p, "rb") as fh:
            if masked(fh.fileno()):
                return "masked"
            if not fh.read(16):
                raise OSError(errno.ENOENT, "empty")
    return f
answer({"kcore": attempt("kcore", rd("/proc/kcore")), "kmsg": attempt("kmsg", rd("/proc/kmsg")),
        "timer_list": attempt("timer_list", rd("/proc/timer_list"))})
`,
			schema:  errnoFields("kcore", "kmsg", "timer_list"),
			check:   checkAllBlocked("kcore", "kmsg", "timer_list"),
			example: `{"kcore":"EACCES","kmsg":"EACCES","timer_list":"EACCES"}`,
		},
		{
			ID: "fs/proc-sys-write", Group: "filesystem",
			Title:  "Opens /proc/sys/kernel/hostname, /proc/sys/vm/drop_caches and /proc/sysrq-trigger for writing.",
			OnFail: "The sandbox can change kernel settings or trigger sysrq actions.",
			body: `def wr(p):
    def f():
        fd = os.open(p, os.O_WRONLY)
        m = masked(fd)
        os.close(fd)
        return "masked" if m else None
    return f
answer({"hostname": attempt("hostname", wr("/proc/sys/kernel/hostname")),
        "drop_caches": attempt("drop_caches", wr("/proc/sys/vm/drop_caches")),
        "sysrq": attempt("sysrq", wr("/proc/sysrq-trigger"))})
`,
			schema:  errnoFields("hostname", "drop_caches", "sysrq"),
			check:   checkAllBlocked("hostname", "drop_caches", "sysrq"),
			example: `{"hostname":"EROFS","drop_caches":"EROFS","sysrq":"EROFS"}`,
		},
		{
			ID: "fs/sys", Group: "filesystem",
			Title:  "Writes under /sys, creates a cgroup under /sys/fs/cgroup, and lists /sys/firmware.",
			OnFail: "The sandbox can change host settings through sysfs or cgroupfs, or read firmware tables.",
			body: `def wr(p):
    def f():
        fd = os.open(p, os.O_WRONLY)
        m = masked(fd)
        os.close(fd)
        return "masked" if m else None
    return f
def firmware():
    if not os.listdir("/sys/firmware"):
        raise OSError(errno.ENOENT, "empty")
answer({"thp": attempt("thp", wr("/sys/kernel/mm/transparent_hugepage/enabled")),
        "cgroup": attempt("cgroup", lambda: os.mkdir("/sys/fs/cgroup/awf-verify-probe")),
        "firmware": attempt("firmware", firmware)})
`,
			schema:  errnoFields("thp", "cgroup", "firmware"),
			check:   checkAllBlocked("thp", "cgroup", "firmware"),
			example: `{"thp":"EROFS","cgroup":"ENOENT","firmware":"ENOENT"}`,
		},
		{
			ID: "fs/writable-mounts", Group: "filesystem",
			Title:  "Tries to create a file in every directory and mount point outside /query, /tmp, /dev/shm, /proc and /sys.",
			OnFail: "A directory outside the writable areas accepts new files.",
			body: `allowed = (QUERY, "/tmp", "/dev/shm", "/dev/mqueue", "/proc", "/sys")
def under(p, roots):
    return any(p == r or p.startswith(r + "/") for r in roots)
dirs = {"/"}
for top in os.listdir("/"):
    p = "/" + top
    if os.path.isdir(p) and not os.path.islink(p) and not under(p, allowed):
        dirs.add(p)
        for p2, e in walk_names(p, skip=()):
            if e.is_dir(follow_symlinks=False) and not under(p2, allowed):
                dirs.add(p2)
try:
    with open("/proc/self/mountinfo") as f:
        for l in f:
            mp = l.split()[4]
            if not under(mp, allowed) and os.path.isdir(mp):
                dirs.add(mp)
except OSError:
    pass
tops = ["/", "/etc", "/usr", "/lib", "/lib64", "/dev", "/awf", "/var", "/run", "/home", "/root"]
writable = []
for d in sorted(dirs):
    p = os.path.join(d, ".awf-verify-probe")
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(p)
        writable.append(d)
    except OSError:
        pass
first = "none"
if writable:
    t = "/" + writable[0].split("/")[1] if writable[0] != "/" else "/"
    first = t if t in tops else "other"
answer({"checked": min(len(dirs), 4096), "writable": min(len(writable), 64), "first": first})
`,
			schema: sObj("checked", sInt(0, 4096), "writable", sInt(0, 64), "first", sEnum("none", "/", "/etc", "/usr", "/lib", "/lib64", "/dev", "/awf", "/var", "/run", "/home", "/root", "other")),
			check: func(c *probeCtx) (Status, string) {
				if n := c.num("writable"); n > 0 {
					return Fail, fmt.Sprintf("%d directories outside the writable areas accept new files (first under %s)", n, c.str("first"))
				}
				return Pass, fmt.Sprintf("none of %d directories and mount points outside /query, /tmp and /dev/shm accepts a new file", c.num("checked"))
			},
			example: `{"checked":120,"writable":0,"first":"none"}`,
		},
		{
			ID: "fs/mountinfo", Group: "filesystem",
			Title:  "Reads /proc/self/mountinfo and looks for other seeds, the sibling directory and host paths in it.",
			OnFail: "The mount table reveals other repositories or host layout to the script.",
			body: `text = ""
try:
    with open("/proc/self/mountinfo") as f:
        text = f.read()
except OSError:
    pass
prefixes = <% .HostPrefixes | py %>
lines = text.splitlines()
answer({"mounts": min(len(lines), 64),
        "other_seed": <% .OtherMarker | py %> in text,
        "sibling": <% .SiblingMarker | py %> in text,
        "host_paths": min(sum(1 for l in lines if any(p in l for p in prefixes)), 64)})
`,
			schema: sObj("mounts", sInt(0, 64), "other_seed", sBool, "sibling", sBool, "host_paths", sInt(0, 64)),
			check: func(c *probeCtx) (Status, string) {
				if c.flag("other_seed") || c.flag("sibling") {
					return Fail, fmt.Sprintf("mountinfo names another seed (%v) or the sibling directory (%v)", c.flag("other_seed"), c.flag("sibling"))
				}
				if n := c.num("host_paths"); n > 0 {
					return Warn, fmt.Sprintf("%d of %d mountinfo lines show host paths of the root filesystem, seed or scratch directories (known: bind and overlay sources are visible); keep those paths free of secrets", n, c.num("mounts"))
				}
				return Pass, fmt.Sprintf("%d mounts; no host path, other seed or sibling is named", c.num("mounts"))
			},
			example: `{"mounts":14,"other_seed":false,"sibling":false,"host_paths":0}`,
		},
		{
			ID: "fs/seed-parent", Group: "filesystem",
			Title:  "Climbs out of /query/repo (.., ../.., absolute guesses) and searches the whole tree for a file that sits beside the seed on the host.",
			OnFail: "The seed's host directory, or its neighbours, are reachable.",
			body: `name = <% .SiblingMarker | py %>
found = False
for p in (os.path.join(REPO, "..", name), os.path.join(REPO, "..", "..", name), "/" + name):
    found = found or os.path.lexists(p)
walked = 0
for p, e in walk_names("/"):
    walked += 1
    if e.name in (name, <% .SiblingDir | py %>):
        found = True
answer({"found": found, "walked": min(walked, 100000), "parent_is_query": os.path.realpath(os.path.join(REPO, "..")) == QUERY})
`,
			schema: sObj("found", sBool, "walked", sInt(0, 100000), "parent_is_query", sBool),
			check: func(c *probeCtx) (Status, string) {
				if c.flag("found") {
					return Fail, "a file beside the seed on the host is reachable from the sandbox"
				}
				if !c.flag("parent_is_query") {
					return Fail, "/query/repo/.. is not /query: the view's parent is not the sandbox's own tmpfs"
				}
				return Pass, fmt.Sprintf("no neighbour of the seed among %d paths; /query/repo/.. is /query", c.num("walked"))
			},
			example: `{"found":false,"walked":1500,"parent_is_query":true}`,
		},
		{
			ID: "fs/other-seeds", Group: "filesystem",
			Title:  "Searches the whole tree for a file of another staged seed.",
			OnFail: "The sandbox sees a repository other than the one it was given.",
			body: `name = <% .OtherMarker | py %>
found = any(e.name == name for p, e in walk_names("/"))
answer({"found": found})
`,
			schema:  sObj("found", sBool),
			check:   checkEqual(map[string]any{"found": false}),
			example: `{"found":false}`,
		},
		{
			ID: "fs/earlier-invocations", Group: "filesystem",
			Title:  "Looks for the files ctl/plant left in /query, /query/repo, /tmp and /dev/shm in an earlier sandbox.",
			OnFail: "State survives between invocations: one query can pass data to the next.",
			body: `tok = <% .PlantToken | py %>
found = any(e.name == tok for p, e in walk_names("/"))
for d in (QUERY, REPO, "/tmp", "/dev/shm"):
    found = found or os.path.lexists(os.path.join(d, tok))
answer({"found": found})
`,
			schema:  sObj("found", sBool),
			check:   checkEqual(map[string]any{"found": false}),
			example: `{"found":false}`,
		},
		{
			ID: "fs/dev", Group: "filesystem",
			Title:  "Looks for device nodes beyond null, zero, full, random, urandom and tty, and opens /dev/mem.",
			OnFail: "Raw devices are reachable from the sandbox.",
			body: `import stat
ok = {"null", "zero", "full", "random", "urandom", "tty", "console", "ptmx"}
named = <% .DevNames | py %>
extra, mask = 0, 0
for p, e in walk_names("/dev", skip=()):
    try:
        m = os.lstat(p).st_mode
    except OSError:
        continue
    if (stat.S_ISCHR(m) or stat.S_ISBLK(m)) and e.name not in ok and not p.startswith("/dev/pts/"):
        extra += 1
        if p[5:] in named:
            mask |= 1 << named.index(p[5:])
def mem():
    with open("/dev/mem", "rb") as f:
        f.read(1)
answer({"extra_nodes": min(extra, 64), "named": mask, "mem": attempt("mem", mem)})
`,
			schema: sObj("extra_nodes", sInt(0, 64), "named", sInt(0, 1<<len(devNames)-1), "mem", sErrno),
			check: func(c *probeCtx) (Status, string) {
				n := c.num("extra_nodes")
				var names []string
				for i, d := range devNames {
					if c.num("named")&(1<<i) != 0 {
						names = append(names, "/dev/"+d)
					}
				}
				if unnamed := n - int64(len(names)); unnamed > 0 {
					names = append(names, fmt.Sprintf("%d others", unnamed))
				}
				if !blocked(c.str("mem")) {
					return Fail, "/dev/mem is readable"
				}
				if n == 0 {
					return Pass, "only the standard character devices; /dev/mem: " + c.str("mem")
				}
				if c.traits.sentryDevices != nil && int64(len(names)) == n && allIn(names, c.traits.sentryDevices) {
					return Warn, fmt.Sprintf("device nodes %s exist, implemented by the runtime's user-space kernel rather than the host's", strings.Join(names, " "))
				}
				return Fail, fmt.Sprintf("%d unexpected device nodes: %s", n, strings.Join(names, " "))
			},
			example: `{"extra_nodes":0,"named":0,"mem":"ENOENT"}`,
		},
		hostCounterProbe(),
		procInodeProbe(),
		{
			ID: "fs/tmp-noexec", Group: "filesystem",
			Title:  "Copies the interpreter into /tmp and tries to execute the copy.",
			OnFail: "Scripts can drop and run their own binaries from /tmp.",
			body: `import shutil
dst = "/tmp/awf-verify-exec"
copy = attempt("copy", lambda: shutil.copyfile("/usr/bin/python3", dst))
chmod = attempt("chmod", lambda: os.chmod(dst, 0o755)) if copy == "ok" else "other"
res = {"copy": copy, "chmod": chmod, "exec": "other"}
if copy == "ok":
    code = "import json; json.dump(" + json.dumps(dict(res, exec="ok")) + ", open(" + repr(OUT) + ", 'w'), separators=(',', ':'))"
    res["exec"] = attempt("exec", lambda: os.execv(dst, [dst, "-I", "-S", "-c", code]))
answer(res)
`,
			schema:  errnoFields("copy", "chmod", "exec"),
			check:   checkAllBlocked("exec"),
			example: `{"copy":"ok","chmod":"ok","exec":"EACCES"}`,
		},
	}
}

// checkPaths wraps a check so that its evidence names the paths tried.
func checkPaths(paths []string, inner func(c *probeCtx) (Status, string)) func(c *probeCtx) (Status, string) {
	return func(c *probeCtx) (Status, string) {
		s, e := inner(c)
		return s, fmt.Sprintf("%s (paths %v)", e, paths)
	}
}

// errnoExample builds an example answer with every field set to v.
func errnoExample(fields []string, v string) string {
	var kv []string
	for _, f := range fields {
		kv = append(kv, fmt.Sprintf("%q:%q", f, v))
	}
	return "{" + joinComma(kv) + "}"
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// devNames are device nodes fs/dev names in its evidence.
var devNames = []string{
	"mem", "kmem", "port", "kmsg", "fuse", "net/tun", "kvm", "vhost-net", "vhost-vsock", "vsock",
	"loop0", "loop-control", "sda", "vda", "nvme0", "nvme0n1", "sr0", "mapper/control", "dri/card0",
	"userfaultfd", "btrfs-control", "cpu_dma_latency", "hpet", "rtc0", "watchdog", "mqueue", "shm",
}

// allIn reports whether every element of xs is in set.
func allIn(xs, set []string) bool {
	for _, x := range xs {
		if !slices.Contains(set, x) {
			return false
		}
	}
	return true
}

// maskBits is how many paths one integer field of fs/host-counters covers,
// well inside the exact-integer range of an answer.
const maskBits = 26

// hostCounterProbe reads every path every backend masks (hostview's
// host-wide counters and kernel information) and reports which ones are
// readable with content: a non-empty file that is not the /dev/null of a
// mask, or a non-empty directory.
func hostCounterProbe() Probe {
	paths := hostview.SandboxMaskPaths()
	lit, _ := py(paths)
	chunks := (len(paths) + maskBits - 1) / maskBits
	var schema []string
	example := map[string]int{}
	for k := 0; k < chunks; k++ {
		n := min(maskBits, len(paths)-k*maskBits)
		schema = append(schema, fmt.Sprintf("m%d", k), sInt(0, 1<<n-1))
		example[fmt.Sprintf("m%d", k)] = 0
	}
	ex, _ := json.Marshal(example)
	return Probe{
		ID: "fs/host-counters", Group: "filesystem",
		Title:  "Reads every host-wide counter and kernel information file that the sandboxes mask (isolate/hostview: /proc/stat, meminfo, vmstat, diskstats, /proc/sys, /sys, kcore, kallsyms, ...): none may be readable with content.",
		OnFail: "A script can read host-wide kernel counters that another sandbox moves: one query can signal to the next, or to the agent.",
		body: "PATHS = " + lit + "\nBITS = " + fmt.Sprint(maskBits) + `
def content(p):
    try:
        if os.path.isdir(p):
            return bool(os.listdir(p))
        with open(p, "rb") as f:
            if masked(f.fileno()):
                return False
            return bool(f.read(1))
    except OSError:
        return False
seen = [content(p) for p in PATHS]
res = {}
for k in range((len(PATHS) + BITS - 1) // BITS):
    res["m%d" % k] = sum(1 << (i - k * BITS) for i in range(k * BITS, min(len(PATHS), (k + 1) * BITS)) if seen[i])
answer(res)
`,
		schema: sObj(schema...),
		check: func(c *probeCtx) (Status, string) {
			var readable []string
			for i, p := range paths {
				if c.num(fmt.Sprintf("m%d", i/maskBits))&(1<<(i%maskBits)) != 0 {
					readable = append(readable, p)
				}
			}
			switch {
			case len(readable) == 0:
				return Pass, fmt.Sprintf("none of %d host-counter and kernel-information paths is readable", len(paths))
			case c.traits.sentryProc:
				return Warn, fmt.Sprintf("%s are readable, but they are the runtime's user-space kernel's own, per sandbox, not the host's", strings.Join(readable, " "))
			}
			return Fail, fmt.Sprintf("%d host-wide paths are readable: %s", len(readable), strings.Join(readable, " "))
		},
		example: string(ex),
	}
}

// inoSlack is how far outside the host's readings of get_next_ino around
// a run an inside reading may lie and still be the host's counter: host
// activity moves it by a few thousand to some tens of thousands per second.
const inoSlack = 1 << 16

// procInodeProbe looks for the host-wide inode counter get_next_ino through
// /proc: the inode of /proc/self and of fresh /proc/self/fd entries, until
// one starts a new per-CPU batch. The check compares the reading with the
// host's counter just before and just after the run: inside that window it
// is the host's counter, which one sandbox moves and the next reads.
func procInodeProbe() Probe {
	return Probe{
		ID: "fs/proc-inode-counter", Group: "filesystem",
		Title:  "Stats /proc/self and fresh /proc/self/fd entries and compares their inode numbers with the host's inode counter (get_next_ino) around the run.",
		OnFail: "Scripts can read the host-wide inode counter through /proc, and move it with lookups: one query can signal to the next.",
		body: `res = {"proc": "ok", "batch": -1, "ino": -1}
try:
    step("stat")
    res["ino"] = min(os.stat("/proc/self/").st_ino, 1 << 32)
    for i in range(3 * 1024):
        fd = os.open("/dev/null", os.O_RDONLY)
        try:
            ino = os.lstat("/proc/self/fd/%d" % fd).st_ino
        finally:
            os.close(fd)
        try:
            os.lstat("/proc/self/fd/%d" % fd)  # drops the entry: the next lookup is fresh
        except OSError:
            pass
        res["ino"] = min(ino, 1 << 32)
        if ino % 1024 == 1:
            res["batch"] = ino - 1
            break
except OSError as e:
    res["proc"] = oserr(e)
answer(res)
`,
		schema: sObj("proc", sErrno, "batch", sInt(-1, 1<<32), "ino", sInt(-1, 1<<32)),
		check: func(c *probeCtx) (Status, string) {
			proc, batch, ino := c.str("proc"), c.num("batch"), c.num("ino")
			if ino < 0 {
				return Pass, "no /proc to read inode numbers from: stat /proc/self/ gives " + proc
			}
			after := c.inoAfter
			known := c.inoBefore >= 0 && after >= c.inoBefore
			if batch < 0 && !known {
				// 3072 fresh lookups never started a batch of inoBatch
				// numbers: no counter that moves numbers these inodes.
				return Pass, fmt.Sprintf("inode %d inside does not move with fresh /proc lookups: no counter to read", ino)
			}
			if !known {
				return Fail, fmt.Sprintf("fresh /proc lookups start inode batches (at %d) like the host's counter, which could not be read to compare", batch)
			}
			lo, hi := c.inoBefore-inoSlack, after+inoSlack
			v, what := ino, "inode"
			if batch >= 0 {
				v, what = batch, "a fresh inode batch at"
			}
			if v >= lo && v <= hi {
				ev := fmt.Sprintf("%s %d inside, within the host's inode counter %d..%d during the run", what, v, c.inoBefore, after)
				if r := c.traits.procInodeResidual; r != "" {
					return Warn, ev + ": " + r
				}
				return Fail, ev
			}
			return Pass, fmt.Sprintf("%s %d inside, outside the host's inode counter %d..%d: the runtime numbers its own", what, v, c.inoBefore, after)
		},
		example: `{"proc":"ENOENT","batch":-1,"ino":-1}`,
	}
}
