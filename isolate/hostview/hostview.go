// Package hostview owns the one list of host-wide kernel files that a
// sandbox can move and that another observer could read: the agent while a
// query runs, or a later sandbox. Invariant 8 says no such file may carry a
// bit, so every consumer renders this list and none keeps its own:
//
//   - the agent shim replaces each Snapshot entry by a copy frozen when the
//     agent starts (same format, so free, nproc, top and os.totalmem still
//     work) and covers every other non-process entry of /proc;
//   - every sandbox backend masks each entry (a script has no need for them),
//     with the kernel information of SandboxMaskPaths.
//
// The package reads the host only in Copy; Entries is pure data. It does
// not decide how a backend masks a path: that is the backend's business.
// Entries never nest (no entry lies inside another), so each can be
// mounted over on its own.
package hostview

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// Action says what the agent's view does with an entry.
type Action int

const (
	// Snapshot replaces the entry by a read-only copy taken at agent start.
	// Tools read these (free, top, nproc, runtimes sizing their heaps).
	Snapshot Action = iota + 1
	// Mask replaces the entry by an empty file or directory. Nothing an
	// agent needs reads it, and a copy would still show host state.
	Mask
)

func (a Action) String() string {
	switch a {
	case Snapshot:
		return "snapshot"
	case Mask:
		return "mask"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Entry is one host-wide file or directory under /proc or /sys.
type Entry struct {
	// Path is absolute, as seen on the host (/proc/stat).
	Path string
	// Action is what the agent's view does with it. Sandboxes mask every entry.
	Action Action
	// Reason says which movement of shared state the entry would show.
	Reason string
}

// entries is the list. Keep it sorted by path; Entries returns a copy.
// unit_test.go checks the order, uniqueness and that every reason is given.
var entries = []Entry{
	{"/proc/buddyinfo", Snapshot, "free pages per order and zone move with every allocation a sandbox makes"},
	{"/proc/cgroups", Mask, "the number of cgroups per hierarchy changes as each sandbox's cgroup is created and removed, which times a script from outside"},
	{"/proc/cpuinfo", Snapshot, "the current clock rate (cpu MHz) follows the load a sandbox puts on a core"},
	{"/proc/crypto", Mask, "each algorithm's refcnt moves as kernel crypto transforms are allocated and freed"},
	{"/proc/diskstats", Snapshot, "read and write counts per disk, including the loop device of each sandbox's root image, move with every page a sandbox faults in"},
	{"/proc/fs", Mask, "per-filesystem state such as ext4's free blocks per group (mb_groups) moves with every write to a host filesystem"},
	{"/proc/interrupts", Snapshot, "timer, IPI and device interrupt counts per CPU move with a sandbox's activity"},
	{"/proc/irq", Mask, "per-interrupt spurious and unhandled counts move with device activity a sandbox causes"},
	{"/proc/key-users", Mask, "per-uid key counts; sandboxes share uid 65534"},
	{"/proc/keys", Mask, "the keys the caller may view, including uid 65534's user keyring, which every sandbox shares"},
	{"/proc/kpagecgroup", Mask, "the memory cgroup of every physical page shows which pages a sandbox brought in"},
	{"/proc/kpagecount", Mask, "the map count of every physical page moves as a sandbox maps shared files"},
	{"/proc/kpageflags", Mask, "the flags of every physical page show page-cache residency, which a sandbox sets by reading a file"},
	{"/proc/loadavg", Snapshot, "run-queue averages, the number of runnable tasks and the last pid follow a sandbox's threads"},
	{"/proc/locks", Snapshot, "every file lock on the host, with its owner's pid and inode"},
	{"/proc/meminfo", Snapshot, "free, cached, dirty and slab memory move with a sandbox's allocations and reads"},
	{"/proc/pagetypeinfo", Mask, "free pages per migrate type move with allocations"},
	{"/proc/partitions", Snapshot, "block devices appear and vanish as each sandbox's root image is attached to a loop device, which times a script from outside"},
	{"/proc/pressure", Snapshot, "CPU, memory and I/O stall times follow a sandbox's contention"},
	{"/proc/sched_debug", Mask, "every CPU's run queue with each task's run time and switch counts"},
	{"/proc/schedstat", Snapshot, "per-CPU run and wait times follow a sandbox's threads"},
	{"/proc/slabinfo", Mask, "kernel object counts (dentries, inodes, tasks) move with a sandbox's activity"},
	{"/proc/softirqs", Snapshot, "softirq counts per CPU move with a sandbox's timers and I/O"},
	{"/proc/stat", Snapshot, "CPU times, context switches and the fork counter (processes) follow a sandbox"},
	{"/proc/swaps", Snapshot, "swap use moves under a sandbox's memory pressure"},
	{"/proc/sys", Snapshot, "fs/file-nr, fs/inode-nr, fs/dentry-state, kernel/random/entropy_avail and friends are host-wide counters"},
	{"/proc/sysvipc", Mask, "System V IPC objects of the namespace, with pids"},
	{"/proc/timer_list", Mask, "every pending timer on the host, with its expiry, moves with a sandbox's sleeps and timers"},
	{"/proc/uptime", Snapshot, "the second field is idle time summed over CPUs, which falls as a sandbox computes"},
	{"/proc/vmallocinfo", Mask, "kernel virtual allocations move with a sandbox's activity"},
	{"/proc/vmstat", Snapshot, "page fault, reclaim and I/O counters move with a sandbox's memory use"},
	{"/proc/zoneinfo", Snapshot, "free and used pages per zone move with a sandbox's allocations"},
	{"/sys", Mask, "sysfs is host-wide throughout: block devices' stat and inflight counters, CPU frequency and idle statistics, NUMA node meminfo, slab, THP and KSM counters under kernel/mm, interrupt counts under kernel/irq, thermal sensors, and the root cgroup's statistics"},
}

// Entries returns the list, sorted by path. The slice is a copy.
func Entries() []Entry {
	return append([]Entry(nil), entries...)
}

// MaskPaths returns every entry's path, for a sandbox backend to mask.
func MaskPaths() []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Path
	}
	return out
}

