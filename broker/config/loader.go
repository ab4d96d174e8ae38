package config

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/awf-project/awf/proto"
)

// loader walks a decoded document and collects every error with its path.
type loader struct {
	errs []string
}

func (l *loader) fail(path, format string, args ...any) {
	l.errs = append(l.errs, path+": "+fmt.Sprintf(format, args...))
}

// object checks that v is an object whose keys are all in allowed.
func (l *loader) object(path string, v any, allowed ...string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		l.fail(path, "must be an object")
		return nil, false
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		l.fail(path, "unknown key %s (allowed: %s)", strings.Join(unknown, ", "), strings.Join(allowed, ", "))
	}
	return m, true
}

// The field readers below read the key of a block's object m at the path
// p.key when the key is present, and store what they read through dst. Each
// owns one rule and its wording for every block that has such a field.

// flag reads a boolean; any other value fails and reads as false.
func (l *loader) flag(p string, m map[string]any, key string, dst *bool) {
	v, ok := m[key]
	if !ok {
		return
	}
	b, isBool := v.(bool)
	if !isBool {
		l.fail(p+"."+key, "must be true or false")
	}
	*dst = b
}

// text reads a string and returns it, so that the caller can check its
// shape; a value that is not a string fails and is not stored.
func (l *loader) text(p string, m map[string]any, key string, dst *string) (string, bool) {
	v, ok := m[key]
	if !ok {
		return "", false
	}
	s, ok := l.str(p+"."+key, v)
	if ok {
		*dst = s
	}
	return s, ok
}

// choice reads a string that must be one of choices.
func (l *loader) choice(p string, m map[string]any, key string, choices []string, dst *string) {
	if v, ok := m[key]; ok {
		if s, ok := l.oneOf(p+"."+key, v, choices); ok {
			*dst = s
		}
	}
}

// readInt reads an integer in [lo, hi], stored only when it is in range. It
// is a function, not a method, to be generic over the int and int64 fields.
func readInt[T int | int64](l *loader, p string, m map[string]any, key string, lo, hi int64, dst *T) {
	if v, ok := m[key]; ok {
		if n, ok := l.integer(p+"."+key, v, lo, hi); ok {
			*dst = T(n)
		}
	}
}

// size reads a size in memoryLimit's form (ParseMemory) into dst and its
// bytes into n, stored only when it is valid; the message names key.
func (l *loader) size(p string, m map[string]any, key string, dst *string, n *int64) {
	v, ok := m[key]
	if !ok {
		return
	}
	s, ok := l.str(p+"."+key, v)
	if !ok {
		return
	}
	b, err := ParseMemory(s)
	if err != nil {
		l.fail(p+"."+key, "%s", strings.Replace(err.Error(), "memoryLimit", key, 1))
		return
	}
	*dst, *n = s, b
}

// model reads a model name: boundedAgents.model, apiProxy.targets.*.model.
func (l *loader) model(p string, m map[string]any, dst *string) {
	if s, ok := l.text(p, m, "model", dst); ok && !proto.ValidModelName(s) {
		l.fail(p+".model", "%q is not a model name (letters, digits, . _ : / @ + -; at most 128)", s)
	}
}

// notEnvName is the failure of a variable name outside envName.
const notEnvName = "%q is not an upper-case variable name (A-Z, 0-9, _; at most 128)"

// enabledRepos reads what every job kind's block starts with: enabled, and
// privateRepos, each entry read by entry (the kind's own forms). An enabled
// block fails when its privateRepos is missing or empty; every kind shares
// the rule and its wording.
func (l *loader) enabledRepos(p string, m map[string]any, entry repoEntry, enabled *bool, repos *[]Repo) {
	l.flag(p, m, "enabled", enabled)
	if v, ok := m["privateRepos"]; ok {
		*repos = l.repoList(p+".privateRepos", v, entry)
	}
	if !*enabled {
		return
	}
	if a, present := m["privateRepos"]; !present {
		l.fail(p+".privateRepos", "is required when enabled is true")
	} else if arr, ok := a.([]any); ok && len(arr) == 0 {
		l.fail(p+".privateRepos", "must not be empty when enabled is true")
	}
}

