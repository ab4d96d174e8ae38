package isolatetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// hostDiskScript samples statvfs of every path of PATHS that exists for
// about three seconds and answers, for each, how far each free count
// (blocks, blocks for users, inodes, inodes for users) moved. Halfway it
// writes 1 MiB to its own /tmp: that mount must see it, or the receiver
// is blind and the test proves nothing.
const hostDiskScript = `import json, os, time
paths = [p for p in PATHS if os.path.exists(p)]
def snap():
    out = {}
    for p in paths:
        s = os.statvfs(p)
        out[p] = (s.f_bfree, s.f_bavail, s.f_ffree, s.f_favail)
    return out
lo = snap()
hi = dict(lo)
t0 = time.time()
wrote = False
n = 0
while time.time() - t0 < 3.0:
    if not wrote and time.time() - t0 > 1.5:
        with open("/tmp/awf-self-write", "wb") as f:
            f.write(b"x" * (1 << 20))
        wrote = True
    for p, v in snap().items():
        lo[p] = tuple(min(a, b) for a, b in zip(lo[p], v))
        hi[p] = tuple(max(a, b) for a, b in zip(hi[p], v))
    n += 1
    time.sleep(0.01)
json.dump({"samples": n, "moved": {p: [h - l for h, l in zip(hi[p], lo[p])] for p in paths}}, open("/query/out", "w"))
`

// HostDiskUnseen is a channel test with both ends: the host is the sender,
// writing and removing 8 MiB at a time on the filesystem of the test's
// temporary directory (the state directory's, here the host's disk) from
// before the job starts until it has ended, and the script is the receiver, sampling the
// free counts of every path it can stat (hostDiskScript over
// isolate.StatPaths of tpl's description). No count may
// move but those in visible, the paths the backend declares to show a
// host disk (docker: its root and the Engine's /etc files on the data
// root), and each of those must move when it shares that filesystem with
// the writes (sameDisk), which proves the sender. The script's own /tmp
// must see its own write, which proves the receiver.
func HostDiskUnseen(t *testing.T, rt isolate.Runtime, tpl isolate.Template, visible []string, sameDisk bool) {
	t.Helper()
	d, err := isolate.Describe(tpl, isolate.Job{}, isolate.HostConfig{})
	require.NoError(t, err)
	quoted, err := json.Marshal(isolate.StatPaths(d))
	require.NoError(t, err)
	script := "PATHS = " + string(quoted) + "\n" + hostDiskScript

	// The writes start before the job and end after it, so that they
	// cover the whole of the script's sampling on every backend (gvisor
	// reports no start: Job.OnStart).
	stop := make(chan struct{})
	type written struct {
		n   int
		err error
	}
	w := make(chan written, 1)
	go func() {
		n, err := writeUntil(t.TempDir(), stop)
		w <- written{n, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "host-disk-" + RandomID(t)[:8], Script: []byte(script)}})
	close(stop)
	wr := <-w
	require.NoError(t, wr.err)
	// The script samples for 3 s; a write and removal take 100 ms and more.
	require.GreaterOrEqual(t, wr.n, 10, "the host wrote too little while the job ran")
	require.Equal(t, isolate.KindOK, o.Kind, "%s\nstderr: %s", o.Detail, o.Stderr)

	var got struct {
		Samples int                 `json:"samples"`
		Moved   map[string][4]int64 `json:"moved"`
	}
	require.NoError(t, json.Unmarshal(o.Output, &got), "%s", o.Output)
	t.Logf("%d samples; moved (free blocks, for users, inodes, for users): %v", got.Samples, got.Moved)
	require.Greater(t, got.Samples, 20, "the receiver sampled too rarely to see anything")
	require.Contains(t, got.Moved, "/tmp")
	require.GreaterOrEqual(t, got.Moved["/tmp"][0], int64((1<<20)/os.Getpagesize()),
		"the script did not see its own 1 MiB write in /tmp: the receiver is blind")
	for p, m := range got.Moved {
		switch {
		case p == "/tmp":
		case slices.Contains(visible, p):
			if sameDisk {
				assert.Positive(t, m[0], "%s shows the host's disk (declared) but did not see the host's writes: the sender proves nothing", p)
			}
		default:
			assert.Equal(t, [4]int64{}, m, "%s moved while only the host wrote: it shows a host disk", p)
		}
	}
}

// writeUntil writes and removes 8 MiB files in dir, each written through
// to the disk's counts (fsync), until stop is closed. It returns how many
// files it wrote.
func writeUntil(dir string, stop <-chan struct{}) (int, error) {
	buf := []byte(strings.Repeat("w", 8<<20))
	for n := 0; ; n++ {
		select {
		case <-stop:
			return n, nil
		default:
		}
		p := filepath.Join(dir, fmt.Sprintf("w%d", n))
		if err := writeSync(p, buf); err != nil {
			return n, err
		}
		time.Sleep(50 * time.Millisecond)
		if err := os.Remove(p); err != nil {
			return n, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func writeSync(p string, b []byte) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
