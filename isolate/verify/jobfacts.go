package verify

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// jobFacts are what verify reads of the job's first process from the host,
// through the host's /proc, when the runtime reports it running under every
// control. The direct sandbox mounts no /proc (its inode numbers come from
// the host-wide get_next_ino counter), so from inside a probe cannot read
// its own capabilities, NoNewPrivs, seccomp mode or network interfaces;
// the probes that need them fall back to these, and say so. Under gVisor
// the host pid is the Sentry's, not the job's, so its probes never fall
// back (their /proc is the Sentry's and readable).
type jobFacts struct {
	// status is /proc/PID/status, key to trimmed value; nil when unread.
	status map[string]string
	// ifaces are the interfaces of /proc/PID/net/dev, sorted; nil when unread.
	ifaces []string
	// routes4 and routes6 count usable routes through a device other than
	// lo in /proc/PID/net/route and ipv6_route; -1 when unread.
	routes4, routes6 int
	// unixNames are the socket names of /proc/PID/net/unix (abstract ones
	// start with @); nil when unread.
	unixNames []string
}

// noJobFacts are the facts of a job whose start was never reported: nothing
// read, so no probe can take a verdict from them.
var noJobFacts = jobFacts{routes4: -1, routes6: -1}

// readJobFacts reads the facts of pid. It must return quickly (OnStart).
func readJobFacts(pid int) jobFacts {
	f := noJobFacts
	base := fmt.Sprintf("/proc/%d/", pid)
	if b, err := os.ReadFile(base + "status"); err == nil {
		f.status = map[string]string{}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok {
				f.status[k] = strings.TrimSpace(v)
			}
		}
	}
	if b, err := os.ReadFile(base + "net/dev"); err == nil {
		f.ifaces = []string{}
		lines := strings.Split(string(b), "\n")
		for _, l := range lines[min(2, len(lines)):] {
			if name, _, ok := strings.Cut(l, ":"); ok {
				f.ifaces = append(f.ifaces, strings.TrimSpace(name))
			}
		}
		sort.Strings(f.ifaces)
	}
	if b, err := os.ReadFile(base + "net/unix"); err == nil {
		f.unixNames = []string{}
		lines := strings.Split(string(b), "\n")
		for _, l := range lines[min(1, len(lines)):] {
			if fs := strings.Fields(l); len(fs) > 7 {
				f.unixNames = append(f.unixNames, fs[len(fs)-1])
			}
		}
	}
	f.routes4 = countRoutes(base+"net/route", 1, 0, 3)
	f.routes6 = countRoutes(base+"net/ipv6_route", 0, 9, 8)
	return f
}

// countRoutes counts the routes of a /proc/net route table that leave
// through a device other than lo and are not rejections (RTF_REJECT), as
// net/routes does from inside; -1 when the table cannot be read.
func countRoutes(path string, skip, dev, flags int) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	n := 0
	for _, l := range lines[min(skip, len(lines)):] {
		c := strings.Fields(l)
		if len(c) <= max(dev, flags) || c[dev] == "lo" {
			continue
		}
		fl, err := strconv.ParseUint(c[flags], 16, 32)
		if err == nil && fl&0x0200 == 0 {
			n++
		}
	}
	return n
}

// fromHost is the evidence suffix of a verdict taken from jobFacts.
const fromHost = " (read from the host's /proc/PID of the job: the sandbox has no /proc)"

// inoBatch is how many numbers each CPU takes from get_next_ino at a time.
const inoBatch = 1024

// hostInodeCounter reads get_next_ino, the host-wide counter that numbers
// pipes, sockets and procfs inodes: each CPU takes inoBatch numbers at a
// time, so the first inode of a fresh batch (n%inoBatch == 1) shows the
// counter itself. Fresh pipes reach one within inoBatch tries.
func hostInodeCounter() (int64, error) {
	for i := 0; i < 3*inoBatch; i++ {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return 0, fmt.Errorf("pipe: %w", err)
		}
		var st unix.Stat_t
		err := unix.Fstat(p[0], &st)
		unix.Close(p[0])
		unix.Close(p[1])
		if err != nil {
			return 0, fmt.Errorf("fstat pipe: %w", err)
		}
		if st.Ino%inoBatch == 1 {
			return int64(st.Ino) - 1, nil
		}
	}
	return 0, fmt.Errorf("no fresh inode batch in %d pipes", 3*inoBatch)
}
