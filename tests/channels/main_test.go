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
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/awf-project/awf/rootfs"
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
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "channels: FAIL: these tests must run as root (they run awf run, sandboxes and an agent user)")
		return 1
	}
	var err error
	if workDir, err = os.MkdirTemp("", "awf-channels-"); err != nil {
		fmt.Fprintln(os.Stderr, "channels:", err)
		return 1
	}
	defer os.RemoveAll(workDir)
	if err := os.Chmod(workDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "channels:", err)
		return 1
	}
	binDir = filepath.Join(workDir, "bin")
	awfBin = filepath.Join(binDir, "awf")
	for _, c := range []string{"awf", "bounded-query"} {
		if *prebuilt != "" {
			if err := copyExecutable(filepath.Join(*prebuilt, c), filepath.Join(binDir, c)); err != nil {
				fmt.Fprintf(os.Stderr, "channels: prebuilt %s: %v\n", c, err)
				return 1
			}
			continue
		}
		cmd := exec.Command("go", "build", "-tags", "seccomp", "-o", filepath.Join(binDir, c), "github.com/awf-project/awf/cmd/"+c)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "channels: build %s: %v\n%s", c, err, out)
			return 1
		}
	}
	if killed, err = killedCalls(); err != nil {
		fmt.Fprintln(os.Stderr, "channels: policy:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rootfsDir = filepath.Join(workDir, "rootfs")
	if rootfsHash, err = rootfs.Build(ctx, rootfs.Options{Out: rootfsDir}); err != nil {
		fmt.Fprintln(os.Stderr, "channels: rootfs:", err)
		return 1
	}
	agentUser = fmt.Sprintf("awf-ch-%d", os.Getpid()%100000)
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", agentUser).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "channels: useradd: %v\n%s", err, out)
		return 1
	}
	defer exec.Command("userdel", agentUser).Run()
	return m.Run()
}

// copyExecutable copies a prebuilt binary into the 0755 work directory, so the
// agent user and the sandbox can execute it wherever the original lives.
func copyExecutable(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
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
