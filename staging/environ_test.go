package staging

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const scrubHelperEnv = "AWF_STAGING_SCRUB_HELPER"

// TestScrubEnvironHelper is the child side of TestScrubEnviron; it does
// nothing in a normal run.
func TestScrubEnvironHelper(t *testing.T) {
	if os.Getenv(scrubHelperEnv) != "1" {
		return
	}
	in := bufio.NewReader(os.Stdin)
	tok := ResolveToken(os.Getenv)
	fmt.Println("ready")
	_, _ = in.ReadString('\n')
	if err := ScrubEnviron(TokenVariables()...); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("scrubbed %s %q %q\n", tok, os.Getenv("GH_TOKEN"), os.Getenv("GITHUB_TOKEN"))
	_, _ = in.ReadString('\n')
	os.Exit(0)
}

// TestScrubEnviron starts this test binary with a token in its environment and
// checks that /proc/<pid>/environ shows it before ScrubEnviron and never after,
// while other variables and the resolved copy survive.
func TestScrubEnviron(t *testing.T) {
	token := "tok_" + randHex(t, 20)
	cmd := exec.Command(os.Args[0], "-test.run=^TestScrubEnvironHelper$", "-test.count=1")
	cmd.Env = []string{scrubHelperEnv + "=1", "GH_TOKEN=" + token, "GITHUB_TOKEN=other_" + token, "KEEP=me"}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	out := bufio.NewReader(stdout)
	environ := func() string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
		require.NoError(t, err)
		return string(b)
	}
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	require.Contains(t, environ(), token, "control: the token is visible before the scrub")

	_, err = stdin.Write([]byte("go\n"))
	require.NoError(t, err)
	line, err = out.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("scrubbed %s \"\" \"\"\n", token), line, "the resolved copy survives; the variables are gone")
	env := environ()
	assert.NotContains(t, env, token)
	assert.Contains(t, env, "KEEP=me")
	assert.True(t, strings.Contains(env, "GH_TOKEN="), "the names stay, the values are zeroed")
	require.NoError(t, stdin.Close())
}
