package agentloop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// confinedSeed is a seed with every way out a model might try: symbolic
// links to the host (file and directory), a relative link climbing out, a
// link to /proc magic links, a FIFO, a sparse huge file, and a directory
// of many entries. Next to it lies a secret the tools must never read.
func confinedSeed(t *testing.T) (string, string) {
	t.Helper()
	base := t.TempDir()
	seed := filepath.Join(base, "seed")
	secret := filepath.Join(base, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("TOP-SECRET-OUTSIDE\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(seed, "src", "deep"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "src", "main.go"), []byte("package main\n// needle here\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "src", "deep", "x.txt"), []byte("one\ntwo needle\n"), 0o644))
	for name, target := range map[string]string{
		"etc-link":    "/etc",
		"passwd-link": "/etc/passwd",
		"up-link":     "../secret.txt",
		"src/up-dir":  "../..",
		"proc-self":   "/proc/self",
		"in-link":     "src/main.go", // even a link inside the seed is not followed
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(seed, name)))
	}
	require.NoError(t, syscall.Mkfifo(filepath.Join(seed, "fifo"), 0o644))
	huge, err := os.Create(filepath.Join(seed, "huge.bin"))
	require.NoError(t, err)
	_, err = huge.WriteString("needle at the start\n")
	require.NoError(t, err)
	require.NoError(t, huge.Truncate(4<<30)) // sparse: 4 GiB, no disk
	require.NoError(t, huge.Close())
	late, err := os.Create(filepath.Join(seed, "late.txt"))
	require.NoError(t, err)
	_, err = late.WriteString(strings.Repeat("a", MaxReadBytes) + "needle")
	require.NoError(t, err)
	require.NoError(t, late.Close())
	return seed, secret
}

func TestToolConfinement(t *testing.T) {
	forSeedModes(t, func(t *testing.T, repo *Repo, seed string) {
		ctx := context.Background()
		cases := []struct {
			name, path, want string
		}{
			{"dot-dot", "../secret.txt", "leaves the repository"},
			{"dot-dot inside a path", "src/../../secret.txt", "leaves the repository"},
			{"dot-dot that stays inside still cannot climb", "src/deep/../../../secret.txt", "leaves the repository"},
			{"symlink to a host file", "passwd-link", "symbolic link"},
			{"symlink to a host directory", "etc-link/passwd", "symbolic link"},
			{"relative symlink out", "up-link", "symbolic link"},
			{"symlinked directory out", "src/up-dir/secret.txt", "symbolic link"},
			{"symlink inside the seed", "in-link", "symbolic link"},
			{"a link to /proc", "proc-self/environ", "symbolic link"},
			{"absolute path names the seed root", "/etc/passwd", "no such file"},
			{"absolute path with dot-dot", "/../secret.txt", "leaves the repository"},
			{"a FIFO is not read (and does not block)", "fifo", "not a regular file"},
			{"a directory is not a file", "src", "not a regular file"},
			{"NUL byte", "src/main.go\x00x", "NUL"},
			{"too long", strings.Repeat("a/", MaxPathBytes), "longer than"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := repo.ReadFile(ctx, c.path)
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.want)
				var te *toolError
				assert.ErrorAs(t, err, &te, "a tool error, shown to the model")
				assert.NotContains(t, err.Error(), seed, "errors never name the host path")
			})
		}
		t.Run("absolute path reads the seed", func(t *testing.T) {
			s, err := repo.ReadFile(ctx, "/src/main.go")
			require.NoError(t, err)
			assert.Equal(t, "package main\n// needle here\n", s)
		})
		t.Run("list_files refuses the same escapes", func(t *testing.T) {
			for _, p := range []string{"..", "etc-link", "src/up-dir", "proc-self", "/..", "src/../.."} {
				_, err := repo.ListFiles(ctx, p)
				assert.Error(t, err, p)
			}
		})
		t.Run("search refuses the same escapes", func(t *testing.T) {
			for _, p := range []string{"..", "etc-link", "src/up-dir", "proc-self"} {
				_, err := repo.Search(ctx, "root", p)
				assert.Error(t, err, p)
			}
		})
		t.Run("search does not follow links", func(t *testing.T) {
			s, err := repo.Search(ctx, "TOP-SECRET", ".")
			require.NoError(t, err)
			assert.Equal(t, "(no matches)\n", s)
			s, err = repo.Search(ctx, "root:", ".")
			require.NoError(t, err)
			assert.Equal(t, "(no matches)\n", s, "not /etc/passwd through etc-link or passwd-link")
		})
	})
}

