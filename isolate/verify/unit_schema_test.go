package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/policy"
)

// reportSchema is the published schema of the JSON report.
const reportSchema = "../../docs/verify-report.schema.json"

// schemaCheck validates v against the subset of JSON Schema the report
// schema uses: type, enum, pattern, minLength, minimum, properties,
// required, additionalProperties (false or a schema), items and local $ref.
// A keyword it does not know fails, so the schema cannot grow a rule this
// check silently ignores.
func schemaCheck(root, s map[string]any, v any, path string) error {
	known := map[string]bool{"$schema": true, "$id": true, "title": true, "description": true, "$defs": true,
		"type": true, "enum": true, "pattern": true, "minLength": true, "minimum": true, "properties": true,
		"required": true, "additionalProperties": true, "items": true, "$ref": true}
	for k := range s {
		if !known[k] {
			return fmt.Errorf("%s: schema keyword %q is not checked", path, k)
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		if !ok {
			return fmt.Errorf("%s: non-local $ref %s", path, ref)
		}
		def, ok := root["$defs"].(map[string]any)[name].(map[string]any)
		if !ok {
			return fmt.Errorf("%s: no $defs/%s", path, name)
		}
		return schemaCheck(root, def, v, path)
	}
	if t, ok := s["type"].(string); ok {
		if got := jsonType(v); got != t && !(t == "number" && got == "integer") {
			return fmt.Errorf("%s: %s, want %s", path, got, t)
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			found = found || fmt.Sprint(e) == fmt.Sprint(v)
		}
		if !found {
			return fmt.Errorf("%s: %v not in %v", path, v, enum)
		}
	}
	if str, ok := v.(string); ok {
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", path, str, p)
		}
		if m, ok := s["minLength"].(json.Number); ok {
			if n, _ := m.Int64(); int64(len(str)) < n {
				return fmt.Errorf("%s: shorter than %d", path, n)
			}
		}
	}
	if num, ok := v.(json.Number); ok {
		if m, ok := s["minimum"].(json.Number); ok {
			a, _ := num.Float64()
			b, _ := m.Float64()
			if a < b {
				return fmt.Errorf("%s: %v below %v", path, a, b)
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if it, ok := s["items"].(map[string]any); ok {
			for i, x := range arr {
				if err := schemaCheck(root, it, x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		for _, r := range asStrings(s["required"]) {
			if _, ok := obj[r]; !ok {
				return fmt.Errorf("%s: missing %s", path, r)
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub := path + "." + k
			if ps, ok := props[k].(map[string]any); ok {
				if err := schemaCheck(root, ps, obj[k], sub); err != nil {
					return err
				}
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					return fmt.Errorf("%s: property not in the schema", sub)
				}
			case map[string]any:
				if err := schemaCheck(root, ap, obj[k], sub); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func asStrings(v any) []string {
	var out []string
	xs, _ := v.([]any)
	for _, x := range xs {
		out = append(out, x.(string))
	}
	return out
}

func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

func validateReport(t *testing.T, doc []byte) error {
	t.Helper()
	sb, err := os.ReadFile(reportSchema)
	require.NoError(t, err)
	root := decodeNumbers(t, sb).(map[string]any)
	return schemaCheck(root, root, decodeNumbers(t, doc), "report")
}

// TestReportSchemaAndRoundTrip runs a real selection in the direct sandbox
// (a probe, the loaded filter and docker's pins when the test Engine is
// there), checks that its JSON report validates against the published
// schema with every pin filled, and that it round-trips: unmarshal, marshal,
// byte-equal.
func TestReportSchemaAndRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Runtimes: []string{"direct"}, Required: []string{"direct"}, RootFS: testRootFS,
		Probes: []string{"ctl/python", "filter/"}, Environ: []string{}})
	require.NoError(t, err)
	require.NotEqual(t, Blocked, rep.Runtimes[0].Status, rep.Runtimes[0].Reason)

	var buf bytes.Buffer
	require.NoError(t, rep.WriteJSON(&buf))
	require.NoError(t, validateReport(t, buf.Bytes()))

	p := rep.Pins
	// A test binary carries no dependency list; bin/awf does (see the
	// pinned header in docs/verify.md).
	if bi, ok := debug.ReadBuildInfo(); ok && len(bi.Deps) > 0 {
		assert.Regexp(t, `^v\d+\.\d+`, p.Libcontainer)
	} else {
		assert.Equal(t, "unknown: the build info lists no dependencies (a test binary)", p.Libcontainer)
	}
	for name, v := range map[string]string{"awf": p.AWF, "kernel": p.Kernel, "distribution": p.Distribution,
		"libseccomp": p.Libseccomp, "python": p.Python, "policy": p.Policy.SHA256,
		"canonical": p.Policy.Canonical, "rootfs": p.RootFS.Digest} {
		assert.NotEmpty(t, v, name)
		assert.NotContains(t, v, "unknown:", name)
	}
	// runsc and the Engine are pinned whatever the runtimes: a version, or
	// why there is none, never left out.
	assert.NotEmpty(t, p.Runsc, "runsc")
	assert.NotEmpty(t, p.Docker, "docker_engine")
	if _, err := exec.LookPath("runsc"); err == nil {
		assert.Regexp(t, `^runsc version `, p.Runsc)
	}
	assert.Regexp(t, `^3\.\d+\.\d+`, p.Python)
	assert.Equal(t, "embedded", p.Policy.Source)
	arch, err := policy.NativeArch()
	require.NoError(t, err)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, p.Policy.Filters[arch], "the native filter is pinned")
	assert.Equal(t, []string{"ctl/python", "filter/"}, p.Config.Probes)
	assert.NotZero(t, p.Config.Limits.MemoryBytes)
	assert.NotContains(t, buf.String(), "…", "the JSON report carries whole evidence")

	var back Report
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	var again bytes.Buffer
	require.NoError(t, back.WriteJSON(&again))
	assert.Equal(t, buf.String(), again.String(), "the report round-trips")
}

// TestReportSchemaRejects proves the schema check can fail: a report with a
// pin missing, an unknown field or a bad verdict does not validate.
func TestReportSchemaRejects(t *testing.T) {
	rep := runFake(t, &fakeRuntime{respond: passing}, []string{"ctl/python"})
	var buf bytes.Buffer
	require.NoError(t, rep.WriteJSON(&buf))
	require.NoError(t, validateReport(t, buf.Bytes()), "a fake run's report validates too")
	for name, edit := range map[string]func(m map[string]any){
		"missing pin":   func(m map[string]any) { delete(m["pins"].(map[string]any), "libseccomp") },
		"missing runsc": func(m map[string]any) { delete(m["pins"].(map[string]any), "runsc") },
		"missing docker_engine": func(m map[string]any) {
			delete(m["pins"].(map[string]any), "docker_engine")
		},
		"unknown field": func(m map[string]any) { m["extra"] = true },
		"bad verdict": func(m map[string]any) {
			m["checks"].([]any)[0].(map[string]any)["status"] = "MAYBE"
		},
		"bad filter hash": func(m map[string]any) {
			m["pins"].(map[string]any)["policy"].(map[string]any)["filters"].(map[string]any)["x86_64"] = "sha256:abc"
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := decodeNumbers(t, buf.Bytes()).(map[string]any)
			edit(m)
			b, err := json.Marshal(m)
			require.NoError(t, err)
			assert.Error(t, validateReport(t, b))
		})
	}
}
