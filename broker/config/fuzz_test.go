package config

import (
	"testing"
)

// FuzzLoad checks that the loader never panics and that it accepts exactly
// the documents the published schema accepts.
func FuzzLoad(f *testing.F) {
	fuzzLoaderAndSchema(f, configCases)
}

// fuzzLoaderAndSchema seeds f with the cases' documents and checks on every
// input that the loader does not panic, refuses what does not decode, and
// accepts exactly what the schema accepts.
func fuzzLoaderAndSchema(f *testing.F, cases []schemaCase) {
	for _, tc := range cases {
		f.Add([]byte(tc.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, lerr := Load(doc)
		if _, derr := DecodeJSON(doc); derr != nil {
			if lerr == nil {
				t.Fatalf("loader accepted undecodable %q", doc)
			}
			return
		}
		serr := checkSchema(t, doc)
		if (lerr == nil) != (serr == nil) {
			t.Fatalf("loader and schema disagree on %q: loader=%v schema=%v", doc, lerr, serr)
		}
	})
}
