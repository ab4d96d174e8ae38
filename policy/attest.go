package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Attestation is the proof (or refutation) that a live process runs under
// the filter a policy compiles to. A security team checks a running sandbox
// with it rather than trusting that the runtime loaded what it was given.
//
// The kernel keeps the program exactly as it was loaded, so the first test
// is on the program itself: identical to Policy.BPF, or Policy.BPF behind
// runc's ENOSYS stub. Only when the form differs (another loader, another
// libseccomp) are the decisions compared, from the BPF both sides run.
type Attestation struct {
	PID          int    `json:"pid"`
	Command      string `json:"command"`
	Policy       string `json:"policy"`
	PolicyDigest string `json:"policy_digest"`
	Arch         string `json:"arch"`
	// Compiled is the program the policy compiles to on Arch, before runc's stub.
	Compiled ProgramID `json:"compiled"`
	// Threads holds one entry per thread of the process: a filter is a
	// per-thread attribute, and one unfiltered thread is enough to escape.
	Threads []ThreadAttestation `json:"threads"`
	Match   bool                `json:"match"`
	Verdict string              `json:"verdict"`
}

// ProgramID names a classic-BPF program by length and digest.
type ProgramID struct {
	Instructions int    `json:"instructions"`
	SHA256       string `json:"sha256"`
}

// ThreadAttestation is what one thread runs under.
type ThreadAttestation struct {
	TID int `json:"tid"`
	// Seccomp is the mode /proc reports: 0 none, 1 strict, 2 filter.
	Seccomp    int  `json:"seccomp"`
	NoNewPrivs bool `json:"no_new_privs"`
	// Filters are the stacked filters, newest first, as the kernel holds them.
	Filters []ProgramID `json:"filters,omitempty"`
	// How is "identical", "runc-stub" (the compiled program behind runc's
	// ENOSYS stub), "decisions" (another form, the same decisions) or
	// "mismatch".
	How   string   `json:"how"`
	Diffs []string `json:"diffs,omitempty"`
}

// Match reasons for ThreadAttestation.How.
const (
	AttestIdentical = "identical"
	AttestRuncStub  = "runc-stub"
	AttestDecisions = "decisions"
	AttestMismatch  = "mismatch"
)

// maxAttestDiffs bounds the differences kept per thread: enough to show
// what is wrong, not the whole table of an unrelated filter.
const maxAttestDiffs = 40

// Attest reads the seccomp filters of every thread of pid (ptrace, so root
// with CAP_SYS_ADMIN and CONFIG_CHECKPOINT_RESTORE; no other tracer) and
// compares each with what p compiles to on arch ("" is the host's). An
// error means the process could not be examined; a mismatch is a verdict,
// not an error. Threads born during the reading are not seen: attest a
// process that is not creating threads, or attest it again.
//
// The caller must not be pid's parent: ptrace makes it the tracer, and a
// parent's own wait for the child (a sandbox runtime's) would see the
// ptrace-stops. Such a caller is refused; run the attestation in another
// process (awf policy attest).
func Attest(ctx context.Context, pid int, p *Policy, arch string) (*Attestation, error) {
	if ppid, err := parentOf(pid); err != nil {
		return nil, fmt.Errorf("attest %d: %w", pid, err)
	} else if ppid == os.Getpid() {
		return nil, fmt.Errorf("attest %d: this process is its parent, whose wait would see the ptrace-stops; attest from another process", pid)
	}
	if arch == "" {
		a, err := NativeArch()
		if err != nil {
			return nil, err
		}
		arch = a
	}
	compiled, err := p.BPF(arch)
	if err != nil {
		return nil, fmt.Errorf("attest %d: compile %s: %w", pid, p.Name, err)
	}
	golden, err := p.Table(arch)
	if err != nil {
		return nil, fmt.Errorf("attest %d: table of %s: %w", pid, p.Name, err)
	}
	tids, err := threadsOf(pid)
	if err != nil {
		return nil, fmt.Errorf("attest %d: %w", pid, err)
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	at := &Attestation{
		PID: pid, Command: strings.TrimSpace(string(comm)),
		Policy: p.Name, PolicyDigest: p.Digest(), Arch: arch,
		Compiled: ProgramID{len(compiled), ProgramSHA256(compiled)},
		Match:    true,
	}
	for _, tid := range tids {
		th, err := attestThread(ctx, pid, tid, compiled, golden, arch)
		if err != nil {
			if _, gone := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid, tid)); gone != nil && tid != pid {
				continue // the thread ended while we read: it runs nothing
			}
			return nil, fmt.Errorf("attest %d: %w", pid, err)
		}
		if th.How == AttestMismatch {
			at.Match = false
		}
		at.Threads = append(at.Threads, th)
	}
	if len(at.Threads) == 0 {
		return nil, fmt.Errorf("attest %d: the process has no thread left", pid)
	}
	at.Verdict = at.verdict()
	return at, nil
}

