package apiproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/broker/sysuser"
	"github.com/awf-project/awf/tests/fakeprovider"
)

// TestMain lets the test binary be the proxy process, as the awf binary is
// in production: Start runs "EXE run --api-proxy SPEC".
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "run" && os.Args[2] == "--api-proxy" {
		spec, err := ReadSpec(os.Args[3])
		if err == nil {
			ctx, stop := signalContext()
			err = Serve(ctx, spec)
			stop()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) == 3 && os.Args[1] == "proxy-parent" {
		// A stand-in for awf: start the proxy, report its pid, and wait
		// to be killed.
		exe, _ := os.Executable()
		p, err := Start(context.Background(), exe, os.Args[2], map[Protocol]string{OpenAI: openAIKey}, nil, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("pid %d\n", p.Pid())
		select {}
	}
	os.Exit(runWithTestUser(m))
}

// testUserName is the throwaway system user that these tests' proxy
// processes drop to (Spec.User); runWithTestUser makes it and removes it.
// Under -fuzz, the workers are this binary too and start while the
// coordinator holds the user: only the process that made it removes it.
const testUserName = "awf-pxtest"

func runWithTestUser(m *testing.M) int {
	ctx := context.Background()
	_, err := sysuser.Lookup(testUserName)
	made := errors.Is(err, sysuser.ErrUnknown)
	if _, err := sysuser.Ensure(ctx, testUserName); err != nil {
		fmt.Fprintf(os.Stderr, "apiproxy tests need the system user %s: %v\n", testUserName, err)
		return 1
	}
	code := m.Run()
	if made {
		if err := sysuser.Remove(ctx, testUserName); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}

// testUser returns the ids of testUserName, for Spec.User.
func testUser(t testing.TB) *sysuser.IDs {
	t.Helper()
	ids, err := sysuser.Lookup(testUserName)
	require.NoError(t, err)
	return &ids
}

func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	notifyTerm(ch)
	go func() { <-ch; cancel() }()
	return ctx, cancel
}

// startProcess runs the proxy as a child process in front of fake, with the
// fake's CA as the system roots (SSL_CERT_FILE, which the process passes on).
// The CA's directory is root's alone, so only a proxy that loads its roots
// before it drops root can reach the fake.
func startProcess(t testing.TB, fake *fakeprovider.Server, agent *Limits, handoff *os.File) (*Process, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700))
	ca := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(ca, fake.CertPEM(), 0o644))
	t.Setenv("SSL_CERT_FILE", ca)
	audit := filepath.Join(dir, AuditFile)
	spec := Spec{Listen: "127.0.0.1:0", AuditPath: audit, Agent: agent, Handoff: handoff != nil, User: testUser(t),
		Targets: []SpecTarget{{Protocol: OpenAI, BaseURL: fake.URL()}, {Protocol: Anthropic, BaseURL: fake.URL()}}}
	specPath := filepath.Join(dir, "api-proxy.json")
	require.NoError(t, WriteSpec(specPath, spec))
	exe, err := os.Executable()
	require.NoError(t, err)
	p, err := Start(context.Background(), exe, specPath, map[Protocol]string{OpenAI: openAIKey, Anthropic: anthropicKey}, handoff, os.Stderr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop() })
	return p, audit
}

func post(t testing.TB, url, auth string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+auth)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestProcessHoldsTheKeyOnlyInMemory(t *testing.T) {
	fake := fakeprovider.New(t, fakeprovider.Turn{Kind: fakeprovider.Finish}, fakeprovider.Turn{Kind: fakeprovider.Finish})
	lim := defaultLimits()
	p, auditPath := startProcess(t, fake, &lim, nil)
	require.True(t, strings.HasPrefix(p.AgentToken, capabilityPrefix))
	host, _, err := net.SplitHostPort(p.Addr)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)

	st, b := post(t, "http://"+p.Addr+OpenAI.Path(), p.AgentToken, fakeprovider.OpenAIRequest(openAIModel, 10))
	require.Equal(t, http.StatusOK, st, string(b))
	st, _ = post(t, "http://"+p.Addr+Anthropic.Path(), p.AgentToken, fakeprovider.AnthropicRequest(claudeModel, 10))
	require.Equal(t, http.StatusOK, st)
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "Bearer "+openAIKey, reqs[0].Header.Get("Authorization"))
	assert.Equal(t, anthropicKey, reqs[1].Header.Get("X-Api-Key"))

	for _, f := range []string{"environ", "cmdline"} {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", p.Pid(), f))
		require.NoError(t, err)
		assert.NotContains(t, string(raw), openAIKey, f)
		assert.NotContains(t, string(raw), anthropicKey, f)
		assert.NotContains(t, string(raw), p.AgentToken, f)
	}
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.Pid()))
	for _, kv := range strings.Split(string(env), "\x00") {
		name, _, _ := strings.Cut(kv, "=")
		assert.Contains(t, []string{"", "PATH", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR"}, name, "the proxy's environment is fixed")
	}

	require.NoError(t, p.Stop())
	fi, err := os.Stat(auditPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	raw, err := os.ReadFile(auditPath)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(raw), "\n"))
	assert.NotContains(t, string(raw), openAIKey)
	assert.NotContains(t, string(raw), p.AgentToken)
	assert.Contains(t, string(raw), `"caller":"agent"`)
}

