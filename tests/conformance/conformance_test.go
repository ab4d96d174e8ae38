// Package conformance runs the language-neutral vectors in this directory
// against the proto package. The vectors (and gen_vectors.py, which writes
// them) are normative together with proto/CONTRACT.md; README.md describes
// the format for other implementations.
package conformance

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/proto"
)

// header is the first line of every vector file.
type header struct {
	Contract    string `json:"contract"`
	Version     string `json:"version"`
	File        string `json:"file"`
	Cases       int    `json:"cases"`
	Description string `json:"description"`
}

// vector is one case; fields are read as needed by its kind.
type vector map[string]json.RawMessage

func (v vector) str(t *testing.T, k string) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(v[k], &s), "field %q", k)
	return s
}

func (v vector) has(k string) bool { _, ok := v[k]; return ok }

func (v vector) boolean(t *testing.T, k string) bool {
	t.Helper()
	var b bool
	require.NoError(t, json.Unmarshal(v[k], &b), "field %q", k)
	return b
}

func (v vector) int64(t *testing.T, k string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, json.Unmarshal(v[k], &n), "field %q", k)
	return n
}

// bytesField decodes F, F_hex or F_parts.
func (v vector) bytesField(t *testing.T, k string) []byte {
	t.Helper()
	switch {
	case v.has(k):
		return []byte(v.str(t, k))
	case v.has(k + "_hex"):
		b, err := hex.DecodeString(v.str(t, k+"_hex"))
		require.NoError(t, err)
		return b
	case v.has(k + "_parts"):
		var parts []struct {
			Text   *string `json:"text"`
			Hex    *string `json:"hex"`
			Repeat int     `json:"repeat"`
		}
		require.NoError(t, json.Unmarshal(v[k+"_parts"], &parts))
		var buf bytes.Buffer
		for _, p := range parts {
			unit := []byte(nil)
			if p.Text != nil {
				unit = []byte(*p.Text)
			} else {
				var err error
				unit, err = hex.DecodeString(*p.Hex)
				require.NoError(t, err)
			}
			buf.Write(bytes.Repeat(unit, p.Repeat))
		}
		return buf.Bytes()
	}
	t.Fatalf("vector has no %q, %q_hex or %q_parts", k, k, k)
	return nil
}

// load reads one vector file and checks its header.
func load(t *testing.T, path string) (header, []vector) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<22)
	require.True(t, sc.Scan(), "%s is empty", path)
	var h header
	dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&h), "%s: header", path)
	var vs []vector
	ids := map[string]bool{}
	for sc.Scan() {
		var v vector
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), "%s line %d", path, len(vs)+2)
		id := v.str(t, "id")
		require.False(t, ids[id], "duplicate id %s", id)
		ids[id] = true
		require.True(t, v.has("rules"), "%s has no rules", id)
		vs = append(vs, v)
	}
	require.NoError(t, sc.Err())
	require.Equal(t, "awf-proto", h.Contract, path)
	require.Equal(t, proto.ContractVersion, h.Version, "%s: contract version", path)
	require.Equal(t, strings.TrimSuffix(filepath.Base(path), ".jsonl"), h.File, path)
	require.Equal(t, h.Cases, len(vs), "%s: header case count", path)
	return h, vs
}

// checkError asserts err is of the vector's error class and, when given,
// contains error_contains (a hint for this implementation's messages).
// succeeded checks err against what v expects: when v expects a failure
// (its "ok" is false), err must be of v's class (checkError) and the
// caller stops; otherwise err must be nil and the caller goes on to check
// the value.
func succeeded(t *testing.T, v vector, err error) bool {
	t.Helper()
	if !v.boolean(t, "ok") {
		checkError(t, v, err)
		return false
	}
	require.NoError(t, err)
	return true
}

func checkError(t *testing.T, v vector, err error) {
	t.Helper()
	require.Error(t, err)
	classes := map[string]error{"json": proto.ErrJSON, "schema": proto.ErrSchema, "value": proto.ErrValue, "request": proto.ErrRequest}
	cls := v.str(t, "error_class")
	want, ok := classes[cls]
	require.True(t, ok, "unknown error_class %q", cls)
	assert.True(t, errors.Is(err, want), "want class %s, got %v", cls, err)
	if cls == "schema" {
		assert.False(t, errors.Is(err, proto.ErrJSON), "want a DSL error, got a JSON error: %v", err)
	}
	if v.has("error_contains") {
		assert.Contains(t, err.Error(), v.str(t, "error_contains"))
	}
}

