package apiproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The control channel is how the bounded-agent broker, which has no
// network, gets a capability for each enclave invocation from the proxy
// process and revokes it after the enclave is gone, and how awf hands the
// proxy the listener of the enclave link. It is a SOCK_SEQPACKET pair: one
// JSON request per message (a listener descriptor rides with "listen"),
// one JSON reply per message. It can issue only enclave capabilities, never
// the agent's, and never wider than the enclave limits awf fixed at start.

// fdControl is the proxy process's end of the control channel, when
// Spec.Control is set.
const fdControl = 6

// maxControlMessage caps one control message either way.
const maxControlMessage = 4096

// controlTimeout bounds one control exchange.
const controlTimeout = 5 * time.Second

// enclaveCaller is the only caller shape the control channel issues for:
// "enclave-" and an invocation id.
var enclaveCaller = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^enclave-[0-9a-f]{1,56}$`) })

type controlRequest struct {
	Op          string `json:"op"` // issue, revoke, listen
	Caller      string `json:"caller,omitempty"`
	MaxRequests int    `json:"maxRequests,omitempty"`
	MaxTokens   int    `json:"maxTokens,omitempty"`
	Token       string `json:"token,omitempty"`
}

type controlReply struct {
	OK    bool   `json:"ok"`
	Token string `json:"token,omitempty"`
	Error string `json:"error,omitempty"`
}

// NewControlPair returns the two ends of a control channel: the proxy's
// (pass it to StartWithControl) and the broker's (NewControl).
func NewControlPair() (proxyEnd, brokerEnd *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("api proxy control: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "api-proxy-control"), os.NewFile(uintptr(fds[1]), "api-proxy-control"), nil
}

// Control is the client end of the control channel. It is safe for
// concurrent use; exchanges are serialised.
type Control struct {
	mu sync.Mutex
	c  *net.UnixConn
}

// NewControl wraps the broker's end of the channel; it takes f over.
func NewControl(f *os.File) (*Control, error) {
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("api proxy control: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("api proxy control: not a Unix socket")
	}
	return &Control{c: uc}, nil
}

// Close closes the channel; the proxy stops serving it.
func (c *Control) Close() error { return c.c.Close() }

// Issue asks the proxy for a capability for caller ("enclave-<invocation>")
// with at most maxRequests forwarded requests and maxTokens per request.
func (c *Control) Issue(ctx context.Context, caller string, maxRequests, maxTokens int) (string, error) {
	return c.exchangeToken(ctx, controlRequest{Op: "issue", Caller: caller, MaxRequests: maxRequests, MaxTokens: maxTokens}, nil, "token")
}

// Revoke ends a capability issued by Issue.
func (c *Control) Revoke(ctx context.Context, token string) error {
	_, err := c.exchange(ctx, controlRequest{Op: "revoke", Token: token}, nil)
	return err
}

// Listen hands the proxy a listener to serve (the proxy end of the
// enclave link, created in the namespace awf made for it): a TCP listener
// on a loopback or IPv4 link-local address. It returns the listener's id
// for Unlisten.
func (c *Control) Listen(ctx context.Context, l *net.TCPListener) (string, error) {
	f, err := l.File()
	if err != nil {
		return "", fmt.Errorf("api proxy control: %w", err)
	}
	defer f.Close()
	return c.exchangeToken(ctx, controlRequest{Op: "listen"}, f, "listener id")
}

// Unlisten makes the proxy close a listener that Listen handed over, so
// that nothing of a torn-down enclave stays open in the proxy (its socket
// would keep the enclave's namespace alive).
func (c *Control) Unlisten(ctx context.Context, id string) error {
	_, err := c.exchange(ctx, controlRequest{Op: "unlisten", Token: id}, nil)
	return err
}

// exchangeToken is exchange for the operations whose reply carries an id in
// its Token field (Issue's token, Listen's listener id, named by what); an
// empty one is an error.
func (c *Control) exchangeToken(ctx context.Context, req controlRequest, fd *os.File, what string) (string, error) {
	r, err := c.exchange(ctx, req, fd)
	if err != nil {
		return "", err
	}
	if r.Token == "" {
		return "", errors.New("api proxy control: no " + what + " in the reply")
	}
	return r.Token, nil
}

func (c *Control) exchange(ctx context.Context, req controlRequest, fd *os.File) (controlReply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dl := time.Now().Add(controlTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = c.c.SetDeadline(dl)
	defer func() { _ = c.c.SetDeadline(time.Time{}) }()
	b, err := json.Marshal(req)
	if err != nil {
		return controlReply{}, fmt.Errorf("api proxy control: %w", err)
	}
	var oob []byte
	if fd != nil {
		oob = unix.UnixRights(int(fd.Fd()))
	}
	if _, _, err := c.c.WriteMsgUnix(b, oob, nil); err != nil {
		return controlReply{}, fmt.Errorf("api proxy control: %s: %w", req.Op, err)
	}
	buf := make([]byte, maxControlMessage)
	n, _, flags, _, err := c.c.ReadMsgUnix(buf, nil)
	if err != nil {
		return controlReply{}, fmt.Errorf("api proxy control: %s: %w", req.Op, err)
	}
	if flags&unix.MSG_TRUNC != 0 || n == 0 {
		return controlReply{}, fmt.Errorf("api proxy control: %s: malformed reply", req.Op)
	}
	var r controlReply
	if err := strictJSON(buf[:n], &r); err != nil {
		return controlReply{}, fmt.Errorf("api proxy control: %s: %w", req.Op, err)
	}
	if !r.OK {
		return r, fmt.Errorf("api proxy control: %s refused: %s", req.Op, r.Error)
	}
	return r, nil
}

func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data")
	}
	return nil
}

// controlServer is the proxy process's side of the channel.
type controlServer struct {
	p *Proxy
	// enclave is the widest capability the channel may issue: awf fixes
	// it at start from boundedAgents (models, body caps, timeout) and the
	// requests and tokens caps of one invocation.
	enclave Limits
	serve   func(net.Listener)

	mu        sync.Mutex
	issued    map[string]string // token → caller, for revocation by issuer only
	listeners map[string]*ownedListener
	nextID    int
}

// ownedListener is a handed-over listener that Unlisten closes; after that
// Accept reports http.ErrServerClosed, as a stopped server's would.
type ownedListener struct {
	net.Listener
	mu     sync.Mutex
	closed bool
}

func (l *ownedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		l.mu.Lock()
		closed := l.closed
		l.mu.Unlock()
		if closed {
			return nil, http.ErrServerClosed
		}
	}
	return c, err
}

func (l *ownedListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return l.Listener.Close()
}

// serveControl answers requests on h until it is closed or ctx ends.
func serveControl(ctx context.Context, h *os.File, p *Proxy, enclave Limits, serve func(net.Listener)) error {
	if err := enclave.validate(); err != nil {
		h.Close()
		return fmt.Errorf("api proxy control: enclave %w", err)
	}
	c, err := net.FileConn(h)
	h.Close()
	if err != nil {
		return fmt.Errorf("api proxy control: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return errors.New("api proxy control: not a Unix socket")
	}
	stop := context.AfterFunc(ctx, func() { uc.Close() })
	defer stop()
	defer uc.Close()
	s := &controlServer{p: p, enclave: enclave, serve: serve, issued: map[string]string{}, listeners: map[string]*ownedListener{}}
	defer s.closeListeners()
	buf := make([]byte, maxControlMessage)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
		if err != nil || (n == 0 && oobn == 0) {
			return nil // closed: the broker is gone
		}
		fds := receivedFDs(oob[:oobn])
		var reply controlReply
		if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
			closeFDs(fds)
			reply = controlReply{Error: "message too long"}
		} else {
			reply = s.handle(buf[:n], fds)
		}
		b, _ := json.Marshal(reply)
		if _, _, err := uc.WriteMsgUnix(b, nil, nil); err != nil {
			return fmt.Errorf("api proxy control: reply: %w", err)
		}
	}
}

// handle answers one request; it owns fds.
func (s *controlServer) handle(msg []byte, fds []int) controlReply {
	fail := func(format string, args ...any) controlReply {
		closeFDs(fds)
		return controlReply{Error: fmt.Sprintf(format, args...)}
	}
	var req controlRequest
	if err := strictJSON(msg, &req); err != nil {
		return fail("malformed request: %v", err)
	}
	if req.Op != "listen" && len(fds) > 0 {
		return fail("%s carries no descriptor", req.Op)
	}
	switch req.Op {
	case "issue":
		switch {
		case !enclaveCaller().MatchString(req.Caller):
			return fail("caller %q is not an enclave invocation", req.Caller)
		case req.MaxRequests < 1 || req.MaxRequests > s.enclave.MaxRequests:
			return fail("maxRequests %d must be in 1..%d", req.MaxRequests, s.enclave.MaxRequests)
		case req.MaxTokens < 1 || req.MaxTokens > s.enclave.MaxTokens:
			return fail("maxTokens %d must be in 1..%d", req.MaxTokens, s.enclave.MaxTokens)
		}
		l := s.enclave
		l.MaxRequests, l.MaxTokens = req.MaxRequests, req.MaxTokens
		tok, err := s.p.Issue(req.Caller, l)
		if err != nil {
			return fail("%v", err)
		}
		s.mu.Lock()
		s.issued[tok] = req.Caller
		s.mu.Unlock()
		return controlReply{OK: true, Token: tok}
	case "revoke":
		s.mu.Lock()
		_, ours := s.issued[req.Token]
		delete(s.issued, req.Token)
		s.mu.Unlock()
		// Only what this channel issued: the agent's capability is not the
		// broker's to end.
		if !ours || !s.p.Revoke(req.Token) {
			return fail("not a capability this channel issued")
		}
		return controlReply{OK: true}
	case "listen":
		if len(fds) != 1 {
			return fail("listen carries exactly one descriptor, not %d", len(fds))
		}
		l, err := enclaveListener(fds[0])
		if err != nil {
			return fail("%v", err)
		}
		ol := &ownedListener{Listener: l}
		s.mu.Lock()
		s.nextID++
		id := fmt.Sprintf("listener-%d", s.nextID)
		s.listeners[id] = ol
		s.mu.Unlock()
		s.serve(ol)
		return controlReply{OK: true, Token: id}
	case "unlisten":
		s.mu.Lock()
		l, ok := s.listeners[req.Token]
		delete(s.listeners, req.Token)
		s.mu.Unlock()
		if !ok {
			return fail("not a listener this channel handed over")
		}
		l.Close()
		return controlReply{OK: true}
	}
	return fail("unknown op %q", req.Op)
}

// closeListeners closes every listener still handed over when the
// channel ends.
func (s *controlServer) closeListeners() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, l := range s.listeners {
		l.Close()
		delete(s.listeners, id)
	}
}

// enclaveListener turns a received descriptor into a listener, which must
// be TCP on a loopback or IPv4 link-local address: the proxy end of the
// enclave link, where nothing routes.
func enclaveListener(fd int) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), "enclave-listener")
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("listener: %w", err)
	}
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok || !(a.IP.IsLoopback() || a.IP.To4() != nil && a.IP.IsLinkLocalUnicast()) {
		l.Close()
		return nil, fmt.Errorf("listener %v: want TCP on a loopback or IPv4 link-local address", l.Addr())
	}
	return l, nil
}

func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if f, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