func TestProcessServesHandedOffListener(t *testing.T) {
	fake := fakeprovider.New(t, fakeprovider.Turn{Kind: fakeprovider.Finish})
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	proxyEnd, shimEnd := os.NewFile(uintptr(fds[0]), "p"), os.NewFile(uintptr(fds[1]), "s")
	defer shimEnd.Close()
	lim := defaultLimits()
	p, _ := startProcess(t, fake, &lim, proxyEnd)
	proxyEnd.Close()
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, SendListener(shimEnd, l))
	l.Close() // the proxy has its own copy now
	st, b := post(t, "http://"+addr+OpenAI.Path(), p.AgentToken, fakeprovider.OpenAIRequest(openAIModel, 10))
	assert.Equal(t, http.StatusOK, st, string(b))
	assert.Equal(t, 1, fake.Count())
	// A clean end with the hand-off still open: under -race, a data race in
	// the proxy process makes it exit 66, and Stop says so.
	require.NoError(t, p.Stop())
}

// TestProcessDropsRoot checks every thread of a serving proxy from
// outside: the test user's ids, no supplementary group, no capability, not
// dumpable. The upstream's CA sits in a directory only root may read, so
// the answer also shows that the proxy loaded its roots before it dropped
// root.
func TestProcessDropsRoot(t *testing.T) {
	fake := fakeprovider.New(t, fakeprovider.Turn{Kind: fakeprovider.Finish})
	lim := defaultLimits()
	p, audit := startProcess(t, fake, &lim, nil)
	fi, err := os.Stat(filepath.Dir(audit))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the CA's directory must be root's alone")
	st, b := post(t, "http://"+p.Addr+OpenAI.Path(), p.AgentToken, fakeprovider.OpenAIRequest(openAIModel, 10))
	require.Equal(t, http.StatusOK, st, string(b))
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.Pid()))
	require.NoError(t, err)
	require.NotEmpty(t, tasks)
	for _, task := range tasks {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", p.Pid(), task.Name()))
		require.NoError(t, err)
		assert.NoError(t, checkStatus(string(status), *testUser(t)), "thread %s", task.Name())
	}
	// The kernel gives a process that is not dumpable /proc files owned by
	// root: another proxy of the same uid cannot trace this one.
	var pst unix.Stat_t
	require.NoError(t, unix.Stat(fmt.Sprintf("/proc/%d/environ", p.Pid()), &pst))
	assert.Zero(t, pst.Uid, "the proxy is dumpable after its drop")
}

