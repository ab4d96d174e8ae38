package client

import (
	"bufio"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseArgs(t *testing.T) {
	a, err := ParseArgs([]string{"--schema", `{"type":"boolean"}`, "--repo", "o/r"})
	assert.NoError(t, err)
	assert.Equal(t, Args{Repo: "o/r", Schema: `{"type":"boolean"}`}, a)
	// What it refuses: TestParseArgsRefuses.
}

func TestEncodeSchemaIsUnpaddedBase64URL(t *testing.T) {
	assert.Equal(t, "eyJ0eXBlIjoiYm9vbGVhbiJ9", EncodeSchema(`{"type":"boolean"}`))
	assert.Equal(t, "Pz8-", EncodeSchema("??>"))
	assert.NotContains(t, EncodeSchema("a"), "=")
}

func TestCanonical(t *testing.T) {
	assert.Equal(t, ErrorLine, Canonical([]byte(`{"status":"error"}`)))
	assert.Equal(t, `{"status":"ok","result":1}`, Canonical([]byte(`{"status":"ok","result":1}`)))
	for _, bad := range []string{"", `{"status":"ok","result":}`[:24], "{\"status\":\"ok\",\"result\":\"\n\"}", `{"status":"error"} `, "\xff"} {
		assert.Equal(t, ErrorLine, Canonical([]byte(bad)), bad)
	}
}

func FuzzParseArgs(f *testing.F) {
	f.Add("--repo\x00o/r\x00--schema\x00{}")
	f.Add("--schema\x00x\x00--repo\x00a/b\x00--")
	f.Fuzz(func(t *testing.T, joined string) {
		a, err := ParseArgs(strings.Split(joined, "\x00"))
		if err == nil && (a.Repo == "" || a.Schema == "" || len(a.Schema) > MaxSchemaBytes || strings.Contains(a.Repo, "..")) {
			t.Fatalf("accepted %q", joined)
		}
	})
}

func FuzzReadResponse(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\ncontent-length: 18\r\n\r\n{\"status\":\"error\"}")
	f.Add("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
	f.Fuzz(func(t *testing.T, raw string) {
		body, err := readResponse(bufio.NewReader(strings.NewReader(raw)))
		if err == nil && len(body) > MaxResponseBytes {
			t.Fatal("body over cap")
		}
		line := Canonical(body)
		if line != ErrorLine && !strings.HasPrefix(line, okPrefix) {
			t.Fatalf("non-canonical %q", line)
		}
	})
}
