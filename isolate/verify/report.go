package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/awf-project/awf/isolate/sbx"
)

// ReportVersion is the version of the JSON report format. It changes when a
// field changes meaning or is removed; adding a field does not change it.
const ReportVersion = 1

// Report is the result of one verify run.
type Report struct {
	// Version is ReportVersion.
	Version int `json:"version"`
	// Started is when the run began (UTC, RFC 3339).
	Started string `json:"started"`
	// Finished is when the run ended (UTC, RFC 3339).
	Finished string `json:"finished"`
	// Pins say exactly what was tested: versions, hashes and configuration.
	Pins Pins `json:"pins"`
	// Host describes the host the run checked.
	Host HostFacts `json:"host"`
	// Checks are the host checks.
	Checks []Result `json:"checks"`
	// Runtimes holds one entry per requested runtime, in request order.
	Runtimes []RuntimeReport `json:"runtimes"`
	// OK is true when the run passes: no FAIL anywhere and no BLOCKED
	// runtime that was required.
	OK bool `json:"ok"`
}

// RuntimeReport is the result of the battery in one runtime.
type RuntimeReport struct {
	// Name is the runtime's configuration name.
	Name string `json:"name"`
	// Status is the worst verdict of its results, or BLOCKED.
	Status Status `json:"status"`
	// Required is true when a BLOCKED verdict counts as a failure.
	Required bool `json:"required"`
	// Reason says why the runtime is BLOCKED.
	Reason string `json:"reason,omitempty"`
	// Controls is, for a runtime BLOCKED by missing controls (sbx), its
	// capability probe in the seed's structured form: one object per
	// control with control, required, supported and evidence.
	Controls []sbx.ControlStatus `json:"controls,omitempty"`
	// Results holds one entry per probe and runtime-level check.
	Results []Result `json:"results"`
	// Summary counts Results by verdict.
	Summary map[Status]int `json:"summary"`
	// Millis is how long the battery took.
	Millis int64 `json:"ms"`
}

// finish computes the runtime's summary and status.
func (r *RuntimeReport) finish(d time.Duration) {
	r.Millis = d.Milliseconds()
	if r.Status == Blocked {
		r.Summary = map[Status]int{Blocked: len(r.Results)}
		return
	}
	r.Status, r.Summary = Tally(r.Results)
}

// Failed reports whether this runtime makes the run fail.
func (r *RuntimeReport) Failed() bool {
	switch r.Status {
	case Fail:
		return true
	case Blocked:
		return r.Required
	}
	return false
}

// computeOK sets OK from the checks and runtimes.
func (rep *Report) computeOK() {
	ok := true
	for _, c := range rep.Checks {
		if c.Status == Fail {
			ok = false
		}
	}
	for i := range rep.Runtimes {
		if rep.Runtimes[i].Failed() {
			ok = false
		}
	}
	rep.OK = ok
}

// ExitCode is the process exit status for the report: 0 when it passes, 1 otherwise.
func (rep *Report) ExitCode() int { return ExitCode(rep.OK) }

// ExitCode is the process exit status of a report that passes when ok:
// 0, or 1. verify's and the agent battery's reports both exit by it.
func ExitCode(ok bool) int {
	if ok {
		return 0
	}
	return 1
}

// WriteJSON writes the versioned JSON report.
func (rep *Report) WriteJSON(w io.Writer) error {
	if err := WriteReportJSON(w, rep); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	return nil
}

// WriteReportJSON writes a report as indented JSON, with HTML characters
// left as they are: the one JSON form of verify's and the agent battery's
// reports.
func WriteReportJSON(w io.Writer, rep any) error { return writeJSON(w, rep, "write report") }

