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

// reposRequired fails an enabled block whose privateRepos is missing or
// empty; every job kind's block shares the rule and its wording.
func (l *loader) reposRequired(p string, m map[string]any) {
	if a, present := m["privateRepos"]; !present {
		l.fail(p+".privateRepos", "is required when enabled is true")
	} else if arr, ok := a.([]any); ok && len(arr) == 0 {
		l.fail(p+".privateRepos", "must not be empty when enabled is true")
	}
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
	c := &Config{BoundedQueries: BoundedQueries{
		Runtime:        DefaultRuntime,
		TimeoutSeconds: DefaultTimeout,
		MemoryLimit:    DefaultMemoryLimit,
		Interpreter:    DefaultInterpreter,
		MaxInvocations: DefaultMaxInvocations,
		WarmPool:       DefaultWarmPool,
		PrivateRepos:   []Repo{},
	}, Agent: Agent{Network: AgentNetworkHost}}
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
	mem, err := ParseMemory(c.BoundedQueries.MemoryLimit)
	if err == nil {
		c.BoundedQueries.MemoryBytes = mem
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
	if v, ok := m["enabled"]; ok {
		e, isBool := v.(bool)
		if !isBool {
			l.fail(p+".enabled", "must be true or false")
		}
		b.Enabled = e
	}
	if v, ok := m["privateRepos"]; ok {
		b.PrivateRepos = l.repos(p+".privateRepos", v, warnings)
	}
	if b.Enabled && len(b.PrivateRepos) == 0 {
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
			if _, err := ParseMemory(s); err != nil {
				l.fail(p+".memoryLimit", "%v", err)
			} else {
				b.MemoryLimit = s
			}
		}
	}
	if v, ok := m["interpreter"]; ok {
		if s, ok := l.str(p+".interpreter", v); ok && s != "python3" {
			l.fail(p+".interpreter", "%q is not supported (only python3)", s)
		}
	}
	if v, ok := m["maxInvocations"]; ok {
		if n, ok := l.integer(p+".maxInvocations", v, 1, MaxMaxInvocations); ok {
			b.MaxInvocations = int(n)
		}
	}
	if v, ok := m["warmPool"]; ok {
		if n, ok := l.integer(p+".warmPool", v, 0, MaxWarmPool); ok {
			b.WarmPool = int(n)
		}
	}
	if v, ok := m["rootfs"]; ok {
		b.RootFS = l.rootfs(p+".rootfs", v)
	}
	if v, ok := m["dockerSocket"]; ok {
		if s, ok := l.str(p+".dockerSocket", v); ok {
			if !absPath.MatchString(s) {
				l.fail(p+".dockerSocket", "must be an absolute path to a Unix socket")
			}
			b.DockerSocket = s
		}
	}
	if v, ok := m["runscPath"]; ok {
		if s, ok := l.str(p+".runscPath", v); ok {
			if !absPath.MatchString(s) {
				l.fail(p+".runscPath", "must be an absolute path")
			}
			b.RunscPath = s
		}
	}
}

func (l *loader) rootfs(p string, v any) *RootFS {
	m, ok := l.object(p, v, "path", "digest")
	if !ok {
		return nil
	}
	r := &RootFS{}
	if v, ok := m["path"]; !ok {
		l.fail(p+".path", "is required")
	} else if s, ok := l.str(p+".path", v); ok {
		if !absPath.MatchString(s) {
			l.fail(p+".path", "must be an absolute path")
		}
		r.Path = s
	}
	if v, ok := m["digest"]; !ok {
		l.fail(p+".digest", "is required")
	} else if s, ok := l.str(p+".digest", v); ok {
		if !digestShape.MatchString(s) {
			l.fail(p+".digest", "must be sha256: followed by 64 lower-case hex digits")
		}
		r.Digest = s
	}
	return r
}

