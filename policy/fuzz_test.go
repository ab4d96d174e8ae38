package policy

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// FuzzDecodeFilter: decoding an arbitrary program (as read from a live
// process) never panics; it either fails or yields a sorted table whose rows
// agree with direct evaluation.
func FuzzDecodeFilter(f *testing.F) {
	f.Add(EncodeProgram([]unix.SockFilter{{Code: bpfRET | bpfK, K: retAllow}}))
	f.Add(EncodeProgram([]unix.SockFilter{
		{Code: bpfLD | bpfW | bpfABS, K: 0}, {Code: bpfJMP | bpfJEQ | bpfK, Jt: 0, Jf: 1, K: 16},
		{Code: bpfLD | bpfW | bpfABS, K: 24}, {Code: bpfJMP | bpfJEQ | bpfK, Jt: 0, Jf: 1, K: 0x5401},
		{Code: bpfRET | bpfK, K: retAllow}, {Code: bpfRET | bpfK, K: retKillProcess}}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 8*64 {
			return // keep each run short; real filters are covered by the tests
		}
		prog, err := DecodeProgram(raw)
		if err != nil {
			return
		}
		tb, err := DecodeFilter("x86_64", prog)
		if err != nil {
			return
		}
		for _, r := range tb.Rows {
			if r.Case != "" || r.Syscall == compatSyscall {
				continue
			}
			got, err := Evaluate(prog, "x86_64", r.Nr, [6]uint64{})
			if err != nil {
				t.Fatal(err)
			}
			if got != r.Action {
				t.Fatalf("row %v but evaluation says %s", r, got)
			}
		}
	})
}

// fuzzImport is the shared body of the import fuzz targets: decoding never
// panics; an accepted profile yields a draft that names its arches, and
// small profiles compile without panicking on each of them.
func fuzzImport(t *testing.T, decode func(string, []byte) (*Imported, error), raw []byte) {
	im, err := decode("fuzz.json", raw)
	if err != nil {
		return
	}
	d := im.Draft()
	if !strings.Contains(d, "arch "+strings.Join(im.Arches, " ")+"\n") {
		t.Fatalf("draft does not name its arches %v:\n%s", im.Arches, d)
	}
	_ = Lint("draft.policy", []byte(d))
	if len(raw) > 2048 {
		return // keep each run short; the default profile is covered by the tests
	}
	for _, a := range im.Arches {
		// An error is fine (libseccomp refuses a rule, or the table would
		// need more argument paths than the decoder explores); a panic is not.
		_, _ = im.Table(a)
	}
}

// FuzzImportDocker: the Docker profile decoder. Seeds live in
// testdata/fuzz/FuzzImportDocker.
func FuzzImportDocker(f *testing.F) {
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_ERRNO","archMap":[{"architecture":"SCMP_ARCH_X86_64","subArchitectures":["SCMP_ARCH_X86"]}],"syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[]}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) { fuzzImport(t, ImportDocker, raw) })
}

// FuzzImportOCI: the OCI seccomp decoder (bare section or config.json).
// Seeds live in testdata/fuzz/FuzzImportOCI.
func FuzzImportOCI(f *testing.F) {
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_KILL_PROCESS","architectures":["SCMP_ARCH_X86_64"],"syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) { fuzzImport(t, ImportOCI, raw) })
}
