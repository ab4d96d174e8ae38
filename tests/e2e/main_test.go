// Package e2e drives the real product end to end as root: the awf and
// bounded-query binaries built into a temp dir, the real direct sandbox (and
// every other runtime that is available), real sockets and a real agent user.
package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/awf-project/awf/tests/fixture"
)

// Shared fixtures, set up once in TestMain.
var (
	binDir     string // awf, bounded-query and sealed-probe
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
	env, err := fixture.Setup(fixture.Options{Suite: "e2e", UserPrefix: "awf-e2e", Commands: []string{"sealed-probe"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	binDir, awfBin, agentUser = env.BinDir, env.AwfBin, env.AgentUser
	rootfsDir, rootfsHash = env.RootFS, env.RootFSHash
	repoDir = filepath.Join(env.Work, "repo")
	if err := fixture.MakeRepo(repoDir, "e2e", map[string]string{
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
