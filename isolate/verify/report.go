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
	r.Summary = map[Status]int{}
	if r.Status == Blocked {
		r.Summary[Blocked] = len(r.Results)
		return
	}
	r.Status = Pass
	for _, x := range r.Results {
		r.Summary[x.Status]++
		r.Status = worst(r.Status, x.Status)
	}
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	h := rep.Host
	fmt.Fprintf(tw, "awf isolate verify (report v%d, %s)\n", rep.Version, rep.Started)
	fmt.Fprintf(tw, "host: kernel %s, %s, cgroup %s\n", h.Kernel, h.Arch, h.CgroupMode)
	rep.Pins.writeText(tw)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "STATUS\tCHECK\tEVIDENCE\n")
	for _, c := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.ID, oneLine(c.Evidence))
	}
	for _, r := range rep.Runtimes {
		fmt.Fprintf(tw, "\nruntime %s: %s", r.Name, r.Status)
		if r.Status == Blocked {
			req := "not required"
			if r.Required {
				req = "required"
			}
			fmt.Fprintf(tw, " (%s; %d probes not run): %s\n", req, len(r.Results), oneLine(r.Reason))
			continue
		}
		fmt.Fprintf(tw, " (%s, %.1f s)\n", summaryText(r.Summary), float64(r.Millis)/1000)
		if p := pathText(r.Results); p != "" {
			fmt.Fprintf(tw, "path: %s\n", p)
		}
		fmt.Fprintf(tw, "STATUS\tPROBE\tEVIDENCE\n")
		for _, x := range r.Results {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", x.Status, x.ID, oneLine(x.Evidence))
		}
	}
	verdict := "PASS"
	if !rep.OK {
		verdict = "FAIL"
	}
	fmt.Fprintf(tw, "\nverdict: %s\n", verdict)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("verify: write report: %w", err)
	}
	return nil
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

// oneLine flattens evidence to one bounded line for the table.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 220
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
