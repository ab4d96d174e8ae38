package verify

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/awf-project/awf/proto"
)

// Formats returns the report formats Write accepts, a fresh slice each
// call.
func Formats() []string { return []string{"text", "json", "junit", "sarif"} }

// Write writes the report in one of Formats.
func (rep *Report) Write(w io.Writer, format string) error {
	switch format {
	case "", "text":
		return rep.WriteText(w)
	case "json":
		return rep.WriteJSON(w)
	case "junit":
		return rep.WriteJUnit(w)
	case "sarif":
		return rep.WriteSARIF(w)
	}
	return fmt.Errorf("verify: unknown format %q (want %s)", format, strings.Join(Formats(), ", "))
}

// JUnit XML, the shape CI dashboards read: one testsuite for the host checks
// and one per runtime, one testcase per result. FAIL is a failure; WARN
// passes with its evidence in system-out; N/A and BLOCKED are skipped, except
// that a required runtime's BLOCKED is a failure, as it fails the run.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

func seconds(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

// WriteJUnit writes the report as JUnit XML.
func (rep *Report) WriteJUnit(w io.Writer) error {
	all := junitSuites{Name: "awf isolate verify"}
	var total int64
	add := func(s junitSuite) {
		all.Suites = append(all.Suites, s)
		all.Tests += s.Tests
		all.Failures += s.Failures
		all.Skipped += s.Skipped
	}
	host := junitSuite{Name: "host", Timestamp: rep.Started, Properties: rep.Pins.properties()}
	for _, c := range rep.Checks {
		host.add(c, "host", false)
	}
	host.Time = seconds(0)
	add(host)
	for _, r := range rep.Runtimes {
		s := junitSuite{Name: "runtime " + r.Name, Timestamp: rep.Started, Time: seconds(r.Millis)}
		if r.Status == Blocked {
			s.Properties = []junitProperty{{Name: "blocked", Value: r.Reason}, {Name: "required", Value: fmt.Sprint(r.Required)}}
		}
		for _, x := range r.Results {
			s.add(x, r.Name, r.Status == Blocked && r.Required)
		}
		total += r.Millis
		add(s)
	}
	all.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("verify: write junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return fmt.Errorf("verify: write junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("verify: write junit: %w", err)
	}
	return nil
}

// add appends one result as a testcase.
func (s *junitSuite) add(r Result, class string, blockedFails bool) {
	c := junitCase{Name: r.ID, Classname: class + "." + r.Group, Time: seconds(r.Millis)}
	switch {
	case r.Status == Fail, r.Status == Blocked && blockedFails:
		c.Failure = &junitMessage{Message: r.Evidence, Type: string(r.Status), Text: r.Evidence}
		s.Failures++
	case r.Status == Blocked, r.Status == NotApplicable:
		c.Skipped = &junitMessage{Message: string(r.Status) + ": " + r.Evidence}
		s.Skipped++
	default:
		c.SystemOut = string(r.Status) + ": " + r.Evidence
	}
	s.Tests++
	s.Cases = append(s.Cases, c)
}

// properties are the pins as JUnit properties.
func (p Pins) properties() []junitProperty {
	ps := []junitProperty{
		{"awf", p.AWF}, {"vcs_revision", p.Revision}, {"vcs_modified", fmt.Sprint(p.Modified)},
		{"kernel", p.Kernel}, {"distribution", p.Distribution}, {"libseccomp", p.Libseccomp},
		{"libcontainer", p.Libcontainer}, {"runsc", p.Runsc}, {"docker_engine", p.Docker}, {"python", p.Python},
		{"policy", p.Policy.Name}, {"policy_source", p.Policy.Source}, {"policy_sha256", p.Policy.SHA256},
		{"policy_canonical_sha256", p.Policy.Canonical}, {"rootfs", p.RootFS.Path}, {"rootfs_digest", p.RootFS.Digest},
	}
	for _, a := range sortedKeys(p.Policy.Filters) {
		ps = append(ps, junitProperty{"filter_" + a, p.Policy.Filters[a]})
	}
	return ps
}

// SARIF 2.1.0: one run whose tool is awf, one rule per check or probe that
// appears in the report, and one result per FAIL (level error) and per
// required runtime that is BLOCKED; WARN results are level warning. PASS and
// N/A are not results: SARIF lists findings, not proofs.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool        sarifTool         `json:"tool"`
	Invocations []sarifInvocation `json:"invocations"`
	Results     []sarifResult     `json:"results"`
	Properties  Pins              `json:"properties"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID               string       `json:"id"`
	ShortDescription sarifMessage `json:"shortDescription"`
}

type sarifInvocation struct {
	ExecutionSuccessful bool   `json:"executionSuccessful"`
	StartTimeUTC        string `json:"startTimeUtc"`
	EndTimeUTC          string `json:"endTimeUtc,omitempty"`
}

type sarifResult struct {
	RuleID     string            `json:"ruleId"`
	RuleIndex  int               `json:"ruleIndex"`
	Level      string            `json:"level"`
	Message    sarifMessage      `json:"message"`
	Properties map[string]string `json:"properties"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

// SARIFSchema is the schema URI a SARIF 2.1.0 log names.
const SARIFSchema = "https://json.schemastore.org/sarif-2.1.0.json"

// WriteSARIF writes the report's failures as a SARIF 2.1.0 log.
func (rep *Report) WriteSARIF(w io.Writer) error {
	run := sarifRun{
		Tool: sarifTool{Driver: sarifDriver{Name: "awf isolate verify", Version: proto.Version(),
			InformationURI: "https://github.com/awf-project/awf/blob/main/docs/verify.md", Rules: []sarifRule{}}},
		Invocations: []sarifInvocation{{ExecutionSuccessful: true, StartTimeUTC: rep.Started, EndTimeUTC: rep.Finished}},
		Results:     []sarifResult{},
		Properties:  rep.Pins,
	}
	titles := probeTitles()
	index := map[string]int{}
	rule := func(id string) int {
		if i, ok := index[id]; ok {
			return i
		}
		t := titles[id]
		if t == "" {
			t = id
		}
		index[id] = len(run.Tool.Driver.Rules)
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, sarifRule{ID: id, ShortDescription: sarifMessage{Text: t}})
		return index[id]
	}
	emit := func(r Result, runtime, level string) {
		run.Results = append(run.Results, sarifResult{RuleID: r.ID, RuleIndex: rule(r.ID), Level: level,
			Message:    sarifMessage{Text: r.Evidence},
			Properties: map[string]string{"runtime": runtime, "status": string(r.Status), "group": r.Group}})
	}
	judge := func(r Result, runtime string, blockedFails bool) {
		switch {
		case r.Status == Fail, r.Status == Blocked && blockedFails:
			emit(r, runtime, "error")
		case r.Status == Warn:
			emit(r, runtime, "warning")
		}
	}
	for _, c := range rep.Checks {
		judge(c, "host", false)
	}
	for _, r := range rep.Runtimes {
		if r.Status == Blocked {
			if r.Required {
				judge(Result{ID: "runtime/" + r.Name, Group: "runtime", Status: Blocked, Evidence: r.Reason}, r.Name, true)
			}
			continue
		}
		for _, x := range r.Results {
			judge(x, r.Name, false)
		}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(sarifLog{Schema: SARIFSchema, Version: "2.1.0", Runs: []sarifRun{run}}); err != nil {
		return fmt.Errorf("verify: write sarif: %w", err)
	}
	return nil
}

// probeTitles maps each probe ID to its title, for SARIF rule descriptions.
func probeTitles() map[string]string {
	m := map[string]string{}
	for _, p := range append(Battery(), filterProbe) {
		m[p.ID] = p.Title
	}
	return m
}
