package apiproxy

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/awf-project/awf/broker/jsonfile"
)

// AuditFile is the name of the proxy's log in the run's audit directory.
const AuditFile = "api-proxy.jsonl"

// CallerUnauthenticated is the caller of a record whose request carried no
// valid capability.
const CallerUnauthenticated = "unauthenticated"

// Entry is one line of the audit log: metadata of one request, never a
// body or a header. Counters that do not apply are omitted.
type Entry struct {
	TS        string `json:"ts"`
	RequestID string `json:"requestId"`
	// Caller is the capability's caller (CallerAgent or an invocation
	// id), or CallerUnauthenticated.
	Caller   string `json:"caller"`
	Protocol string `json:"protocol,omitempty"`
	Method   string `json:"method"`
	// Path is the request path with control characters removed, at most
	// 200 bytes.
	Path  string `json:"path"`
	Model string `json:"model,omitempty"`
	// Status is what the caller received; UpstreamStatus what the provider
	// answered, when the request went upstream.
	Status         int `json:"status"`
	UpstreamStatus int `json:"upstreamStatus,omitempty"`
	// Outcome is "forwarded" or the refusal code.
	Outcome       string `json:"outcome"`
	RequestBytes  int64  `json:"requestBytes"`
	ResponseBytes int64  `json:"responseBytes"`
	InputTokens   *int64 `json:"inputTokens,omitempty"`
	OutputTokens  *int64 `json:"outputTokens,omitempty"`
	DurationMs    int64  `json:"durationMs"`
}

// OutcomeForwarded is the outcome of a request that went upstream and whose
// answer, whatever its status, went back to the caller.
const OutcomeForwarded = "forwarded"

// OpenAuditFile opens path for appending: created 0600, never through a
// symbolic link. Its directory must exist (the run's protected audit
// directory, 0700).
func OpenAuditFile(path string) (*os.File, error) {
	f, err := jsonfile.OpenAppend(path)
	if err != nil {
		return nil, fmt.Errorf("api proxy audit log: %w", err)
	}
	return f, nil
}

// logPath makes a caller-chosen path safe to log.
func logPath(p string) string {
	p = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, p)
	return jsonfile.Clip(p, 200)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
