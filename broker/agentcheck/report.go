package agentcheck

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/awf-project/awf/isolate/verify"
)

// ReportVersion is the version of the JSON report format. It changes when a
// field changes meaning or is removed; adding a field does not change it.
const ReportVersion = 1

// Report is the result of one "awf isolate verify --agent" run.
type Report struct {
	// Version is ReportVersion.
	Version int `json:"version"`
	// Started is when the run began (UTC, RFC 3339).
	Started string `json:"started"`
	// Host describes the host and the agent user.
	Host HostFacts `json:"host"`
	// Views holds one battery per agent.network mode, in request order.
	Views []ViewReport `json:"views"`
	// OK is true when no result anywhere is FAIL.
	OK bool `json:"ok"`
}

// HostFacts describes where the battery ran.
type HostFacts struct {
	Kernel     string `json:"kernel"`
	CgroupMode string `json:"cgroupMode"`
	// AgentUser is the agent user's name ("" for a uid without a passwd
	// entry); AgentUID its uid.
	AgentUser string `json:"agentUser"`
	AgentUID  int    `json:"agentUID"`
}

// ViewReport is the battery in one agent view.
type ViewReport struct {
	// Network is the agent.network mode of the view.
	Network string `json:"network"`
	// Status is the worst verdict of Results.
	Status verify.Status `json:"status"`
	// Results holds one entry per probe, in catalogue order.
	Results []verify.Result `json:"results"`
	// Summary counts Results by verdict.
	Summary map[verify.Status]int `json:"summary"`
	// Millis is how long the battery took.
	Millis int64 `json:"ms"`
}

// rank orders verdicts from best to worst, as verify does.
func rank(s verify.Status) int {
	switch s {
	case verify.Pass:
		return 0
	case verify.NotApplicable:
		return 1
	case verify.Warn:
		return 2
	case verify.Blocked:
		return 3
	}
	return 4
}

// finish computes the view's summary and status.
func (v *ViewReport) finish(d time.Duration) {
	v.Millis = d.Milliseconds()
	v.Summary = map[verify.Status]int{}
	v.Status = verify.Pass
	for _, r := range v.Results {
		v.Summary[r.Status]++
		if rank(r.Status) > rank(v.Status) {
			v.Status = r.Status
		}
	}
}

// computeOK sets OK: no view has a FAIL (or anything worse than WARN).
func (rep *Report) computeOK() {
	rep.OK = true
	for _, v := range rep.Views {
		if rank(v.Status) > rank(verify.Warn) {
			rep.OK = false
		}
	}
}

// ExitCode is the process exit status for the report: 0 when it passes, 1 otherwise.
func (rep *Report) ExitCode() int { return verify.ExitCode(rep.OK) }

// WriteJSON writes the versioned JSON report.
func (rep *Report) WriteJSON(w io.Writer) error {
	if err := verify.WriteReportJSON(w, rep); err != nil {
		return fmt.Errorf("agentcheck: %w", err)
	}
	return nil
}

// WriteText writes the readable table, in verify's style: host facts, one
// line per probe for each agent view, and a closing verdict.
func (rep *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	h := rep.Host
	fmt.Fprintf(tw, "awf isolate verify --agent (report v%d, %s)\n", rep.Version, rep.Started)
	user := h.AgentUser
	if user == "" {
		user = "(no passwd entry)"
	}
	fmt.Fprintf(tw, "host: kernel %s, cgroup %s; agent user %s (uid %d)\n", h.Kernel, h.CgroupMode, user, h.AgentUID)
	for _, v := range rep.Views {
		fmt.Fprintf(tw, "\nagent view, network %s: %s (%s, %.1f s)\n", v.Network, v.Status, summaryText(v.Summary), float64(v.Millis)/1000)
		fmt.Fprintf(tw, "STATUS\tPROBE\tEVIDENCE\n")
		for _, r := range v.Results {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Status, r.ID, oneLine(r.Evidence))
		}
	}
	verdict := "PASS"
	if !rep.OK {
		verdict = "FAIL"
	}
	fmt.Fprintf(tw, "\nverdict: %s\n", verdict)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("agentcheck: write report: %w", err)
	}
	return nil
}

// summaryText renders verdict counts in a fixed order.
func summaryText(m map[verify.Status]int) string {
	var parts []string
	for _, s := range []verify.Status{verify.Pass, verify.Fail, verify.Warn, verify.NotApplicable, verify.Blocked} {
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
	const max = 300
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
