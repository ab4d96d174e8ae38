// Command provider is make demo's scripted stand-in for a model provider:
// an HTTPS server speaking just enough of the OpenAI chat-completions
// protocol for one bounded-agent question. A conversation's first request
// gets a list_files call; a request that carries a tool result gets
// finish with true. It is not a model and answers every question alike.
//
// Usage: provider CA_FILE; it prints its base URL on stdout and serves
// until stdin closes.
package main

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: provider CA_FILE")
		os.Exit(2)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(answer))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(os.Args[1], ca, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(1)
	}
	fmt.Println(srv.URL)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func answer(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"fake","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	name, args := "list_files", `{"path":"."}`
	if strings.Contains(string(body), `"role":"tool"`) {
		name, args = "finish", `{"result":true}`
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-demo", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
			"role": "assistant", "content": nil,
			"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}}},
		"usage": map[string]any{"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
	})
}
