package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCanonicalSchema(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"sorted keys", `{"type":"integer","minimum":0,"maximum":9}`, `{"maximum":9,"minimum":0,"type":"integer"}`},
		{"nested", `{"type":"object","fields":{"b":{"type":"boolean"},"a":{"type":"const","value":"<x>"}}}`,
			`{"fields":{"a":{"type":"const","value":"<x>"},"b":{"type":"boolean"}},"type":"object"}`},
		{"numbers as written", `{"type":"integer","minimum":-9007199254740993,"maximum":9007199254740993}`,
			`{"maximum":9007199254740993,"minimum":-9007199254740993,"type":"integer"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CanonicalSchema([]byte(tc.in))
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

// Every invocation and failure record of a framed request names what was
// asked by digest, and every record carries the awf version and CI run id.
func TestAuditRecordDigestsAndVersion(t *testing.T) {
	t.Setenv("GITHUB_RUN_ID", "4242")
	spaced := `{ "value": 42, "type": "const" }`
	for _, tc := range []struct {
		name    string
		outcome isolate.Kind
		kind    string
	}{{"invocation", isolate.KindOK, "invocation"}, {"failure", isolate.KindNonzeroExit, "failure"}} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTestBroker(t, 32, Seed{Repo: "o/r", Dir: "/seeds/x", Sensitivity: "internal"})
			tb.rt.outcome = func(isolate.Spec) isolate.Outcome {
				return isolate.Outcome{Kind: tc.outcome, Output: []byte("42")}
			}
			tb.b.Handle(context.Background(), queryReq("o/r", spaced, script))
			lines := strings.Split(strings.TrimSpace(tb.audit(t)), "\n")
			var rec Record
			require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &rec))
			assert.Equal(t, tc.kind, rec.Kind)
			s := sha256.Sum256([]byte(script))
			assert.Equal(t, hex.EncodeToString(s[:]), rec.ScriptSHA256)
			c := sha256.Sum256([]byte(`{"type":"const","value":42}`))
			assert.Equal(t, hex.EncodeToString(c[:]), rec.SchemaSHA256, "the digest of the canonical schema, not of the text sent")
			assert.Equal(t, proto.Version(), rec.AWFVersion)
			assert.Equal(t, "4242", rec.CIRunID)
		})
	}
}

// A probe's record names its closed schema as a query's names its own: by
// the digest of the canonical text, whose keys are sorted.
func TestProbeRecordDigestIsCanonical(t *testing.T) {
	task, _, err := frame(ProbeKind{}, probeReq("o/r", yesNo, script))
	require.NoError(t, err)
	text, schema := taskDigests(task)
	s := sha256.Sum256([]byte(script))
	assert.Equal(t, hex.EncodeToString(s[:]), text)
	closed, err := proto.ProbeSchema(yesNo)
	require.NoError(t, err)
	c, err := CanonicalSchema(closed.Compact())
	require.NoError(t, err)
	sum := sha256.Sum256(c)
	assert.Equal(t, hex.EncodeToString(sum[:]), schema)
}

// ReadAudit gives back what Write appended, in order, and names the line
// of a record it cannot decode.
func TestReadAuditRoundTrip(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenAudit(dir, "audit.jsonl")
	require.NoError(t, err)
	a.Failure(IDFraming, ReasonInvalidRequest, "bad header")
	a.Lifecycle(LifecycleCancelled, "")
	require.NoError(t, a.Close())
	path := filepath.Join(dir, "audit.jsonl")
	recs, err := ReadAudit(path)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	for i := range recs {
		assert.NotEmpty(t, recs[i].TS)
		recs[i].TS, recs[i].AWFVersion, recs[i].CIRunID = "", "", ""
	}
	assert.Equal(t, []Record{
		{Kind: "failure", InvocationID: IDFraming, Reason: ReasonInvalidRequest, Detail: "bad header"},
		{Kind: "lifecycle", Event: LifecycleCancelled},
	}, recs)

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("not json\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = ReadAudit(path)
	assert.ErrorContains(t, err, path+":3:")

	_, err = ReadAudit(filepath.Join(dir, "absent.jsonl"))
	assert.Error(t, err)
}
