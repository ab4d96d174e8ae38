package verify

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"text/template"

	"github.com/awf-project/awf/isolate"
)

// Probe is one in-sandbox test: a script, the finite schema of its answer,
// the limits it runs under, and the rule that turns its outcome into a verdict.
type Probe struct {
	// ID names the probe, "group/name".
	ID string
	// Group is the section of the report.
	Group string
	// Title says in one sentence what the probe tries.
	Title string
	// OnFail says what a FAIL means for the operator.
	OnFail string

	body   string                // Python built in Go; "" for a probe whose script is probes/<ID>.py
	schema string                // finite schema of the answer
	limits func(*isolate.Limits) // nil = default limits
	check  func(c *probeCtx) (Status, string)
	// example is a passing answer, used by the documentation and by tests.
	example string
	// exampleKind is the outcome kind of a passing run when it is not ok.
	exampleKind isolate.Kind
}

// params are the values a probe script is rendered with.
type params struct {
	Query, Repo, Out, Tmp string
	Errnos                []string
	Limits                isolate.Limits

	SeedMarker, SeedValue string
	SeedEntries           int
	OtherMarker           string
	SiblingMarker         string
	SiblingDir            string
	PlantToken            string
	Hostname              string
	HostOnly              []string   // host paths the sandbox must not see
	HostPrefixes          []string   // host path prefixes mountinfo must not reveal
	DiskPaths             []string   // sandbox paths fs/host-disk stats (diskPaths)
	HostDisks             [][3]int64 // the host filesystems it compares them with (hostDisks)
	TCP4Port, TCP6Port    int
	UDPPort, DNSPort      int
	Abstract              string
	FloodBytes            int
	BombCap               int
	ThreadCap             int
	TokenNames            []string
	TokenPrefixes         []string
	DevNames              []string
	TokenSuffixes         []string
}

