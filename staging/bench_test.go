package staging

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

// medianMs returns the median of ds in milliseconds.
func medianMs(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}

// timed runs f and returns how long it took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// BenchmarkStageVsGitClone stages one small repository over loopback HTTP
// (clone, scrub, seal, verify, seed map) and, interleaved in the same
// iteration, runs the peer: a plain `git clone --depth=1` of the same
// repository from the same server with the credential in the URL and no
// scrub, seal or verification. It reports both medians and their ratio.
func BenchmarkStageVsGitClone(b *testing.B) {
	token := "tok_" + randHex(b, 16)
	srv := newGitServer(b, token)
	work, _ := makeWorkRepo(b, defaultSpec("bench"))
	srv.add(b, "acme/small", work)
	url := "http://x:" + token + "@" + srv.URL[len("http://"):] + "/acme/small.git"
	base := b.TempDir()
	var stage, clone []time.Duration
	b.ResetTimer()
	for i := range b.N {
		root := filepath.Join(base, fmt.Sprint(i))
		require.NoError(b, os.Mkdir(root, 0o700))
		stage = append(stage, timed(func() {
			_, err := Stage(context.Background(), Options{PrivateRoot: root, RunID: randHex(b, 16), Token: token, ServerURL: srv.URL},
				[]Repo{{Slug: "acme/small", Sensitivity: "public"}})
			require.NoError(b, err)
		}))
		clone = append(clone, timed(func() {
			tgit(b, base, "clone", "-q", "--depth=1", "--single-branch", "--no-tags", url, fmt.Sprintf("c%d", i))
		}))
		require.NoError(b, Release(context.Background(), root))
	}
	b.StopTimer()
	b.ReportMetric(medianMs(stage), "stage-ms")
	b.ReportMetric(medianMs(clone), "clone-ms")
	b.ReportMetric(medianMs(stage)/medianMs(clone), "stage/clone")
}

// BenchmarkCopyTreeVsCpA copies a staged 16 MiB, 2,000-file seed with
// CopyTree and, interleaved, with the peer `cp -a` (path-based, no checks),
// and walks it with VerifyReadOnly. It reports the three medians and the
// CopyTree/cp ratio.
func BenchmarkCopyTreeVsCpA(b *testing.B) {
	token := "tok_" + randHex(b, 16)
	srv := newGitServer(b, token)
	work, _ := makeWorkRepo(b, benchSpec(b))
	srv.add(b, "acme/bench", work)
	root := newPrivateRoot(b)
	seeds, err := Stage(context.Background(), Options{PrivateRoot: root, RunID: randHex(b, 16), Token: token, ServerURL: srv.URL},
		[]Repo{{Slug: "acme/bench", Sensitivity: "public"}})
	require.NoError(b, err)
	seed := seeds[0].Dir
	base := b.TempDir()
	var cpt, cpa, verify []time.Duration
	b.ResetTimer()
	for i := range b.N {
		d1, d2 := filepath.Join(base, fmt.Sprint("t", i)), filepath.Join(base, fmt.Sprint("a", i))
		cpt = append(cpt, timed(func() {
			require.NoError(b, CopyTree(context.Background(), seed, d1, CopyLimits{Writable: true}))
		}))
		cpa = append(cpa, timed(func() {
			out, err := exec.Command("cp", "-a", seed, d2).CombinedOutput()
			require.NoError(b, err, "%s", out)
		}))
		verify = append(verify, timed(func() { require.NoError(b, VerifyReadOnly(context.Background(), seed)) }))
		require.NoError(b, os.RemoveAll(d1))
		require.NoError(b, os.RemoveAll(d2))
	}
	b.StopTimer()
	b.ReportMetric(medianMs(cpt), "copytree-ms")
	b.ReportMetric(medianMs(cpa), "cp-a-ms")
	b.ReportMetric(medianMs(cpt)/medianMs(cpa), "copytree/cp")
	b.ReportMetric(medianMs(verify), "verify-ms")
}
