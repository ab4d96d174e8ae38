package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/proto"
)

// The checks here run before anything is staged. Each one stops a path by
// which the agent could reach a private repository without paying for it
// (invariant 9): a git credential persisted in its working tree, or a
// file, directory or engine socket that the agent's view must cover but
// cannot because the agent keeps a path that overlaps it.

// PersistedCredential is one git setting in the agent's working tree that
// holds or hands out a credential. The value is never kept; Key has any
// userinfo redacted, because a url.<base>.insteadOf key can hold a token.
type PersistedCredential struct {
	File string // the config file that sets it
	Key  string // the setting, as git lists it, redacted
	Why  string // what kind of credential it is
}

func (c PersistedCredential) String() string {
	return fmt.Sprintf("%s in %s (%s)", c.Key, c.File, c.Why)
}

// gitConfigTimeout bounds each git config call.
const gitConfigTimeout = 10 * time.Second

// maxGitConfigFiles caps how many config files one check reads (the
// repository's and those they include, transitively).
const maxGitConfigFiles = 32

// FindPersistedCredentials walks up from dir to the root of the git
// repository that holds it (none: no finding) and reads that repository's
// config files, and every file they include, whatever its condition
// (actions/checkout from v6 keeps its token in an included file outside
// .git). home expands an include path that starts with "~/" ("" leaves it).
// Git itself parses each file (git config --file --null --list) with an
// environment that reads no other configuration. A file that git cannot
// parse fails the check: a credential may hide in what was not read.
func FindPersistedCredentials(ctx context.Context, dir, home string) ([]PersistedCredential, error) {
	files, err := repoConfigFiles(dir)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	var out []PersistedCredential
	seen := map[string]bool{}
	for len(files) > 0 {
		f := files[0]
		files = files[1:]
		if seen[f] {
			continue
		}
		seen[f] = true
		if len(seen) > maxGitConfigFiles {
			return nil, fmt.Errorf("git config: more than %d included files from %s", maxGitConfigFiles, dir)
		}
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			continue // git ignores a missing include too
		}
		kvs, err := listGitConfig(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, kv := range kvs {
			if why := credentialSetting(kv[0], kv[1]); why != "" {
				out = append(out, PersistedCredential{File: f, Key: redactUserinfo(kv[0]), Why: why})
			}
			if isIncludeKey(kv[0]) && kv[1] != "" {
				files = append(files, includePath(f, kv[1], home))
			}
		}
	}
	return out, nil
}

// repoConfigFiles finds the repository that holds dir and returns its
// config files: the common config and, for a linked worktree, its own.
func repoConfigFiles(dir string) ([]string, error) {
	if !filepath.IsAbs(dir) {
		return nil, nil
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		dotgit := filepath.Join(d, ".git")
		fi, err := os.Stat(dotgit)
		if err == nil {
			gitdir := dotgit
			if !fi.IsDir() {
				if gitdir, err = readGitdirFile(dotgit); err != nil {
					return nil, err
				}
			}
			common := gitdir
			if b, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
				c := strings.TrimSpace(string(b))
				if !filepath.IsAbs(c) {
					c = filepath.Join(gitdir, c)
				}
				common = filepath.Clean(c)
			}
			files := []string{filepath.Join(common, "config")}
			if wt := filepath.Join(gitdir, "config.worktree"); gitdir != common || fileExists(wt) {
				files = append(files, wt)
			}
			return files, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("git repository of %s: %w", dir, err)
		}
		if d == "/" {
			return nil, nil
		}
	}
}

// readGitdirFile reads a ".git" file ("gitdir: PATH", relative to its directory).
func readGitdirFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("git repository: %w", err)
	}
	g, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", fmt.Errorf("git repository: %s is not a gitdir file", p)
	}
	g = strings.TrimSpace(g)
	if !filepath.IsAbs(g) {
		g = filepath.Join(filepath.Dir(p), g)
	}
	return filepath.Clean(g), nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// listGitConfig returns the key/value pairs of one config file, includes
// not followed (FindPersistedCredentials follows them itself, so that a
// conditional include is read whatever its condition).
func listGitConfig(ctx context.Context, file string) ([][2]string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitConfigTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "config", "--file", file, "--no-includes", "--null", "--list")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C"}
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git config %s: cannot read it (%v: %s); fix or remove it", file, err, strings.TrimSpace(stderr.String()))
	}
	var kvs [][2]string
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		k, v, _ := bytes.Cut(rec, []byte{'\n'})
		kvs = append(kvs, [2]string{string(k), string(v)})
	}
	return kvs, nil
}

// isIncludeKey reports whether key is include.path or includeIf.<cond>.path.
func isIncludeKey(key string) bool {
	return key == "include.path" || strings.HasPrefix(key, "includeif.") && strings.HasSuffix(key, ".path")
}