func TestStartFailsClosed(t *testing.T) {
	fake := fakeprovider.New(t)
	dir := t.TempDir()
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		spec Spec
		log  string
	}{
		{"non-loopback listen", Spec{Listen: "0.0.0.0:0", AuditPath: filepath.Join(dir, "a1.jsonl"),
			Targets: []SpecTarget{{Protocol: OpenAI, BaseURL: fake.URL()}}}, ""},
		{"no audit dir", Spec{Listen: "127.0.0.1:0", AuditPath: filepath.Join(dir, "missing", "a.jsonl"),
			Targets: []SpecTarget{{Protocol: OpenAI, BaseURL: fake.URL()}}}, ""},
		{"http to a remote host", Spec{Listen: "127.0.0.1:0", AuditPath: filepath.Join(dir, "a3.jsonl"),
			Targets: []SpecTarget{{Protocol: OpenAI, BaseURL: "http://192.0.2.1"}}}, ""},
		{"target without key", Spec{Listen: "127.0.0.1:0", AuditPath: filepath.Join(dir, "a4.jsonl"),
			Targets: []SpecTarget{{Protocol: Anthropic, BaseURL: fake.URL()}}}, ""},
		// Run as root, the proxy would serve as root.
		{"no user to drop to", Spec{Listen: "127.0.0.1:0", AuditPath: filepath.Join(dir, "a5.jsonl"),
			Targets: []SpecTarget{{Protocol: OpenAI, BaseURL: fake.URL()}}}, "no user to drop to"},
		{"root as the user", Spec{Listen: "127.0.0.1:0", AuditPath: filepath.Join(dir, "a6.jsonl"), User: &sysuser.IDs{},
			Targets: []SpecTarget{{Protocol: OpenAI, BaseURL: fake.URL()}}}, "must not run as root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			require.NoError(t, WriteSpec(sp, tc.spec))
			var logb bytes.Buffer
			_, err := Start(context.Background(), exe, sp, map[Protocol]string{OpenAI: openAIKey}, nil, &logb)
			assert.Error(t, err, "log: %s", logb.String())
			assert.Contains(t, logb.String(), tc.log)
			assert.NotContains(t, logb.String(), openAIKey)
		})
	}
	assert.Zero(t, fake.Count())
}

func TestSpecForConfig(t *testing.T) {
	c, err := config.Load([]byte(`{"apiProxy":{"targets":{"openai":{"model":"gpt-4o-mini"},"anthropic":{"apiKeyEnv":"MY_KEY"}},"maxModelRequests":3,"timeout":7}}`))
	require.NoError(t, err)
	s := SpecFor(c.APIProxy, "/x/api-proxy.jsonl")
	assert.Equal(t, "127.0.0.1:0", s.Listen)
	assert.Equal(t, []SpecTarget{{OpenAI, "https://api.openai.com"}, {Anthropic, "https://api.anthropic.com"}}, s.Targets)
	require.NotNil(t, s.Agent)
	assert.Equal(t, map[Protocol]string{OpenAI: "gpt-4o-mini"}, s.Agent.Models, "a target without a model is not the agent's")
	assert.Equal(t, 3, s.Agent.MaxRequests)
	assert.Equal(t, 7*time.Second, s.Agent.Timeout)
	assert.Equal(t, []string{"OPENAI_API_KEY", "MY_KEY"}, KeyVariables(c.APIProxy))
	_, err = ReadKeys(c.APIProxy, func(k string) string {
		if k == "OPENAI_API_KEY" {
			return "k"
		}
		return ""
	})
	assert.ErrorContains(t, err, "$MY_KEY is empty")
	keys, err := ReadKeys(c.APIProxy, func(string) string { return "v" })
	require.NoError(t, err)
	assert.Equal(t, map[Protocol]string{OpenAI: "v", Anthropic: "v"}, keys)
}

func TestLimitListenerCapsConnections(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := &limitListener{Listener: inner, sem: make(chan struct{}, 2)}
	defer l.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", inner.Addr().String())
		require.NoError(t, err)
		clients = append(clients, c)
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while two were open")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, first.Close())
	_ = first.Close()
	third := <-accepted
	assert.Len(t, l.sem, 2, "a second Close gives back nothing")
	third.Close()
	second.Close()
	assert.Len(t, clients, 3)
}

func TestProcessDiesWithItsParent(t *testing.T) {
	fake := fakeprovider.New(t)
	dir := t.TempDir()
	specPath := filepath.Join(dir, "api-proxy.json")
	require.NoError(t, WriteSpec(specPath, Spec{Listen: "127.0.0.1:0", AuditPath: filepath.Join(dir, AuditFile),
		User: testUser(t), Targets: []SpecTarget{{Protocol: OpenAI, BaseURL: fake.URL()}}}))
	exe, err := os.Executable()
	require.NoError(t, err)
	parent := exec.Command(exe, "proxy-parent", specPath)
	out, err := parent.StdoutPipe()
	require.NoError(t, err)
	parent.Stderr = os.Stderr
	require.NoError(t, parent.Start())
	defer func() { _ = parent.Process.Kill(); _ = parent.Wait() }()
	var pid int
	_, err = fmt.Fscanf(out, "pid %d\n", &pid)
	require.NoError(t, err)
	require.NoError(t, unix.Kill(pid, 0), "the proxy runs")
	require.NoError(t, parent.Process.Kill())
	_ = parent.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for unix.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = unix.Kill(pid, unix.SIGKILL)
			t.Fatal("the proxy outlived its parent")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
