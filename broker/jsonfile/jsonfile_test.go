package jsonfile

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failWriter fails every write and counts closes.
type failWriter struct{ closed int }

func (w *failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
func (w *failWriter) Close() error              { w.closed++; return nil }

func TestLogAppendsWholeLines(t *testing.T) {
	var b strings.Builder
	l := NewLog(&b, "awf test")
	done := make(chan struct{})
	for i := 0; i < 16; i++ {
		go func() {
			l.Append(map[string]any{"k": strings.Repeat("x", 100)})
			done <- struct{}{}
		}()
	}
	for i := 0; i < 16; i++ {
		<-done
	}
	l.Append(func() {}) // does not marshal: dropped
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 16)
	for _, line := range lines {
		assert.Equal(t, `{"k":"`+strings.Repeat("x", 100)+`"}`, line)
	}
	assert.NoError(t, l.Close(), "a writer that is no Closer")

	w := &failWriter{}
	l = NewLog(w, "awf test")
	l.Append("x") // reported on stderr, not to the caller
	require.NoError(t, l.Close())
	assert.Equal(t, 1, w.closed)
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"short", "abc", 5, "abc"},
		{"exact", "abcde", 5, "abcde"},
		{"cut", "abcdef", 3, "abc"},
		{"on a rune boundary", "aé", 2, "a"},
		{"whole rune", "aéb", 3, "aé"},
		{"short invalid kept", "a\xff", 5, "a\xff"},
		{"invalid byte early empties the prefix", "\xffabc", 3, ""},
		{"zero", "abc", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Clip(tc.in, tc.n))
		})
	}
}