// writeJSON writes v in WriteReportJSON's form, which the matrices share;
// an error says what was being written.
func writeJSON(w io.Writer, v any, what string) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// WriteText writes the readable table: host facts, host checks, then one
// line per probe for each runtime, and a closing verdict.
func (rep *Report) WriteText(w io.Writer) error {
	t := NewTextTable(w, evidenceWidth)
	h := rep.Host
	t.Printf("awf isolate verify (report v%d, %s)\n", rep.Version, rep.Started)
	t.Printf("host: kernel %s, %s, cgroup %s\n", h.Kernel, h.Arch, h.CgroupMode)
	rep.Pins.writeText(t.tw)
	t.Printf("\n")
	t.Results("CHECK", rep.Checks)
	for _, r := range rep.Runtimes {
		if r.Status == Blocked {
			req := "not required"
			if r.Required {
				req = "required"
			}
			t.Printf("\nruntime %s: %s (%s; %d probes not run): %s\n", r.Name, r.Status, req, len(r.Results), oneLine(r.Reason))
			continue
		}
		t.Heading("runtime "+r.Name, r.Status, r.Summary, r.Millis)
		if p := pathText(r.Results); p != "" {
			t.Printf("path: %s\n", p)
		}
		t.Results("PROBE", r.Results)
	}
	if err := t.Close(rep.OK); err != nil {
		return fmt.Errorf("verify: write report: %w", err)
	}
	return nil
}

// TextTable writes the readable form that verify's and the agent battery's
// reports share: lines aligned in columns, a heading per section with its
// verdict and summary, one line a result with its evidence flattened to one
// bounded line, and a closing verdict. Make it with NewTextTable; it is
// finished by Close.
type TextTable struct {
	tw    *tabwriter.Writer
	width int // evidence longer than this many bytes is cut
}

// NewTextTable starts a table on w whose evidence is cut at width bytes.
func NewTextTable(w io.Writer, width int) *TextTable {
	return &TextTable{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0), width: width}
}

// Printf writes free text: report headers, or a line the columns align.
func (t *TextTable) Printf(format string, a ...any) { fmt.Fprintf(t.tw, format, a...) }

// Heading opens a section: a blank line, then "label: STATUS (summary,
// seconds)".
func (t *TextTable) Heading(label string, s Status, summary map[Status]int, millis int64) {
	t.Printf("\n%s: %s (%s, %.1f s)\n", label, s, summaryText(summary), float64(millis)/1000)
}

// Results writes the column header "STATUS  column  EVIDENCE" and one line
// a result.
func (t *TextTable) Results(column string, rs []Result) {
	t.Printf("STATUS\t%s\tEVIDENCE\n", column)
	for _, r := range rs {
		t.Printf("%s\t%s\t%s\n", r.Status, r.ID, flatten(r.Evidence, t.width))
	}
}

// Close writes the closing verdict, PASS when ok and FAIL otherwise, and
// flushes the table.
func (t *TextTable) Close(ok bool) error {
	verdict := "PASS"
	if !ok {
		verdict = "FAIL"
	}
	t.Printf("\nverdict: %s\n", verdict)
	return t.tw.Flush()
}

// pathText counts the results by the path their sandbox took, pooled
// first: "pooled (81 probes)" or "pooled (80 probes), cold (1 probe)".
func pathText(rs []Result) string {
	n := map[string]int{}
	for _, x := range rs {
		if x.Path != "" {
			n[x.Path]++
		}
	}
	var parts []string
	for _, p := range []string{PathPooled, PathCold} {
		switch {
		case n[p] == 1:
			parts = append(parts, p+" (1 probe)")
		case n[p] > 1:
			parts = append(parts, fmt.Sprintf("%s (%d probes)", p, n[p]))
		}
	}
	return strings.Join(parts, ", ")
}

// summaryText renders verdict counts in a fixed order.
func summaryText(m map[Status]int) string {
	var parts []string
	for _, s := range []Status{Pass, Fail, Warn, NotApplicable, Blocked} {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[s], s))
		}
	}
	if len(parts) == 0 {
		return "no results"
	}
	return strings.Join(parts, ", ")
}

// evidenceWidth is how many bytes of evidence verify's tables show; the
// JSON report carries it whole.
const evidenceWidth = 220

// oneLine flattens evidence to one line of verify's width for a table.
func oneLine(s string) string { return flatten(s, evidenceWidth) }

// flatten folds s onto one line and cuts it after max bytes.
func flatten(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// sortedKeys returns a map's keys in order, for stable evidence.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
