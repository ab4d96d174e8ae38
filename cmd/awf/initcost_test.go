package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// initAllocBudget is what one awf package's initializers may allocate. The
// largest today is policy's tables (about 15 KiB); one counted-repetition
// pattern such as `[a-z]{0,254}` compiled at init allocates hundreds of KiB.
const initAllocBudget = 24 << 10

// TestPackageInitIsCheap holds every awf package's initializers to a small
// allocation budget. Every direct sandbox starts by re-executing this binary
// as libcontainer's container init, and Go runs every package initializer
// before init takes over: work done in a package variable is done again for
// every sandbox and every CLI start. Package-level regular expressions
// compiled at init once cost about 3.5 ms of each start (awf with no
// command: median 21.0 ms, against 17.4 ms with them compiled on first use,
// interleaved, n=150). Allocation is what the test counts, not time, so
// that it cannot flake on a loaded host.
func TestPackageInitIsCheap(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Go's own flags only: TestMain runs no test and the binary exits after
	// its initializers, which GODEBUG=inittrace=1 reports on stderr.
	cmd := exec.CommandContext(ctx, self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())

	seen := parseInitTrace(t, stderr.String())
	require.GreaterOrEqual(t, len(seen), 10, "too few awf packages in the init trace; its format may have changed:\n%s", stderr.String())
	for pkg, n := range seen {
		assert.LessOrEqual(t, n, initAllocBudget, "package %s allocates %d bytes in its initializers; compile or build it on first use (sync.OnceValue)", pkg, n)
	}
}

// initLine is one line of GODEBUG=inittrace=1, for example
// "init github.com/x/y @8.1 ms, 0.001 ms clock, 256 bytes, 2 allocs".
var initLine = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, [0-9.]+ ms clock, ([0-9]+) bytes, [0-9]+ allocs$`)

// parseInitTrace returns the bytes each awf package allocates at init. The
// test binary's own package (main, with the tests' variables) is left out.
func parseInitTrace(t *testing.T, trace string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, line := range strings.Split(trace, "\n") {
		m := initLine.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(m[1], "github.com/awf-project/awf/") {
			continue
		}
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err, line)
		seen[m[1]] += n
	}
	return seen
}
