package config

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/awf-project/awf/proto"
)

// The defaults and bounds of the boundedAgents block. Every default is the
// seed's conservative one; the runtime default is direct, as for queries.
const (
	DefaultAgentRuntime          = "direct"
	DefaultAgentProfile          = TargetOpenAI
	DefaultAgentTimeout          = 120
	DefaultAgentMemoryLimit      = "512m"
	DefaultAgentCPULimit         = "1"
	DefaultAgentPidsLimit        = 128
	DefaultAgentTmpfsLimit       = "64m"
	DefaultAgentMaxOutputBytes   = 8192
	DefaultAgentMaxTaskBytes     = 4096
	DefaultAgentMaxInvocations   = 8
	DefaultAgentMaxModelRequests = 8
	DefaultAgentMaxModelTokens   = 1024
	// DefaultAgentWarmPool enclaves are kept prepared per repository, as
	// boundedQueries.warmPool keeps sandboxes; MaxWarmPool bounds both.
	DefaultAgentWarmPool = DefaultWarmPool

	MinAgentPidsLimit         = 8
	MaxAgentPidsLimit         = 4096
	MaxAgentOutputBytes       = 8192
	MaxAgentTaskBytes         = proto.MaxAgentTaskBytes
	MaxAgentModelRequests     = 64
	MaxAgentModelTokens       = 32768
	MaxAgentMaxInvocations    = MaxMaxInvocations
	MaxAgentTimeout           = MaxTimeout
	agentCPUMilliPerCPU       = 1000
	minAgentCPUMilli          = 10
	defaultAgentCPUMilli      = 1000
	defaultAgentMemoryBytes   = 512 << 20
	defaultAgentTmpfsBytes    = 64 << 20
	agentBlock                = "boundedAgents"
	agentProfileOpenAIPath    = "/v1/chat/completions"
	agentProfileAnthropicPath = "/v1/messages"
)

// AgentProfiles returns the accepted values of boundedAgents.profile, a
// fresh slice each call: the provider protocol the enclave speaks to the
// API proxy.
func AgentProfiles() []string { return []string{TargetOpenAI, TargetAnthropic} }

// AgentProfilePath is the one provider path the enclave's loop may request
// for a profile.
func AgentProfilePath(profile string) string {
	if profile == TargetAnthropic {
		return agentProfileAnthropicPath
	}
	return agentProfileOpenAIPath
}

// BoundedAgents is the boundedAgents block with defaults applied: a fixed
// model loop in an enclave whose only peer is the API proxy, answering a
// finite, charged value. Its ledger and invocation count are its own.
type BoundedAgents struct {
	Enabled      bool
	PrivateRepos []Repo
	// Runtime is the enclave backend: direct, gvisor, docker or sbx (sbx
	// is accepted but capability-blocked at preflight).
	Runtime string
	// MemoryLimit, CPULimit and TmpfsLimit are the limits as written
	// ("256m", "0.5"); AgentParams holds them parsed.
	MemoryLimit string
	CPULimit    string
	TmpfsLimit  string
	AgentParams
}

// AgentParams are the block's resolved values that a run's bounded-agent
// broker is given, every one of them (host.AgentSpec embeds this struct):
// the model and the per-invocation limits, sizes in bytes, CPU in
// thousandths.
type AgentParams struct {
	// Profile is the provider protocol: openai or anthropic.
	Profile string
	// Model is the one model every invocation uses; a request can never
	// choose it. Required when enabled.
	Model          string
	TimeoutSeconds int
	MemoryBytes    int64
	CPUMilli       int64
	PidsLimit      int
	TmpfsBytes     int64
	MaxOutputBytes int
	MaxTaskBytes   int
	MaxInvocations int
	// MaxModelRequests and MaxModelTokens bound each invocation's proxy
	// capability: requests forwarded, and max_tokens per request.
	MaxModelRequests int
	MaxModelTokens   int
	// WarmPool is how many single-use enclaves (network and sandbox) the
	// broker keeps prepared per repository, each refilled after an
	// answer, outside its timing bucket; 0 prepares every enclave inside
	// its invocation. A backend that cannot prepare enclaves ahead
	// (gvisor, docker) prepares each inside its invocation. (Omitted from
	// the run's spec file when 0.)
	WarmPool int `json:",omitempty"`
}

