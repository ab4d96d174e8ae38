package agentloop

import (
	"encoding/json"
	"io"
	"strings"
	"sync"
)

// Transcript bounds.
const (
	// MaxTranscriptBytes caps transcript.jsonl.
	MaxTranscriptBytes = 1 << 20
	// maxTranscriptString cuts any one string in a transcript line.
	maxTranscriptString = 64 << 10
	// endReserve is kept free for the final line, which is always written.
	endReserve = 4 << 10
)

// transcript writes the bounded JSON-lines record of one invocation: the
// task, the schema, every provider response body, every tool result and the
// terminal state. It never receives a header or the capability. Lines that
// would pass the cap are dropped (and counted in the final line), so the
// terminal state is always the last line.
type transcript struct {
	mu      sync.Mutex
	w       io.Writer
	written int
	dropped int
	// secret is the capability. Nothing the loop records should hold it
	// (it only ever travels in a header), but any string that did is
	// scrubbed rather than trusted to be clean.
	secret string
}

func newTranscript(w io.Writer) *transcript { return &transcript{w: w} }

// add writes one line; fields are marshalled as given, after strings are cut.
func (t *transcript) add(fields map[string]any) {
	t.line(fields, false)
}

func (t *transcript) line(fields map[string]any, final bool) {
	if t == nil || t.w == nil {
		return
	}
	for k, v := range fields {
		s, ok := v.(string)
		if !ok {
			continue
		}
		if t.secret != "" {
			s = strings.ReplaceAll(s, t.secret, "[capability]")
		}
		if len(s) > maxTranscriptString {
			s = clipString(s, maxTranscriptString) + "…(cut)"
		}
		fields[k] = s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if final && t.dropped > 0 {
		fields["droppedLines"] = t.dropped
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return
	}
	b = append(b, '\n')
	limit := MaxTranscriptBytes - endReserve
	if final {
		limit = MaxTranscriptBytes
	}
	if t.written+len(b) > limit {
		t.dropped++
		return
	}
	n, _ := t.w.Write(b)
	t.written += n
}

// end writes the final line naming the terminal state.
func (t *transcript) end(o Outcome) {
	f := map[string]any{"type": "end", "state": o.State, "requests": o.Requests,
		"inputTokens": o.InputTokens, "outputTokens": o.OutputTokens}
	if o.Detail != "" {
		f["detail"] = clipString(o.Detail, 1024)
	}
	t.line(f, true)
}