func TestVectors(t *testing.T) {
	files, err := filepath.Glob("*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no vector files next to the runner")
	total := 0
	rules := map[string]int{}
	for _, f := range files {
		h, vs := load(t, f)
		total += len(vs)
		for _, v := range vs {
			var rs []string
			require.NoError(t, json.Unmarshal(v["rules"], &rs))
			for _, r := range rs {
				rules[r]++
			}
		}
		t.Run(h.File, func(t *testing.T) {
			for _, v := range vs {
				t.Run(v.str(t, "id"), func(t *testing.T) { run(t, h.File, v) })
			}
		})
	}
	assert.GreaterOrEqual(t, total, 250, "the suite must hold at least 250 cases")
	for i := 1; i <= 44; i++ {
		assert.Positive(t, rules[fmt.Sprintf("R%d", i)], "no vector cites rule R%d", i)
	}
}

func run(t *testing.T, file string, v vector) {
	kind := file
	if v.has("kind") {
		kind = v.str(t, "kind")
	}
	switch kind {
	case "json":
		runJSON(t, v)
	case "schema":
		runSchema(t, v)
	case "result":
		runResult(t, v)
	case "envelope":
		if v.str(t, "status") == "error" {
			assert.Equal(t, v.str(t, "body"), proto.ErrorEnvelope)
		} else {
			assert.Equal(t, v.str(t, "body"), string(proto.OKEnvelope([]byte(v.str(t, "canonical")))))
		}
	case "repo":
		err := proto.ValidateRepoSlug(v.str(t, "input"))
		if v.boolean(t, "ok") {
			assert.NoError(t, err)
		} else {
			assert.ErrorIs(t, err, proto.ErrRequest)
		}
	case "script":
		err := proto.ValidateScript(v.bytesField(t, "input"))
		if v.boolean(t, "ok") {
			assert.NoError(t, err)
		} else {
			assert.ErrorIs(t, err, proto.ErrRequest)
		}
	case "header":
		got, err := proto.DecodeSchemaHeader(v.str(t, "input"))
		if v.boolean(t, "ok") {
			require.NoError(t, err)
			assert.Equal(t, v.str(t, "decoded"), string(got))
		} else {
			assert.ErrorIs(t, err, proto.ErrRequest)
		}
	case "request":
		runRequest(t, v)
	case "sensitivity":
		bits, metered, ok := proto.SensitivityBudget(v.str(t, "name"))
		assert.Equal(t, v.boolean(t, "ok"), ok)
		assert.Equal(t, v.boolean(t, "metered"), metered)
		assert.Equal(t, v.int64(t, "budget_bits"), bits)
	case "charge":
		card, ok := new(big.Int).SetString(v.str(t, "cardinality"), 10)
		require.True(t, ok)
		assert.Equal(t, v.int64(t, "charge_bits"), proto.ChargeForCardinality(card))
	case "constant":
		runConstant(t, v)
	default:
		t.Fatalf("unknown kind %q", kind)
	}
}

func runJSON(t *testing.T, v vector) {
	got, err := proto.CompactJSON(v.bytesField(t, "input"))
	if !succeeded(t, v, err) {
		return
	}
	assert.Equal(t, v.str(t, "compact"), string(got))
}

func runSchema(t *testing.T, v vector) {
	s, err := proto.ParseSchema(v.bytesField(t, "schema"))
	if !succeeded(t, v, err) {
		return
	}
	assert.Equal(t, v.int64(t, "charge_bits"), s.ChargeBits())
	assert.Equal(t, v.str(t, "compact"), string(s.Compact()))
	if string(v["cardinality"]) == "null" {
		assert.Nil(t, s.Cardinality())
		var want float64
		require.NoError(t, json.Unmarshal(v["cardinality_log2"], &want))
		assert.InEpsilon(t, want, s.CardinalityLog2(), 1e-9)
		return
	}
	require.NotNil(t, s.Cardinality())
	assert.Equal(t, v.str(t, "cardinality"), s.Cardinality().String())
}

