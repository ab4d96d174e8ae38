package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/awf-project/awf/broker"
)

// githubActions speaks GitHub Actions' workflow commands when awf run runs
// in a job (GITHUB_ACTIONS=true): every failure of awf itself (preflight,
// staging, broker, teardown) is also an ::error:: annotation, and the run's
// audit summary is appended to the job summary ($GITHUB_STEP_SUMMARY).
// Outside Actions it does nothing, so the operator's log is unchanged.
type githubActions struct {
	on      bool
	summary string // $GITHUB_STEP_SUMMARY, "" for none
	stderr  io.Writer
}

func newGitHubActions(getenv func(string) string, stderr io.Writer) githubActions {
	g := githubActions{on: getenv("GITHUB_ACTIONS") == "true", stderr: stderr}
	if g.on {
		g.summary = getenv("GITHUB_STEP_SUMMARY")
	}
	return g
}

// errorf prints one ::error:: annotation. Workflow commands are read from
// the job's output line by line; %, CR and LF are escaped as the runner
// expects, so a message can neither end the command nor start another.
func (g githubActions) errorf(title, format string, args ...any) {
	if !g.on {
		return
	}
	esc := strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A")
	titleEsc := strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C")
	fmt.Fprintf(g.stderr, "::error title=%s::%s\n", titleEsc.Replace(title), esc.Replace(fmt.Sprintf(format, args...)))
}

// appendSummary appends the markdown summary of the run's kept audit log
// (the same text as awf audit summary --format markdown) to the job
// summary. Failing to write it is reported, never fatal: the run's result
// does not depend on the job page.
func (g githubActions) appendSummary(auditDir, file string) {
	if !g.on || g.summary == "" {
		return
	}
	recs, err := broker.ReadAudit(filepath.Join(auditDir, file))
	if err == nil {
		var f *os.File
		if f, err = os.OpenFile(g.summary, os.O_WRONLY|os.O_APPEND, 0); err == nil {
			_, err = io.WriteString(f, "## awf bounded queries\n\n")
			if err == nil {
				err = summarizeAudit(auditDir, recs).writeMarkdown(f)
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		fmt.Fprintf(g.stderr, "awf: job summary: %v\n", err)
	}
}
