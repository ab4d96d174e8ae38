// Package agentloop is the fixed model loop that runs inside a bounded-agent
// enclave. It is the only program there: it reads the task, the finite schema
// and its configuration from read-only files, talks to the API proxy (its only
// network peer) in one of two provider protocols, offers the model four fixed
// tools confined to the read-only seed, and writes one schema-valid JSON value
// to the result file. It holds no credential: the capability it presents is
// single-use and only the proxy can turn it into a provider key.
package agentloop

// Paths inside the enclave. The broker mounts each of them; the loop never
// reads or writes anything else (besides /tmp, which it does not use).
const (
	// RepoDir is the immutable seed, a read-only bind.
	RepoDir = "/enclave/repo"
	// TaskPath holds the task bytes (UTF-8, at most maxTaskBytes).
	TaskPath = "/enclave/task"
	// SchemaPath holds the finite schema in the bounded-query DSL.
	SchemaPath = "/enclave/schema.json"
	// ConfigPath holds the loop configuration, a JSON Config.
	ConfigPath = "/enclave/loop.json"
	// BinaryPath is where the loop binary (cmd/agent-loop) is mounted.
	BinaryPath = "/enclave/bin/loop"
	// OutDir is the bounded writable tmpfs for the loop's outputs.
	OutDir = "/enclave/out"
	// ResultPath is the one JSON value the broker validates.
	ResultPath = OutDir + "/result.json"
	// TranscriptPath is the bounded transcript the broker moves to the
	// protected audit directory.
	TranscriptPath = OutDir + "/transcript.jsonl"
	// TmpDir is the bounded scratch tmpfs.
	TmpDir = "/tmp"
)

// Profiles: the provider protocol the loop speaks to the API proxy.
const (
	ProfileOpenAI    = "openai"
	ProfileAnthropic = "anthropic"
)

// Config is the loop configuration the broker writes to ConfigPath. Every
// field comes from trusted configuration or the broker; nothing in it comes
// from the calling agent.
type Config struct {
	// Profile is ProfileOpenAI or ProfileAnthropic.
	Profile string `json:"profile"`
	// Model is the configured model; a request can never choose it.
	Model string `json:"model"`
	// Endpoint is the API proxy's base URL as seen from inside the enclave,
	// for example "http://169.254.77.1:8080" (plain HTTP over the enclave
	// link, which leads nowhere else).
	Endpoint string `json:"endpoint"`
	// Capability is the per-invocation proxy capability ("awf-cap-…"), sent
	// as Authorization: Bearer (openai) or x-api-key (anthropic). It is never
	// written to the transcript.
	Capability string `json:"capability"`
	// MaxModelRequests bounds the model requests of one invocation (>= 1).
	MaxModelRequests int `json:"maxModelRequests"`
	// MaxModelTokens is the total token budget, counted from usage.
	MaxModelTokens int `json:"maxModelTokens"`
	// MaxOutputBytes caps result.json.
	MaxOutputBytes int `json:"maxOutputBytes"`
	// DeadlineUnixMilli is the wall-clock deadline; the loop stops before it.
	DeadlineUnixMilli int64 `json:"deadlineUnixMilli"`
	// AnthropicVersion is the pinned anthropic-version header value.
	AnthropicVersion string `json:"anthropicVersion"`
}
