package staging

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzValidateRef checks that an accepted ref can never be read as an option,
// a refspec, a revision expression or a path escape.
func FuzzValidateRef(f *testing.F) {
	for _, s := range []string{"main", "release/1.2", "v1.0", "-x", "a:b", "a..b", "@{-1}", strings.Repeat("a", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		if ValidateRef(ref) != nil {
			return
		}
		require.NotEmpty(t, ref)
		require.NotEqual(t, byte('-'), ref[0])
		require.False(t, strings.ContainsAny(ref, ":^~*?[\\ @{}+\x00\n"), ref)
		require.NotContains(t, ref, "..")
	})
}

// FuzzValidateSlug checks that an accepted slug normalizes to a safe URL path
// segment pair and a 32-hex seed id.
func FuzzValidateSlug(f *testing.F) {
	for _, s := range []string{"acme/w", " A/b ", "a/..", "a/b/c", "-a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, slug string) {
		if ValidateSlug(slug) != nil {
			return
		}
		n := NormalizeSlug(slug)
		require.Equal(t, 1, strings.Count(n, "/"))
		owner, name, _ := strings.Cut(n, "/")
		require.NotEqual(t, "..", name)
		require.NotEqual(t, ".", name)
		require.NotEmpty(t, owner)
		require.Len(t, SeedID(testRunID, n), 32)
		require.False(t, strings.ContainsAny(n, "\x00\n\t %?#:@"), n)
	})
}

// FuzzResolveSource checks that an accepted source is a credential-free https
// (or loopback http) URL, or a clean absolute local path.
func FuzzResolveSource(f *testing.F) {
	for _, s := range []string{"", "https://example.com/a.git", "https://u:p@x/a", "/srv/x", "ext::sh", "http://127.0.0.1:1/x", "http://example.com/x"} {
		f.Add(s, "")
	}
	f.Add("", "https://ghe.example.com")
	f.Fuzz(func(t *testing.T, source, server string) {
		got, kind, err := resolveSource(Repo{Slug: "acme/w", Source: source}, server)
		if err != nil {
			return
		}
		if kind == sourceLocal {
			require.True(t, filepath.IsAbs(got))
			require.Equal(t, filepath.Clean(got), got)
			return
		}
		u, err := url.Parse(got)
		require.NoError(t, err)
		require.Nil(t, u.User)
		require.Empty(t, u.RawQuery)
		require.Empty(t, u.Fragment)
		require.True(t, u.Scheme == "https" || u.Scheme == "http" && isLoopbackHost(u.Hostname()), got)
		require.False(t, strings.HasPrefix(got, "-"))
	})
}

// FuzzTreeChecker feeds arbitrary ls-tree output in arbitrary chunks: it never
// panics, and a gitlink record is always caught.
func FuzzTreeChecker(f *testing.F) {
	f.Add([]byte("100644 blob abc\tREADME\x00160000 commit def\tvendor/x\x00"), 3)
	f.Add([]byte("100644 blob abc\tsub/.gitmodules\x00"), 1)
	f.Add([]byte("garbage"), 2)
	f.Fuzz(func(t *testing.T, b []byte, chunk int) {
		if chunk <= 0 {
			chunk = 1
		}
		var tc treeChecker
		for i := 0; i < len(b); i += chunk {
			if _, err := tc.Write(b[i:min(len(b), i+chunk)]); err != nil {
				return
			}
		}
		for _, rec := range strings.Split(string(b), "\x00") {
			if strings.HasPrefix(rec, "160000 ") && strings.Contains(rec, "\t") && strings.Contains(string(b), rec+"\x00") {
				require.Error(t, tc.err, "gitlink %q missed", rec)
			}
		}
	})
}
