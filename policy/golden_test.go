package policy

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// update regenerates policy/testdata from the current compiler output:
//
//	go test ./policy -run Golden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const (
	goldenTable = "testdata/python3.table"
	goldenBPF   = "testdata/python3.bpf.sha256"
)

// goldenBPFText renders the BPF hashes of p per arch, with the libseccomp
// version that produced them.
func goldenBPFText(t *testing.T, p *Policy) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# sha256 of the BPF %s compiles to (before runc's ENOSYS stub)\n", p.Name)
	fmt.Fprintf(&b, "# libseccomp %s\n", LibseccompVersion())
	for _, a := range p.Arches {
		prog, err := p.BPF(a)
		require.NoError(t, err)
		fmt.Fprintf(&b, "%s  %s  %d\n", ProgramSHA256(prog), a, len(prog))
	}
	return b.String()
}

func goldenTableText(t *testing.T, p *Policy) string {
	t.Helper()
	var ts []Table
	for _, a := range p.Arches {
		tb, err := p.Table(a)
		require.NoError(t, err)
		ts = append(ts, tb)
	}
	return Merge(ts...).String()
}

// checkGolden compares the compiled decision table and BPF hashes of p with
// the reviewed files tablePath and bpfPath (or rewrites them under -update),
// the one golden check of every embedded policy; it returns the compiled
// texts by path.
func checkGolden(t *testing.T, p *Policy, tablePath, bpfPath string) map[string]string {
	t.Helper()
	files := map[string]string{
		tablePath: goldenTableText(t, p),
		bpfPath:   goldenBPFText(t, p),
	}
	for path, text := range files {
		if *update {
			require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "missing golden file; run: go test ./policy -run Golden -update")
		if string(want) != text {
			t.Errorf("%s drifted from the compiled %s:\n%s\nreview the change, then run: go test ./policy -run Golden -update",
				filepath.Base(path), p.Name, lineDiff(string(want), text))
		}
	}
	return files
}

// TestGolden fails when the compiled default policy (its decision table or
// its BPF) changes without policy/testdata being updated in the same change.
func TestGolden(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	checkGolden(t, p, goldenTable, goldenBPF)
}

// lineDiff lists lines only in want (-) or only in got (+).
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var out []string
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDeterministic: the same policy compiles to the same bytes every time,
// and rule order in the file does not matter.
func TestDeterministic(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	a := p.Arches[0]
	first, err := p.BPF(a)
	require.NoError(t, err)
	again, err := p.BPF(a)
	require.NoError(t, err)
	require.Equal(t, first, again)

	// Reverse the rules inside every group.
	lines := strings.Split(string(DefaultSource()), "\n")
	var out []string
	var block []string
	flush := func() {
		for i := len(block) - 1; i >= 0; i-- {
			out = append(out, block[i])
		}
		block = nil
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 0 && (f[0] == "allow" || f[0] == "kill" || f[0] == "errno") {
			block = append(block, l)
			continue
		}
		flush()
		out = append(out, l)
	}
	flush()
	q, err := Parse("reversed.policy", []byte(strings.Join(out, "\n")))
	require.NoError(t, err)
	reordered, err := q.BPF(a)
	require.NoError(t, err)
	require.Equal(t, first, reordered)
}
