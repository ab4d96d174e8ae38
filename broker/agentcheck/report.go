package agentcheck

import (
	"fmt"
	"io"
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

// finish computes the view's summary and status.
func (v *ViewReport) finish(d time.Duration) {
	v.Millis = d.Milliseconds()
	v.Status, v.Summary = verify.Tally(v.Results)
}

// computeOK sets OK: no view has a FAIL (or anything worse than WARN).
func (rep *Report) computeOK() {
	rep.OK = true
	for _, v := range rep.Views {
		if v.Status.WorseThan(verify.Warn) {
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

// evidenceWidth is how many bytes of evidence the table shows: more than
// verify's, as a FAIL here carries what it means for the operator.
const evidenceWidth = 300

// WriteText writes the readable table, in verify's style: host facts, one
// line per probe for each agent view, and a closing verdict.
func (rep *Report) WriteText(w io.Writer) error {
	t := verify.NewTextTable(w, evidenceWidth)
	h := rep.Host
	t.Printf("awf isolate verify --agent (report v%d, %s)\n", rep.Version, rep.Started)
	user := h.AgentUser
	if user == "" {
		user = "(no passwd entry)"
	}
	t.Printf("host: kernel %s, cgroup %s; agent user %s (uid %d)\n", h.Kernel, h.CgroupMode, user, h.AgentUID)
	for _, v := range rep.Views {
		t.Heading("agent view, network "+v.Network, v.Status, v.Summary, v.Millis)
		t.Results("PROBE", v.Results)
	}
	if err := t.Close(rep.OK); err != nil {
		return fmt.Errorf("agentcheck: write report: %w", err)
	}
	return nil
}
