package staging

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidateSlug(t *testing.T) {
	for _, s := range []string{"acme/widgets", "A-1/x.y_z-", "a/" + strings.Repeat("n", 100), strings.Repeat("o", 39) + "/r", "a/.github"} {
		assert.NoError(t, ValidateSlug(s), s)
	}
	for _, s := range []string{"", "acme", "/x", "acme/", "-acme/x", "acme-/x", "ac_me/x", "acme/x/y", "acme/.",
		"acme/..", "acme/a b", "a/" + strings.Repeat("n", 101), strings.Repeat("o", 40) + "/r", "acme/x\ny", "acme/é",
		" acme/w ", "o--x/r", "o/a..b"} {
		assert.Error(t, ValidateSlug(s), "%q", s)
	}
}

func TestValidateRef(t *testing.T) {
	for _, r := range []string{"main", "release/1.2", "v1.0.0", "feature-x_y", strings.Repeat("a", 40)} {
		assert.NoError(t, ValidateRef(r), r)
	}
	for _, r := range []string{"", "-x", "--upload-pack=x", "/main", "main/", "a..b", "a//b", "a/.b", ".hidden",
		"x.lock", "x.", "HEAD", "FETCH_HEAD", "a:b", "+main", "main^", "main~1", "a b", "a*", "a?", "a[", "a\\b",
		"@{-1}", "a@{1}", strings.Repeat("a", 256)} {
		assert.Error(t, ValidateRef(r), "%q", r)
	}
}

func TestResolveSource(t *testing.T) {
	for _, tc := range []struct {
		repo   Repo
		server string
		want   string
		kind   sourceKind
	}{
		{Repo{Slug: "Acme/W"}, "", "https://github.com/acme/w.git", sourceRemote},
		{Repo{Slug: "acme/w"}, "https://ghe.example.com/", "https://ghe.example.com/acme/w.git", sourceRemote},
		{Repo{Slug: "acme/w"}, "http://127.0.0.1:8080", "http://127.0.0.1:8080/acme/w.git", sourceRemote},
		{Repo{Slug: "acme/w"}, "http://[::1]:8080", "http://[::1]:8080/acme/w.git", sourceRemote},
		{Repo{Slug: "acme/w", Source: "https://git.example.com/x/y.git"}, "", "https://git.example.com/x/y.git", sourceRemote},
		{Repo{Slug: "acme/w", Source: "/srv/mirrors/acme/w"}, "", "/srv/mirrors/acme/w", sourceLocal},
	} {
		got, kind, err := resolveSource(tc.repo, tc.server)
		if assert.NoError(t, err, "%+v", tc.repo) {
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.kind, kind)
		}
	}
	for _, tc := range []struct {
		repo   Repo
		server string
	}{
		{Repo{Slug: "acme/w"}, "http://example.com"},
		{Repo{Slug: "acme/w"}, "https://user:pw@github.com"},
		{Repo{Slug: "acme/w"}, "https://github.com?x=1"},
		{Repo{Slug: "acme/w"}, "file:///srv"},
		{Repo{Slug: "acme/w", Source: "git://example.com/x.git"}, ""},
		{Repo{Slug: "acme/w", Source: "ssh://example.com/x.git"}, ""},
		{Repo{Slug: "acme/w", Source: "git@example.com:x.git"}, ""},
		{Repo{Slug: "acme/w", Source: "ext::sh -c id"}, ""},
		{Repo{Slug: "acme/w", Source: "file:///srv/x"}, ""},
		{Repo{Slug: "acme/w", Source: "https://example.com/"}, ""},
		{Repo{Slug: "acme/w", Source: "https://example.com/x#frag"}, ""},
		{Repo{Slug: "acme/w", Source: "https://example.com/a/../b"}, ""},
		{Repo{Slug: "acme/w", Source: "/srv/../etc"}, ""},
		{Repo{Slug: "acme/w", Source: "/srv/x/"}, ""},
		{Repo{Slug: "acme/w", Source: "relative/path"}, ""},
		{Repo{Slug: "acme/w", Source: "-uhttps://x"}, ""},
	} {
		_, _, err := resolveSource(tc.repo, tc.server)
		if assert.Error(t, err, "%+v %s", tc.repo, tc.server) {
			assert.NotContains(t, err.Error(), "pw@")
		}
	}
}

func TestResolveToken(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	assert.Equal(t, "gh", ResolveToken(env(map[string]string{"GH_TOKEN": "gh", "GITHUB_TOKEN": "github"})))
	assert.Equal(t, "github", ResolveToken(env(map[string]string{"GH_TOKEN": "  ", "GITHUB_TOKEN": " github\n"})))
	assert.Equal(t, "", ResolveToken(env(nil)))
}
