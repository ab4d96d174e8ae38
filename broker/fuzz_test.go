package broker

import (
	"bufio"
	"bytes"
	"context"
	"testing"
)

// readRaw reads one request from raw as serveConn does, without its
// deadlines: the head, its body framing, then the body up to max bytes. It
// reports false when the head or its framing is refused, where serveConn
// answers without reading a body.
func readRaw(raw []byte, max int) (*Request, bool) {
	br := bufio.NewReader(bytes.NewReader(raw))
	req, err := readHead(br)
	if err != nil {
		return nil, false
	}
	plan, err := planBody(req)
	if err != nil {
		return nil, false
	}
	req.Body, req.BodyErr = readBody(br, plan, max)
	return req, true
}

// FuzzReadRequest drives the head parser, the body framing and the v2
// framing rules with arbitrary bytes: they must never panic, never read past
// their caps, and always yield one canonical body.
func FuzzReadRequest(f *testing.F) {
	f.Add([]byte(curlRequest("o/r", boolS, "true")))
	f.Add([]byte("POST /query HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\ntrue\r\n0\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, ok := readRaw(raw, QueryKind{}.MaxBody())
		if !ok {
			return
		}
		if max := (QueryKind{}).MaxBody(); len(req.Body) > max {
			t.Fatalf("body of %d bytes passed the cap", len(req.Body))
		}
		tb := newTestBroker(t, 4, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "internal"})
		out := tb.b.Handle(context.Background(), req)
		if string(out) != errBody && !bytes.HasPrefix(out, []byte(`{"status":"ok","result":`)) {
			t.Fatalf("non-canonical body %q", out)
		}
	})
}
