package verify

// Status is the verdict of one check or probe.
type Status string

// The verdicts. FAIL and (for required runtimes) BLOCKED make verify fail;
// WARN and N/A never do.
const (
	// Pass means the control was proven to hold.
	Pass Status = "PASS"
	// Fail means the control did not hold, or could not be proven.
	Fail Status = "FAIL"
	// Warn means the control holds but the host is in a degraded or
	// hazardous state that the operator should know about.
	Warn Status = "WARN"
	// Blocked means the runtime's host component is absent, so nothing ran.
	Blocked Status = "BLOCKED"
	// NotApplicable means the check does not apply to this runtime; the
	// evidence says why.
	NotApplicable Status = "N/A"
)

// rank orders verdicts from best to worst for aggregation.
func (s Status) rank() int {
	switch s {
	case Pass:
		return 0
	case NotApplicable:
		return 1
	case Warn:
		return 2
	case Blocked:
		return 3
	default:
		return 4
	}
}

// WorseThan reports whether s ranks below t, from PASS, N/A, WARN and
// BLOCKED down to FAIL: the one order verify's and the agent battery's
// reports aggregate verdicts by.
func (s Status) WorseThan(t Status) bool { return s.rank() > t.rank() }

// worst returns the worse of two verdicts.
func worst(a, b Status) Status {
	if b.WorseThan(a) {
		return b
	}
	return a
}

// Tally returns the worst verdict of rs (PASS when rs is empty) and the
// count of each verdict: a report section's status and summary.
func Tally(rs []Result) (Status, map[Status]int) {
	s, n := Pass, map[Status]int{}
	for _, r := range rs {
		n[r.Status]++
		s = worst(s, r.Status)
	}
	return s, n
}

// Result is one line of a report: a host check, a probe or a runtime-level check.
type Result struct {
	// ID names the check, for example "host/kernel" or "net/socket-netlink".
	ID string `json:"id"`
	// Group is the section: host, control, network, filesystem, privilege,
	// limits, leftovers or filter.
	Group string `json:"group"`
	// Status is the verdict.
	Status Status `json:"status"`
	// Evidence is one sentence that supports the verdict.
	Evidence string `json:"evidence"`
	// Kind is the typed outcome of the sandbox run, for probes.
	Kind string `json:"kind,omitempty"`
	// Answer is the probe's canonical answer, when it produced one.
	Answer string `json:"answer,omitempty"`
	// Millis is how long the probe took end to end, for probes.
	Millis int64 `json:"ms,omitempty"`
	// Path is how a probe's sandbox was made: PathPooled or PathCold.
	Path string `json:"path,omitempty"`
}

// The paths a probe's sandbox can take (Result.Path).
const (
	// PathPooled is a sandbox isolate/pool prepared ahead, its interpreter
	// started and waiting, then handed the script: the broker's warm path.
	PathPooled = "pooled"
	// PathCold is a sandbox prepared by Runtime.Run for the job itself.
	PathCold = "cold"
)