// kernelInfo is kernel information that no sandbox needs and that is not a
// counter a sandbox moves: kernel memory and symbols, hardware tables, the
// kernel's build configuration and the sysrq trigger. Sorted.
var kernelInfo = []string{
	"/proc/acpi", "/proc/asound", "/proc/config.gz", "/proc/kallsyms", "/proc/kcore", "/proc/kmsg",
	"/proc/latency_stats", "/proc/scsi", "/proc/sysrq-trigger", "/proc/timer_stats",
	"/sys/devices/virtual/powercap", "/sys/firmware",
}

// SandboxMaskPaths is what every sandbox backend masks: each entry and the
// kernel information above, sorted and without duplicates. Entries that
// contain one another (/sys and /sys/firmware) are both listed: a backend
// that cannot mask a directory still masks the file inside it.
func SandboxMaskPaths() []string {
	ps := append(MaskPaths(), kernelInfo...)
	sort.Strings(ps)
	out := ps[:0]
	for i, p := range ps {
		if i == 0 || p != ps[i-1] {
			out = append(out, p)
		}
	}
	return out
}

// Lookup returns the entry for path, if it is on the list.
func Lookup(path string) (Entry, bool) {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].Path >= path })
	if i < len(entries) && entries[i].Path == path {
		return entries[i], true
	}
	return Entry{}, false
}

// pidEntry matches the /proc entries that belong to processes.
var pidEntry = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[1-9][0-9]*$`) })

// LiveProcEntry reports whether the top-level /proc entry name stays live in
// the agent's view: process directories and the self links, which a pid
// namespace already confines to the agent's own processes.
func LiveProcEntry(name string) bool {
	return pidEntry().MatchString(name) || name == "self" || name == "thread-self"
}

// MaxSnapshotBytes bounds one snapshotted file. procfs files are small; a
// larger one is cut there rather than copied without limit.
const MaxSnapshotBytes = 1 << 20

// ErrAbsent means the entry does not exist on this host (a kernel built
// without schedstats has no /proc/schedstat). It wraps fs.ErrNotExist. A
// consumer leaves such an entry out of its view: there is nothing to freeze.
var ErrAbsent = fmt.Errorf("hostview: entry absent on this host: %w", fs.ErrNotExist)

// skipDirs are never descended into by Copy. binfmt_misc is an automount
// point on systemd hosts: opening it would mount a filesystem as a side
// effect, and it holds no counter.
var skipDirs = map[string]bool{"/proc/sys/fs/binfmt_misc": true}

// Copy writes a frozen copy of the host file or directory src to dst,
// which must not exist. A missing src returns ErrAbsent and creates
// nothing. Directories are copied recursively but never across a mount
// point (a separate filesystem below /proc or /sys is not the entry's), and
// never into skipDirs; entries that vanish while being copied, files that
// cannot be read (write-only, root-only, or that fail on read as some
// procfs files do) and symbolic links are left out. The copy is owned by
// the caller and is made read-only (0444 files, 0555 directories).
func Copy(src, dst string) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrAbsent, src)
	}
	if err != nil {
		return fmt.Errorf("hostview: %w", err)
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return fmt.Errorf("hostview: %s is neither a file nor a directory", src)
	}
	err = copyTree(src, dst, fi, devOf(fi))
	if errors.Is(err, errSkipped) {
		return fmt.Errorf("hostview: %s cannot be read", src)
	}
	return err
}

// copyTree copies src (described by fi) to dst, staying on device dev.
func copyTree(src, dst string, fi fs.FileInfo, dev uint64) error {
	switch {
	case fi.IsDir():
		if devOf(fi) != dev || skipDirs[src] {
			return errSkipped
		}
		des, err := os.ReadDir(src)
		if err != nil {
			return errSkipped
		}
		if err := os.Mkdir(dst, 0o755); err != nil {
			return fmt.Errorf("hostview: %w", err)
		}
		for _, de := range des {
			if de.Type()&fs.ModeSymlink != 0 {
				continue
			}
			s := filepath.Join(src, de.Name())
			cfi, err := os.Lstat(s)
			if err != nil {
				continue // gone since the listing
			}
			if err := copyTree(s, filepath.Join(dst, de.Name()), cfi, dev); err != nil && !errors.Is(err, errSkipped) {
				return err
			}
		}
		if err := os.Chmod(dst, 0o555); err != nil {
			return fmt.Errorf("hostview: %w", err)
		}
		return nil
	case fi.Mode().IsRegular():
		b, err := readBounded(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, b, 0o444); err != nil {
			return fmt.Errorf("hostview: %w", err)
		}
		return nil
	}
	return errSkipped
}

// devOf is the device a file lives on.
func devOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev)
	}
	return 0
}

// errSkipped marks a part of a tree that Copy leaves out.
var errSkipped = errors.New("hostview: left out")

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errSkipped
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(f, MaxSnapshotBytes)); err != nil {
		return nil, errSkipped
	}
	return buf.Bytes(), nil
}

// Describe renders the list as a Markdown table, for docs/security.md.
func Describe() string {
	var b strings.Builder
	b.WriteString("| path | agent's view | reason |\n|---|---|---|\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", e.Path, e.Action, e.Reason)
	}
	return b.String()
}
