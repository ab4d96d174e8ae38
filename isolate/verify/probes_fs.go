package verify

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/hostview"
)

// filesystemProbes try to write outside the writable areas and to read
// anything of the host, of other seeds or of earlier invocations.
func filesystemProbes() []Probe {
	disk := diskPaths()
	writeProbe := func(id, title string, paths ...string) Probe {
		body := "res = {}\n"
		var fields []string
		for i, p := range paths {
			f := fmt.Sprintf("w%d", i)
			fields = append(fields, f)
			body += fmt.Sprintf("def f%d():\n    fd = os.open(%q, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)\n    os.close(fd)\nres[%q] = attempt(%q, f%d)\n", i, p, f, f, i)
		}
		body += "answer(res)\n"
		p := blockedProbe(id, title, "The script can change the shared root filesystem, which every later sandbox runs on.",
			errnoExample(fields, "EROFS"), fields...)
		p.body, p.check = body, checkPaths(paths, p.check)
		return p
	}
	return inGroup("filesystem", []Probe{
		writeProbe("fs/write-root", "Creates a file in /.", "/awf-verify-probe"),
		writeProbe("fs/write-etc", "Creates /etc/awf-verify-probe and opens /etc/passwd for writing.", "/etc/awf-verify-probe", "/etc/passwd"),
		writeProbe("fs/write-usr", "Creates a file in /usr/bin and opens the interpreter for writing.", "/usr/bin/awf-verify-probe", "/usr/bin/python3"),
		writeProbe("fs/write-script", "Opens the query script for writing.", "/awf/query-script.py"),
		{
			ID:     "fs/host-paths",
			Title:  "Looks for host-only paths: files that exist on the host but not in the root filesystem, and verify's own work directory.",
			OnFail: "Host files are visible in the sandbox.",
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
			ID:     "fs/host-disk",
			Title:  "Stats every mount of the sandbox, its root, /usr and /etc, and the files the Engine binds into /etc (isolate.StatPaths), and compares each filesystem (size, inodes, block size) with the host's disks: the state directory's, the root filesystem's, verify's own, the temporary directories' and, for docker, the Engine's data root.",
			OnFail: "A mount in the sandbox lies on a host disk: statvfs shows a script that disk's live free blocks and inodes, which every host write moves.",
			schema: sObj("mask", sInt(0, 1<<len(disk)-1)),
			check: func(c *probeCtx) (Status, string) {
				var shared []string
				residual := true
				for i, p := range disk {
					if c.num("mask")&(1<<i) != 0 {
						shared = append(shared, p)
						residual = residual && (p == "/" || p == "/etc" || strings.HasPrefix(p, "/etc/"))
					}
				}
				switch {
				case len(shared) == 0:
					return Pass, fmt.Sprintf("none of %d paths lies on a host disk", len(disk))
				case residual && c.traits.rootDiskResidual != "":
					return Warn, fmt.Sprintf("%s on a host disk: %s", strings.Join(shared, ", "), c.traits.rootDiskResidual)
				}
				return Fail, fmt.Sprintf("%s on a host disk, whose live free counts statvfs shows", strings.Join(shared, ", "))
			},
			example: `{"mask":0}`,
		},
		blockedProbe("fs/proc-kcore", "Reads /proc/kcore, /proc/kmsg and /proc/timer_list.",
			"Kernel memory or logs are readable from the sandbox.",
			`{"kcore":"EACCES","kmsg":"EACCES","timer_list":"EACCES"}`, "kcore", "kmsg", "timer_list"),
		blockedProbe("fs/proc-sys-write", "Opens /proc/sys/kernel/hostname, /proc/sys/vm/drop_caches and /proc/sysrq-trigger for writing.",
			"The sandbox can change kernel settings or trigger sysrq actions.",
			`{"hostname":"EROFS","drop_caches":"EROFS","sysrq":"EROFS"}`, "hostname", "drop_caches", "sysrq"),
		blockedProbe("fs/sys", "Writes under /sys, creates a cgroup under /sys/fs/cgroup, and lists /sys/firmware.",
			"The sandbox can change host settings through sysfs or cgroupfs, or read firmware tables.",
			`{"thp":"EROFS","cgroup":"ENOENT","firmware":"ENOENT"}`, "thp", "cgroup", "firmware"),
		{
			ID:     "fs/writable-mounts",
			Title:  "Tries to create a file in every directory and mount point outside /query, /tmp, /dev/shm, /proc and /sys.",
			OnFail: "A directory outside the writable areas accepts new files.",
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
			ID:     "fs/mountinfo",
			Title:  "Reads /proc/self/mountinfo and looks for other seeds, the sibling directory and host paths in it.",
			OnFail: "The mount table reveals other repositories or host layout to the script.",
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
			ID:     "fs/seed-parent",
			Title:  "Climbs out of /query/repo (.., ../.., absolute guesses) and searches the whole tree for a file that sits beside the seed on the host.",
			OnFail: "The seed's host directory, or its neighbours, are reachable.",
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
		wantProbe("fs/other-seeds", "Searches the whole tree for a file of another staged seed.",
			"The sandbox sees a repository other than the one it was given.", sObj("found", sBool), `{"found":false}`),
		wantProbe("fs/earlier-invocations", "Looks for the files ctl/plant left in /query, /query/repo, /tmp and /dev/shm in an earlier sandbox.",
			"State survives between invocations: one query can pass data to the next.", sObj("found", sBool), `{"found":false}`),
		{
			ID:     "fs/dev",
			Title:  "Looks for device nodes beyond null, zero, full, random, urandom and tty, and opens /dev/mem.",
			OnFail: "Raw devices are reachable from the sandbox.",
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
			ID:      "fs/tmp-noexec",
			Title:   "Copies the interpreter into /tmp and tries to execute the copy.",
			OnFail:  "Scripts can drop and run their own binaries from /tmp.",
			schema:  errnoFields("copy", "chmod", "exec"),
			check:   checkAllBlocked("exec"),
			example: `{"copy":"ok","chmod":"ok","exec":"EACCES"}`,
		},
	})
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
		ID:     "fs/host-counters",
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
		ID:     "fs/proc-inode-counter",
		Title:  "Stats /proc/self and fresh /proc/self/fd entries and compares their inode numbers with the host's inode counter (get_next_ino) around the run.",
		OnFail: "Scripts can read the host-wide inode counter through /proc, and move it with lookups: one query can signal to the next.",
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

// diskPaths are what fs/host-disk stats inside the sandbox:
// isolate.StatPaths of the description of a job with a repository. Describe
// cannot fail on this template (were it to, the list would hold no mount,
// and TestHostDiskCheck, which finds each mount in it, would fail).
func diskPaths() []string {
	tpl := isolate.Template{Repo: "seed", Limits: isolate.DefaultLimits(), Weaken: isolate.Weakening{NoSeccomp: true}}
	d, _ := isolate.Describe(tpl, isolate.Job{}, isolate.HostConfig{})
	return isolate.StatPaths(d)
}

// hostDisks returns the identity statvfs gives a script of each host
// filesystem that holds one of paths (size in blocks, inodes, block size),
// without repeats; a path that cannot be read is left out.
func hostDisks(paths ...string) [][3]int64 {
	var out [][3]int64
	for _, p := range paths {
		var st unix.Statfs_t
		if p == "" || unix.Statfs(p, &st) != nil {
			continue
		}
		// As the script reads them: Python's statvfs fields are signed.
		d := [3]int64{int64(st.Blocks), int64(st.Files), st.Bsize}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}
