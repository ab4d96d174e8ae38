// Package config loads and checks the awf JSON configuration: the
// boundedQueries block (private repositories, runtime, limits) and the agent
// block. The loader and the published JSON Schema (schema.json, also at
// docs/awf-config.schema.json) accept exactly the same documents.
package config

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/awf-project/awf/proto"
)

// The defaults of the boundedQueries block.
const (
	DefaultRuntime        = "direct"
	DefaultTimeout        = 30
	DefaultMemoryLimit    = "512m"
	DefaultInterpreter    = "python3"
	DefaultMaxInvocations = 32
	// DefaultWarmPool sandboxes are kept prepared per repository;
	// MaxWarmPool is the most the loader accepts.
	DefaultWarmPool = 1
	MaxWarmPool     = 8
	// MaxTimeout keeps the last 60 s of the 600 s bucket for cleanup.
	MaxTimeout        = 540
	MaxMaxInvocations = 10000
)

// Runtimes returns the accepted values of boundedQueries.runtime, a fresh
// slice each call.
func Runtimes() []string { return []string{"direct", "gvisor", "docker", "sbx"} }

// Config is a loaded, checked configuration.
type Config struct {
	BoundedQueries BoundedQueries
	Agent          Agent
	// BoundedAgents is the boundedAgents block (agents.go).
	BoundedAgents BoundedAgents
	// SealedProbes is the sealedProbes block (probes.go).
	SealedProbes SealedProbes
	// APIProxy is the apiProxy block; nil when the document has none.
	APIProxy *APIProxy
	// Warnings are operator-readable notes, such as legacy bare-string repos.
	Warnings []string
}

// ScriptJob is what the blocks whose jobs run one Python script in a
// sandbox (boundedQueries, sealedProbes) share, with defaults applied: each
// block embeds it, and one loader step (l.scriptJob) reads it for both, so
// the two cannot drift apart.
type ScriptJob struct {
	Enabled      bool
	PrivateRepos []Repo
	// Runtime is one of Runtimes().
	Runtime        string
	TimeoutSeconds int
	// MemoryLimit is the limit as written ("512m"); MemoryBytes is its value.
	MemoryLimit    string
	MemoryBytes    int64
	Interpreter    string
	MaxInvocations int
}

// BoundedQueries is the boundedQueries block with defaults applied.
type BoundedQueries struct {
	ScriptJob
	// WarmPool is how many single-use sandboxes the broker keeps prepared
	// for each repository (0 = none: each is prepared inside its request).
	WarmPool int
	// RootFS pins the sandbox root filesystem; nil means awf's cached build.
	RootFS *RootFS
	// DockerSocket is the Engine's Unix socket for the docker runtime.
	DockerSocket string
	// RunscPath is the runsc binary for the gvisor runtime ("" = PATH).
	RunscPath string
}

// DefaultBoundedQueries returns the block as an absent one loads: disabled.
func DefaultBoundedQueries() BoundedQueries {
	return BoundedQueries{
		ScriptJob: defaultScriptJob(DefaultRuntime, DefaultTimeout, DefaultMemoryLimit, DefaultMaxInvocations),
		WarmPool:  DefaultWarmPool,
	}
}

// defaultScriptJob is a disabled block's ScriptJob with the given defaults;
// memoryLimit is one of the Default…MemoryLimit constants, which parse.
func defaultScriptJob(runtime string, timeout int, memoryLimit string, maxInvocations int) ScriptJob {
	mem, _ := ParseMemory(memoryLimit)
	return ScriptJob{
		PrivateRepos: []Repo{}, Runtime: runtime, TimeoutSeconds: timeout, MemoryLimit: memoryLimit,
		MemoryBytes: mem, Interpreter: DefaultInterpreter, MaxInvocations: maxInvocations,
	}
}

// Repo is one configured private repository.
type Repo struct {
	Repo        string // owner/name as written
	Sensitivity string
	Source      string // "" (GitHub), an https URL, or an absolute local path
	Ref         string // "" = default branch
	Legacy      bool   // written as a bare string
}

// RootFS is a digest-pinned root filesystem directory.
type RootFS struct {
	Path   string
	Digest string // sha256:<64 hex>
}

// Agent is the agent block.
type Agent struct {
	// User is a user name or a decimal uid; "" means SUDO_UID/SUDO_GID.
	User string
	// EnvAllow names the credential-looking variables that may reach the
	// agent (agent.env.allow). Nil allows none. GitHub credentials and
	// Actions runtime variables are refused by the loader: they never do.
	EnvAllow []string
	// Network is AgentNetworkHost (the default) or AgentNetworkNone.
	Network string
	// AllowPersistedCredentials lets awf run start although the agent's
	// working tree holds a persisted git credential. False (the default)
	// makes that a preflight failure.
	AllowPersistedCredentials bool
}

