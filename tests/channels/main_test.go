// Package channels attacks awf's information bound from the outside: each test
// runs the real `awf run` with a python3 agent that sends a bounded query
// against a confidential repository holding a known random 64-bit secret (the
// sender, charged 4 bits for a const schema) and then tries to read the secret
// back through shared kernel state, either from a later query against a
// public repository (cross-invocation channels) or from the agent itself
// (live channels). A receiver that decodes the secret better than chance
// fails its test. README.md lists the channels and the measured capacities.
package channels

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/awf-project/awf/tests/fixture"
)

// long repeats every trial: more bits per receiver, a tighter estimate.
var long = flag.Bool("channels.long", false, "run four times as many trials per channel")

// only limits the run to the named channels (comma-separated), for debugging.
var only = flag.String("channels.only", "", "run only these channels (pagecache,misc,counters,live)")

// prebuilt names a directory holding awf and bounded-query already built with
// -tags seccomp, for hosts where building at run time is too slow (the
// emulated cgroup v2 VM of tests/cgroup2). Empty: TestMain builds them.
var prebuilt = flag.String("channels.bin", "", "use awf and bounded-query from this directory instead of building them")

// Shared fixtures, set up once in TestMain.
var (
	workDir    string // 0755, holds the binaries, rootfs and repositories
	binDir     string
	awfBin     string
	rootfsDir  string
	rootfsHash string
	agentUser  string
	// killed are the system calls the built-in policy may kill (any kill
	// rule, conditional or not, except socket's, which kills only the
	// families the scripts never use). The attacker reads the published
	// policy and never makes them: a killed script learns nothing.
	killed []string
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(setup(m))
}

func setup(m *testing.M) int {
	env, err := fixture.Setup(fixture.Options{Suite: "channels", UserPrefix: "awf-ch", Prebuilt: *prebuilt})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	workDir, binDir, awfBin, rootfsDir, rootfsHash, agentUser = env.Work, env.BinDir, env.AwfBin, env.RootFS, env.RootFSHash, env.AgentUser
	if killed, err = killedCalls(); err != nil {
		fmt.Fprintln(os.Stderr, "channels: policy:", err)
		return 1
	}
	return m.Run()
}

// killedCalls reads `awf policy table @default` and returns every x86_64
// system call with a kill rule, plus those that fall to a kill default.
func killedCalls() ([]string, error) {
	out, err := exec.Command(awfBin, "policy", "table", "@default", "--arch", "x86_64").Output()
	if err != nil {
		return nil, fmt.Errorf("awf policy table: %w", err)
	}
	seen := map[string]bool{}
	kill := map[string]bool{}
	defaultKill := false
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "# default: kill") {
			defaultKill = true
		}
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "x86_64" {
			continue
		}
		seen[f[1]] = true
		if strings.HasPrefix(f[2], "kill") && !(f[1] == "socket" && strings.Contains(l, " if ")) {
			kill[f[1]] = true
		}
	}
	// The calls the scripts make that are not in the table fall to the default.
	for _, c := range []string{"mincore", "preadv2", "fadvise64", "pipe2", "shmget", "semget", "msgget",
		"add_key", "keyctl", "sysinfo", "fork", "clone", "socket", "sched_setaffinity"} {
		if !seen[c] && defaultKill {
			kill[c] = true
		}
	}
	var names []string
	for c := range kill {
		names = append(names, c)
	}
	sort.Strings(names)
	return names, nil
}
