package main

import (
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/agentloop"
	"github.com/awf-project/awf/tests/fakeprovider"
	"github.com/awf-project/awf/tests/fakeprovider/proxied"
)

// buildStatic builds this command the way the Makefile does (CGO_ENABLED=0).
func buildStatic(t *testing.T, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
}

// staticLoop is this command built as buildStatic builds it.
func staticLoop(t *testing.T) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "loop")
	buildStatic(t, bin)
	b, err := os.ReadFile(bin)
	require.NoError(t, err)
	return b
}

// enclaveRoot lays out a new directory as the enclave's paths, for the loop
// to run chrooted into: loop at agentloop.BinaryPath, a seed holding
// net/retry.go, the task, the schema and c as the loop's config, given a
// deadline a minute away and the Anthropic API version.
func enclaveRoot(t *testing.T, loop []byte, c agentloop.Config, task, schema string) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.Chmod(root, 0o755))
	in := func(p string) string { return filepath.Join(root, p) }
	for _, d := range []string{"enclave/bin", "enclave/out", "enclave/repo/net", "tmp"} {
		require.NoError(t, os.MkdirAll(in(d), 0o755))
	}
	c.MaxOutputBytes = 8192
	c.DeadlineUnixMilli = time.Now().Add(time.Minute).UnixMilli()
	c.AnthropicVersion = "2023-06-01"
	cfg, err := json.Marshal(c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(in(agentloop.BinaryPath), loop, 0o755))
	for p, b := range map[string][]byte{
		agentloop.RepoDir + "/net/retry.go": []byte("// retry policy\n"),
		agentloop.ConfigPath:                cfg,
		agentloop.TaskPath:                  []byte(task),
		agentloop.SchemaPath:                []byte(schema),
	} {
		require.NoError(t, os.WriteFile(in(p), b, 0o644))
	}
	return root
}

// TestStatic: the binary has no interpreter and no dynamic section, so it
// runs in an enclave that holds nothing but itself.
func TestStatic(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "loop")
	buildStatic(t, bin)
	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "no program interpreter")
		assert.NotEqual(t, elf.PT_DYNAMIC, p.Type, "no dynamic section")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	assert.Empty(t, libs)
}

// TestEnclaveLayout runs the binary chrooted into a directory laid out as
// the enclave's paths (nothing else in it: no /proc, no /etc, no libc),
// against the real API proxy in front of the scripted fake provider, for
// both profiles: it answers, writes result.json and the transcript, and
// exits 0. An argument is refused.
func TestEnclaveLayout(t *testing.T) {
	loop := staticLoop(t)
	for _, profile := range []string{agentloop.ProfileOpenAI, agentloop.ProfileAnthropic} {
		t.Run(profile, func(t *testing.T) {
			fake := fakeprovider.New(t,
				fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "search", Args: map[string]any{"pattern": "retry"}},
				fakeprovider.Turn{Kind: fakeprovider.Finish, Args: map[string]any{"result": map[string]any{"owner": "net", "sure": true}}})
			endpoint, tok := proxied.Start(t, fake, "m", 1024, 8)

			root := enclaveRoot(t, loop, agentloop.Config{Profile: profile, Model: "m", Endpoint: endpoint, Capability: tok,
				MaxModelRequests: 8, MaxModelTokens: 1024}, "Who owns retries, and are you sure?",
				`{"type":"object","fields":{"owner":{"type":"enum","values":["net","store"]},"sure":{"type":"boolean"}}}`)
			in := func(p string) string { return filepath.Join(root, p) }

			run := func(args ...string) (int, error) {
				cmd := exec.Command(agentloop.BinaryPath, args...)
				cmd.Dir, cmd.Env = "/", []string{}
				cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
				err := cmd.Run()
				if ee, ok := err.(*exec.ExitError); ok {
					return ee.ExitCode(), nil
				}
				return 0, err
			}
			code, err := run("--anything")
			require.NoError(t, err)
			assert.Equal(t, agentloop.ExitBadInput, code)
			assert.Equal(t, 0, fake.Count())

			code, err = run()
			require.NoError(t, err)
			tr, _ := os.ReadFile(in(agentloop.TranscriptPath))
			require.Equal(t, agentloop.ExitOK, code, "%s", tr)
			res, err := os.ReadFile(in(agentloop.ResultPath))
			require.NoError(t, err)
			assert.Equal(t, `{"owner":"net","sure":true}`, string(res))
			assert.Contains(t, string(tr), `net/retry.go:1: // retry policy`)
			assert.NotContains(t, string(tr), tok)

			code, err = run()
			require.NoError(t, err)
			assert.Equal(t, agentloop.ExitOutputError, code, "outputs are never overwritten")
		})
	}
}
