package agentcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate/verify"
)

func TestParseStat(t *testing.T) {
	fields := strings.Repeat("0 ", 17) // fields 5..21
	cases := []struct {
		line  string
		comm  string
		start uint64
		ok    bool
	}{
		{"42 (awf) S 1 " + fields + "12345 99", "awf", 12345, true},
		{"7 (a b) c)) R 1 " + fields + "77 1", "a b) c)", 77, true},
		{"7 (short) R 1 2", "", 0, false},
		{"no parens", "", 0, false},
	}
	for _, c := range cases {
		comm, start, ok := parseStat(c.line)
		assert.Equal(t, c.ok, ok, c.line)
		assert.Equal(t, c.comm, comm, c.line)
		assert.Equal(t, c.start, start, c.line)
	}
	b, err := os.ReadFile("/proc/self/stat")
	require.NoError(t, err)
	_, start, ok := parseStat(string(b))
	assert.True(t, ok)
	assert.NotZero(t, start)
}

func TestForkDelta(t *testing.T) {
	d, ok := forkDelta([]byte("cpu 1 2\nprocesses 100\n"), []byte("cpu 3 4\nprocesses 1105\n"))
	assert.True(t, ok)
	assert.Equal(t, int64(1005), d)
	_, ok = forkDelta([]byte("cpu 1\n"), []byte("processes 3\n"))
	assert.False(t, ok)
}

func TestWatcherSeesTheReadyLineAcrossWrites(t *testing.T) {
	w := newWatcher(readyLine)
	for _, chunk := range []string{"noise\nAWF-AGENT", "CHECK re", "ady\nmore\n"} {
		_, err := w.Write([]byte(chunk))
		require.NoError(t, err)
	}
	select {
	case <-w.ready:
	default:
		t.Fatal("the ready line was split over writes and missed")
	}
	assert.Contains(t, w.text(), "more")
	// A line that only starts like it is not it.
	w2 := newWatcher(readyLine)
	_, _ = w2.Write([]byte(readyLine + " not\n"))
	select {
	case <-w2.ready:
		t.Fatal("a longer line counted as the ready line")
	default:
	}
}

// TestProbeHidden: only absence passes; a file kept by its mode fails.
func TestProbeHidden(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(f, []byte("x"), 0o644))
	s, ev := probeHidden(f)
	assert.Equal(t, verify.Fail, s, ev)
	s, ev = probeHidden(filepath.Join(dir, "absent"))
	assert.Equal(t, verify.Pass, s, ev)
}

func TestProbeCredentials(t *testing.T) {
	s, ev := probeCredentials([]string{"PATH=/bin", "HOME=/"}, plantedCredentials)
	assert.Equal(t, verify.Pass, s, ev)
	s, ev = probeCredentials([]string{"PATH=/bin", "BAR_SECRET=x"}, plantedCredentials)
	assert.Equal(t, verify.Fail, s, ev)
	assert.Contains(t, ev, "BAR_SECRET")
	assert.NotContains(t, ev, "=x")
	s, _ = probeCredentials([]string{"FOO_API_KEY=x"}, plantedCredentials)
	assert.Equal(t, verify.Fail, s)
}

func TestCatalogueIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Catalogue() {
		assert.True(t, strings.HasPrefix(p.ID, "agent/"), p.ID)
		assert.False(t, seen[p.ID], "duplicate %s", p.ID)
		seen[p.ID] = true
		assert.NotEmpty(t, p.Title, p.ID)
		assert.NotEmpty(t, p.OnFail, p.ID)
	}
	fx := &fixture{}
	for _, h := range fx.hidden() {
		assert.True(t, seen[h.ID], "hidden probe %s is not in the catalogue", h.ID)
	}
}

// TestDocsListEveryAgentProbe keeps the --agent section of docs/verify.md
// in step with the catalogue.
func TestDocsListEveryAgentProbe(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "verify.md"))
	require.NoError(t, err)
	doc := string(b)
	i := strings.Index(doc, "## `awf isolate verify --agent`")
	require.GreaterOrEqual(t, i, 0, "docs/verify.md must have a section for --agent")
	section := doc[i:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	for _, p := range catalogue {
		assert.Contains(t, section, "`"+p.ID+"`", "the --agent section of docs/verify.md must explain %s", p.ID)
	}
}
