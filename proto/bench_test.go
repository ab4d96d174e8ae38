package proto_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/awf-project/awf/proto"
)

// cpuClock reports the process's user+system CPU time. On a shared machine
// wall time per op swings with other load; CPU time per op (reported as the
// extra metric cpu-ns/op, GC included) stays put.
func cpuClock(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs op b.N times and reports CPU time per op next to wall time.
func loop(b *testing.B, op func() error) {
	b.ReportAllocs()
	start := cpuClock(b)
	n := 0
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(cpuClock(b)-start)/float64(n), "cpu-ns/op")
}

// benchResult returns a schema and a ~8 KiB conforming result: an array of 64
// objects with a mix of every scalar type, written with whitespace and keys
// out of declaration order so canonicalisation does real work.
func benchResult(tb testing.TB) (*proto.Schema, []byte) {
	tb.Helper()
	schema := `{"type":"array","length":64,"items":{"type":"object","fields":{` +
		`"path":{"type":"enum","values":["src/main.go","src/lib/über.go","docs/README.md","tests/a_test.go"]},` +
		`"lines":{"type":"integer","minimum":0,"maximum":9007199254740991},` +
		`"ok":{"type":"boolean"},` +
		`"kind":{"type":"union","variants":{"none":{"type":"const","value":null},"pair":{"type":"tuple","items":[{"type":"integer","minimum":-100,"maximum":100},{"type":"boolean"}]}}}}}}`
	s, err := proto.ParseSchema([]byte(schema))
	if err != nil {
		tb.Fatal(err)
	}
	paths := []string{`"src/main.go"`, `"src/lib/\u00fcber.go"`, `"docs/README.md"`, `"tests/a_test.go"`}
	var b strings.Builder
	b.WriteString("[\n")
	for i := 0; i < 64; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		kind := `{"tag": "none", "value": null}`
		if i%2 == 1 {
			kind = fmt.Sprintf(`{"value": [%d, %t], "tag": "pair"}`, i-50, i%3 == 0)
		}
		fmt.Fprintf(&b, `  {"ok": %t, "kind": %s, "lines": %d, "path": %s,    "pad": 0}`, i%2 == 0, kind, 1000003*i, paths[i%4])
	}
	b.WriteString("\n]\n")
	// Drop the padding key (it is there to size the text) but keep the spaces.
	out := strings.ReplaceAll(b.String(), `,    "pad": 0`, `          `)
	for len(out) < proto.MaxResultBytes-16 {
		out += " "
	}
	return s, []byte(out)
}

// BenchmarkCheckResult8K measures parse + validate + canonicalise of an
// ~8 KiB /query/out file.
func BenchmarkCheckResult8K(b *testing.B) {
	s, out := benchResult(b)
	if _, err := s.CheckResult(out); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	loop(b, func() error { _, err := s.CheckResult(out); return err })
}

// benchSchema returns a 4076-byte schema text: an object of 16 fields mixing
// enums, integers, tuples, arrays and unions.
func benchSchema(tb testing.TB) []byte {
	tb.Helper()
	var b strings.Builder
	b.WriteString(`{"type":"object","fields":{`)
	for i := 0; i < 16; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"field_%02d":`, i)
		switch i % 4 {
		case 0:
			b.WriteString(`{"type":"enum","values":[`)
			for j := 0; j < 44; j++ {
				if j > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `"value-%02d-%02d"`, i, j)
			}
			b.WriteString(`]}`)
		case 1:
			b.WriteString(`{"type":"tuple","items":[{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991},{"type":"boolean"}]}`)
		case 2:
			b.WriteString(`{"type":"array","length":64,"items":{"type":"integer","minimum":0,"maximum":1000}}`)
		default:
			b.WriteString(`{"type":"union","variants":{"none":{"type":"const","value":null},"some":{"type":"enum","values":[1,2,3,4,5,6,7,8,9,10]}}}`)
		}
	}
	b.WriteString(`}}`)
	if b.Len() < 4000 || b.Len() > proto.MaxSchemaBytes {
		tb.Fatalf("bench schema is %d bytes, want about 4 KiB", b.Len())
	}
	return []byte(b.String())
}

// BenchmarkParseSchema4K measures parse + validate + cardinality/charge of an
// ~4 KiB schema.
func BenchmarkParseSchema4K(b *testing.B) {
	src := benchSchema(b)
	if _, err := proto.ParseSchema(src); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	loop(b, func() error { _, err := proto.ParseSchema(src); return err })
}

// BenchmarkPeerEncodingJSON8K is the side-by-side peer: the standard
// library's encoding/json decoding the same file into any and re-encoding it
// (no strictness, no schema).
func BenchmarkPeerEncodingJSON8K(b *testing.B) {
	_, out := benchResult(b)
	b.SetBytes(int64(len(out)))
	loop(b, func() error {
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			return err
		}
		_, err := json.Marshal(v)
		return err
	})
}

// BenchmarkCheckResult8KTree measures the authoritative tree path alone (the
// path every failing or declined result takes).
func BenchmarkCheckResult8KTree(b *testing.B) {
	s, out := benchResult(b)
	b.SetBytes(int64(len(out)))
	loop(b, func() error { _, _, _, err := s.CheckResultPaths(out); return err })
}

// BenchmarkSideBySide runs, within each iteration, CheckResult, both of its
// paths in full (the cost bound of a declined result), encoding/json on the
// same 8 KiB result, and ParseSchema on the 4 KiB schema, so
// that load from elsewhere on a shared machine hits all of them alike. It
// reports the median wall time of each (µs) and the ratio of encoding/json to
// CheckResult.
func BenchmarkSideBySide(b *testing.B) {
	s, out := benchResult(b)
	src := benchSchema(b)
	variants := []struct {
		name string
		op   func() error
	}{
		{"check-us", func() error { _, err := s.CheckResult(out); return err }},
		{"both-us", func() error { _, _, _, err := s.CheckResultPaths(out); return err }},
		{"schema-us", func() error { _, err := proto.ParseSchema(src); return err }},
		{"encjson-us", func() error {
			var v any
			if err := json.Unmarshal(out, &v); err != nil {
				return err
			}
			_, err := json.Marshal(v)
			return err
		}},
	}
	samples := make([][]float64, len(variants))
	for b.Loop() {
		for i, v := range variants {
			t0 := time.Now()
			if err := v.op(); err != nil {
				b.Fatal(err)
			}
			samples[i] = append(samples[i], float64(time.Since(t0).Nanoseconds())/1e3)
		}
	}
	med := make([]float64, len(variants))
	for i, v := range variants {
		sort.Float64s(samples[i])
		med[i] = samples[i][len(samples[i])/2]
		b.ReportMetric(med[i], v.name)
	}
	b.ReportMetric(med[3]/med[0], "encjson/check")
}