// scriptJob reads the fields the two script blocks share (ScriptJob), under
// the same rules and in the same order, so that their errors read alike.
func (l *loader) scriptJob(p string, m map[string]any, entry repoEntry, j *ScriptJob) {
	l.enabledRepos(p, m, entry, &j.Enabled, &j.PrivateRepos)
	l.choice(p, m, "runtime", Runtimes(), &j.Runtime)
	readInt(l, p, m, "timeout", 1, MaxTimeout, &j.TimeoutSeconds)
	l.size(p, m, "memoryLimit", &j.MemoryLimit, &j.MemoryBytes)
	var interpreter string
	if s, ok := l.text(p, m, "interpreter", &interpreter); ok && s != DefaultInterpreter {
		l.fail(p+".interpreter", "%q is not supported (only python3)", s)
	}
	readInt(l, p, m, "maxInvocations", 1, MaxMaxInvocations, &j.MaxInvocations)
}

// oneOf reads the string at path and fails it unless it is one of choices.
func (l *loader) oneOf(path string, v any, choices []string) (string, bool) {
	s, ok := l.str(path, v)
	if ok && !slices.Contains(choices, s) {
		l.fail(path, "%q is not one of %s", s, strings.Join(choices, ", "))
	}
	return s, ok
}

func (l *loader) str(path string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		l.fail(path, "must be a string")
	}
	return s, ok
}

// integer accepts a JSON number written as an integer in [lo, hi].
func (l *loader) integer(path string, v any, lo, hi int64) (int64, bool) {
	n, ok := v.(json.Number)
	if ok {
		// JSON Schema's integer is mathematical: 30, 30.0 and 3e1 are the same.
		if r, ok := new(big.Rat).SetString(string(n)); ok && r.IsInt() {
			i := r.Num()
			if !i.IsInt64() || i.Int64() < lo || i.Int64() > hi {
				l.fail(path, "%s is out of range %d..%d", n, lo, hi)
				return 0, false
			}
			return i.Int64(), true
		}
	}
	l.fail(path, "must be an integer in %d..%d", lo, hi)
	return 0, false
}

func (l *loader) config(tree any) *Config {
	c := &Config{BoundedQueries: DefaultBoundedQueries(), Agent: Agent{Network: AgentNetworkHost}}
	top, ok := l.object("config", tree, "$schema", "boundedQueries", "agent", "apiProxy", "boundedAgents", "sealedProbes")
	if !ok {
		return c
	}
	if v, ok := top["$schema"]; ok {
		l.str("$schema", v)
	}
	if v, ok := top["boundedQueries"]; ok {
		l.boundedQueries(v, &c.BoundedQueries, &c.Warnings)
	}
	if v, ok := top["agent"]; ok {
		l.agent(v, &c.Agent, &c.Warnings)
	}
	if v, ok := top["apiProxy"]; ok {
		c.APIProxy = l.apiProxy(v)
	}
	c.BoundedAgents = DefaultBoundedAgents()
	if v, ok := top["boundedAgents"]; ok {
		l.boundedAgents(v, &c.BoundedAgents)
	}
	c.SealedProbes = DefaultSealedProbes()
	if v, ok := top["sealedProbes"]; ok {
		l.sealedProbes(v, &c.SealedProbes)
	}
	return c
}

func (l *loader) boundedQueries(v any, b *BoundedQueries, warnings *[]string) {
	const p = "boundedQueries"
	m, ok := l.object(p, v, "enabled", "privateRepos", "runtime", "timeout", "memoryLimit",
		"interpreter", "maxInvocations", "warmPool", "rootfs", "dockerSocket", "runscPath")
	if !ok {
		return
	}
	entry := func(ip string, e any) (Repo, bool) { return l.queryRepo(ip, e, warnings) }
	l.scriptJob(p, m, entry, &b.ScriptJob)
	readInt(l, p, m, "warmPool", 0, MaxWarmPool, &b.WarmPool)
	if v, ok := m["rootfs"]; ok {
		b.RootFS = l.rootfs(p+".rootfs", v)
	}
	if s, ok := l.text(p, m, "dockerSocket", &b.DockerSocket); ok && !absPath().MatchString(s) {
		l.fail(p+".dockerSocket", "must be an absolute path to a Unix socket")
	}
	if s, ok := l.text(p, m, "runscPath", &b.RunscPath); ok && !absPath().MatchString(s) {
		l.fail(p+".runscPath", "must be an absolute path")
	}
}

