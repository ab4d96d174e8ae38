package config

import (
	"fmt"
	"strings"
)

// The defaults of the sealedProbes block: the seed's, with the runtime
// default of bounded queries (direct).
const (
	DefaultProbeRuntime        = DefaultRuntime
	DefaultProbeTimeout        = DefaultTimeout
	DefaultProbeMemoryLimit    = DefaultMemoryLimit
	DefaultProbeMaxInvocations = DefaultMaxInvocations
	probeBlock                 = "sealedProbes"
)

// SealedProbes is the sealedProbes block with defaults applied: v1 of the
// original design, three caller outcomes plus ERROR per invocation. Probes
// carry no sensitivity: the invocation count is their only budget.
type SealedProbes struct {
	Enabled bool
	// PrivateRepos is the complete allowlist; Sensitivity is always "".
	PrivateRepos   []Repo
	Runtime        string
	TimeoutSeconds int
	MemoryLimit    string
	MemoryBytes    int64
	Interpreter    string
	MaxInvocations int
}

// DefaultSealedProbes returns the block as an absent one loads: disabled.
func DefaultSealedProbes() SealedProbes {
	mem, _ := ParseMemory(DefaultProbeMemoryLimit)
	return SealedProbes{
		PrivateRepos:   []Repo{},
		Runtime:        DefaultProbeRuntime,
		TimeoutSeconds: DefaultProbeTimeout,
		MemoryLimit:    DefaultProbeMemoryLimit,
		MemoryBytes:    mem,
		Interpreter:    DefaultInterpreter,
		MaxInvocations: DefaultProbeMaxInvocations,
	}
}

func (l *loader) sealedProbes(v any, b *SealedProbes) {
	const p = probeBlock
	m, ok := l.object(p, v, "enabled", "privateRepos", "runtime", "timeout", "memoryLimit", "interpreter", "maxInvocations")
	if !ok {
		return
	}
	if v, ok := m["enabled"]; ok {
		e, isBool := v.(bool)
		if !isBool {
			l.fail(p+".enabled", "must be true or false")
		}
		b.Enabled = e
	}
	if v, ok := m["privateRepos"]; ok {
		b.PrivateRepos = l.probeRepos(p+".privateRepos", v)
	}
	if b.Enabled {
		l.reposRequired(p, m)
	}
	if v, ok := m["runtime"]; ok {
		if s, ok := l.oneOf(p+".runtime", v, Runtimes()); ok {
			b.Runtime = s
		}
	}
	if v, ok := m["timeout"]; ok {
		if n, ok := l.integer(p+".timeout", v, 1, MaxTimeout); ok {
			b.TimeoutSeconds = int(n)
		}
	}
	if v, ok := m["memoryLimit"]; ok {
		if s, ok := l.str(p+".memoryLimit", v); ok {
			if n, err := ParseMemory(s); err != nil {
				l.fail(p+".memoryLimit", "%v", err)
			} else {
				b.MemoryLimit, b.MemoryBytes = s, n
			}
		}
	}
	if v, ok := m["interpreter"]; ok {
		if s, ok := l.str(p+".interpreter", v); ok && s != DefaultInterpreter {
			l.fail(p+".interpreter", "%q is not supported (only python3)", s)
		}
	}
	if v, ok := m["maxInvocations"]; ok {
		if n, ok := l.integer(p+".maxInvocations", v, 1, MaxMaxInvocations); ok {
			b.MaxInvocations = int(n)
		}
	}
}

// probeRepos reads sealedProbes.privateRepos: bare owner/repo strings (the
// seed's form) or objects {repo, source, ref} (so that local clones stage
// offline), slugs unique case-insensitively. Neither form has a sensitivity.
func (l *loader) probeRepos(p string, v any) []Repo {
	a, ok := v.([]any)
	if !ok {
		l.fail(p, "must be an array")
		return nil
	}
	out := make([]Repo, 0, len(a))
	seen := map[string]int{}
	for i, e := range a {
		ip := fmt.Sprintf("%s[%d]", p, i)
		var r Repo
		switch t := e.(type) {
		case string:
			if !ValidSlug(t) {
				l.fail(ip, "%q is not a bare owner/repo slug", t)
				continue
			}
			r = Repo{Repo: t}
		case map[string]any:
			if _, has := t["sensitivity"]; has {
				l.fail(ip+".sensitivity", "sealed probes carry no sensitivity (the invocation count is their budget)")
				continue
			}
			// The object form is the bounded queries' without its
			// sensitivity: l.repo's rules, given a placeholder to check.
			withSens := map[string]any{"sensitivity": "sealed"}
			for k, v := range t {
				withSens[k] = v
			}
			var ok bool
			if r, ok = l.repo(ip, withSens); !ok {
				continue
			}
			r.Sensitivity = ""
		default:
			l.fail(ip, "must be a bare owner/repo string or an object {\"repo\", \"source\", \"ref\"}")
			continue
		}
		key := strings.ToLower(r.Repo)
		if j, dup := seen[key]; dup {
			l.fail(ip, "%q duplicates %s[%d] (slugs are compared case-insensitively)", r.Repo, p, j)
			continue
		}
		seen[key] = i
		out = append(out, r)
	}
	return out
}
