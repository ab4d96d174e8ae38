package staging

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

const httpBackend = "/usr/lib/git-core/git-http-backend"

// randHex returns n random bytes in hex.
func randHex(t testing.TB, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// testGitEnv is the environment of the git commands that build fixtures.
func testGitEnv(home string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid",
		"GIT_AUTHOR_DATE=2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2020-01-01T00:00:00Z",
		"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=init.defaultBranch", "GIT_CONFIG_VALUE_0=main",
		"GIT_CONFIG_KEY_1=protocol.file.allow", "GIT_CONFIG_VALUE_1=always",
	}
}

// tgit runs a fixture git command in dir and returns its trimmed stdout.
func tgit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = testGitEnv(os.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "git %v: %s", args, errb.String())
	return strings.TrimSpace(out.String())
}

// repoSpec describes a fixture repository: its files, symlinks and gitlinks
// (tree entries of mode 160000 with no .gitmodules).
type repoSpec struct {
	files    map[string]string
	execs    map[string]string
	symlinks map[string]string
	gitlinks []string
}

// defaultSpec is an ordinary repository with nested files, an executable and
// symlinks pointing out of the tree.
func defaultSpec(marker string) repoSpec {
	return repoSpec{
		files: map[string]string{
			"README.md":        "# fixture " + marker + "\n",
			"src/main.py":      "print('hello " + marker + "')\n",
			"src/deep/a/b.txt": "needle " + marker + "\n",
		},
		execs:    map[string]string{"bin/run.sh": "#!/bin/sh\necho run\n"},
		symlinks: map[string]string{"link-abs": "/etc/passwd", "link-up": "../../../outside", "src/link-in": "main.py"},
	}
}

// makeWorkRepo builds a non-bare repository with two commits: a first one and
// the spec on top. It returns the directory and the head commit.
func makeWorkRepo(t testing.TB, spec repoSpec) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "work")
	require.NoError(t, os.Mkdir(dir, 0o755))
	tgit(t, dir, "init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "first.txt"), []byte("first\n"), 0o644))
	tgit(t, dir, "add", "-A")
	tgit(t, dir, "commit", "-q", "-m", "first")
	for p, c := range spec.files {
		writeFile(t, filepath.Join(dir, p), c, 0o644)
	}
	for p, c := range spec.execs {
		writeFile(t, filepath.Join(dir, p), c, 0o755)
	}
	for p, target := range spec.symlinks {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.Symlink(target, filepath.Join(dir, p)))
	}
	tgit(t, dir, "add", "-A")
	for _, p := range spec.gitlinks {
		tgit(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("ab", 20)+","+p)
	}
	tgit(t, dir, "commit", "-q", "--allow-empty", "-m", "second")
	return dir, tgit(t, dir, "rev-parse", "HEAD")
}

func writeFile(t testing.TB, p, content string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), mode))
	require.NoError(t, os.Chmod(p, mode))
}

// gitServer serves bare repositories over git's smart HTTP protocol on
// loopback: git http-backend behind net/http/cgi, demanding the token as the
// basic-auth password.
type gitServer struct {
	URL   string
	root  string
	token string
	v2    atomic.Bool // a request asked for protocol v2
}

func newGitServer(t testing.TB, token string) *gitServer {
	t.Helper()
	_, err := os.Stat(httpBackend)
	require.NoError(t, err, "git http-backend is required (Debian package git)")
	s := &gitServer{root: t.TempDir(), token: token}
	backend := &cgi.Handler{
		Path:   httpBackend,
		Stderr: io.Discard,
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + s.root, "PATH=/usr/local/bin:/usr/bin:/bin",
		},
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Git-Protocol"), "version=2") {
			s.v2.Store(true)
		}
		_, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(pass), []byte(s.token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="awf-test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		// The CGI child would otherwise get the credential in its environment.
		r.Header.Del("Authorization")
		backend.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s.URL = "http://" + ln.Addr().String()
	return s
}

// add publishes the work repository as slug.
func (s *gitServer) add(t testing.TB, slug, work string) {
	t.Helper()
	dst := filepath.Join(s.root, slug+".git")
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	tgit(t, "", "clone", "-q", "--bare", "--no-local", work, dst)
	// Tags of the work repository come along with a bare clone.
}

// newPrivateRoot creates a fresh 0700 private root.
func newPrivateRoot(t testing.TB) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "private")
	require.NoError(t, os.Mkdir(root, 0o700))
	t.Cleanup(func() { _ = Release(context.Background(), root) })
	return root
}

// treeHash hashes every path, type, mode, link target and content below dir.
func treeHash(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	var paths []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		paths = append(paths, p)
		return nil
	}))
	sort.Strings(paths)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		io.WriteString(h, rel+"\x00"+fi.Mode().String()+"\x00")
		st := fi.Sys().(*syscall.Stat_t)
		io.WriteString(h, hex.EncodeToString([]byte{byte(st.Uid), byte(st.Gid)})+"\x00")
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			io.WriteString(h, target)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			h.Write(b)
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// findBytes lists every regular file below dir (no links followed) that
// contains needle.
func findBytes(t testing.TB, dir string, needle []byte) []string {
	t.Helper()
	var hits []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			if bytes.Contains(b, needle) {
				hits = append(hits, p)
			}
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			require.NoError(t, err)
			if strings.Contains(target, string(needle)) {
				hits = append(hits, p)
			}
		}
		return nil
	}))
	return hits
}

// listDir returns the names in dir.
func listDir(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := []string{}
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
