package staging

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/awf-project/awf/proto"
)

// DefaultServerURL is the git server used when Options.ServerURL is empty.
const DefaultServerURL = "https://github.com"

// NormalizeSlug returns the canonical form of a repository slug: trimmed and
// lower-cased. Seed ids and the seed map use this form.
func NormalizeSlug(slug string) string { return strings.ToLower(strings.TrimSpace(slug)) }

// SeedID returns the opaque seed id of a repository under a run:
// HMAC-SHA256 keyed with the run id over the normalized slug, first 32 hex.
func SeedID(runID, slug string) string {
	m := hmac.New(sha256.New, []byte(runID))
	m.Write([]byte(NormalizeSlug(slug)))
	return hex.EncodeToString(m.Sum(nil))[:32]
}

// ResolveToken returns the staging credential: GH_TOKEN, then GITHUB_TOKEN,
// trimmed of surrounding white space. "" means none is configured. The result
// is a copy, so it survives ScrubEnviron.
func ResolveToken(getenv func(string) string) string {
	for _, name := range TokenVariables() {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return strings.Clone(v)
		}
	}
	return ""
}

// ValidateSlug checks an owner/name slug by the protocol's one rule (R39,
// proto.ValidateRepoSlug), so that staging refuses exactly what the config
// loader and the client refuse. It does not trim: a slug reaches staging
// from the loaded config or the seed map, both already in canonical form.
func ValidateSlug(slug string) error {
	if err := proto.ValidateRepoSlug(slug); err != nil {
		return fmt.Errorf("repository %q: %w", slug, err)
	}
	return nil
}

// ValidateRef checks an operator-chosen ref: a full commit id, or a branch or
// tag name made of letters, digits and "._/-" that git would accept as a ref
// and that can never be read as an option, a refspec or a revision expression.
func ValidateRef(ref string) error {
	if ref == "" || len(ref) > 255 {
		return fmt.Errorf("ref %q: empty or longer than 255 bytes", ref)
	}
	for _, c := range []byte(ref) {
		if !isAlnum(c) && c != '.' && c != '_' && c != '/' && c != '-' {
			return fmt.Errorf("ref %q: only letters, digits and ._/- are allowed", ref)
		}
	}
	if ref[0] == '-' || ref[0] == '/' || ref[0] == '.' || strings.HasSuffix(ref, "/") ||
		strings.HasSuffix(ref, ".") || strings.HasSuffix(ref, ".lock") ||
		strings.Contains(ref, "..") || strings.Contains(ref, "//") || strings.Contains(ref, "/.") ||
		ref == "HEAD" || ref == "FETCH_HEAD" || ref == "ORIG_HEAD" {
		return fmt.Errorf("ref %q: not a valid branch, tag or commit", ref)
	}
	return nil
}

// validCommit reports whether s is a full lower-case SHA-1 or SHA-256 object id.
func validCommit(s string) bool {
	return (len(s) == 40 || len(s) == 64) && isLowerHex(s)
}

// validRunID reports whether s is a run id by proto's one rule.
func validRunID(s string) bool { return proto.ValidateRunID(s) == nil }

// validToken reports whether a credential is printable ASCII without spaces,
// so that it can only travel as one HTTP basic-auth password.
func validToken(s string) bool {
	if len(s) == 0 || len(s) > 4096 {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// validSensitivity reports whether s names a sensitivity of the policy table.
func validSensitivity(s string) bool {
	_, _, ok := proto.SensitivityBudget(s)
	return ok
}

// ValidateServerURL checks a git server base URL: https (plain http only for a
// loopback host), no user info, query or fragment.
func ValidateServerURL(raw string) error {
	_, err := parseRemoteURL(raw)
	return err
}

// parseRemoteURL applies the remote URL rules shared by server URLs and
// https sources. Messages never quote user info, which could hold a secret.
func parseRemoteURL(raw string) (*url.URL, error) {
	for _, c := range []byte(raw) {
		if c <= ' ' || c >= 0x7f {
			return nil, fmt.Errorf("url %s: control, space or non-ASCII byte", displayURL(raw))
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("url %s: does not parse", displayURL(raw))
	}
	show := displayURL(raw)
	switch {
	case u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname())):
		return nil, fmt.Errorf("url %s: must be https (http only on loopback)", show)
	case u.Host == "" || u.Opaque != "":
		return nil, fmt.Errorf("url %s: no host", show)
	case u.User != nil:
		return nil, fmt.Errorf("url %s: user info is not allowed; the credential comes from the environment", show)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("url %s: query and fragment are not allowed", show)
	case strings.Contains(u.Path, "/../") || strings.HasSuffix(u.Path, "/.."):
		return nil, fmt.Errorf("url %s: dot-dot path", show)
	}
	return u, nil
}

// displayURL quotes a URL for a message without any user info.
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil && u.Host == "" {
		return "(unparseable url)"
	}
	u.User = nil
	return fmt.Sprintf("%q", u.String())
}

// sameHost reports whether the remote URL src is on the git server's host
// (scheme, host and port), the only host the credential is offered to.
func sameHost(src, serverURL string) bool {
	if serverURL == "" {
		serverURL = DefaultServerURL
	}
	a, err1 := url.Parse(src)
	b, err2 := url.Parse(serverURL)
	return err1 == nil && err2 == nil && a.Scheme == b.Scheme && strings.EqualFold(a.Host, b.Host)
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// sourceKind tells how a repository is fetched.
type sourceKind int

const (
	sourceRemote sourceKind = iota // https (or loopback http) URL
	sourceLocal                    // pre-provisioned local clone
)

// resolveSource returns where a repository is fetched from. Requests never
// reach this: only operator configuration does.
func resolveSource(r Repo, serverURL string) (string, sourceKind, error) {
	src := strings.TrimSpace(r.Source)
	switch {
	case src == "":
		base := serverURL
		if base == "" {
			base = DefaultServerURL
		}
		if _, err := parseRemoteURL(base); err != nil {
			return "", 0, fmt.Errorf("server %w", err)
		}
		return strings.TrimRight(base, "/") + "/" + NormalizeSlug(r.Slug) + ".git", sourceRemote, nil
	case strings.HasPrefix(src, "/"):
		if filepath.Clean(src) != src {
			return "", 0, fmt.Errorf("source %q: local path must be clean and absolute", src)
		}
		for _, c := range []byte(src) {
			if c < ' ' || c == 0x7f {
				return "", 0, fmt.Errorf("source %q: control byte in path", src)
			}
		}
		return src, sourceLocal, nil
	default:
		u, err := parseRemoteURL(src)
		if err != nil {
			return "", 0, fmt.Errorf("source %w", err)
		}
		if u.Path == "" || u.Path == "/" {
			return "", 0, fmt.Errorf("source %q: no repository path", src)
		}
		return src, sourceRemote, nil
	}
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isLowerHex(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