func (l *loader) repos(p string, v any, warnings *[]string) []Repo {
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
			r = Repo{Repo: t, Sensitivity: "internal", Legacy: true}
			*warnings = append(*warnings, fmt.Sprintf("%s: bare string %q is deprecated; it means {\"repo\": %q, \"sensitivity\": \"internal\"}", ip, t, t))
		case map[string]any:
			var ok bool
			r, ok = l.repo(ip, t)
			if !ok {
				continue
			}
		default:
			l.fail(ip, "must be an object {\"repo\", \"sensitivity\"} or a bare owner/repo string")
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

func (l *loader) repo(p string, m map[string]any) (Repo, bool) {
	n := len(l.errs)
	m, _ = l.object(p, m, "repo", "sensitivity", "source", "ref")
	var r Repo
	if v, ok := m["repo"]; !ok {
		l.fail(p+".repo", "is required")
	} else if s, ok := l.str(p+".repo", v); ok {
		if !ValidSlug(s) {
			l.fail(p+".repo", "%q is not a bare owner/repo slug", s)
		}
		r.Repo = s
	}
	if v, ok := m["sensitivity"]; !ok {
		l.fail(p+".sensitivity", "is required (one of %s)", strings.Join(proto.Sensitivities(), ", "))
	} else if s, ok := l.oneOf(p+".sensitivity", v, proto.Sensitivities()); ok {
		r.Sensitivity = s
	}
	if v, ok := m["source"]; ok {
		if s, ok := l.str(p+".source", v); ok {
			if !sourceShape.MatchString(s) {
				l.fail(p+".source", "must be an https:// URL or an absolute local path")
			}
			r.Source = s
		}
	}
	if v, ok := m["ref"]; ok {
		if s, ok := l.str(p+".ref", v); ok {
			if !refShape.MatchString(s) || !refDots.MatchString(s) {
				l.fail(p+".ref", "%q is not a branch, tag or commit name", s)
			}
			r.Ref = s
		}
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
			if !userShape.MatchString(t) {
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
	if n, ok := m["network"]; ok {
		if s, ok := l.oneOf("agent.network", n, AgentNetworks()); ok {
			a.Network = s
		}
	}
	if b, ok := m["allowPersistedCredentials"]; ok {
		t, isBool := b.(bool)
		if !isBool {
			l.fail("agent.allowPersistedCredentials", "must be true or false")
		}
		a.AllowPersistedCredentials = t
		if t {
			*warnings = append(*warnings, "agent.allowPersistedCredentials is true: a git credential persisted in the agent's working tree (an actions/checkout token in .git/config) stays readable by the agent, which can then clone private repositories around every bound")
		}
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
		case !envName.MatchString(s):
			l.fail(ip, "%q is not an upper-case variable name (A-Z, 0-9, _; at most 128)", s)
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
	if v, ok := m["maxModelRequests"]; ok {
		if n, ok := l.integer(p+".maxModelRequests", v, 1, MaxAPIMaxModelRequests); ok {
			a.MaxModelRequests = int(n)
		}
	}
	if v, ok := m["maxModelTokens"]; ok {
		if n, ok := l.integer(p+".maxModelTokens", v, 1, MaxAPIMaxModelTokens); ok {
			a.MaxModelTokens = int(n)
		}
	}
	if v, ok := m["maxRequestBytes"]; ok {
		if n, ok := l.integer(p+".maxRequestBytes", v, MinAPIBodyBytes, MaxAPIBodyBytes); ok {
			a.MaxRequestBytes = n
		}
	}
	if v, ok := m["maxResponseBytes"]; ok {
		if n, ok := l.integer(p+".maxResponseBytes", v, MinAPIBodyBytes, MaxAPIBodyBytes); ok {
			a.MaxResponseBytes = n
		}
	}
	if v, ok := m["timeout"]; ok {
		if n, ok := l.integer(p+".timeout", v, 1, MaxTimeout); ok {
			a.TimeoutSeconds = int(n)
		}
	}
	return a
}

func (l *loader) apiTarget(p, protocol string, v any) APITarget {
	t := DefaultAPITarget(protocol)
	m, ok := l.object(p, v, "baseUrl", "apiKeyEnv", "model")
	if !ok {
		return t
	}
	if v, ok := m["baseUrl"]; ok {
		if s, ok := l.str(p+".baseUrl", v); ok {
			if !baseURLShape.MatchString(s) {
				l.fail(p+".baseUrl", "%q: want https://HOST[:PORT][/PREFIX], or http:// to 127.0.0.1 or [::1] only; no user, query or fragment", s)
			}
			t.BaseURL = s
		}
	}
	if v, ok := m["apiKeyEnv"]; ok {
		if s, ok := l.str(p+".apiKeyEnv", v); ok {
			if !envName.MatchString(s) {
				l.fail(p+".apiKeyEnv", "%q is not an upper-case variable name (A-Z, 0-9, _; at most 128)", s)
			}
			t.APIKeyEnv = s
		}
	}
	if v, ok := m["model"]; ok {
		if s, ok := l.str(p+".model", v); ok {
			if !modelShape.MatchString(s) {
				l.fail(p+".model", "%q is not a model name (letters, digits, . _ : / @ + -; at most 128)", s)
			}
			t.Model = s
		}
	}
	return t
}
