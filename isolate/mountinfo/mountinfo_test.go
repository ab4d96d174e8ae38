package mountinfo

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		name, line string
		want       Mount
		err        string
	}{
		{"proc(5)'s example", "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
			Mount{ID: 36, Parent: 35, Dev: "98:0", Root: "/mnt1", Point: "/mnt2", Options: []string{"rw", "noatime"},
				Optional: []string{"master:1"}, FSType: "ext3", Source: "/dev/root", Super: []string{"rw", "errors=continue"}}, ""},
		{"no optional fields", "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
			Mount{ID: 41, Parent: 31, Dev: "0:38", Root: "/", Point: "/sys/fs/cgroup/unified", Options: []string{"rw", "relatime"},
				FSType: "cgroup2", Source: "cgroup2", Super: []string{"rw"}}, ""},
		{"escaped paths", `50 1 0:40 /a\134b /mnt/a\040b\011c rw shared:2 master:3 - tmpfs my\040src rw`,
			Mount{ID: 50, Parent: 1, Dev: "0:40", Root: `/a\b`, Point: "/mnt/a b\tc", Options: []string{"rw"},
				Optional: []string{"shared:2", "master:3"}, FSType: "tmpfs", Source: "my src", Super: []string{"rw"}}, ""},
		{"empty source", "50 1 0:40 / /x rw - tmpfs  rw",
			Mount{ID: 50, Parent: 1, Dev: "0:40", Root: "/", Point: "/x", Options: []string{"rw"}, FSType: "tmpfs", Super: []string{"rw"}}, ""},
		{"a dash as the root is not the separator", "50 1 0:40 - /x rw - tmpfs t rw",
			Mount{ID: 50, Parent: 1, Dev: "0:40", Root: "-", Point: "/x", Options: []string{"rw"}, FSType: "tmpfs", Source: "t", Super: []string{"rw"}}, ""},
		{"no separator", "41 31 0:38 / /x rw shared:1 cgroup2 cgroup2 rw", Mount{}, "not id parent"},
		{"short", "41 31 0:38 / - cgroup2", Mount{}, "not id parent"},
		{"an option with a raw space", "41 31 0:38 / /x rw - fuse f rw,label=a b",
			Mount{ID: 41, Parent: 31, Dev: "0:38", Root: "/", Point: "/x", Options: []string{"rw"}, FSType: "fuse", Source: "f", Super: []string{"rw", "label=a b"}}, ""},
		{"double space", "41 31 0:38 /  /x rw - tmpfs t rw", Mount{}, "field 5 is empty"},
		{"empty options before optional fields", "41 31 0:38 / /x  rw - tmpfs t rw", Mount{}, "field 6 is empty"},
		{"empty options", "41 31 0:38 / /x  - tmpfs t rw", Mount{}, "field 6 is empty"},
		{"signed id", "+41 31 0:38 / /x rw - tmpfs t rw", Mount{}, "mount id"},
		{"huge parent", "41 99999999999999999999 0:38 / /x rw - tmpfs t rw", Mount{}, "parent id"},
		{"empty", "", Mount{}, "not id parent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseLine(tc.line)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, m)
			again, err := ParseLine(m.String())
			require.NoError(t, err)
			assert.Equal(t, m, again, "rendered %q", m.String())
		})
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b/c`: "/a b/c",
		"/plain":    "/plain",
		`\134`:      `\`,
		`/x\04`:     `/x\04`,  // too short
		`/x\400`:    `/x\400`, // not a byte
		`/x\08a`:    `/x\08a`, // not octal
		`\040\040`:  "  ",
		`a\`:        `a\`,
	} {
		assert.Equal(t, want, Unescape(in), in)
	}
}

func TestParseRefusesAMalformedLine(t *testing.T) {
	_, err := Parse(strings.NewReader("36 35 98:0 / /a rw - ext3 /dev/root rw\n\nbroken line\n"))
	require.ErrorContains(t, err, "line 3")
	ms, err := Parse(strings.NewReader("36 35 98:0 / /a rw - ext3 /dev/root rw\n\n37 36 0:1 / /a/b rw - tmpfs t rw\n"))
	require.NoError(t, err)
	require.Len(t, ms, 2)
	assert.True(t, ms[1].Below("/a"))
	assert.True(t, ms[1].Below("/a/"))
	assert.True(t, ms[1].Below("/a/b"))
	assert.False(t, ms[1].Below("/a/b/c"))
	assert.False(t, ms[0].Below("/a/b"))
	assert.False(t, Mount{Point: "/ab"}.Below("/a"))
}

// TestReadThisHost: the kernel's own tables parse, and name the root.
func TestReadThisHost(t *testing.T) {
	for _, p := range []string{Self, Thread} {
		ms, err := Read(p)
		require.NoError(t, err, p)
		var root bool
		for _, m := range ms {
			root = root || m.Point == "/"
		}
		assert.True(t, root, "%s names no mount at /", p)
	}
	_, err := Read("/proc/self/no-such-table")
	require.ErrorIs(t, err, os.ErrNotExist)
}

// FuzzParseLine: whatever is accepted renders back to a line that parses
// to the same mount, and the line's shape holds.
func FuzzParseLine(f *testing.F) {
	f.Add("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue")
	f.Add(`50 1 0:40 /a\134b /mnt/a\040b rw shared:2 - tmpfs  rw`)
	f.Add("1 2 3 4 5 6 - a b c")
	f.Fuzz(func(t *testing.T, line string) {
		m, err := ParseLine(line)
		if err != nil {
			return
		}
		if m.ID < 0 || m.Parent < 0 || m.Point == "" || m.FSType == "" || len(m.Super) == 0 {
			t.Fatalf("%q: %+v", line, m)
		}
		again, err := ParseLine(m.String())
		if err != nil {
			t.Fatalf("%q renders as %q, which does not parse: %v", line, m.String(), err)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("%q: %+v renders as %q, read back as %+v", line, m, m.String(), again)
		}
	})
}
