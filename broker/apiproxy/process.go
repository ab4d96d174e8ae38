package apiproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/broker/jsonfile"
	"github.com/awf-project/awf/broker/sysuser"

	"github.com/awf-project/awf/isolate/ownthread"
)

// ReadyTimeout bounds the proxy process's start-up.
const ReadyTimeout = 30 * time.Second

// stopGrace is how long the process gets after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// The file descriptors of the proxy process ("awf run --api-proxy SPEC").
const (
	fdSecrets = 3 // read to EOF: the JSON Secrets, then closed
	fdReady   = 4 // one line "ready ADDR TOKEN\n", then closed
	fdHandoff = 5 // optional: a Unix socket that carries listeners (SCM_RIGHTS)
)

// Spec is what the proxy process needs to start. awf writes it (0600) into
// the run's private root; it holds no secret: the keys arrive over a pipe.
type Spec struct {
	// Listen is a loopback host:port; port 0 picks a free one.
	Listen string
	// AuditPath is the JSONL audit log, in the run's protected audit dir.
	AuditPath string
	Targets   []SpecTarget
	// Agent is the primary agent's limits; nil issues no agent capability.
	Agent *Limits
	// Handoff says that fd 5 carries further listeners (each created in
	// the agent's network namespace) to serve, until it is closed.
	Handoff bool
	// Control says that fd 6 is the control channel (control.go), which
	// issues enclave capabilities no wider than Enclave; Enclave is
	// required with it.
	Control bool
	Enclave *Limits
	// User is who the proxy runs as once it holds its keys, audit log and
	// listeners (see UserName); a proxy started as root refuses to serve
	// without one.
	User *sysuser.IDs
}

// SpecTarget is one upstream of a Spec, without its key.
type SpecTarget struct {
	Protocol Protocol
	BaseURL  string
}

// Secrets travel from awf to the proxy process over a pipe, never through
// argv, the environment or a file.
type Secrets struct {
	Keys map[Protocol]string
}

// SpecFor renders the apiProxy block as a Spec. The agent gets a
// capability for every target with a model, with the block's limits.
func SpecFor(c *config.APIProxy, auditPath string) Spec {
	s := Spec{Listen: "127.0.0.1:0", AuditPath: auditPath}
	models := map[Protocol]string{}
	for _, name := range config.APITargets() {
		t, ok := c.Targets[name]
		if !ok {
			continue
		}
		s.Targets = append(s.Targets, SpecTarget{Protocol: Protocol(name), BaseURL: t.BaseURL})
		if t.Model != "" {
			models[Protocol(name)] = t.Model
		}
	}
	if len(models) > 0 {
		s.Agent = &Limits{
			Models:           models,
			MaxRequests:      c.MaxModelRequests,
			MaxTokens:        c.MaxModelTokens,
			MaxRequestBytes:  c.MaxRequestBytes,
			MaxResponseBytes: c.MaxResponseBytes,
			Timeout:          time.Duration(c.TimeoutSeconds) * time.Second,
		}
	}
	return s
}

// KeyVariables lists the variables holding the block's keys, for
// staging.ScrubEnviron: after ReadKeys, no other process may see them.
func KeyVariables(c *config.APIProxy) []string {
	var out []string
	for _, name := range config.APITargets() {
		if t, ok := c.Targets[name]; ok {
			out = append(out, t.APIKeyEnv)
		}
	}
	return out
}

// ReadKeys reads each target's key once, as a copy (the environment is
// scrubbed afterwards). An empty key is an error naming the variable.
func ReadKeys(c *config.APIProxy, getenv func(string) string) (map[Protocol]string, error) {
	keys := map[Protocol]string{}
	for _, name := range config.APITargets() {
		t, ok := c.Targets[name]
		if !ok {
			continue
		}
		v := getenv(t.APIKeyEnv)
		if v == "" {
			return nil, fmt.Errorf("apiProxy.targets.%s: $%s is empty or unset", name, t.APIKeyEnv)
		}
		keys[Protocol(name)] = strings.Clone(v)
	}
	return keys, nil
}

// WriteSpec writes s to path, exclusively, 0600.
func WriteSpec(path string, s Spec) error { return jsonfile.WriteSpec(path, "api proxy spec", s) }

// ReadSpec reads a spec written by WriteSpec; the file must be a regular
// root-owned file closed to others, of at most jsonfile.MaxSpecBytes.
func ReadSpec(path string) (Spec, error) {
	var s Spec
	err := jsonfile.ReadSpec(path, "api proxy spec", &s)
	return s, err
}

