package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/proto"
)

const auditSummaryUsage = `usage: awf audit summary [RUN-DIR] [--format text|markdown|json] [--log-dir DIR]

Summarizes the protected audit log of one run: every query with its outcome
(the failure reason the agent never sees), charge, timing bucket, measured
time and script digest; the bits charged to each repository against its
budget; the staged commits; the awf version and CI run id. RUN-DIR is a
directory with bounded-query.jsonl, as "awf run" prints it (default: the
newest run under --log-dir, default /var/log/awf). Root only.
`

const auditShowUsage = `usage: awf audit show [RUN-DIR] [--json] [--log-dir DIR]

Prints every record of a run's protected audit log, one line each (--json:
the JSONL exactly as written). RUN-DIR as for "awf audit summary". Root only.
`

// auditLogName is the broker's audit file inside a run directory.
const auditLogName = "bounded-query.jsonl"

// auditArgs parses [RUN-DIR] and the flags of an audit subcommand, in either
// order, and reads the run's records.
func auditArgs(e env, name, usage string, def func(fs *flag.FlagSet)) (dir string, recs []broker.Record, code int) {
	args := e.args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	fs := e.flags(name, usage)
	logDir := fs.String("log-dir", host.DefaultAuditArchive, "directory of kept run audit logs")
	def(fs)
	if err := fs.Parse(args); err != nil {
		return "", nil, 2
	}
	switch {
	case fs.NArg() == 1 && dir == "":
		dir = fs.Arg(0)
	case fs.NArg() != 0:
		fmt.Fprint(e.stderr, usage)
		return "", nil, 2
	}
	fail := func(err error) (string, []broker.Record, int) {
		fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
		return "", nil, 1
	}
	if os.Geteuid() != 0 {
		return fail(errors.New("the audit log is protected: run as root"))
	}
	if dir == "" {
		d, err := newestRun(*logDir)
		if err != nil {
			return fail(err)
		}
		dir = d
	}
	recs, err := broker.ReadAudit(filepath.Join(dir, auditLogName))
	if err != nil {
		return fail(err)
	}
	return dir, recs, 0
}

// newestRun is the most recently modified run directory under base that
// holds an audit log.
func newestRun(base string) (string, error) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return "", fmt.Errorf("audit logs: %w", err)
	}
	var best string
	var bestT time.Time
	for _, de := range ents {
		if !de.IsDir() {
			continue
		}
		st, err := os.Stat(filepath.Join(base, de.Name(), auditLogName))
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if best == "" || st.ModTime().After(bestT) {
			best, bestT = filepath.Join(base, de.Name()), st.ModTime()
		}
	}
	if best == "" {
		return "", fmt.Errorf("no run with an audit log under %s", base)
	}
	return best, nil
}

// auditSummary is what "awf audit summary" reports (also its JSON form).
type auditSummary struct {
	RunDir   string         `json:"runDir"`
	Versions []string       `json:"awfVersions"`
	CIRunID  string         `json:"ciRunId,omitempty"`
	Queries  []auditQuery   `json:"queries"`
	Answered int            `json:"answered"`
	Failed   int            `json:"failed"`
	Repos    []auditRepo    `json:"repos"`
	Staged   []string       `json:"staged"`
	Other    map[string]int `json:"otherFailures"`
	Events   map[string]int `json:"lifecycle"`
}

type auditQuery struct {
	N            int    `json:"n"`
	InvocationID string `json:"invocationId"`
	Repo         string `json:"repo"`
	Sensitivity  string `json:"sensitivity,omitempty"`
	Outcome      string `json:"outcome"` // answered, or the failure reason
	Bits         int64  `json:"bits"`
	BucketMs     *int64 `json:"bucketMs,omitempty"`
	ElapsedMs    *int64 `json:"elapsedMs,omitempty"`
	ScriptSHA256 string `json:"scriptSha256,omitempty"`
	SchemaSHA256 string `json:"schemaSha256,omitempty"`
}

type auditRepo struct {
	Repo        string `json:"repo"`
	Sensitivity string `json:"sensitivity,omitempty"`
	Bits        int64  `json:"bits"`
	Budget      *int64 `json:"budget,omitempty"` // absent when unmetered or unknown
}