// TestToolMagicLinks: a seed that is itself /proc/self still cannot be
// walked through its magic links.
func TestToolMagicLinks(t *testing.T) {
	forModes(t, func(t *testing.T, walk bool) {
		repo, err := openMode(t, "/proc/self", walk)
		require.NoError(t, err)
		defer repo.Close()
		for _, p := range []string{"root/etc/passwd", "cwd", "exe", "fd/0", "root"} {
			_, err := repo.ReadFile(context.Background(), p)
			require.Error(t, err, p)
			assert.Contains(t, err.Error(), "symbolic link", p)
		}
		_, err = repo.ListFiles(context.Background(), "root")
		assert.Error(t, err)
	})
}

func TestReadFile(t *testing.T) {
	forSeedModes(t, func(t *testing.T, repo *Repo, seed string) {
		t.Run("a huge file: the first 8192 bytes", func(t *testing.T) {
			s, err := repo.ReadFile(context.Background(), "huge.bin")
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(s, "needle at the start\n"))
			assert.Contains(t, s, fmt.Sprintf("only the first %d of %d bytes", MaxReadBytes, int64(4<<30)))
			assert.LessOrEqual(t, len(s), MaxToolResultBytes)
		})
		t.Run("invalid UTF-8 is replaced", func(t *testing.T) {
			require.NoError(t, os.WriteFile(filepath.Join(seed, "bin.dat"), []byte("a\xffb"), 0o644))
			s, err := repo.ReadFile(context.Background(), "bin.dat")
			require.NoError(t, err)
			assert.Equal(t, "a\uFFFDb", s)
		})
	})
}

func TestListFiles(t *testing.T) {
	forSeedModes(t, func(t *testing.T, repo *Repo, seed string) {
		t.Run("kinds, sorted", func(t *testing.T) {
			s, err := repo.ListFiles(context.Background(), ".")
			require.NoError(t, err)
			assert.Equal(t, "other etc-link\nother fifo\nfile huge.bin\nother in-link\nfile late.txt\n"+
				"other passwd-link\nother proc-self\ndir src\nother up-link\n", s)
			s, err = repo.ListFiles(context.Background(), "/src/")
			require.NoError(t, err)
			assert.Equal(t, "dir src/deep\nfile src/main.go\nother src/up-dir\n", s)
		})
		t.Run("many entries: the 200 smallest names", func(t *testing.T) {
			dir := filepath.Join(seed, "many")
			require.NoError(t, os.Mkdir(dir, 0o755))
			var names []string
			for i := range 3000 {
				n := fmt.Sprintf("f%05d", (i*7919)%3000) // created out of order
				names = append(names, n)
				require.NoError(t, os.WriteFile(filepath.Join(dir, n), nil, 0o644))
			}
			sort.Strings(names)
			s, err := repo.ListFiles(context.Background(), "many")
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
			require.Len(t, lines, MaxListEntries+1)
			for i := range MaxListEntries {
				assert.Equal(t, "file many/"+names[i], lines[i])
			}
			assert.Equal(t, "(2800 more entries not shown)", lines[MaxListEntries])
		})
		t.Run("empty", func(t *testing.T) {
			require.NoError(t, os.Mkdir(filepath.Join(seed, "empty"), 0o755))
			s, err := repo.ListFiles(context.Background(), "empty")
			require.NoError(t, err)
			assert.Equal(t, "(empty directory)\n", s)
		})
		t.Run("a file is not a directory", func(t *testing.T) {
			_, err := repo.ListFiles(context.Background(), "src/main.go")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "not a directory")
		})
	})
}

