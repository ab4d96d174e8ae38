package verify

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/isolatetest"
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
	root, err := isolatetest.BuildRootFS("awf-verify-rootfs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer root.Remove()
	defer removeEnclaveProbe()
	testRootFS = root.Dir
	return m.Run()
}
