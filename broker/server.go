package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Server limits, matching the reference server.
const (
	// MaxConns caps concurrent connections; excess ones get the canonical
	// error at once.
	MaxConns = 32
	// HeadTimeout bounds reading the request line and headers.
	HeadTimeout = 5 * time.Second
	// BodyTimeout bounds reading the body.
	BodyTimeout = 5 * time.Second
	// WriteTimeout bounds writing the response.
	WriteTimeout = 5 * time.Second
	// ClientErrorDelay is the fixed delay before answering a malformed head.
	ClientErrorDelay = 10 * time.Millisecond
	// DrainTimeout and DrainBytes bound reading leftover input after a response.
	DrainTimeout = time.Second
	DrainBytes   = 1 << 20
	// Route is the one route of a bounded-query broker; other kinds name
	// theirs (KindRoute).
	Route = "/query"
)

// Server serves one Broker over HTTP/1.1 on a stream listener (a Unix
// socket). Every response is status 200 with one canonical body, and every
// connection carries exactly one request.
type Server struct {
	b     *Broker
	audit *Audit

	mu       sync.Mutex
	conns    int
	stopping bool
	wg       sync.WaitGroup
	ln       net.Listener
	// hard is cancelled when shutdown gives up waiting.
	hard    context.Context
	hardEnd context.CancelFunc
}

// NewServer returns a server for b.
func NewServer(b *Broker, audit *Audit) *Server {
	hard, cancel := context.WithCancel(context.Background())
	return &Server{b: b, audit: audit, hard: hard, hardEnd: cancel}
}

// ListenUnix creates the socket at path, owned by uid:gid with mode 0600.
// The socket's directory should be 0700 and owned by root until the socket
// is in place, so that nobody can reach it before its owner is set.
func ListenUnix(path string, uid, gid int) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Lchown(path, uid, gid); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return ln, nil
}

// Serve accepts connections until the listener is closed.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		ln.Close()
		return nil
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		s.mu.Lock()
		over := s.conns >= MaxConns
		if !over {
			s.conns++
		}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			if over {
				defer s.wg.Done()
				s.b.countResponse()
				s.audit.Failure(IDServer, ReasonConnectionLimit, fmt.Sprintf("more than %d connections", MaxConns))
				writeResponse(c, s.b.errBody)
				c.Close()
				return
			}
			held := s.serveConn(c)
			s.mu.Lock()
			s.conns--
			s.mu.Unlock()
			s.wg.Done()
			// The response is written and the connection closed: only now
			// may the warm pool prepare the sandbox that the job used up,
			// on the lane the job held, so that the next job finds it
			// ready. A refill is no request: Shutdown does not wait for it
			// (it stops at Freeze), the broker's Close does.
			if held {
				s.b.refillAndRelease(s.hard)
			}
		}()
	}
}

// Shutdown freezes admissions (later requests get the canonical error,
// uncounted: the run is over), stops accepting, and waits for in-flight requests until ctx
// ends, after which their sandboxes are abandoned to the runtime's cleanup.
func (s *Server) Shutdown(ctx context.Context) error {
	s.b.Freeze()
	s.mu.Lock()
	ln := s.ln
	s.stopping = true
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.hardEnd()
		<-done
		return fmt.Errorf("shutdown: %w", ctx.Err())
	}
}

// serveConn serves one connection. held reports that the request's
// answer left the broker's lane held for the refill (Broker.handle); the
// caller must then call refillAndRelease, after the connection is closed.
func (s *Server) serveConn(c net.Conn) (held bool) {
	defer c.Close()
	defer func() {
		if p := recover(); p != nil {
			s.audit.Failure(IDServer, ReasonUnhandled, fmt.Sprintf("panic: %v", p))
			writeResponse(c, s.b.errBody)
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(HeadTimeout))
	br := bufio.NewReaderSize(c, 4096)
	req, err := readHead(br)
	var plan bodyPlan
	if err == nil {
		plan, err = planBody(req)
	}
	if err != nil {
		s.b.countResponse()
		s.audit.Failure(IDTransport, ReasonHeaderRejected, err.Error())
		time.Sleep(ClientErrorDelay)
		writeResponse(c, s.b.errBody)
		return
	}
	if req.Method != "POST" || req.Target != s.b.route {
		if !(req.Method == "GET" && req.Target == ProbeRoute && peerIsRoot(c)) {
			s.b.countResponse()
			s.audit.Failure(IDTransport, ReasonWrongRoute, fmt.Sprintf("%.16s %.64q", req.Method, req.Target))
		}
		writeResponse(c, s.b.errBody)
		return
	}
	if s.b.closed.Load() {
		writeResponse(c, s.b.errBody)
		return
	}
	max := s.b.o.Kind.MaxBody()
	if !plan.chunked && plan.length > int64(max) {
		req.BodyErr = fmt.Errorf("%w: Content-Length %d > %d", errBodyTooLarge, plan.length, max)
	} else {
		if v, _, ok := req.header("Expect"); ok && strings.EqualFold(v, "100-continue") {
			_ = c.SetWriteDeadline(time.Now().Add(WriteTimeout))
			_, _ = c.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n"))
		}
		_ = c.SetReadDeadline(time.Now().Add(BodyTimeout))
		req.Body, req.BodyErr = readBody(br, plan, max)
	}
	_ = c.SetReadDeadline(time.Time{})
	var body []byte
	body, held = s.b.handle(s.hard, req, true)
	writeResponse(c, body)
	return held
}

// ProbeRoute is the route of awf's own readiness probe (host.ProbeSocket):
// sent by root before the agent starts, answered canonically, and neither
// counted nor audited. From anyone else it is a wrong route like any other.
const ProbeRoute = "/ready"

// peerIsRoot reports whether the peer of the Unix connection c is uid 0.
func peerIsRoot(c net.Conn) bool {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	root := false
	_ = raw.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		root = err == nil && cred.Uid == 0
	})
	return root
}

// countResponse counts one response that the server answers before Handle
// (a malformed head, a wrong route, a connection over MaxConns) against
// maxInvocations: the seed counts every response. Once exhausted nothing
// is counted further.
func (b *Broker) countResponse() {
	b.mu.Lock()
	if b.used < b.o.MaxInvocations {
		b.used++
	}
	b.mu.Unlock()
}

// writeResponse writes one 200 response with a canonical body and closes
// the exchange (one request per connection).
func writeResponse(c net.Conn, body []byte) {
	_ = c.SetWriteDeadline(time.Now().Add(WriteTimeout))
	head := "HTTP/1.1 200 OK\r\n" +
		"content-type: application/json\r\n" +
		"cache-control: no-store\r\n" +
		"content-length: " + strconv.Itoa(len(body)) + "\r\n" +
		"connection: close\r\n\r\n"
	_, _ = c.Write(append([]byte(head), body...))
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.CloseWrite()
	}
	// Closing with unread input would reset the connection and could lose
	// the response, so drain what the client still sends, within bounds.
	_ = c.SetReadDeadline(time.Now().Add(DrainTimeout))
	_, _ = io.CopyN(io.Discard, c, DrainBytes)
}
