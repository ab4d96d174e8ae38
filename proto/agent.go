package proto

// The bounded-agent framing: the version header first, then the repository
// and the schema, as for queries; the body is the task text. proto owns it,
// as it owns the query's and the probe's, so that the broker, the config
// loader and the bounded-agent CLI read one copy.
const (
	HeaderAgentVersion = "x-awf-agent-version"
	// AgentProtocolVersion is the one accepted X-AWF-Agent-Version.
	AgentProtocolVersion = "1"
	// MaxAgentTaskBytes is the hard cap on a task, whatever the config
	// says: boundedAgents.maxTaskBytes may only lower it.
	MaxAgentTaskBytes = 65536
	// MaxModelNameBytes caps a model name (ValidModelName).
	MaxModelNameBytes = 128
)

// AgentHeaderNames returns the framing headers of a bounded-agent request,
// in the order the client sends them. It returns a fresh slice each call.
func AgentHeaderNames() []string {
	return []string{HeaderAgentVersion, HeaderRepo, HeaderSchema}
}

// ValidModelName reports whether s can name the model a bounded agent asks
// for: 1 to MaxModelNameBytes ASCII letters, digits and ._:/@+-, starting
// with a letter or digit. The name reaches the model API in the loop's
// request body, so nothing else (no space, quote or control character) may
// be in it. The config loader and the bounded-agent kind both apply it.
func ValidModelName(s string) bool {
	if len(s) == 0 || len(s) > MaxModelNameBytes || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case isAlnum(c):
		case c == '.', c == '_', c == ':', c == '/', c == '@', c == '+', c == '-':
		default:
			return false
		}
	}
	return true
}
