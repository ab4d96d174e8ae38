package policy

import (
	"testing"
)

// FuzzParse: the parser never panics, and whatever it accepts renders to a
// canonical text that parses back to the same policy. Seeds live in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	// The 20 KiB default policy is parsed by the tests; as a seed it would make
	// minimisation slow, so the seeds are small files.
	f.Add([]byte(header + "allow read : reading\n"))
	f.Add([]byte(header + "allow ioctl if arg1 & 0xffffffff in {TCGETS, FIONREAD} +sensitive : tty\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse("fuzz.policy", src)
		_ = Lint("fuzz.policy", src)
		if err != nil {
			return
		}
		q, err := Parse("canonical.policy", []byte(p.Canonical()))
		if err != nil {
			t.Fatalf("canonical text does not parse: %v\n%s", err, p.Canonical())
		}
		if q.Canonical() != p.Canonical() {
			t.Fatalf("canonical text is not stable:\n%s\n---\n%s", p.Canonical(), q.Canonical())
		}
	})
}
