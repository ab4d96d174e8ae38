package main

import (
	"bytes"
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/broker/client"
	"github.com/awf-project/awf/broker/client/clienttest"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/tests/fixture"
)

var cli fixture.CLI

func TestMain(m *testing.M) { fixture.MainWithCLI(m, "bounded-agent", &cli.Bin) }

// errLine is every failure's line.
const errLine = client.ErrorLine + "\n"

// taskRuntime answers every enclave with the task text as its result, so
// that the test sees exactly what reached the broker.
type taskRuntime struct{ fixture.EchoRuntime }

func (taskRuntime) Name() string { return "task-echo" }
func (taskRuntime) Run(context.Context, isolate.Spec) isolate.Outcome {
	return isolate.Err(isolate.KindLaunchFailed, "not an enclave")
}
func (taskRuntime) RunEnclave(_ context.Context, _ isolate.Template, e broker.Enclave) broker.EnclaveOutcome {
	for _, f := range e.Files {
		if f.Path == broker.EnclaveTaskPath {
			return broker.EnclaveOutcome{Outcome: isolate.Outcome{Kind: isolate.KindOK, Output: f.Content}}
		}
	}
	return broker.EnclaveOutcome{Outcome: isolate.Err(isolate.KindOutputMissing, "no task")}
}

type issuer struct{}

func (issuer) Issue(context.Context, string, int, int) (string, error) {
	return "awf-cap-" + strings.Repeat("0", 64), nil
}
func (issuer) Revoke(context.Context, string) error { return nil }

func startBroker(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	k, err := broker.NewAgentKind(broker.AgentOptions{
		MaxTaskBytes: 4096, MaxOutputBytes: 8192, Profile: "openai", Model: "m",
		Proxy: netip.MustParseAddrPort("169.254.77.1:8080"), MaxModelRequests: 8, MaxModelTokens: 1024,
		Timeout: 5 * time.Second, Limits: isolate.DefaultLimits(), LoopBinary: "/loop", Issuer: issuer{},
		TranscriptDir: filepath.Join(dir, "audit", "transcripts"),
	})
	require.NoError(t, err)
	return fixture.ServeBroker(t, dir, "bounded-agent.jsonl", broker.Options{Kind: k, Runtime: taskRuntime{}, MaxInvocations: 100, Timeout: 5 * time.Second,
		Template: isolate.Template{Limits: isolate.DefaultLimits()},
		Seeds:    []broker.Seed{{Repo: "o/r", Dir: "/s", Sensitivity: "public"}}})
}

func TestCLIAgainstBroker(t *testing.T) {
	sock := startBroker(t)
	env := []string{proto.AgentSocketEnv + "=" + sock}
	enum := `{"type":"enum","values":["net","store","api","none"]}`
	assert.Equal(t, `{"status":"ok","result":"store"}`+"\n", cli.Run(t, env, strings.NewReader(`"store"`), "--repo", "o/r", "--schema", enum))
	assert.Equal(t, `{"status":"ok","result":"net"}`+"\n", cli.Run(t, env, strings.NewReader(` "net" `), "--schema", enum, "--repo", "O/R"))
	// Failures from the broker are the same bytes as local ones.
	assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(`"net"`), "--repo", "o/unknown", "--schema", enum))
	assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(`"web"`), "--repo", "o/r", "--schema", enum))
	assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(`"net"`), "--repo", "o/r", "--schema", `{"type":"string"}`))
	// The broker's task cap (4096) applies even when the CLI's is higher.
	assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(`"net"`+strings.Repeat(" ", 4096)), "--repo", "o/r", "--schema", enum))
}

func TestCLIRejectsLocally(t *testing.T) {
	sock, contacted := fixture.RecordingSocket(t)
	env := []string{proto.AgentSocketEnv + "=" + sock}
	b := `{"type":"boolean"}`
	// The parser's refusals, and the options the CLI has not: it cannot
	// name a model, runtime, tool, endpoint or task.
	cases := clienttest.RefusedArgs(b)
	for name, flag := range map[string][]string{
		"model":     {"--model", "gpt-4o"},
		"runtime":   {"--runtime", "docker"},
		"tool":      {"--tool", "shell"},
		"endpoint":  {"--endpoint", "http://x"},
		"task flag": {"--task", "x"},
	} {
		cases[name] = append([]string{"--repo", "o/r", "--schema", b}, flag...)
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader("x"), args...))
		})
	}
	ok := []string{"--repo", "o/r", "--schema", b}
	t.Run("empty stdin", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(""), ok...))
	})
	t.Run("task over the hard cap", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(strings.Repeat("a", 65537)), ok...))
	})
	t.Run("task over the configured cap", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, append(env, proto.AgentMaxTaskBytesEnv+"=10"), strings.NewReader(strings.Repeat("a", 11)), ok...))
	})
	t.Run("bad configured cap", func(t *testing.T) {
		for _, v := range []string{"0", "-1", "65537", "x", "10 "} {
			assert.Equal(t, errLine, cli.Run(t, append(env, proto.AgentMaxTaskBytesEnv+"="+v), strings.NewReader("a"), ok...), v)
		}
	})
	t.Run("invalid utf8", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, env, bytes.NewReader([]byte{'a', 0xff}), ok...))
	})
	t.Run("no socket env", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, nil, strings.NewReader("x"), ok...))
	})
	t.Run("the query socket is not the agent's", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, []string{proto.QuerySocketEnv + "=" + sock}, strings.NewReader("x"), ok...))
	})
	t.Run("tty stdin", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, env, fixture.OpenPTY(t), ok...))
	})
	assert.Empty(t, contacted, "a locally rejected request contacted the broker")

	// Within the configured cap it is sent.
	cli.Run(t, append(env, proto.AgentMaxTaskBytesEnv+"=10"), strings.NewReader(strings.Repeat("a", 10)), ok...)
	select {
	case <-contacted:
	case <-time.After(5 * time.Second):
		t.Fatal("a valid request did not reach the socket")
	}
}

func TestCLIOddResponsesAreTheErrorLine(t *testing.T) {
	sock := fixture.AnsweringSocket(t, fixture.HTTPResponse("200 OK", `{"status":"error","why":"budget"}`))
	assert.Equal(t, errLine, cli.Run(t, []string{proto.AgentSocketEnv + "=" + sock}, strings.NewReader("x"), "--repo", "o/r", "--schema", `{"type":"boolean"}`))
}

func TestCLIIsStatic(t *testing.T) { fixture.RequireStatic(t, cli.Bin) }
