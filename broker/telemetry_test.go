package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// telemetryLines reads dir's runtime-telemetry.jsonl and checks that every
// record has exactly the seed's five fields.
func telemetryLines(t *testing.T, dir string) []Telemetry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "runtime-telemetry.jsonl"))
	require.NoError(t, err)
	var out []Telemetry
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var m map[string]string
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		assert.Equal(t, []string{"capabilityState", "category", "lifecycleClass", "primaryBackend", "queryBackend"}, keys, line)
		out = append(out, Telemetry{m["primaryBackend"], m["queryBackend"], m["lifecycleClass"], m["capabilityState"], m["category"]})
	}
	return out
}

func TestTelemetryEveryAnsweredJobAndCountExhaustion(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenAudit(dir, "bounded-query.jsonl")
	require.NoError(t, err)
	defer a.Close()
	tel, err := OpenTelemetry(dir, "host", "direct")
	require.NoError(t, err)
	defer tel.Close()
	clock := &fakeClock{}
	rt := &fakeRuntime{clock: clock, cost: 40 * time.Millisecond}
	b, err := New(Options{Kind: QueryKind{}, Runtime: rt, Template: testTemplate(),
		Seeds: []Seed{{Repo: "o/r", Dir: "/seeds/x", Sensitivity: "public"}}, MaxInvocations: 3,
		Timeout: 30 * time.Second, Clock: clock, Audit: a, Telemetry: tel})
	require.NoError(t, err)
	ctx := context.Background()
	for _, r := range []*Request{
		queryReq("o/r", boolS, script),     // success
		queryReq("o/other", boolS, script), // repo not allowed
		{Method: "POST", Target: "/query"}, // framing
		queryReq("o/r", boolS, script),     // past maxInvocations
		queryReq("o/r", boolS, script),     // and again
	} {
		b.Handle(ctx, r)
	}
	got := telemetryLines(t, dir)
	var cats []string
	for _, r := range got {
		assert.Equal(t, Telemetry{"host", "direct", ClassQuery, StateSupported, r.Category}, r)
		cats = append(cats, r.Category)
	}
	assert.Equal(t, []string{"success", ReasonRepoNotAllowed, ReasonInvalidRequest, ReasonCountExhausted, ReasonCountExhausted}, cats,
		"one record per answer, count exhaustion included")
}

func TestNewTelemetryKeepsFreeTextOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   [5]string
		want Telemetry
	}{
		{"seed values", [5]string{"host", "gvisor", ClassStartup, StateBlocked, "query-security-block"},
			Telemetry{"host", "gvisor", ClassStartup, StateBlocked, "query-security-block"}},
		{"path as category", [5]string{"host", "direct", ClassQuery, StateSupported, "/var/lib/awf/private/x"},
			Telemetry{"host", "direct", ClassQuery, StateSupported, CategoryUnknown}},
		{"repo as backend", [5]string{"o/r", "direct", ClassQuery, StateSupported, "ok"},
			Telemetry{CategoryUnknown, "direct", ClassQuery, StateSupported, "ok"}},
		{"unknown class and state", [5]string{"host", "direct", "probe", "maybe", "ok"},
			Telemetry{"host", "direct", CategoryUnknown, CategoryUnknown, "ok"}},
		{"too long", [5]string{"host", "direct", ClassQuery, StateSupported, "a" + strings.Repeat("b", 64)},
			Telemetry{"host", "direct", ClassQuery, StateSupported, CategoryUnknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, NewTelemetry(tc.in[0], tc.in[1], tc.in[2], tc.in[3], tc.in[4]))
		})
	}
	var buf bytes.Buffer
	require.NoError(t, WriteTelemetry(&buf, NewTelemetry("host", "sbx", ClassPreflight, StateBlocked, "query-security-block")))
	assert.Equal(t, `{"primaryBackend":"host","queryBackend":"sbx","lifecycleClass":"preflight","capabilityState":"blocked","category":"query-security-block"}`+"\n", buf.String())
}

func TestKindClass(t *testing.T) {
	assert.Equal(t, ClassQuery, KindClass(QueryKind{}))
	assert.Equal(t, ClassQuery, KindClass(ProbeKind{}), "a sealed probe is a query of the run")
	assert.Equal(t, ClassInvocation, KindClass(&AgentKind{}), "the seed's class for bounded agents")
}
