// Package e2e drives the real product end to end as root: the awf and
// bounded-query binaries built into a temp dir, the real direct sandbox (and
// every other runtime that is available), real sockets and a real agent user.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/awf-project/awf/rootfs"
)

// Shared fixtures, set up once in TestMain.
var (
	binDir     string // awf and bounded-query
	awfBin     string
	rootfsDir  string
	rootfsHash string
	agentUser  string
	repoDir    string // a local git repository with a few files
)

func TestMain(m *testing.M) {
	os.Exit(setup(m))
}

func setup(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: FAIL: these tests must run as root (they build sandboxes, namespaces and a user)")
		return 1
	}
	work, err := os.MkdirTemp("", "awf-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(work)
	if err := os.Chmod(work, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	binDir = filepath.Join(work, "bin")
	awfBin = filepath.Join(binDir, "awf")
	for _, c := range []string{"awf", "bounded-query", "sealed-probe"} {
		cmd := exec.Command("go", "build", "-tags", "seccomp", "-o", filepath.Join(binDir, c), "github.com/awf-project/awf/cmd/"+c)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: build %s: %v\n%s", c, err, out)
			return 1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rootfsDir = filepath.Join(work, "rootfs")
	if rootfsHash, err = rootfs.Build(ctx, rootfs.Options{Out: rootfsDir}); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: rootfs:", err)
		return 1
	}
	agentUser = fmt.Sprintf("awf-e2e-%d", os.Getpid()%100000)
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", agentUser).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: useradd: %v\n%s", err, out)
		return 1
	}
	defer exec.Command("userdel", agentUser).Run()
	repoDir = filepath.Join(work, "repo")
	if err := makeRepo(repoDir, map[string]string{
		"README.md":      "# demo\n",
		"SECURITY.md":    "report to security@example.com\n",
		"LICENSE":        "MIT License\n",
		"src/a.py":       "print('a')\n",
		"src/b.py":       "print('b')\n",
		"pyproject.toml": "[project]\nrequires-python = \">=3.10\"\n",
	}); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: repo:", err)
		return 1
	}
	return m.Run()
}

func makeRepo(dir string, files map[string]string) error {
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "."},
		{"-c", "user.email=e2e@example.com", "-c", "user.name=e2e", "commit", "-q", "-m", "initial"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
