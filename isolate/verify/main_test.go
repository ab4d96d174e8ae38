package verify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/rootfs"
)

func init() {
	// Keep the main goroutine on the main thread, so that libcontainer's
	// namespace-joining threads never run on it (see pinnedNamespace).
	runtime.LockOSThread()
	// libcontainer re-executes this test binary as the container init.
	direct.InitIfRequested()
	// verify reads loaded filters through a helper re-execution of the binary.
	HelperIfRequested()
}

// testRootFS is the root filesystem the real-sandbox tests run on.
var testRootFS string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "verify tests must run as root: they build real sandboxes and read filters with ptrace")
		return 1
	}
	dir, err := os.MkdirTemp("", "awf-verify-rootfs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testRootFS = filepath.Join(dir, "root")
	if _, err := rootfs.Build(ctx, rootfs.Options{Out: testRootFS}); err != nil {
		fmt.Fprintln(os.Stderr, "build test rootfs:", err)
		return 1
	}
	return m.Run()
}
