package isolate

import (
	"fmt"
	"strings"
)

// Deviation is one field of the description (Describe) that a backend
// cannot express as written, and what it does instead. The rendering test
// of each backend allows exactly these and nothing else; verify reports
// them and docs/runtimes.md shows them (a test keeps the doc's table equal
// to DeviationsMarkdown).
type Deviation struct {
	// Backend is the runtime's configuration name.
	Backend string
	// Field names the description's field (an OCI runtime-spec path, or a
	// mount's destination).
	Field string
	// Instead is what the sandbox gets.
	Instead string
	// Why says why the backend cannot do better, and why it is still safe
	// or which residual it leaves.
	Why string
}

// The controls the rendering tests compare; a Deviation's Field names one
// of them, or another field of the description.
const (
	FieldMaskedPaths   = "linux.maskedPaths"
	FieldReadonlyPaths = "linux.readonlyPaths"
	FieldEnv           = "process.env"
	FieldProc          = "mounts: /proc, /sys"
	FieldDev           = "mounts: /dev"
	FieldDevices       = "linux.devices"
	FieldPids          = "linux.resources.pids"
	FieldMemory        = "linux.resources.memory"
	FieldSeccomp       = "linux.seccomp"
)

// deviations is the table. Keep it sorted by backend, then field order of
// appearance; Deviations returns a copy.
var deviations = []Deviation{
	{"docker", FieldEnv, "the Engine adds HOSTNAME=<hostname>",
		"the Engine always sets it; it repeats the hostname, which the job reads with uname anyway"},
	{"docker", FieldProc, "the Engine mounts /proc, /sys (read-only), /dev/pts and /dev/mqueue",
		"runc 1.1 needs /proc inside the container to start it; procfs numbers its inodes from the host-wide counter get_next_ino, which a script can read and move: a residual channel of this backend (fs/proc-inode-counter fails); the masks and read-only paths cover the rest"},
	{"docker", FieldDev, "the Engine's own /dev tmpfs: nosuid, mode 0755, root-owned, without noexec",
		"the API cannot set /dev's options; uid 65534 cannot write to it"},
	{"docker", FieldDevices, "the Engine's default nodes; /dev/zero is 0666 with an rwm rule",
		"the API can add device rules but not narrow the defaults; a shared mapping of a writable /dev/zero moves the host-wide shm inode counter, which any host process reads: a residual channel of this backend"},
	{"gvisor", FieldProc, "the Sentry's own /proc and /sys",
		"runsc mounts them in every sandbox; they are per sandbox and show no host counter that one sandbox can move for the next (TestSentryViewDoesNotMove)"},
	{"gvisor", FieldMaskedPaths, "not applied",
		"runsc ignores linux.maskedPaths (measured: /proc/meminfo and /sys stay readable); what they would hide is the Sentry's own, per sandbox"},
	{"gvisor", FieldReadonlyPaths, "not applied", "runsc ignores linux.readonlyPaths; the paths are the Sentry's own"},
	{"gvisor", FieldDevices, "the Sentry's own /dev: no node and no device rule reaches the host",
		"runsc builds /dev inside the Sentry; its /dev/zero mappings are Sentry memory and move no host counter"},
	{"gvisor", FieldPids, "the job's limit is RLIMIT_NPROC = pids, enforced by the Sentry; the host pids cgroup allows pids + 64",
		"the job's tasks are Sentry tasks, not host tasks; the host cgroup counts the Sentry's threads, the gofer and ptrace stubs"},
	{"gvisor", FieldMemory, "the limit covers the Sentry and the gofer too",
		"they run in the sandbox's host cgroup; the job gets somewhat less (the Sentry takes about 20-40 MiB)"},
	{"gvisor", FieldSeccomp, "applied inside the Sentry: kill-process becomes trap (SIGSYS, whose default action ends the whole process: seccomp-kill), errno answers EPERM",
		"runsc's --oci-seccomp has no kill-process, and its kill ends one thread, so a multi-threaded job ran on to the wall limit; a job that handles, ignores or blocks SIGSYS survives a denied call, which is still not executed, and its outcome is then not seccomp-kill (a Go program's runtime handles SIGSYS and exits 2); (*gvisor.Runtime).Deviations lists the rules of each policy; the host is protected by the Sentry's own filter"},
}

// Deviations returns the declared deviations, as a copy.
func Deviations() []Deviation {
	return append([]Deviation(nil), deviations...)
}

// DeviationsOf returns backend's declared deviations.
func DeviationsOf(backend string) []Deviation {
	var out []Deviation
	for _, d := range deviations {
		if d.Backend == backend {
			out = append(out, d)
		}
	}
	return out
}

// Deviates reports whether backend declares a deviation of field.
func Deviates(backend, field string) bool {
	for _, d := range deviations {
		if d.Backend == backend && d.Field == field {
			return true
		}
	}
	return false
}

// DeviationsMarkdown renders the table for docs/runtimes.md.
func DeviationsMarkdown() string {
	var b strings.Builder
	b.WriteString("| backend | field | instead | why |\n|---|---|---|---|\n")
	for _, d := range deviations {
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", d.Backend, d.Field, d.Instead, d.Why)
	}
	return b.String()
}
