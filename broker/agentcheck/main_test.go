package agentcheck

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/broker/sysuser"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/rootfs"
)

func init() {
	// Keep the main goroutine on the main thread: the load sandbox's
	// libcontainer joins namespaces on locked threads.
	runtime.LockOSThread()
	// libcontainer re-executes this test binary as the container init.
	direct.InitIfRequested()
}

// testCgroupParent is the tests' own cgroup parent, so that what they make
// is theirs alone and can be removed at the end.
const testCgroupParent = "awf-agentcheck-test"

// Shared fixtures, set up once in TestMain.
var (
	testAwf    string // the awf binary: the shim and the probe mode
	testRootFS string // the load sandbox's root filesystem
	testSelf   string // this test binary, which is also a weakened shim
	testUser   string // an agent user made for the tests
)

// knobsEnv carries the shim's TestOnly knobs (JSON) from a weakened twin to
// this test binary started as the shim (Options.TestOnlyShimExe).
const knobsEnv = "AWF_TESTONLY_AGENTCHECK_KNOBS"

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "run" && os.Args[2] == "--agent-shim" {
		os.Exit(testShim(os.Args[3:]))
	}
	os.Exit(setup(m))
}

// testShim is the real shim with the view weakened by the knobs in knobsEnv.
func testShim(args []string) int {
	a, argv, err := host.ParseShimCommand(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	code, err := host.TestOnlyRunShim(a, argv, []byte(os.Getenv(knobsEnv)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

func setup(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "agentcheck: FAIL: these tests must run as root (they start the agent shim, a sandbox and a user)")
		return 1
	}
	work, err := os.MkdirTemp("", "awf-agentcheck-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentcheck:", err)
		return 1
	}
	defer os.RemoveAll(work)
	if testSelf, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, "agentcheck:", err)
		return 1
	}
	testAwf = filepath.Join(work, "awf")
	cmd := exec.Command("go", "build", "-tags", "seccomp", "-o", testAwf, "github.com/awf-project/awf/cmd/awf")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "agentcheck: build awf: %v\n%s", err, out)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	testRootFS = filepath.Join(work, "rootfs")
	if _, err := rootfs.Build(ctx, rootfs.Options{Out: testRootFS}); err != nil {
		fmt.Fprintln(os.Stderr, "agentcheck: rootfs:", err)
		return 1
	}
	testUser = fmt.Sprintf("awf-ac-%d", os.Getpid()%100000)
	if err := sysuser.Create(ctx, testUser); err != nil {
		fmt.Fprintln(os.Stderr, "agentcheck:", err)
		return 1
	}
	defer func() {
		if err := sysuser.Remove(context.Background(), testUser); err != nil {
			fmt.Fprintln(os.Stderr, "agentcheck:", err)
		}
	}()
	defer removeCgroupParents()
	return m.Run()
}

// removeCgroupParents removes the tests' cgroup parents, now empty, from
// every hierarchy.
func removeCgroupParents() {
	for _, name := range []string{testCgroupParent + agentCgroupSuffix + "-agent", testCgroupParent} {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", name))
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", name))
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				fmt.Fprintf(os.Stderr, "agentcheck: remove cgroup parent %s: %v\n", d, err)
			}
		}
	}
}
