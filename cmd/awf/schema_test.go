package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runAWF(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	rc := realMain(args, strings.NewReader(stdin), &out, &errb)
	return rc, out.String(), errb.String()
}

const objSchema = `{"type":"object","fields":{"a":{"type":"boolean"},"b":{"type":"integer","minimum":0,"maximum":3}}}`

func TestSchemaCheckText(t *testing.T) {
	rc, out, _ := runAWF(t, "", "schema", "check", `{"type":"integer","minimum":0,"maximum":255}`)
	require.Equal(t, 0, rc)
	assert.Contains(t, out, "cardinality: 256\n")
	assert.Contains(t, out, "charge: 12 bits (1 status + 8 schema + 3 timing)")
	assert.Contains(t, out, "public        unmetered")
	assert.Contains(t, out, "internal      64 bits: affordable, 5 queries of this schema per run")
	assert.Contains(t, out, "confidential  8 bits: not affordable (charge 12 > 8)")
	assert.Contains(t, out, "sealed        0 bits: not affordable")

	rc, _, errOut := runAWF(t, "", "schema", "check", `{"type":"object","fields":{"9x":{"type":"boolean"}}}`)
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, `field name "9x" must start with a letter`)
}

func TestSchemaCheckJSON(t *testing.T) {
	rc, out, _ := runAWF(t, `{"type":"boolean"}`, "schema", "check", "--json", "-")
	require.Equal(t, 0, rc)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, true, r["valid"])
	assert.Equal(t, "2", r["cardinality"])
	assert.Equal(t, float64(5), r["charge_bits"])
	b := r["budgets"].([]any)
	require.Len(t, b, 4)
	assert.Equal(t, map[string]any{"sensitivity": "confidential", "metered": true, "budget_bits": float64(8), "affordable": true, "queries_per_run": float64(1)}, b[2])
	assert.Equal(t, map[string]any{"sensitivity": "public", "metered": false, "budget_bits": nil, "affordable": true, "queries_per_run": nil}, b[0])

	rc, out, _ = runAWF(t, "", "schema", "check", "--json", `{"type":"boolean","x":1}`)
	assert.Equal(t, 1, rc)
	r = nil
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, map[string]any{"valid": false, "error": `invalid schema: at $: boolean schema must have exactly the keys "type"; unexpected key "x"`}, r)

	huge := `{"type":"array","length":64,"items":{"type":"array","length":64,"items":{"type":"array","length":64,"items":{"type":"array","length":64,"items":{"type":"boolean"}}}}}`
	rc, out, _ = runAWF(t, "", "schema", "check", "--json", huge)
	require.Equal(t, 0, rc)
	r = nil
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Nil(t, r["cardinality"])
	assert.Equal(t, float64(16777216), r["cardinality_log2"])
	assert.Equal(t, float64(1029), r["charge_bits"])
	assert.Equal(t, true, r["charge_capped"])
}

func TestSchemaCheckFileAndUsage(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(p, []byte("{\n  \"type\": \"boolean\"\n}\n"), 0o600))
	rc, out, _ := runAWF(t, "", "schema", "check", "@"+p)
	require.Equal(t, 0, rc)
	assert.Contains(t, out, "cardinality: 2\n")

	for _, args := range [][]string{{"schema"}, {"schema", "check"}, {"schema", "check", "a", "b"}, {"schema", "check", "--bogus", "x"}, {"schema", "nope"}} {
		rc, _, _ := runAWF(t, "", args...)
		assert.Equal(t, 2, rc, args)
	}
	rc, out, _ = runAWF(t, strings.Repeat(" ", 9000), "schema", "check", "--json", "-")
	assert.Equal(t, 1, rc)
	assert.Contains(t, out, `"error":"schema text is larger than the maximum of 8192 bytes"`)

	rc, _, errOut := runAWF(t, "", "schema", "check", "@/nonexistent/s.json")
	assert.Equal(t, 2, rc)
	assert.Contains(t, errOut, "no such file")
}

func TestSchemaValidate(t *testing.T) {
	rc, out, _ := runAWF(t, "{\"b\": 2,\n \"a\": true}\n", "schema", "validate", "--schema", objSchema)
	require.Equal(t, 0, rc)
	assert.Equal(t, "{\"a\":true,\"b\":2}\n", out)

	rc, out, errOut := runAWF(t, `{"b": 4, "a": true}`, "schema", "validate", "--schema="+objSchema, "-")
	assert.Equal(t, 1, rc)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "at $.b: integer is outside the range 0..3")

	p := filepath.Join(t.TempDir(), "out")
	require.NoError(t, os.WriteFile(p, []byte(`{"a":false,"b":0} x`), 0o600))
	rc, _, errOut = runAWF(t, "", "schema", "validate", p, "--schema", objSchema)
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, "unexpected content after the JSON value")

	rc, _, errOut = runAWF(t, strings.Repeat(" ", 9000), "schema", "validate", "--schema", objSchema)
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, "result is larger than the maximum of 8192 bytes")

	rc, _, errOut = runAWF(t, "true", "schema", "validate", "--schema", `{"type":"bool"}`)
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, `unknown schema type "bool"`)

	for _, args := range [][]string{{"schema", "validate"}, {"schema", "validate", "--schema"}, {"schema", "validate", "--schema", "-"}, {"schema", "validate", "--schema", "x", "--schema", "y"}, {"schema", "validate", "--schema", "x", "a", "b"}} {
		rc, _, _ := runAWF(t, "", args...)
		assert.Equal(t, 2, rc, args)
	}
}