// includePath resolves an include path the way git does: relative to the
// including file, "~/" in home.
func includePath(from, p, home string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
		return filepath.Join(home, rest)
	}
	if !filepath.IsAbs(p) {
		return filepath.Join(filepath.Dir(from), p)
	}
	return filepath.Clean(p)
}

// gitHubTokenPrefixes are the prefixes of GitHub's token formats.
var gitHubTokenPrefixes = []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}

// credentialSetting says why a git setting holds or hands out a
// credential, or "" when it does not. key is as git lists it: section and
// name lower-cased, the subsection as written.
func credentialSetting(key, value string) string {
	switch {
	case strings.HasPrefix(key, "http.") && strings.HasSuffix(key, ".extraheader"):
		return "an http extraheader, which actions/checkout writes with persist-credentials"
	case strings.HasPrefix(key, "credential.") && strings.HasSuffix(key, ".helper"):
		h := strings.TrimSpace(value)
		if strings.HasPrefix(h, "!") {
			return "an inline credential helper, which can print any token"
		}
		if f := strings.Fields(h); len(f) > 0 && (f[0] == "store" || strings.HasSuffix(f[0], "git-credential-store")) {
			return "the store credential helper, which keeps tokens in plain text"
		}
	case (strings.HasPrefix(key, "remote.") || strings.HasPrefix(key, "submodule.")) && (strings.HasSuffix(key, ".url") || strings.HasSuffix(key, ".pushurl")):
		if hasUserinfo(value) {
			return "a remote URL with credentials in it"
		}
	case strings.HasPrefix(key, "url.") && (strings.HasSuffix(key, ".insteadof") || strings.HasSuffix(key, ".pushinsteadof")):
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(key, "url."), ".insteadof"), ".pushinsteadof")
		if hasUserinfo(base) || hasUserinfo(value) {
			return "a URL rewrite with credentials in it"
		}
	}
	for _, p := range gitHubTokenPrefixes {
		if strings.Contains(value, p) || strings.Contains(key, p) {
			return "a GitHub token"
		}
	}
	return ""
}

// hasUserinfo reports whether a URL carries credentials: any userinfo on
// http(s), a password on any other scheme (ssh://git@host is normal).
func hasUserinfo(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		// An unparsable URL with an @ before its path is judged by its shape.
		return userinfoShape().MatchString(s)
	}
	_, pw := u.User.Password()
	return pw || u.Scheme == "http" || u.Scheme == "https"
}

var (
	userinfoShape = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?i)https?://[^/@]+@`) })
	userinfoPart  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`://[^/@]*@`) })
)

func redactUserinfo(s string) string { return userinfoPart().ReplaceAllString(s, "://***@") }

// HideInputs are the paths the agent's view must cover.
type HideInputs struct {
	PrivateBase      string   // every run's private root
	AuditArchiveBase string   // every run's kept audit log
	RootFSCache      string   // awf's rootfs cache ("" = DefaultRootFSCache)
	RootFS           string   // a configured rootfs directory, or ""
	StateDirs        []string // runtime state directories
	Sources          []string // configured local source paths
	DockerSocket     string   // boundedQueries.dockerSocket, or ""
	DockerHost       string   // the caller's DOCKER_HOST, or ""
}