// pseudoIDs are the invocation ids of failure records that belong to no query.
var pseudoIDs = []string{broker.IDBudget, broker.IDQueue, broker.IDFraming, broker.IDTransport, broker.IDServer}

func summarizeAudit(dir string, recs []broker.Record) auditSummary {
	s := auditSummary{RunDir: dir, Other: map[string]int{}, Events: map[string]int{}, Queries: []auditQuery{}, Repos: []auditRepo{}, Staged: []string{}}
	repos := map[string]*auditRepo{}
	for _, r := range recs {
		if r.AWFVersion != "" && !slices.Contains(s.Versions, r.AWFVersion) {
			s.Versions = append(s.Versions, r.AWFVersion)
		}
		if r.CIRunID != "" && s.CIRunID == "" {
			s.CIRunID = r.CIRunID
		}
		switch {
		case r.Kind == "lifecycle":
			s.Events[r.Event]++
			if r.Event == "seed-staged" {
				s.Staged = append(s.Staged, r.Detail)
			}
			continue
		case r.Kind == "failure" && (r.InvocationID == "" || slices.Contains(pseudoIDs, r.InvocationID)):
			s.Other[r.Reason]++
			continue
		case r.Kind != "invocation" && r.Kind != "failure":
			continue
		}
		q := auditQuery{N: len(s.Queries) + 1, InvocationID: r.InvocationID, Repo: r.Repo, Sensitivity: r.Sensitivity,
			Outcome: "answered", BucketMs: r.BucketMs, ElapsedMs: r.ElapsedMs, ScriptSHA256: r.ScriptSHA256, SchemaSHA256: r.SchemaSHA256}
		if r.Bits != nil {
			q.Bits = *r.Bits
		}
		if r.Kind == "failure" {
			q.Outcome = r.Reason
			s.Failed++
		} else {
			s.Answered++
		}
		s.Queries = append(s.Queries, q)
		if r.Repo == "" {
			continue
		}
		a := repos[r.Repo]
		if a == nil {
			a = &auditRepo{Repo: r.Repo, Sensitivity: r.Sensitivity}
			if b, metered, ok := proto.SensitivityBudget(r.Sensitivity); ok && metered {
				a.Budget = &b
			}
			repos[r.Repo] = a
		}
		a.Bits += q.Bits
	}
	for _, a := range repos {
		s.Repos = append(s.Repos, *a)
	}
	slices.SortFunc(s.Repos, func(a, b auditRepo) int { return strings.Compare(a.Repo, b.Repo) })
	if s.Versions == nil {
		s.Versions = []string{}
	}
	return s
}

func (q auditQuery) cells() []string {
	ms := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%d ms", *p)
	}
	out := q.Outcome
	if out != "answered" {
		out = "failed: " + out
	}
	sha := q.ScriptSHA256
	if len(sha) > 12 {
		sha = sha[:12]
	}
	if sha == "" {
		sha = "-"
	}
	return []string{fmt.Sprintf("Q%d", q.N), q.Repo, out, fmt.Sprintf("%d b", q.Bits), ms(q.BucketMs), ms(q.ElapsedMs), sha}
}

var auditColumns = []string{"", "repository", "outcome", "charge", "bucket", "ran for", "script"}

func (a auditRepo) line() string {
	if a.Budget == nil {
		return fmt.Sprintf("%s: %d bits charged (%s, unmetered)", a.Repo, a.Bits, a.Sensitivity)
	}
	return fmt.Sprintf("%s: %d of its %d-bit run budget (%s)", a.Repo, a.Bits, *a.Budget, a.Sensitivity)
}

func (s auditSummary) header() []string {
	v := strings.Join(s.Versions, ", ")
	if v == "" {
		v = "not recorded"
	}
	h := []string{"run: " + s.RunDir, "awf: " + v}
	if s.CIRunID != "" {
		h = append(h, "CI run: "+s.CIRunID)
	}
	return append(h, fmt.Sprintf("queries: %d (%d answered, %d failed)", len(s.Queries), s.Answered, s.Failed))
}