// threadsOf lists the thread ids of pid, sorted.
func threadsOf(pid int) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	var tids []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, n)
		}
	}
	sort.Ints(tids)
	return tids, nil
}

// parentOf reads the PPid field of pid's status.
func parentOf(pid int) (int, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("status of %d has no PPid", pid)
}

// threadStatus reads the Seccomp and NoNewPrivs fields of a thread's status.
func threadStatus(pid, tid int) (mode int, nnp bool, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		return 0, false, fmt.Errorf("thread %d: %w", tid, err)
	}
	mode = -1
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Seccomp":
			if mode, err = strconv.Atoi(v); err != nil {
				return 0, false, fmt.Errorf("thread %d: Seccomp %q: %w", tid, v, err)
			}
		case "NoNewPrivs":
			nnp = v == "1"
		}
	}
	if mode < 0 {
		return 0, false, fmt.Errorf("thread %d: status has no Seccomp field (kernel without CONFIG_SECCOMP)", tid)
	}
	return mode, nnp, nil
}

func attestThread(ctx context.Context, pid, tid int, compiled []unix.SockFilter, golden Table, arch string) (ThreadAttestation, error) {
	th := ThreadAttestation{TID: tid, How: AttestMismatch}
	mode, nnp, err := threadStatus(pid, tid)
	if err != nil {
		return th, err
	}
	th.Seccomp, th.NoNewPrivs = mode, nnp
	switch mode {
	case unix.SECCOMP_MODE_FILTER:
	case 0:
		th.Diffs = []string{"no seccomp filter: every system call is allowed"}
		return th, nil
	default:
		th.Diffs = []string{fmt.Sprintf("seccomp mode %d, not a filter", mode)}
		return th, nil
	}
	progs, err := ReadFilters(ctx, tid)
	if err != nil {
		return th, err
	}
	for _, pr := range progs {
		th.Filters = append(th.Filters, ProgramID{len(pr), ProgramSHA256(pr)})
	}
	if len(progs) != 1 {
		th.Diffs = []string{fmt.Sprintf("%d filters are stacked; the policy compiles to exactly one", len(progs))}
		return th, nil
	}
	loaded := progs[0]
	switch {
	case slices.Equal(loaded, compiled):
		th.How = AttestIdentical
		return th, nil
	}
	decoded, err := DecodeFilter(arch, loaded)
	if err != nil {
		th.Diffs = []string{fmt.Sprintf("cannot decode the loaded filter: %v", err)}
		return th, nil
	}
	diffs := CompareLoaded(golden, decoded)
	if len(diffs) > 0 && golden.ENOSYSFrom != nil {
		// Loaded by something other than runc (no stub): the policy's own
		// default above the highest named syscall is the policy too.
		plain := golden
		plain.ENOSYSFrom = nil
		if len(CompareLoaded(plain, decoded)) == 0 {
			diffs = nil
		}
	}
	switch {
	case len(diffs) > 0:
		if len(diffs) > maxAttestDiffs {
			diffs = append(diffs[:maxAttestDiffs:maxAttestDiffs], fmt.Sprintf("and %d more differences", len(diffs)-maxAttestDiffs))
		}
		th.Diffs = diffs
	case len(loaded) > len(compiled) && slices.Equal(loaded[len(loaded)-len(compiled):], compiled):
		// The prefix is runc's stub; CompareLoaded has just checked that
		// it adds nothing but the documented ENOSYS tail.
		th.How = AttestRuncStub
	default:
		th.How = AttestDecisions
	}
	return th, nil
}

// verdict is the one-paragraph summary a reviewer files.
func (a *Attestation) verdict() string {
	var b strings.Builder
	word := "MATCH"
	if !a.Match {
		word = "MISMATCH"
	}
	fmt.Fprintf(&b, "%s: pid %d (%s), %d thread(s), against %s (%s), %s, compiled program %d instructions %s\n",
		word, a.PID, a.Command, len(a.Threads), a.Policy, a.PolicyDigest, a.Arch, a.Compiled.Instructions, a.Compiled.SHA256)
	for _, t := range a.Threads {
		fmt.Fprintf(&b, "  thread %d: seccomp %d, no_new_privs %t", t.TID, t.Seccomp, t.NoNewPrivs)
		for _, f := range t.Filters {
			fmt.Fprintf(&b, ", filter %d instructions %s", f.Instructions, f.SHA256)
		}
		switch t.How {
		case AttestIdentical:
			b.WriteString(": the loaded program is the compiled one, instruction for instruction\n")
		case AttestRuncStub:
			b.WriteString(": the loaded program is the compiled one behind runc's ENOSYS stub, which adds only the ENOSYS answer above the highest named syscall\n")
		case AttestDecisions:
			b.WriteString(": another program, with the same decision for every syscall and argument case\n")
		default:
			b.WriteString(": DIFFERS\n")
			for _, d := range t.Diffs {
				fmt.Fprintf(&b, "    %s\n", d)
			}
		}
	}
	return b.String()
}
