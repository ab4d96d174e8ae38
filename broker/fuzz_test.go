package broker

import (
	"bufio"
	"bytes"
	"context"
	"testing"
)

// FuzzReadRequest drives the head parser, the body framing and the v2
// framing rules with arbitrary bytes: they must never panic, never read past
// their caps, and always yield one canonical body.
func FuzzReadRequest(f *testing.F) {
	f.Add([]byte(curlRequest("o/r", boolS, "true")))
	f.Add([]byte("POST /query HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\ntrue\r\n0\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		br := bufio.NewReader(bytes.NewReader(raw))
		req, err := readHead(br)
		if err != nil {
			return
		}
		plan, err := planBody(req)
		if err != nil {
			return
		}
		req.Body, req.BodyErr = readBody(br, plan, QueryKind{}.MaxBody())
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
