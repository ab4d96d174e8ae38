package direct_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/staging"
)

// BenchmarkFirstPrepareView measures what the repository view costs: each
// iteration opens a fresh runtime on the same state directory, prepares
// one sandbox without a repository (to bind the root filesystem), then the
// first sandbox over the seed (which copies it into the view) and a second
// one (which reuses the view), and closes the runtime (which removes the
// view). Interleaved with that, it times staging.CopyTree with the view's
// options alone and, as a peer, cp -a of the same seed. It reports the
// medians (ms) of the first and of the second Prepare, their difference,
// of the copy alone and of cp -a, and the ratio of the last two. Only one
// copy is on disk at a time, as with one runtime, and each iteration starts
// after a sync, so one copy's writeback does not land on the next.
func BenchmarkFirstPrepareView(b *testing.B) {
	for _, c := range []struct {
		name  string
		files int
		size  int
	}{{"small", 0, 0}, {"50MB", 1000, 50 << 10}} {
		b.Run(c.name, func(b *testing.B) {
			seed := filepath.Join(b.TempDir(), "seed")
			files := map[string]string{"a.txt": "seed a\n", "sub/b.txt": "seed b\n"}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range c.files {
				buf := make([]byte, c.size)
				for j := range buf {
					buf[j] = byte('a' + rng.IntN(26))
				}
				files[fmt.Sprintf("d%02d/f%04d.txt", i%20, i)] = string(buf)
			}
			writeSeed(b, seed, files)
			state := b.TempDir()
			scratch := b.TempDir()
			ctx := context.Background()
			var first, again, copyOnly, cpA []time.Duration
			n := 0
			for b.Loop() {
				n++
				// Start each iteration with no dirty pages from the last.
				b.StopTimer()
				unix.Sync()
				b.StartTimer()
				rt, err := direct.Open(isolate.HostConfig{RunID: newRunID(), StateDir: state})
				require.NoError(b, err)
				e := &testEnv{rt: rt, state: state}
				timedPrepare(b, rt, e.template(b, ""))
				first = append(first, timedPrepare(b, rt, e.template(b, seed)))
				again = append(again, timedPrepare(b, rt, e.template(b, seed)))
				require.NoError(b, rt.Close())

				dst := filepath.Join(scratch, fmt.Sprint(n))
				t0 := time.Now()
				require.NoError(b, staging.CopyTree(ctx, seed, dst, staging.CopyLimits{
					Owner: &staging.Ownership{UID: 65534, GID: 65534}, Writable: true}))
				copyOnly = append(copyOnly, time.Since(t0))
				// Like Close, leave one copy at a time on disk.
				require.NoError(b, os.RemoveAll(dst))

				// Peer: cp -a of the same seed, on the same filesystem.
				t0 = time.Now()
				out, err := exec.Command("cp", "-a", seed, dst).CombinedOutput()
				require.NoError(b, err, "cp -a: %s", out)
				cpA = append(cpA, time.Since(t0))
				require.NoError(b, os.RemoveAll(dst))
			}
			report(b, "first-prepare-ms", first)
			report(b, "again-prepare-ms", again)
			b.ReportMetric(float64(isolatetest.Median(first)-isolatetest.Median(again))/float64(time.Millisecond), "view-cost-ms")
			report(b, "copytree-ms", copyOnly)
			report(b, "cp-a-ms", cpA)
			b.ReportMetric(isolatetest.Median(copyOnly).Seconds()/isolatetest.Median(cpA).Seconds(), "copytree/cp-a")
		})
	}
}

// timedPrepare prepares and destroys one sandbox and returns how long
// Prepare took.
func timedPrepare(b *testing.B, rt *direct.Runtime, tpl isolate.Template) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	sb, err := rt.Prepare(ctx, tpl)
	d := time.Since(t0)
	require.NoError(b, err)
	require.NoError(b, sb.Destroy(ctx))
	return d
}