func (s auditSummary) footer() []string {
	var f []string
	for _, st := range s.Staged {
		f = append(f, "staged: "+st)
	}
	for _, a := range s.Repos {
		f = append(f, "charged to "+a.line())
	}
	reasons := make([]string, 0, len(s.Other))
	for r := range s.Other {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		f = append(f, fmt.Sprintf("refused outside any query: %s ×%d", r, s.Other[r]))
	}
	return append(f, "the agent saw none of the failure reasons above, and never a balance")
}

func (s auditSummary) writeText(w io.Writer) error {
	var b strings.Builder
	for _, l := range s.header() {
		b.WriteString(l + "\n")
	}
	if len(s.Queries) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(auditColumns, "\t"))
		for _, q := range s.Queries {
			fmt.Fprintln(tw, strings.Join(q.cells(), "\t"))
		}
		tw.Flush()
	}
	b.WriteString("\n")
	for _, l := range s.footer() {
		b.WriteString(l + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (s auditSummary) writeMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("### awf audit\n\n")
	for _, l := range s.header() {
		b.WriteString("- " + mdEscape(l) + "\n")
	}
	if len(s.Queries) > 0 {
		b.WriteString("\n| " + strings.Join(auditColumns, " | ") + " |\n|")
		for range auditColumns {
			b.WriteString("---|")
		}
		b.WriteString("\n")
		for _, q := range s.Queries {
			c := q.cells()
			for i := range c {
				c[i] = mdEscape(c[i])
			}
			b.WriteString("| " + strings.Join(c, " | ") + " |\n")
		}
	}
	b.WriteString("\n")
	for _, l := range s.footer() {
		b.WriteString("- " + mdEscape(l) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdEscape keeps a cell from ending the table row or starting markup.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

// cmdAuditSummary implements "awf audit summary".
func cmdAuditSummary(ctx context.Context, e env) int {
	var format string
	dir, recs, code := auditArgs(e, "awf audit summary", auditSummaryUsage, func(fs *flag.FlagSet) {
		fs.StringVar(&format, "format", "text", "text, markdown or json")
	})
	if code != 0 {
		return code
	}
	s := summarizeAudit(dir, recs)
	var err error
	switch format {
	case "text":
		err = s.writeText(e.stdout)
	case "markdown", "md":
		err = s.writeMarkdown(e.stdout)
	case "json":
		var b []byte
		if b, err = indentedJSON(s); err == nil {
			_, err = e.stdout.Write(b)
		}
	default:
		fmt.Fprintf(e.stderr, "awf audit summary: unknown --format %q (want text, markdown or json)\n", format)
		return 2
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "awf audit summary: %v\n", err)
		return 1
	}
	return 0
}

// cmdAuditShow implements "awf audit show".
func cmdAuditShow(ctx context.Context, e env) int {
	var asJSON bool
	dir, recs, code := auditArgs(e, "awf audit show", auditShowUsage, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print the JSONL as written")
	})
	if code != 0 {
		return code
	}
	if asJSON {
		f, err := os.Open(filepath.Join(dir, auditLogName))
		if err != nil {
			fmt.Fprintf(e.stderr, "awf audit show: %v\n", err)
			return 1
		}
		defer f.Close()
		if _, err := io.Copy(e.stdout, f); err != nil {
			fmt.Fprintf(e.stderr, "awf audit show: %v\n", err)
			return 1
		}
		return 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	for _, r := range recs {
		what := r.Event
		switch r.Kind {
		case "invocation":
			what = "answered"
		case "failure":
			what = r.Reason
		}
		var extra []string
		if r.Repo != "" {
			extra = append(extra, "repo="+r.Repo)
		}
		if r.Bits != nil {
			extra = append(extra, fmt.Sprintf("bits=%d", *r.Bits))
		}
		if r.BucketMs != nil {
			extra = append(extra, fmt.Sprintf("bucket=%dms", *r.BucketMs))
		}
		if r.ElapsedMs != nil {
			extra = append(extra, fmt.Sprintf("elapsed=%dms", *r.ElapsedMs))
		}
		if r.ScriptSHA256 != "" {
			extra = append(extra, "script="+r.ScriptSHA256[:min(12, len(r.ScriptSHA256))])
		}
		if r.Detail != "" {
			extra = append(extra, r.Detail)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.TS, r.Kind, r.InvocationID, what, strings.Join(extra, " "))
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(e.stderr, "awf audit show: %v\n", err)
		return 1
	}
	return 0
}
