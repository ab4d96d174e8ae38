package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestOutputStaysOffTheEnginesDisk: a script's stdout and stderr must not
// be written to the Engine's data root. That disk is where the Engine keeps
// every container's root, so its free counts are what a later script reads
// with statvfs("/") (a declared residual) and what the agent reads of its
// own root when the data root shares the host's disk; output written there
// (a json-file log of up to twice CaptureBytes) would let a confidential
// script move those counts by an amount and at times of its choosing, a
// sender on a channel the Engine's fixed per-container metadata is not.
//
// The script prints a fresh marker on both streams, closes them and sleeps;
// once the host sees both descriptors closed, the marker is in the Engine's
// hands, and the test reads every file under the data root's container
// directories for it while the container still runs. The capture must
// still hold both streams: the output reaches the broker, only not the disk.
func TestOutputStaysOffTheEnginesDisk(t *testing.T) {
	r := newTestRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := Info(ctx, testSocket)
	require.NoError(t, err)
	require.NotEmpty(t, info.RootDir, "the Engine names no data root")

	marker := "awf-output-marker-" + isolatetest.RandomID(t)[:16]
	script := fmt.Sprintf(`import os, time
m = %q
os.write(1, (m + " out\n").encode() * 64)
os.write(2, (m + " err\n").encode() * 64)
os.close(1)
os.close(2)
time.sleep(4)
`, marker)
	pid, wait := isolatetest.BeginJob(ctx, t, r, template(t, r, ""), isolate.Job{InvocationID: "output", Script: []byte(script)})
	require.Eventually(t, func() bool {
		_, e1 := os.Lstat(fmt.Sprintf("/proc/%d/fd/1", pid))
		_, e2 := os.Lstat(fmt.Sprintf("/proc/%d/fd/2", pid))
		return os.IsNotExist(e1) && os.IsNotExist(e2)
	}, 30*time.Second, 10*time.Millisecond, "the script never closed its output")
	// The Engine copies a stream as it arrives; give a loaded host's copy
	// time to land before looking.
	time.Sleep(500 * time.Millisecond)
	found := filesHolding(t, filepath.Join(info.RootDir, "containers"), []byte(marker))

	o := wait()
	assert.Empty(t, found, "the script's output is on the Engine's disk")
	assert.Contains(t, string(o.Stdout), marker+" out", "stdout was not captured: %s %s", o.Kind, o.Detail)
	assert.Contains(t, string(o.Stderr), marker+" err", "stderr was not captured: %s %s", o.Kind, o.Detail)
}

// filesHolding returns the regular files under dir that contain needle.
func filesHolding(t *testing.T, dir string, needle []byte) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // a container removed while the walk ran
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			found = append(found, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	require.NoError(t, err)
	return found
}

// logTap answers every container inspect with the Engine's real reply
// but with the log driver it names, as an Engine that ignored the
// request's LogConfig (or an authorization plugin that rewrote it) would.
type logTap struct {
	next   http.RoundTripper
	driver string
}

func (l *logTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	p := req.URL.Path
	if err != nil || req.Method != http.MethodGet || !strings.Contains(p, "/containers/") ||
		!strings.HasSuffix(p, "/json") || strings.HasSuffix(p, "/containers/json") {
		return resp, err
	}
	defer resp.Body.Close()
	var reply map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return nil, err
	}
	reply["HostConfig"].(map[string]any)["LogConfig"] = map[string]any{"Type": l.driver, "Config": map[string]any{}}
	b, err := json.Marshal(reply)
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// TestPrepareFailsWhenTheEngineLogs: a container the Engine would log
// (its inspect names a log driver other than none) is refused at Prepare,
// before any script runs, with the reason, and nothing of it is left.
func TestPrepareFailsWhenTheEngineLogs(t *testing.T) {
	r := newTestRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tpl := template(t, r, "")
	// The image is imported (and verified) before the tap goes in.
	sb, err := r.Prepare(ctx, tpl)
	require.NoError(t, err)
	require.NoError(t, sb.Destroy(ctx))

	r.eng.hc.Transport = &logTap{next: r.eng.hc.Transport, driver: "json-file"}
	_, err = r.Prepare(ctx, tpl)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `the Engine logs the container with "json-file", not "none"`)
	assert.Empty(t, containersOf(t, r), "the refused container is left")
}