// DefaultBoundedAgents returns the block as an absent or empty one reads.
func DefaultBoundedAgents() BoundedAgents {
	return BoundedAgents{
		PrivateRepos: []Repo{},
		Runtime:      DefaultAgentRuntime,
		MemoryLimit:  DefaultAgentMemoryLimit,
		CPULimit:     DefaultAgentCPULimit,
		TmpfsLimit:   DefaultAgentTmpfsLimit,
		AgentParams: AgentParams{
			Profile:          DefaultAgentProfile,
			TimeoutSeconds:   DefaultAgentTimeout,
			MemoryBytes:      defaultAgentMemoryBytes,
			CPUMilli:         defaultAgentCPUMilli,
			PidsLimit:        DefaultAgentPidsLimit,
			TmpfsBytes:       defaultAgentTmpfsBytes,
			MaxOutputBytes:   DefaultAgentMaxOutputBytes,
			MaxTaskBytes:     DefaultAgentMaxTaskBytes,
			MaxInvocations:   DefaultAgentMaxInvocations,
			MaxModelRequests: DefaultAgentMaxModelRequests,
			MaxModelTokens:   DefaultAgentMaxModelTokens,
			WarmPool:         DefaultAgentWarmPool,
		},
	}
}

// cpuShape is a CPU count: 0.01 to 99.999 in at most three decimals. The
// schema states the same pattern.
var cpuShape = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:[1-9][0-9]?(?:\.[0-9]{1,3})?|0\.(?:[1-9][0-9]{0,2}|0[1-9][0-9]?))$`)
})

// ParseCPU converts a cpuLimit string ("1", "0.5") to thousandths of a CPU.
func ParseCPU(s string) (int64, error) {
	if !cpuShape().MatchString(s) {
		return 0, fmt.Errorf("cpuLimit %q: want a CPU count from 0.01 to 99.999, at most three decimals", s)
	}
	whole, frac, _ := strings.Cut(s, ".")
	var n int64
	for _, c := range whole {
		n = n*10 + int64(c-'0')
	}
	n *= agentCPUMilliPerCPU
	scale := int64(100)
	for _, c := range frac {
		n += int64(c-'0') * scale
		scale /= 10
	}
	if n < minAgentCPUMilli {
		return 0, fmt.Errorf("cpuLimit %q is below 0.01", s)
	}
	return n, nil
}

func (l *loader) boundedAgents(v any, b *BoundedAgents) {
	const p = agentBlock
	m, ok := l.object(p, v, "enabled", "privateRepos", "runtime", "profile", "model", "timeout",
		"memoryLimit", "cpuLimit", "pidsLimit", "tmpfsLimit", "maxOutputBytes", "maxTaskBytes",
		"maxInvocations", "maxModelRequests", "maxModelTokens", "warmPool")
	if !ok {
		return
	}
	l.enabledRepos(p, m, l.agentRepo, &b.Enabled, &b.PrivateRepos)
	if _, present := m["model"]; b.Enabled && !present {
		l.fail(p+".model", "is required when enabled is true (a request can never choose the model)")
	}
	l.choice(p, m, "runtime", Runtimes(), &b.Runtime)
	l.choice(p, m, "profile", AgentProfiles(), &b.Profile)
	l.model(p, m, &b.Model)
	readInt(l, p, m, "timeout", 1, MaxAgentTimeout, &b.TimeoutSeconds)
	l.size(p, m, "memoryLimit", &b.MemoryLimit, &b.MemoryBytes)
	l.size(p, m, "tmpfsLimit", &b.TmpfsLimit, &b.TmpfsBytes)
	if v, ok := m["cpuLimit"]; ok {
		if s, ok := l.str(p+".cpuLimit", v); ok {
			if n, err := ParseCPU(s); err != nil {
				l.fail(p+".cpuLimit", "%v", err)
			} else {
				b.CPULimit, b.CPUMilli = s, n
			}
		}
	}
	readInt(l, p, m, "pidsLimit", MinAgentPidsLimit, MaxAgentPidsLimit, &b.PidsLimit)
	readInt(l, p, m, "maxOutputBytes", 1, MaxAgentOutputBytes, &b.MaxOutputBytes)
	readInt(l, p, m, "maxTaskBytes", 1, MaxAgentTaskBytes, &b.MaxTaskBytes)
	readInt(l, p, m, "maxInvocations", 1, MaxAgentMaxInvocations, &b.MaxInvocations)
	readInt(l, p, m, "maxModelRequests", 1, MaxAgentModelRequests, &b.MaxModelRequests)
	readInt(l, p, m, "maxModelTokens", 1, MaxAgentModelTokens, &b.MaxModelTokens)
	readInt(l, p, m, "warmPool", 0, MaxWarmPool, &b.WarmPool)
}

// agentRepo reads one entry of boundedAgents.privateRepos: an object only
// (the bare string form is a deprecated spelling of queries that agents
// never had).
func (l *loader) agentRepo(ip string, e any) (Repo, bool) {
	obj, ok := e.(map[string]any)
	if !ok {
		l.fail(ip, "must be an object {\"repo\", \"sensitivity\"}")
		return Repo{}, false
	}
	return l.repo(ip, obj)
}