func runResult(t *testing.T, v vector) {
	s, err := proto.ParseSchema(v.bytesField(t, "schema"))
	require.NoError(t, err, "the schema of a result vector must be valid")
	got, err := s.CheckResult(v.bytesField(t, "input"))
	if !succeeded(t, v, err) {
		return
	}
	assert.Equal(t, v.str(t, "canonical"), string(got))
}

func runRequest(t *testing.T, v vector) {
	var want []string
	require.NoError(t, json.Unmarshal(v["failing"], &want))
	repo, h, script := v.str(t, "repo"), v.str(t, "schema_b64"), v.bytesField(t, "script")
	var failing []string
	if proto.ValidateRepoSlug(repo) != nil {
		failing = append(failing, "repo")
	}
	if text, err := proto.DecodeSchemaHeader(h); err != nil {
		failing = append(failing, "schema")
	} else if _, err := proto.ParseSchema(text); err != nil {
		failing = append(failing, "schema")
	}
	if proto.ValidateScript(script) != nil {
		failing = append(failing, "script")
	}
	sort.Strings(failing)
	sort.Strings(want)
	assert.Equal(t, fmt.Sprint(want), fmt.Sprint(failing))
	req, err := proto.ValidateRequest(repo, h, script)
	if len(want) == 0 {
		require.NoError(t, err)
		assert.Equal(t, repo, req.Repo)
		return
	}
	require.Error(t, err)
	assert.ErrorIs(t, err, proto.ErrRequest)
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		assert.Len(t, u.Unwrap(), len(want), "ValidateRequest must report every failing part: %v", err)
	} else {
		assert.Len(t, want, 1, "ValidateRequest must report every failing part: %v", err)
	}
}

func runConstant(t *testing.T, v vector) {
	name := v.str(t, "name")
	consts := map[string]int64{
		"QueryProtocolVersion":   proto.QueryProtocolVersion,
		"MaxSchemaBytes":         proto.MaxSchemaBytes,
		"MaxSchemaDepth":         proto.MaxSchemaDepth,
		"MaxSchemaNodes":         proto.MaxSchemaNodes,
		"MaxEnumValues":          proto.MaxEnumValues,
		"MaxLiteralStringBytes":  proto.MaxLiteralStringBytes,
		"MaxIdentifierBytes":     proto.MaxIdentifierBytes,
		"MaxObjectFields":        proto.MaxObjectFields,
		"MaxTupleItems":          proto.MaxTupleItems,
		"MaxArrayLength":         proto.MaxArrayLength,
		"MaxUnionVariants":       proto.MaxUnionVariants,
		"MaxSafeInteger":         proto.MaxSafeInteger,
		"MaxJSONBytes":           proto.MaxJSONBytes,
		"MaxJSONDepth":           proto.MaxJSONDepth,
		"MaxResultBytes":         proto.MaxResultBytes,
		"MaxScriptBytes":         proto.MaxScriptBytes,
		"MaxRepoSlugLength":      proto.MaxRepoSlugLength,
		"MaxSchemaHeaderChars":   proto.MaxSchemaHeaderChars,
		"MaxSchemaHeaderBytes":   proto.MaxSchemaHeaderBytes,
		"ResultStatusBits":       proto.ResultStatusBits,
		"TimingBucketBits":       proto.TimingBucketBits,
		"MinChargeBits":          proto.MinChargeBits,
		"MaxChargeBits":          proto.MaxChargeBits,
		"CardinalityCapBits":     proto.CardinalityCapBits,
		"TimingToleranceMS":      proto.TimingToleranceMS,
		"FinalBucketMarginMS":    proto.FinalBucketMarginMS,
		"MaxQueryTimeoutSeconds": proto.MaxQueryTimeoutSeconds,
	}
	if name == "TimingBucketsMS" {
		var want []int64
		require.NoError(t, json.Unmarshal(v["value"], &want))
		var got []int64
		for _, b := range proto.TimingBuckets() {
			got = append(got, int64(b/time.Millisecond))
		}
		assert.True(t, reflect.DeepEqual(want, got), "want %v, got %v", want, got)
		return
	}
	got, ok := consts[name]
	require.True(t, ok, "unknown constant %q", name)
	assert.Equal(t, v.int64(t, "value"), got)
}
