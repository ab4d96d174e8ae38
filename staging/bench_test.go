package staging

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchSpec is a mid-size repository: 2,000 files of 8 KiB (16 MiB) in 40
// directories.
func benchSpec(b *testing.B) repoSpec {
	s := repoSpec{files: map[string]string{}}
	buf := make([]byte, 8<<10)
	for i := range 2000 {
		_, err := rand.Read(buf)
		require.NoError(b, err)
		s.files[fmt.Sprintf("d%02d/f%04d.bin", i%40, i)] = string(buf)
	}
	return s
}

// benchSeed stages the mid-size repository once and returns its seed.
func benchSeed(b *testing.B) string {
	token := "tok_" + randHex(b, 16)
	srv := newGitServer(b, token)
	work, _ := makeWorkRepo(b, benchSpec(b))
	srv.add(b, "acme/bench", work)
	root := newPrivateRoot(b)
	seeds, err := Stage(context.Background(), Options{PrivateRoot: root, RunID: randHex(b, 16), Token: token, ServerURL: srv.URL},
		[]Repo{{Slug: "acme/bench", Sensitivity: "public"}})
	require.NoError(b, err)
	return seeds[0].Dir
}

// BenchmarkStageSmallRepo stages one small repository over loopback HTTP:
// clone, scrub, seal, verify, seed map. Peer: BenchmarkGitCloneSmallRepo.
func BenchmarkStageSmallRepo(b *testing.B) {
	token := "tok_" + randHex(b, 16)
	srv := newGitServer(b, token)
	work, _ := makeWorkRepo(b, defaultSpec("bench"))
	srv.add(b, "acme/small", work)
	base := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		root := filepath.Join(base, fmt.Sprint(i))
		require.NoError(b, os.Mkdir(root, 0o700))
		_, err := Stage(context.Background(), Options{PrivateRoot: root, RunID: randHex(b, 16), Token: token, ServerURL: srv.URL},
			[]Repo{{Slug: "acme/small", Sensitivity: "public"}})
		require.NoError(b, err)
	}
	b.StopTimer()
	require.NoError(b, Release(context.Background(), base))
}

// BenchmarkGitCloneSmallRepo is the peer of BenchmarkStageSmallRepo: a bare
// `git clone --depth=1` of the same repository from the same server, with the
// credential in the URL, and no scrub, seal or verification.
func BenchmarkGitCloneSmallRepo(b *testing.B) {
	token := "tok_" + randHex(b, 16)
	srv := newGitServer(b, token)
	work, _ := makeWorkRepo(b, defaultSpec("bench"))
	srv.add(b, "acme/small", work)
	url := "http://x:" + token + "@" + srv.URL[len("http://"):] + "/acme/small.git"
	base := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		tgit(b, base, "clone", "-q", "--depth=1", "--single-branch", "--no-tags", url, fmt.Sprint(i))
	}
}

// BenchmarkCopyTreeMidSeed copies a 16 MiB, 2,000-file seed. Peer:
// BenchmarkCpAMidSeed.
func BenchmarkCopyTreeMidSeed(b *testing.B) {
	seed := benchSeed(b)
	base := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		dst := filepath.Join(base, fmt.Sprint(i))
		require.NoError(b, CopyTree(context.Background(), seed, dst, CopyLimits{Writable: true}))
		b.StopTimer()
		require.NoError(b, os.RemoveAll(dst))
		b.StartTimer()
	}
}

// BenchmarkCpAMidSeed is the peer of BenchmarkCopyTreeMidSeed: `cp -a` of the
// same seed (path-based, follows nothing, no checks).
func BenchmarkCpAMidSeed(b *testing.B) {
	seed := benchSeed(b)
	base := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		dst := filepath.Join(base, fmt.Sprint(i))
		out, err := exec.Command("cp", "-a", seed, dst).CombinedOutput()
		require.NoError(b, err, "%s", out)
		b.StopTimer()
		require.NoError(b, os.RemoveAll(dst))
		b.StartTimer()
	}
}

// BenchmarkVerifyReadOnlyMidSeed walks the 2,000-file seed with openat2.
func BenchmarkVerifyReadOnlyMidSeed(b *testing.B) {
	seed := benchSeed(b)
	b.ResetTimer()
	for range b.N {
		require.NoError(b, VerifyReadOnly(context.Background(), seed))
	}
}