// AgentHide returns the paths the agent's view covers (ShimArgs.Hide),
// clean, sorted and each once: everything awf owns or was told is
// private, whatever its mode, and every container-engine socket that
// exists now. A path below another one in the list is left out: covering
// the outer one hides it already.
func AgentHide(in HideInputs) []string {
	cache := in.RootFSCache
	if cache == "" {
		cache = DefaultRootFSCache
	}
	// The enclave namespaces' directory: its entries come and go at an
	// enclave's start and teardown, at moments the agent must not learn.
	c := []string{in.PrivateBase, in.AuditArchiveBase, cache, in.RootFS, enclave.NetNSDir}
	c = append(c, in.StateDirs...)
	c = append(c, in.Sources...)
	c = append(c, EngineSockets(in.DockerSocket, in.DockerHost)...)
	var out []string
	for _, p := range c {
		if filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	var outer []string
	for _, p := range out {
		if !slices.ContainsFunc(outer, func(o string) bool { return within(o, p) }) {
			outer = append(outer, p)
		}
	}
	return outer
}

// EngineSockets returns the container-engine sockets that exist now:
// proto's well-known paths and per-user patterns, the configured socket,
// and DOCKER_HOST when it names a Unix socket.
func EngineSockets(configured, dockerHost string) []string {
	var c []string
	for _, p := range proto.ContainerEngineSockets() {
		if strings.ContainsRune(p, '*') {
			m, _ := filepath.Glob(p)
			c = append(c, m...)
		} else {
			c = append(c, p)
		}
	}
	if configured != "" {
		c = append(c, configured)
	}
	if p, ok := strings.CutPrefix(dockerHost, "unix://"); ok && p != "" {
		c = append(c, p)
	}
	var out []string
	for _, p := range c {
		if _, err := os.Lstat(p); err == nil && filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// keptPath is a path the agent keeps in its view, named for messages.
// onlyIfExists marks one that keeps nothing when it does not exist (a home
// of /nonexistent); the others (the ingress directory) are made later.
type keptPath struct {
	what, path   string
	onlyIfExists bool
}

// checkHideKept refuses a hidden path that overlaps a path the agent keeps:
// covering it would take the kept one away (it contains it) or leave the
// agent without part of its own tree (it lies inside it), and either way
// the operator has put something private where the agent works. Both
// sides are compared after resolving symlinks, as the shim follows them.
func checkHideKept(hide []string, kept []keptPath, sockets []string) error {
	for _, h := range hide {
		rh := resolveOrClean(h)
		if rh == "/" {
			return fmt.Errorf("%s resolves to /, which cannot be hidden from the agent", h)
		}
		for _, k := range kept {
			// "/" overlaps everything and is never covered whole.
			if !filepath.IsAbs(k.path) || filepath.Clean(k.path) == "/" || k.onlyIfExists && !fileExists(k.path) {
				continue
			}
			rk := resolveOrClean(k.path)
			if !within(rh, rk) && !within(rk, rh) {
				continue
			}
			what := "private path"
			if slices.Contains(sockets, h) {
				what = "container-engine socket"
			}
			return fmt.Errorf("%s %s must be hidden from the agent, but it overlaps %s %s, which the agent keeps; move it out of there (or run the agent from another directory)", what, h, k.what, k.path)
		}
	}
	return nil
}

// resolveOrClean resolves symlinks in p if it exists, else cleans it.
func resolveOrClean(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// within reports whether p is base or lies below it.
func within(base, p string) bool {
	return base == p || base == "/" || strings.HasPrefix(p, base+"/")
}

// checkWorkingTree fails when the agent's working tree holds a persisted
// git credential, unless the operator allowed it; then it warns, loudly.
func checkWorkingTree(ctx context.Context, o Options, agent Agent) error {
	if o.Workdir == "" {
		return nil
	}
	found, err := FindPersistedCredentials(ctx, o.Workdir, agent.Home)
	if err != nil {
		return fmt.Errorf("preflight: the agent's working tree %s: %w", o.Workdir, err)
	}
	if len(found) == 0 {
		return nil
	}
	var names []string
	for _, f := range found {
		names = append(names, f.String())
	}
	if !o.Config.Agent.AllowPersistedCredentials {
		return fmt.Errorf("preflight: the agent's working tree %s holds a persisted git credential, which the agent could read and use to clone private repositories directly: %s; remove it (actions/checkout: persist-credentials: false) or set agent.allowPersistedCredentials: true",
			o.Workdir, strings.Join(names, "; "))
	}
	for _, n := range names {
		fmt.Fprintf(o.Progress, "awf: WARNING: agent.allowPersistedCredentials is true: the agent can read the persisted git credential %s and clone private repositories with it, around every bound\n", n)
	}
	return nil
}

// planAgentHide computes the agent's Hide list for a run and refuses one
// that would overlap what the agent keeps.
func planAgentHide(o Options, agent Agent, l Layout) ([]string, error) {
	bq := o.Config.BoundedQueries
	in := HideInputs{
		PrivateBase:      l.PrivateBase,
		AuditArchiveBase: filepath.Dir(l.AuditArchive),
		RootFSCache:      o.RootFSCache,
		StateDirs:        []string{l.StateDir},
		DockerSocket:     bq.DockerSocket,
		DockerHost:       o.Getenv("DOCKER_HOST"),
	}
	if bq.RootFS != nil {
		in.RootFS = bq.RootFS.Path
	}
	for _, r := range bq.PrivateRepos {
		if strings.HasPrefix(r.Source, "/") {
			in.Sources = append(in.Sources, r.Source)
		}
	}
	// The directory must exist before the agent starts, so that its view
	// covers it even when another run's enclaves create it later.
	if err := enclave.EnsureNetNSDir(); err != nil {
		return nil, fmt.Errorf("preflight: %w", err)
	}
	hide := AgentHide(in)
	kept := []keptPath{
		{"the agent's working directory", o.Workdir, false},
		{"the agent's home", agent.Home, true},
		{"the run's ingress directory", l.IngressRoot, false},
	}
	if err := checkHideKept(hide, kept, EngineSockets(in.DockerSocket, in.DockerHost)); err != nil {
		return nil, err
	}
	return hide, nil
}
