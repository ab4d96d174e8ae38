package host

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShimArgsOptions(t *testing.T) {
	full := ShimArgs{UID: 1000, GID: 1000, PrivateBase: "/p", IngressBase: "/i", IngressRoot: "/i/r",
		Hide: []string{"/src", "/run/docker.sock"}, Network: NetworkNone, Cgroups: []string{"/sys/fs/cgroup/freezer/awf/a", "/sys/fs/cgroup/unified/awf/a"}}
	for _, a := range []ShimArgs{
		full,
		{UID: 1, GID: 2, PrivateBase: "/p", IngressBase: "/i"},
		{UID: 1, GID: 2, PrivateBase: "/p", IngressBase: "/i", Network: NetworkHost},
		{UID: 1, GID: 2, PrivateBase: "/p", IngressBase: "/i", Cgroups: []string{"/sys/fs/cgroup/a"}},
	} {
		got, err := ParseShimArgs(a.Argv())
		require.NoError(t, err, a.Argv())
		assert.Equal(t, a, got)
	}
	// Without the new options, the command line is the one awf run's
	// agentShim has always split at index 5.
	assert.Len(t, ShimArgs{UID: 1, GID: 1, PrivateBase: "/p", IngressBase: "/i"}.Argv(), 5)

	base := []string{"1000", "1000", "/p", "/i", "/i/r"}
	for _, tc := range []struct {
		name string
		opts []string
		want string
	}{
		{"relative hide", []string{"--hide=src"}, "not an absolute clean path"},
		{"unclean hide", []string{"--hide=/a/../b"}, "not an absolute clean path"},
		{"trailing slash", []string{"--hide=/a/"}, "not an absolute clean path"},
		{"empty hide", []string{"--hide="}, "not an absolute clean path"},
		{"unknown network", []string{"--network=bridge"}, "want"},
		{"empty network", []string{"--network="}, "want"},
		{"two networks", []string{"--network=none", "--network=host"}, "unexpected"},
		{"hide after network", []string{"--network=none", "--hide=/a"}, "unexpected"},
		{"hide after cgroup", []string{"--cgroup=/sys/fs/cgroup/a", "--hide=/a"}, "unexpected"},
		{"network after cgroup", []string{"--cgroup=/sys/fs/cgroup/a", "--network=none"}, "unexpected"},
		{"relative cgroup", []string{"--cgroup=a"}, "not an absolute clean path"},
		{"unknown option", []string{"--hidden=/a"}, "unexpected"},
		{"bare word", []string{"/a"}, "unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseShimArgs(append(append([]string(nil), base...), tc.opts...))
			assert.ErrorContains(t, err, tc.want)
		})
	}
	for _, v := range [][]string{
		{"1000", "1000", "/p", "/i"},
		{"+1000", "1000", "/p", "/i", ""},
		{"01000", "1000", "/p", "/i", ""},
		{"1000", "0", "/p", "/i", ""},
		{"1000", "1000", "/p", "/i", "r"},
	} {
		_, err := ParseShimArgs(v)
		assert.Error(t, err, v)
	}
}

func TestParseShimCommand(t *testing.T) {
	a := ShimArgs{UID: 1, GID: 1, PrivateBase: "/p", IngressBase: "/i", Hide: []string{"/s"}, Network: NetworkNone}
	got, argv, err := ParseShimCommand(append(a.Argv(), "--", "sh", "-c", "--"))
	require.NoError(t, err)
	assert.Equal(t, a, got)
	assert.Equal(t, []string{"sh", "-c", "--"}, argv)
	_, _, err = ParseShimCommand(a.Argv())
	assert.ErrorContains(t, err, "no --")
	_, _, err = ParseShimCommand(append(a.Argv(), "--"))
	assert.ErrorContains(t, err, "no command")
	_, _, err = ParseShimCommand([]string{"--", "sh"})
	assert.Error(t, err)
}

// FuzzParseShimArgs: the parser never panics, and whatever it accepts
// renders back to arguments that parse to the same value, every path in
// it absolute. The input is the argument list joined with NUL bytes, which
// no argument can hold.
func FuzzParseShimArgs(f *testing.F) {
	for _, a := range []ShimArgs{
		{UID: 1000, GID: 1000, PrivateBase: "/var/lib/awf/private", IngressBase: "/run/awf-ingress", IngressRoot: "/run/awf-ingress/0123"},
		{UID: 1000, GID: 1000, PrivateBase: "/p", IngressBase: "/i", Hide: []string{"/src", "/run/docker.sock"}, Network: NetworkNone, Cgroups: []string{"/sys/fs/cgroup/freezer/awf/a"}},
	} {
		f.Add(strings.Join(a.Argv(), "\x00"))
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseShimArgs(strings.Split(s, "\x00"))
		if err != nil {
			return
		}
		if a.UID <= 0 || a.GID <= 0 {
			t.Fatalf("accepted ids %d/%d", a.UID, a.GID)
		}
		for _, p := range append(append([]string{a.PrivateBase, a.IngressBase}, a.Hide...), a.Cgroups...) {
			if !strings.HasPrefix(p, "/") {
				t.Fatalf("accepted relative path %q", p)
			}
		}
		if a.Network != "" && a.Network != NetworkHost && a.Network != NetworkNone {
			t.Fatalf("accepted network %q", a.Network)
		}
		b, err := ParseShimArgs(a.Argv())
		if err != nil {
			t.Fatalf("Argv of an accepted value does not parse: %v", err)
		}
		if strings.Join(b.Argv(), "\x00") != strings.Join(a.Argv(), "\x00") {
			t.Fatalf("round trip differs: %q then %q", a.Argv(), b.Argv())
		}
	})
}