// The values of agent.network.
const (
	// AgentNetworkHost keeps the agent in the host's network namespace.
	AgentNetworkHost = "host"
	// AgentNetworkNone gives the agent an empty network namespace with only
	// loopback; the broker's Unix socket still works.
	AgentNetworkNone = "none"
)

// AgentNetworks lists the accepted values of agent.network.
func AgentNetworks() []string { return []string{AgentNetworkHost, AgentNetworkNone} }

// The defaults and bounds of the apiProxy block. The request and token
// defaults are the seed's per-invocation ones: conservative, widened
// explicitly by the operator.
const (
	DefaultAPIMaxModelRequests = 8
	DefaultAPIMaxModelTokens   = 1024
	DefaultAPIMaxRequestBytes  = 4 << 20
	DefaultAPIMaxResponseBytes = 1 << 20
	DefaultAPITimeout          = 60
	MaxAPIMaxModelRequests     = 100000
	MaxAPIMaxModelTokens       = 1000000
	MaxAPIBodyBytes            = 64 << 20
	MinAPIBodyBytes            = 1024
)

// The provider protocols of apiProxy.targets, and their default key variables.
const (
	TargetOpenAI    = "openai"
	TargetAnthropic = "anthropic"
)

// APITargets lists the accepted keys of apiProxy.targets.
func APITargets() []string { return []string{TargetOpenAI, TargetAnthropic} }

// APIProxy is the apiProxy block with defaults applied. Its limits are the
// primary agent's; bounded-agent invocations get their own.
type APIProxy struct {
	// Targets maps a protocol (TargetOpenAI, TargetAnthropic) to its
	// upstream; at least one is present.
	Targets          map[string]APITarget
	MaxModelRequests int
	MaxModelTokens   int
	MaxRequestBytes  int64
	MaxResponseBytes int64
	TimeoutSeconds   int
}

// APITarget is one upstream provider endpoint.
type APITarget struct {
	// BaseURL is the URL that the protocol's fixed path (/v1/...) follows:
	// https, or http on a loopback host only. Never "" after loading.
	BaseURL string
	// APIKeyEnv names the variable of awf's environment that holds the key.
	APIKeyEnv string
	// Model is the only model the primary agent may name; "" lets the
	// primary agent use no model on this target.
	Model string
}

// DefaultAPITarget returns the defaults of one target.
func DefaultAPITarget(protocol string) APITarget {
	if protocol == TargetAnthropic {
		return APITarget{BaseURL: "https://api.anthropic.com", APIKeyEnv: "ANTHROPIC_API_KEY"}
	}
	return APITarget{BaseURL: "https://api.openai.com", APIKeyEnv: "OPENAI_API_KEY"}
}

// LoadFile reads and loads the configuration that --config names; it is
// LoadPath (source.go): JSON or YAML, a file or standard input ("-").
func LoadFile(path string, stdin io.Reader) (*Config, error) {
	return LoadPath(path, stdin)
}

// Load parses and checks a configuration document.
func Load(src []byte) (*Config, error) {
	tree, err := DecodeJSON(src)
	if err != nil {
		return nil, err
	}
	c, errs := loadTree(tree)
	if len(errs) > 0 {
		return nil, fmt.Errorf("config: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

var (
	memoryShape = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:(?:1[6-9]|[2-9][0-9]|[1-9][0-9]{2,5})[mM]|[1-9][0-9]{0,2}[gG])$`)
	})
	digestShape = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })
	sourceShape = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:https://[^\s]+|/.*)$`) })
	refShape    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/-]{0,254}$`) })
	refDots     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[^.]*(\.[^.]+)*\.?$`) })
	userShape   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`) })
	absPath     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^/.*$`) })
	envName     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`) })
	// baseURLShape: https to any DNS name or IPv4 address, or plain http to
	// a loopback address only (tests and local servers), with an optional
	// path prefix; no user info, query or fragment.
	baseURLShape = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:https://[A-Za-z0-9.-]+|http://(?:127\.0\.0\.1|\[::1\]))(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~-]+)*/?$`)
	})
)

// ValidSlug reports whether s is a bare owner/name slug: the protocol's one
// rule (R39), which staging and the client apply too. schema.json states the
// same set as patterns.
func ValidSlug(s string) bool { return proto.ValidateRepoSlug(s) == nil }

// ParseMemory converts a memoryLimit string ("512m", "1g") to bytes.
func ParseMemory(s string) (int64, error) {
	if !memoryShape().MatchString(s) {
		return 0, fmt.Errorf("memoryLimit %q: want 16m..999999m or 1g..999g", s)
	}
	var n int64
	for _, c := range s[:len(s)-1] {
		n = n*10 + int64(c-'0')
	}
	switch s[len(s)-1] {
	case 'm', 'M':
		return n << 20, nil
	default:
		return n << 30, nil
	}
}
