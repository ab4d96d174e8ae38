package docker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// socketEnv names the test daemon's socket (tests/setup/dockerd.sh).
const socketEnv = "AWF_TEST_DOCKER_SOCKET"

const defaultTestSocket = "/run/awf-test-docker/docker.sock"

var (
	testRootFS     *isolatetest.RootFS // built once for the package's tests
	testRoot       string              // its directory
	testRootDigest string              // its digest at build time
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
	return isolatetest.WithRootFS("awf-docker-rootfs-", func(r *isolatetest.RootFS) int {
		testRootFS, testRoot, testRootDigest = r, r.Dir, r.Digest
		return m.Run()
	})
}

// newTestRuntime returns a probed runtime on the test daemon with a private
// state dir. A missing daemon fails the test: start it with
// `tests/setup/dockerd.sh start` (make test does).
func newTestRuntime(t testing.TB) *Runtime {
	t.Helper()
	return newTestRuntimeWith(t, isolate.HostConfig{})
}

// newTestRuntimeWith is newTestRuntime with h's other fields (RunID,
// StateDir and DockerSocket are the test's).
func newTestRuntimeWith(t testing.TB, h isolate.HostConfig) *Runtime {
	t.Helper()
	h.DockerSocket = testSocket
	r := isolatetest.Open[*Runtime](t, New, h)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, r.Probe(ctx), "no usable Docker daemon at %s (%s); run `tests/setup/dockerd.sh start` first", testSocket, socketEnv)
	isolatetest.SweepAtCleanup(t, r, time.Minute, func() { requireNoLeftovers(t, r) })
	return r
}

// requireNoLeftovers closes r, which removes its rootfs image store, and
// checks that no container, workspace, mount or loop device of r remains.
func requireNoLeftovers(t testing.TB, r *Runtime) {
	t.Helper()
	require.NoError(t, r.Close())
	isolatetest.RequireNoWorkspaceLeftovers(t, r.dir)
	require.Empty(t, containersOf(t, r), "containers left")
}

// containersOf lists the ids of every container, running or not, labelled
// with r's state dir.
func containersOf(t testing.TB, r *Runtime) []string {
	t.Helper()
	return containersWith(t, r, nil)
}

// runningOf lists the ids of the running containers labelled with r's
// state dir: a prepared sandbox's container exists, stopped, from Prepare.
func runningOf(t testing.TB, r *Runtime) []string {
	t.Helper()
	return containersWith(t, r, []string{"running"})
}

// containersWith lists the ids of the containers labelled with r's state
// dir whose status is one of status (nil: any).
func containersWith(t testing.TB, r *Runtime, status []string) []string {
	t.Helper()
	filters := map[string][]string{"label": {labelState + "=" + r.stateTag}}
	if status != nil {
		filters["status"] = status
	}
	f, _ := json.Marshal(filters)
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

func template(t testing.TB, r *Runtime, repo string) isolate.Template {
	return isolate.Template{RunID: r.runID, RootFS: testRoot, Repo: repo, Limits: isolate.DefaultLimits(), Policy: isolatetest.Policy(t)}
}

// run runs script as a job of its own on r.
func run(t *testing.T, r *Runtime, tpl isolate.Template, script string) isolate.Outcome {
	t.Helper()
	return isolatetest.RunScript(t, r, tpl, script)
}