// Process is a running proxy process.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	// Addr is the loopback host:port the proxy listens on.
	Addr string
	// AgentToken is the primary agent's capability ("" without one).
	AgentToken string
}

// Start runs "exe run --api-proxy specPath" as its own process in awf's
// network namespace (it needs upstream egress; the broker has none), in
// its own process group, killed if awf dies. keys go over a pipe; handoff,
// when not nil, is the proxy's end of the listener hand-off socket. Start
// returns once the proxy listens.
func Start(ctx context.Context, exe, specPath string, keys map[Protocol]string, handoff *os.File, logw io.Writer) (*Process, error) {
	return StartWithControl(ctx, exe, specPath, keys, handoff, nil, logw)
}

// StartWithControl is Start with the proxy's end of a control channel
// (NewControlPair) at fd 6, for a spec with Control set.
func StartWithControl(ctx context.Context, exe, specPath string, keys map[Protocol]string, handoff, control *os.File, logw io.Writer) (*Process, error) {
	sr, sw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("api proxy: %w", err)
	}
	rr, rw, err := os.Pipe()
	if err != nil {
		sr.Close()
		sw.Close()
		return nil, fmt.Errorf("api proxy: %w", err)
	}
	defer rr.Close()
	cmd := exec.Command(exe, "run", "--api-proxy", specPath)
	cmd.Env = processEnv(os.Getenv)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logw, logw
	cmd.ExtraFiles = []*os.File{sr, rw}
	if handoff != nil || control != nil {
		// A nil entry leaves its descriptor closed in the child.
		cmd.ExtraFiles = append(cmd.ExtraFiles, handoff)
	}
	if control != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, control)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// From a thread of its own: the parent-death signal follows the forking
	// thread, which must outlive the proxy (see isolate/ownthread).
	done, err := ownthread.Start(cmd)
	sr.Close()
	rw.Close()
	if err != nil {
		sw.Close()
		return nil, fmt.Errorf("api proxy: start: %w", err)
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = <-done; close(p.exited) }()
	werr := json.NewEncoder(sw).Encode(Secrets{Keys: keys})
	sw.Close()
	if werr != nil {
		p.Stop()
		return nil, fmt.Errorf("api proxy: send keys: %w", werr)
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(io.LimitReader(rr, 4096)).ReadString('\n')
		line <- s
	}()
	t := time.NewTimer(ReadyTimeout)
	defer t.Stop()
	select {
	case s := <-line:
		f := strings.Fields(s)
		if len(f) < 2 || len(f) > 3 || f[0] != "ready" {
			p.Stop()
			return nil, errors.New("api proxy: exited before it was ready (see its messages above)")
		}
		p.Addr = f[1]
		if len(f) == 3 {
			p.AgentToken = f[2]
		}
	case <-t.C:
		p.Stop()
		return nil, fmt.Errorf("api proxy: not ready after %v", ReadyTimeout)
	case <-ctx.Done():
		p.Stop()
		return nil, ctx.Err()
	}
	return p, nil
}

// processEnv is the proxy's whole environment: no credential, no proxy
// variable; only the variables that choose the system's TLS roots pass.
func processEnv(getenv func(string) string) []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	for _, k := range []string{"SSL_CERT_FILE", "SSL_CERT_DIR"} {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Pid is the proxy's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop sends SIGTERM, waits up to a grace, then kills the process group.
func (p *Process) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("api proxy: %w", p.err)
		}
		return nil
	case <-t.C:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return errors.New("api proxy: killed after the shutdown grace")
}

