package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/rootfs"
)

// socketEnv names the test daemon's socket (tests/setup/dockerd.sh).
const socketEnv = "AWF_TEST_DOCKER_SOCKET"

const defaultTestSocket = "/run/awf-test-docker/docker.sock"

var (
	testRoot       string // rootfs built once for the package's tests
	testRootDigest string // its digest at build time
	testSocket     string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	testSocket = os.Getenv(socketEnv)
	if testSocket == "" {
		testSocket = defaultTestSocket
	}
	dir, err := os.MkdirTemp("", "awf-docker-rootfs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rootfs temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	testRoot = filepath.Join(dir, "root")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if testRootDigest, err = rootfs.Build(ctx, rootfs.Options{Out: testRoot}); err != nil {
		fmt.Fprintln(os.Stderr, "rootfs build:", err)
		return 1
	}
	return m.Run()
}

func randomID(t testing.TB) string {
	var b [16]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

// newTestRuntime returns a probed runtime on the test daemon with a private
// state dir. A missing daemon fails the test: start it with
// `tests/setup/dockerd.sh start` (make test does).
func newTestRuntime(t testing.TB) *Runtime {
	t.Helper()
	r, err := newRuntime(isolate.HostConfig{RunID: randomID(t), StateDir: t.TempDir(), DockerSocket: testSocket})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, r.Probe(ctx), "no usable Docker daemon at %s (%s); run `tests/setup/dockerd.sh start` first", testSocket, socketEnv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, r.Sweep(ctx))
		requireNoLeftovers(t, r)
	})
	return r
}

// requireNoLeftovers closes r, which removes its rootfs image store, and
// checks that no container, workspace, mount or loop device of r remains.
func requireNoLeftovers(t testing.TB, r *Runtime) {
	t.Helper()
	require.NoError(t, r.Close())
	loops, err := workspace.LoopDevicesOf(r.dir)
	require.NoError(t, err)
	require.Empty(t, loops, "loop devices left")
	ents, err := os.ReadDir(r.dir)
	if err == nil {
		require.Empty(t, ents, "workspaces left in %s", r.dir)
	}
	mi, err := os.ReadFile("/proc/thread-self/mountinfo")
	require.NoError(t, err)
	require.NotContains(t, string(mi), r.dir, "mounts left below the state dir")
	require.Empty(t, containersOf(t, r), "containers left")
}

// containersOf lists the ids of every container, running or not, labelled
// with r's state dir.
func containersOf(t testing.TB, r *Runtime) []string {
	t.Helper()
	f, _ := json.Marshal(map[string][]string{"label": {labelState + "=" + r.stateTag}})
	var list []struct {
		ID string `json:"Id"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.eng.call(ctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}, "filters": {string(f)}}, nil, &list))
	ids := make([]string, len(list))
	for i, c := range list {
		ids[i] = c.ID
	}
	return ids
}

func testPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	p, err := policy.Default()
	require.NoError(t, err, "the default seccomp policy must load")
	return p
}

func template(t testing.TB, r *Runtime, repo string) isolate.Template {
	return isolate.Template{RunID: r.runID, RootFS: testRoot, Repo: repo, Limits: isolate.DefaultLimits(), Policy: testPolicy(t)}
}

func run(t *testing.T, r *Runtime, tpl isolate.Template, script string) isolate.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return r.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "inv-" + randomID(t)[:8], Script: []byte(script)}})
}

// snapshot maps every path under dir to its mode and content or link target.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		v := fi.Mode().String()
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v += " -> " + l
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		m[rel] = v
		return nil
	}))
	return m
}
