package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzLoadYAML checks that the YAML loader never panics, that every refusal
// is a *YAMLError, and that a YAML document means exactly what its JSON
// translation means: LoadYAML accepts it if and only if Load accepts the
// translation (and so, by FuzzLoad, the published schema does), with the
// same Config and the same problems.
func FuzzLoadYAML(f *testing.F) {
	for _, tc := range yamlPairs {
		f.Add([]byte(tc.yaml))
		f.Add([]byte(tc.json))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := LoadYAML(doc)
		var ye *YAMLError
		if err != nil && (!errors.As(err, &ye) || len(ye.Problems) == 0) {
			t.Fatalf("LoadYAML(%q): %v is not a *YAMLError with problems", doc, err)
		}
		tree, derr := DecodeYAML(doc)
		if derr != nil {
			if err == nil {
				t.Fatalf("LoadYAML accepted %q, which DecodeYAML refuses: %v", doc, derr)
			}
			return
		}
		js, merr := json.Marshal(tree)
		if merr != nil {
			t.Fatalf("the tree of %q has no JSON form: %v", doc, merr)
		}
		if len(js) > MaxConfigBytes {
			return
		}
		jc, jerr := Load(js)
		if (err == nil) != (jerr == nil) {
			t.Fatalf("YAML and its JSON translation disagree on %q (%s): yaml=%v json=%v", doc, js, err, jerr)
		}
		if err == nil {
			if !reflect.DeepEqual(c, jc) {
				t.Fatalf("YAML %q and JSON %s load differently:\n%#v\n%#v", doc, js, c, jc)
			}
		} else if got, want := problemsWithoutPositions(ye), jerr.Error(); got != want {
			t.Fatalf("YAML %q and JSON %s have different problems:\n%s\n%s", doc, js, got, want)
		}
		if serr := checkSchema(t, js); (serr == nil) != (err == nil) {
			t.Fatalf("YAML loader and schema disagree on %q: loader=%v schema=%v", doc, err, serr)
		}
	})
}

func problemsWithoutPositions(e *YAMLError) string {
	s := ""
	for i, p := range problemTexts(e) {
		if i > 0 {
			s += "; "
		}
		s += p
	}
	return "config: " + s
}

// BenchmarkLoadYAML measures a typical configuration and the worst case the
// size cap allows: one line of 1 MiB holding a quarter of a million values.
func BenchmarkLoadYAML(b *testing.B) {
	typical := []byte(yamlPairs[1].yaml)
	long := []byte("$schema: [" + strings.Repeat("1,", (MaxConfigBytes-16)/2) + "1]\n")
	for _, bc := range []struct {
		name string
		doc  []byte
	}{{"typical", typical}, {"one-line-1MiB", long}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.doc)))
			for b.Loop() {
				if _, err := DecodeYAML(bc.doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