// py renders a Go value as a Python literal.
func py(v any) (string, error) {
	switch x := v.(type) {
	case bool:
		if x {
			return "True", nil
		}
		return "False", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	if bytes.Equal(b, []byte("null")) {
		return "None", nil
	}
	return string(b), nil
}

var funcs = template.FuncMap{"py": py}

// probeScripts are the probes' Python scripts, one file a probe, named by
// its ID: a reviewer reads, lints and runs them as Python, not as Go
// string literals. A script is a text/template with <% %> delimiters over
// params, run after the prelude.
//
//go:embed probes/*/*.py
var probeScripts embed.FS

// script returns p's Python: its file, or the body built in Go.
func (p *Probe) script() (string, error) {
	if p.body != "" {
		return p.body, nil
	}
	b, err := probeScripts.ReadFile(path.Join("probes", p.ID+".py"))
	if err != nil {
		return "", fmt.Errorf("probe %s: script: %w", p.ID, err)
	}
	return string(b), nil
}

// render returns the complete script of p.
func (p *Probe) render(pr params) ([]byte, error) {
	body, err := p.script()
	if err != nil {
		return nil, err
	}
	t, err := template.New(p.ID).Delims("<%", "%>").Funcs(funcs).Option("missingkey=error").Parse(prelude + "\n# probe " + p.ID + "\n" + body)
	if err != nil {
		return nil, fmt.Errorf("probe %s: template: %w", p.ID, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, pr); err != nil {
		return nil, fmt.Errorf("probe %s: render: %w", p.ID, err)
	}
	return b.Bytes(), nil
}

// effectiveLimits returns the limits p runs under.
func (p *Probe) effectiveLimits() isolate.Limits {
	l := isolate.DefaultLimits()
	l.Wall = defaultProbeWall
	if p.limits != nil {
		p.limits(&l)
	}
	return l
}

// probeCtx is what a probe's check sees.
type probeCtx struct {
	runtime string
	traits  traits
	out     isolate.Outcome
	answer  map[string]any // decoded canonical answer; nil unless out.Kind is ok
	limits  isolate.Limits
	fx      *fixture
	hits    map[string]int64 // listener name -> connections during this probe
	job     jobFacts         // the job's process as the host sees it
	// inoBefore and inoAfter are the host's inode counter (get_next_ino)
	// just before and just after the run, -1 when it could not be read.
	inoBefore, inoAfter int64
}

// str returns a string field of the answer.
func (c *probeCtx) str(k string) string {
	s, _ := c.answer[k].(string)
	return s
}

// num returns an integer field of the answer.
func (c *probeCtx) num(k string) int64 {
	switch x := c.answer[k].(type) {
	case json.Number:
		n, _ := x.Int64()
		return n
	case float64:
		return int64(x)
	}
	return 0
}

// flag returns a boolean field of the answer.
func (c *probeCtx) flag(k string) bool {
	b, _ := c.answer[k].(bool)
	return b
}

// lastStep is the last AWF-STEP marker the script wrote to stderr.
func (c *probeCtx) lastStep() string {
	lines := strings.Split(strings.TrimRight(string(c.out.Stderr), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if s, ok := strings.CutPrefix(lines[i], "AWF-STEP "); ok {
			return s
		}
	}
	return ""
}

// Schema helpers. They write the DSL's JSON by hand so that field order,
// which is the canonical order, is the order given.

func sEnum(vals ...string) string {
	b, _ := json.Marshal(vals)
	return `{"type":"enum","values":` + string(b) + `}`
}

var sErrno = sEnum(errnoVocab...)

const sBool = `{"type":"boolean"}`

func sInt(min, max int64) string {
	return fmt.Sprintf(`{"type":"integer","minimum":%d,"maximum":%d}`, min, max)
}

// sObj builds an object schema from alternating field names and schemas.
func sObj(kv ...string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","fields":{`)
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", kv[i], kv[i+1])
	}
	b.WriteString(`}}`)
	return b.String()
}

// errnoFields is an object schema whose fields are all errno outcomes.
func errnoFields(names ...string) string {
	var kv []string
	for _, n := range names {
		kv = append(kv, n, sErrno)
	}
	return sObj(kv...)
}

// blocked reports whether an errno outcome means the attack did not work.
func blocked(v string) bool { return v != "ok" && v != "" }

// outcomes returns "field=value" for each named field of the answer, the
// evidence of the step checks, and the fields whose value matches (none
// when match is nil).
func (c *probeCtx) outcomes(fields []string, match func(v string) bool) (how, matched []string) {
	for _, f := range fields {
		v := c.str(f)
		how = append(how, f+"="+v)
		if match != nil && match(v) {
			matched = append(matched, f)
		}
	}
	return how, matched
}

// checkAllBlocked passes when every named errno field is not "ok".
func checkAllBlocked(fields ...string) func(c *probeCtx) (Status, string) {
	return func(c *probeCtx) (Status, string) {
		how, worked := c.outcomes(fields, func(v string) bool { return !blocked(v) })
		if len(worked) > 0 {
			return Fail, fmt.Sprintf("the attack worked: %s succeeded (%s)", strings.Join(worked, ", "), strings.Join(how, " "))
		}
		return Pass, "blocked: " + strings.Join(how, " ")
	}
}

// checkAnyBlocked passes when at least one of the named steps of a chained
// attack was blocked.
func checkAnyBlocked(fields ...string) func(c *probeCtx) (Status, string) {
	return func(c *probeCtx) (Status, string) {
		how, stopped := c.outcomes(fields, blocked)
		if len(stopped) == 0 {
			return Fail, "the attack worked: every step succeeded (" + strings.Join(how, " ") + ")"
		}
		return Pass, "blocked: " + strings.Join(how, " ")
	}
}

// checkEqual passes when every named field has the wanted value.
func checkEqual(want map[string]any) func(c *probeCtx) (Status, string) {
	return func(c *probeCtx) (Status, string) {
		var bad, got []string
		for _, k := range sortedKeys(want) {
			v := fmt.Sprint(normalise(c.answer[k]))
			got = append(got, k+"="+v)
			if v != fmt.Sprint(want[k]) {
				bad = append(bad, fmt.Sprintf("%s=%s, want %v", k, v, want[k]))
			}
		}
		if len(bad) > 0 {
			return Fail, strings.Join(bad, "; ")
		}
		return Pass, strings.Join(got, " ")
	}
}

// Probe declarations. Most probes are one of a few kinds, each judged by
// one rule; these build them from what is particular to the probe, so
// that a group's table says each fact once (the answer a probe expects is
// its example too) and the group is set by the table, see inGroup.

// inGroup sets the report section of every probe of a group's table.
func inGroup(group string, ps []Probe) []Probe {
	for i := range ps {
		ps[i].Group = group
	}
	return ps
}

// blockedProbe is an attack whose answer is one errno outcome per step,
// that passes when every step was blocked.
func blockedProbe(id, title, onFail, example string, steps ...string) Probe {
	return Probe{ID: id, Title: title, OnFail: onFail, schema: errnoFields(steps...), check: checkAllBlocked(steps...), example: example}
}

// wantProbe passes when the answer is exactly want, which is also its
// example.
func wantProbe(id, title, onFail, schema, want string) Probe {
	dec := json.NewDecoder(strings.NewReader(want))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		panic(fmt.Sprintf("verify: probe %s: wanted answer %s: %v", id, want, err))
	}
	for k, v := range m {
		m[k] = normalise(v)
	}
	return Probe{ID: id, Title: title, OnFail: onFail, schema: schema, check: checkEqual(m), example: want}
}

// kindProbe drives a limit past its value under limits and passes when the
// run ends with the limit's typed outcome, which is also its example.
func kindProbe(id, title, onFail string, kind isolate.Kind, what string, limits func(*isolate.Limits), schema string) Probe {
	return Probe{ID: id, Title: title, OnFail: onFail, limits: limits, schema: schema, check: kindCheck(kind, what), exampleKind: kind}
}

// withLimits sets the limits p runs under.
func withLimits(p Probe, limits func(*isolate.Limits)) Probe {
	p.limits = limits
	return p
}

// normalise turns a decoded JSON number into an int64 for printing.
func normalise(v any) any {
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return i
		}
	}
	return v
}

// oneOf reports whether v is among vals.
func oneOf(v string, vals ...string) bool { return slices.Contains(vals, v) }
