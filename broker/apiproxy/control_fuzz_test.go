package apiproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// FuzzControlHandle drives the control channel's request handler with
// arbitrary messages: it never panics, and whatever it issues is an
// enclave capability within the limits fixed at start.
func FuzzControlHandle(f *testing.F) {
	for _, s := range []string{
		`{"op":"issue","caller":"enclave-0123","maxRequests":1,"maxTokens":1}`,
		`{"op":"issue","caller":"agent","maxRequests":1,"maxTokens":1}`,
		`{"op":"issue","caller":"enclave-aa","maxRequests":100000,"maxTokens":1}`,
		`{"op":"issue","caller":"enclave-aa","maxRequests":1,"maxTokens":1,"models":{"openai":"x"}}`,
		`{"op":"revoke","token":"awf-cap-00"}`,
		`{"op":"listen"}`,
		`{"op":"unlisten","token":"listener-1"}`,
		`{"op":"issue","caller":"enclave-aa","maxRequests":1,"maxTokens":1} {}`,
		`{"op":"ISSUE"}`,
		"{\"op\":\"issue\",\"caller\":\"enclave-\xff\"}",
	} {
		f.Add([]byte(s))
	}
	p, err := New(Options{Targets: []Target{{Protocol: OpenAI, BaseURL: "https://127.0.0.1:1", Key: openAIKey}}, Audit: io.Discard})
	if err != nil {
		f.Fatal(err)
	}
	lim := enclaveLimits()
	f.Fuzz(func(t *testing.T, msg []byte) {
		cs := &controlServer{p: p, enclave: lim, issued: map[string]string{}, listeners: map[string]*ownedListener{}}
		reply := cs.handle(msg, nil)
		b, err := json.Marshal(reply)
		if err != nil || len(b) > maxControlMessage {
			t.Fatalf("reply %q does not fit a message", b)
		}
		if !reply.OK || reply.Token == "" || !strings.HasPrefix(reply.Token, capabilityPrefix) {
			return
		}
		c, ref := p.caps.authenticate(reply.Token)
		if ref != nil {
			t.Fatalf("issued %q does not authenticate", reply.Token)
		}
		if !enclaveCaller().MatchString(c.caller) || c.limits.MaxRequests > lim.MaxRequests || c.limits.MaxTokens > lim.MaxTokens ||
			c.limits.MaxRequests < 1 || c.limits.MaxTokens < 1 || len(c.limits.Models) != len(lim.Models) {
			t.Fatalf("issued a capability outside the enclave limits for %q: %+v", msg, c.limits)
		}
		if !bytes.Contains(msg, []byte(c.caller)) {
			t.Fatalf("issued for a caller %q the request did not name", c.caller)
		}
	})
}