// Serve is the proxy process: it reads the keys from fd 3, opens the audit
// log, listens, issues the agent's capability, drops root for s.User,
// reports "ready ADDR TOKEN" on fd 4, and serves until ctx ends.
func Serve(ctx context.Context, s Spec) error {
	secrets := os.NewFile(fdSecrets, "secrets")
	var sec Secrets
	err := json.NewDecoder(io.LimitReader(secrets, 1<<16)).Decode(&sec)
	secrets.Close()
	if err != nil {
		return fmt.Errorf("api proxy: keys: %w", err)
	}
	ready := os.NewFile(fdReady, "ready")
	defer ready.Close()
	audit, err := OpenAuditFile(s.AuditPath)
	if err != nil {
		return err
	}
	defer audit.Close()
	var targets []Target
	for _, t := range s.Targets {
		targets = append(targets, Target{Protocol: t.Protocol, BaseURL: t.BaseURL, Key: sec.Keys[t.Protocol]})
	}
	sec = Secrets{}
	p, err := New(Options{Targets: targets, Audit: audit})
	if err != nil {
		return err
	}
	defer p.Close()
	host, _, err := net.SplitHostPort(s.Listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("api proxy: listen %q: want a loopback IP address", s.Listen)
	}
	l, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("api proxy: %w", err)
	}
	timeout := time.Minute
	token := ""
	if s.Agent != nil {
		if token, err = p.Issue(CallerAgent, *s.Agent); err != nil {
			l.Close()
			return err
		}
		timeout = s.Agent.Timeout
	}
	if err := dropRoot(s.User); err != nil {
		l.Close()
		return err
	}
	srv := NewServer(p, timeout)
	sem := make(chan struct{}, MaxConns)
	serve := func(l net.Listener) {
		if err := srv.Serve(&limitListener{Listener: l, sem: sem}); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "awf api-proxy: serve: %v\n", err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); serve(l) }()
	if s.Handoff {
		// Shutdown closes handed-off listeners too and waits for their
		// connections, so their goroutines need no tracking here.
		// The receiver owns the socket and closes it when the sender
		// closes its end: closing it here, under a blocked Recvmsg, would
		// neither wake that call nor be safe (the descriptor's number could
		// be reused while the call still names it).
		h := os.NewFile(fdHandoff, "handoff")
		go receiveListeners(h, func(l net.Listener) { go serve(l) })
	}
	if s.Control {
		if s.Enclave == nil {
			srv.Close()
			return errors.New("api proxy: a control channel needs the enclave limits")
		}
		c := os.NewFile(fdControl, "control")
		go func() {
			if err := serveControl(ctx, c, p, *s.Enclave, func(l net.Listener) { go serve(l) }); err != nil {
				fmt.Fprintf(os.Stderr, "awf api-proxy: %v\n", err)
			}
		}()
	}
	if _, err := fmt.Fprintf(ready, "ready %s %s\n", l.Addr(), token); err != nil {
		srv.Close()
		return fmt.Errorf("api proxy: ready: %w", err)
	}
	ready.Close()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	wg.Wait()
	return nil
}

// MaxConns caps the proxy process's concurrent connections, over all its
// listeners; a further one waits in the listen backlog.
const MaxConns = 64

// limitListener accepts only while fewer than cap(sem) of its connections
// are open.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, sem: l.sem}, nil
}

// limitConn gives its slot back once, when it is first closed.
type limitConn struct {
	net.Conn
	sem  chan struct{}
	once sync.Once
}

func (c *limitConn) Close() error {
	c.once.Do(func() { <-c.sem })
	return c.Conn.Close()
}

// NewServer wraps p in an http.Server whose read and write deadlines cover
// the longest request a capability may take.
func NewServer(p *Proxy, timeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       timeout + 10*time.Second,
		WriteTimeout:      timeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}

// receiveListeners reads listener descriptors sent over the Unix socket h
// (one per message, SCM_RIGHTS) and serves each, until the sender closes
// its end; then it closes h.
func receiveListeners(h *os.File, serve func(net.Listener)) {
	defer h.Close()
	for {
		l, err := RecvListener(h)
		if err != nil {
			return
		}
		serve(l)
	}
}

// SendListener sends l's socket over the Unix socket h. It is how the
// agent shim, inside the agent's network namespace, gives the proxy a
// listener there; the proxy itself never enters that namespace.
func SendListener(h *os.File, l *net.TCPListener) error {
	f, err := l.File()
	if err != nil {
		return fmt.Errorf("api proxy hand-off: %w", err)
	}
	defer f.Close()
	if err := unix.Sendmsg(int(h.Fd()), []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		return fmt.Errorf("api proxy hand-off: %w", err)
	}
	return nil
}

// RecvListener receives one listener sent by SendListener.
func RecvListener(h *os.File) (net.Listener, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(h.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("api proxy hand-off: %w", err)
	}
	if n == 0 && oobn == 0 {
		return nil, io.EOF
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("api proxy hand-off: no descriptor")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, errors.New("api proxy hand-off: want exactly one descriptor")
	}
	f := os.NewFile(uintptr(fds[0]), "handoff-listener")
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("api proxy hand-off: %w", err)
	}
	if a, ok := l.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		l.Close()
		return nil, errors.New("api proxy hand-off: not a loopback TCP listener")
	}
	return l, nil
}