func TestSearch(t *testing.T) {
	forSeedModes(t, func(t *testing.T, repo *Repo, seed string) {
		ctx := context.Background()
		t.Run("first matching line per file, sorted walk, first 8192 bytes only", func(t *testing.T) {
			s, err := repo.Search(ctx, "needle", ".")
			require.NoError(t, err)
			assert.Equal(t, "huge.bin:1: needle at the start\nsrc/deep/x.txt:2: two needle\nsrc/main.go:2: // needle here\n", s)
		})
		t.Run("below a path", func(t *testing.T) {
			s, err := repo.Search(ctx, "needle", "src/deep")
			require.NoError(t, err)
			assert.Equal(t, "src/deep/x.txt:2: two needle\n", s)
		})
		t.Run("a literal substring, not a pattern", func(t *testing.T) {
			s, err := repo.Search(ctx, "ne.dle", ".")
			require.NoError(t, err)
			assert.Equal(t, "(no matches)\n", s)
		})
		t.Run("pattern bounds", func(t *testing.T) {
			_, err := repo.Search(ctx, "", ".")
			assert.ErrorContains(t, err, "empty")
			_, err = repo.Search(ctx, strings.Repeat("é", MaxPatternChars), ".")
			assert.NoError(t, err, "200 characters (400 bytes) is allowed")
			_, err = repo.Search(ctx, strings.Repeat("a", MaxPatternChars+1), ".")
			assert.ErrorContains(t, err, "maximum is 200")
		})
		t.Run("at most 40 hits", func(t *testing.T) {
			dir := filepath.Join(seed, "hits")
			require.NoError(t, os.Mkdir(dir, 0o755))
			for i := range 100 {
				require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("h%03d", i)), []byte("x\nhit me\n"), 0o644))
			}
			s, err := repo.Search(ctx, "hit me", "hits")
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
			require.Len(t, lines, MaxSearchHits+1)
			assert.Equal(t, "hits/h000:2: hit me", lines[0])
			assert.Equal(t, "hits/h039:2: hit me", lines[MaxSearchHits-1])
			assert.Equal(t, "(the search stopped at 40 matching files)", lines[MaxSearchHits])
		})
		t.Run("a long matching line is clipped", func(t *testing.T) {
			dir := filepath.Join(seed, "long")
			require.NoError(t, os.Mkdir(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "l"), []byte("needle"+strings.Repeat("z", 5000)), 0o644))
			s, err := repo.Search(ctx, "needle", "long")
			require.NoError(t, err)
			assert.Equal(t, "long/l:1: needle"+strings.Repeat("z", maxHitLineBytes-len("needle"))+"\n", s)
		})
		t.Run("a cancelled context stops the walk", func(t *testing.T) {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := repo.Search(cctx, "needle", ".")
			assert.ErrorIs(t, err, context.Canceled)
		})
	})
}

func TestCutResult(t *testing.T) {
	assert.Len(t, cutResult(strings.Repeat("a", 20000)), MaxToolResultBytes)
	s := cutResult(strings.Repeat("é", 7000)) // 14000 bytes, 2 per rune
	assert.Len(t, s, MaxToolResultBytes)
	s = cutResult("a" + strings.Repeat("é", 7000)) // the boundary falls inside a rune
	assert.Len(t, s, MaxToolResultBytes-1)
	assert.True(t, strings.HasSuffix(s, "é"))
}

// forModes runs a test with openat2 and with the component walk that
// replaces it where the kernel lacks openat2 (gVisor).
func forModes(t *testing.T, f func(t *testing.T, walk bool)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) { f(t, walk) })
	}
}

// forSeedModes is forModes on a fresh confinedSeed, opened as repo and
// closed when the mode's test ends.
func forSeedModes(t *testing.T, f func(t *testing.T, repo *Repo, seed string)) {
	forModes(t, func(t *testing.T, walk bool) {
		seed, _ := confinedSeed(t)
		repo, err := openMode(t, seed, walk)
		require.NoError(t, err)
		t.Cleanup(func() { repo.Close() })
		f(t, repo, seed)
	})
}

func openMode(t *testing.T, dir string, walk bool) (*Repo, error) {
	t.Helper()
	r, err := OpenRepo(dir)
	if err == nil && walk {
		r.walk.Store(true)
	}
	return r, err
}