func (l *loader) rootfs(p string, v any) *RootFS {
	m, ok := l.object(p, v, "path", "digest")
	if !ok {
		return nil
	}
	r := &RootFS{}
	l.required(p, m, "path")
	if s, ok := l.text(p, m, "path", &r.Path); ok && !absPath().MatchString(s) {
		l.fail(p+".path", "must be an absolute path")
	}
	l.required(p, m, "digest")
	if s, ok := l.text(p, m, "digest", &r.Digest); ok && !digestShape().MatchString(s) {
		l.fail(p+".digest", "must be sha256: followed by 64 lower-case hex digits")
	}
	return r
}

// repoEntry reads one entry of a privateRepos list at path ip; false drops
// it (its failure is recorded).
type repoEntry func(ip string, e any) (Repo, bool)

// repoList reads a privateRepos list: an array whose entries entry reads,
// slugs unique case-insensitively.
func (l *loader) repoList(p string, v any, entry repoEntry) []Repo {
	a, ok := v.([]any)
	if !ok {
		l.fail(p, "must be an array")
		return nil
	}
	out := make([]Repo, 0, len(a))
	seen := map[string]int{}
	for i, e := range a {
		ip := fmt.Sprintf("%s[%d]", p, i)
		r, ok := entry(ip, e)
		if !ok {
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

// queryRepo reads one entry of boundedQueries.privateRepos: an object
// {repo, sensitivity, source, ref}, or a deprecated bare owner/repo string,
// which means sensitivity internal and adds a warning.
func (l *loader) queryRepo(ip string, e any, warnings *[]string) (Repo, bool) {
	switch t := e.(type) {
	case string:
		if !ValidSlug(t) {
			l.fail(ip, "%q is not a bare owner/repo slug", t)
			return Repo{}, false
		}
		*warnings = append(*warnings, fmt.Sprintf("%s: bare string %q is deprecated; it means {\"repo\": %q, \"sensitivity\": \"internal\"}", ip, t, t))
		return Repo{Repo: t, Sensitivity: "internal", Legacy: true}, true
	case map[string]any:
		return l.repo(ip, t)
	default:
		l.fail(ip, "must be an object {\"repo\", \"sensitivity\"} or a bare owner/repo string")
		return Repo{}, false
	}
}

// required fails a key that m lacks.
func (l *loader) required(p string, m map[string]any, key string) {
	if _, ok := m[key]; !ok {
		l.fail(p+"."+key, "is required")
	}
}

func (l *loader) repo(p string, m map[string]any) (Repo, bool) {
	n := len(l.errs)
	m, _ = l.object(p, m, "repo", "sensitivity", "source", "ref")
	var r Repo
	l.required(p, m, "repo")
	if s, ok := l.text(p, m, "repo", &r.Repo); ok && !ValidSlug(s) {
		l.fail(p+".repo", "%q is not a bare owner/repo slug", s)
	}
	if _, ok := m["sensitivity"]; !ok {
		l.fail(p+".sensitivity", "is required (one of %s)", strings.Join(proto.Sensitivities(), ", "))
	}
	l.choice(p, m, "sensitivity", proto.Sensitivities(), &r.Sensitivity)
	if s, ok := l.text(p, m, "source", &r.Source); ok && !sourceShape().MatchString(s) {
		l.fail(p+".source", "must be an https:// URL or an absolute local path")
	}
	if s, ok := l.text(p, m, "ref", &r.Ref); ok && (!refShape().MatchString(s) || !refDots().MatchString(s)) {
		l.fail(p+".ref", "%q is not a branch, tag or commit name", s)
	}
	return r, len(l.errs) == n
}

func (l *loader) agent(v any, a *Agent, warnings *[]string) {
	m, ok := l.object("agent", v, "user", "env", "network", "allowPersistedCredentials")
	if !ok {
		return
	}
	if u, ok := m["user"]; ok {
		switch t := u.(type) {
		case string:
			if !userShape().MatchString(t) {
				l.fail("agent.user", "%q is not a user name", t)
			}
			a.User = t
		case json.Number:
			if n, ok := l.integer("agent.user", t, 1, 4294967294); ok {
				a.User = strconv.FormatInt(n, 10)
			}
		default:
			l.fail("agent.user", "must be a user name or a non-zero uid")
		}
	}
	if e, ok := m["env"]; ok {
		a.EnvAllow = l.agentEnv("agent.env", e)
	}
	l.choice("agent", m, "network", AgentNetworks(), &a.Network)
	l.flag("agent", m, "allowPersistedCredentials", &a.AllowPersistedCredentials)
	if a.AllowPersistedCredentials {
		*warnings = append(*warnings, "agent.allowPersistedCredentials is true: a git credential persisted in the agent's working tree (an actions/checkout token in .git/config) stays readable by the agent, which can then clone private repositories around every bound")
	}
}

// agentEnv reads agent.env: {"allow": [NAME, ...]}.
func (l *loader) agentEnv(p string, v any) []string {
	m, ok := l.object(p, v, "allow")
	if !ok {
		return nil
	}
	raw, ok := m["allow"]
	if !ok {
		return nil
	}
	a, ok := raw.([]any)
	if !ok {
		l.fail(p+".allow", "must be an array of variable names")
		return nil
	}
	out := []string{}
	for i, e := range a {
		ip := fmt.Sprintf("%s.allow[%d]", p, i)
		s, ok := l.str(ip, e)
		if !ok {
			continue
		}
		switch {
		case !envName().MatchString(s):
			l.fail(ip, notEnvName, s)
		case proto.IsGitHubCredentialVariable(s):
			l.fail(ip, "%q is a GitHub credential: it never reaches the agent when bounded queries are enabled (it could clone the private repositories directly), so it cannot be allowed", s)
		case proto.NeverAllowed(s):
			l.fail(ip, "%q is an Actions runtime variable: it never reaches the agent when bounded queries are enabled (it mints tokens), so it cannot be allowed", s)
		default:
			out = append(out, s)
		}
	}
	return out
}

func (l *loader) apiProxy(v any) *APIProxy {
	const p = "apiProxy"
	a := &APIProxy{
		Targets:          map[string]APITarget{},
		MaxModelRequests: DefaultAPIMaxModelRequests,
		MaxModelTokens:   DefaultAPIMaxModelTokens,
		MaxRequestBytes:  DefaultAPIMaxRequestBytes,
		MaxResponseBytes: DefaultAPIMaxResponseBytes,
		TimeoutSeconds:   DefaultAPITimeout,
	}
	m, ok := l.object(p, v, "targets", "maxModelRequests", "maxModelTokens", "maxRequestBytes", "maxResponseBytes", "timeout")
	if !ok {
		return a
	}
	if tv, ok := m["targets"]; !ok {
		l.fail(p+".targets", "is required (at least one of %s)", strings.Join(APITargets(), ", "))
	} else if tm, ok := l.object(p+".targets", tv, APITargets()...); ok {
		if len(tm) == 0 {
			l.fail(p+".targets", "must name at least one of %s", strings.Join(APITargets(), ", "))
		}
		for _, name := range APITargets() {
			if t, ok := tm[name]; ok {
				a.Targets[name] = l.apiTarget(p+".targets."+name, name, t)
			}
		}
	}
	readInt(l, p, m, "maxModelRequests", 1, MaxAPIMaxModelRequests, &a.MaxModelRequests)
	readInt(l, p, m, "maxModelTokens", 1, MaxAPIMaxModelTokens, &a.MaxModelTokens)
	readInt(l, p, m, "maxRequestBytes", MinAPIBodyBytes, MaxAPIBodyBytes, &a.MaxRequestBytes)
	readInt(l, p, m, "maxResponseBytes", MinAPIBodyBytes, MaxAPIBodyBytes, &a.MaxResponseBytes)
	readInt(l, p, m, "timeout", 1, MaxTimeout, &a.TimeoutSeconds)
	return a
}

func (l *loader) apiTarget(p, protocol string, v any) APITarget {
	t := DefaultAPITarget(protocol)
	m, ok := l.object(p, v, "baseUrl", "apiKeyEnv", "model")
	if !ok {
		return t
	}
	if s, ok := l.text(p, m, "baseUrl", &t.BaseURL); ok && !baseURLShape().MatchString(s) {
		l.fail(p+".baseUrl", "%q: want https://HOST[:PORT][/PREFIX], or http:// to 127.0.0.1 or [::1] only; no user, query or fragment", s)
	}
	if s, ok := l.text(p, m, "apiKeyEnv", &t.APIKeyEnv); ok && !envName().MatchString(s) {
		l.fail(p+".apiKeyEnv", notEnvName, s)
	}
	l.model(p, m, &t.Model)
	return t
}
