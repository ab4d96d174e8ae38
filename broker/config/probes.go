package config

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
	// ScriptJob's PrivateRepos is the complete allowlist; each Sensitivity
	// is "".
	ScriptJob
}

// DefaultSealedProbes returns the block as an absent one loads: disabled.
func DefaultSealedProbes() SealedProbes {
	return SealedProbes{defaultScriptJob(DefaultProbeRuntime, DefaultProbeTimeout, DefaultProbeMemoryLimit, DefaultProbeMaxInvocations)}
}

func (l *loader) sealedProbes(v any, b *SealedProbes) {
	const p = probeBlock
	m, ok := l.object(p, v, "enabled", "privateRepos", "runtime", "timeout", "memoryLimit", "interpreter", "maxInvocations")
	if !ok {
		return
	}
	l.scriptJob(p, m, l.probeRepo, &b.ScriptJob)
}

// probeRepo reads one entry of sealedProbes.privateRepos: a bare
// owner/repo string (the seed's form) or an object {repo, source, ref} (so
// that local clones stage offline). Neither form has a sensitivity.
func (l *loader) probeRepo(ip string, e any) (Repo, bool) {
	switch t := e.(type) {
	case string:
		if !ValidSlug(t) {
			l.fail(ip, "%q is not a bare owner/repo slug", t)
			return Repo{}, false
		}
		return Repo{Repo: t}, true
	case map[string]any:
		if _, has := t["sensitivity"]; has {
			l.fail(ip+".sensitivity", "sealed probes carry no sensitivity (the invocation count is their budget)")
			return Repo{}, false
		}
		// The object form is the bounded queries' without its
		// sensitivity: l.repo's rules, given a placeholder to check.
		withSens := map[string]any{"sensitivity": "sealed"}
		for k, v := range t {
			withSens[k] = v
		}
		r, ok := l.repo(ip, withSens)
		r.Sensitivity = ""
		return r, ok
	default:
		l.fail(ip, "must be a bare owner/repo string or an object {\"repo\", \"source\", \"ref\"}")
		return Repo{}, false
	}
}
