package staging

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CheckPrivateRoot fails if the private root overlaps any path the agent can
// see: equal to it, inside it, or containing it. Every path must be absolute.
// Paths are compared after resolving symlinks through their longest existing
// ancestor (the missing rest is appended unresolved), so a root that does not
// exist yet, or is reached through a symlink, is still judged by where it
// will really live.
func CheckPrivateRoot(root string, agentVisible []string) error {
	r, err := resolveExisting(root)
	if err != nil {
		return fmt.Errorf("private root: %w", err)
	}
	for _, v := range agentVisible {
		p, err := resolveExisting(v)
		if err != nil {
			return fmt.Errorf("agent-visible path: %w", err)
		}
		if within(r, p) || within(p, r) {
			return fmt.Errorf("private root %s (%s) overlaps agent-visible path %s (%s)", root, r, v, p)
		}
	}
	return nil
}

// resolveExisting resolves symlinks in the longest existing ancestor of an
// absolute path and appends the missing rest.
func resolveExisting(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q is not absolute", p)
	}
	p = filepath.Clean(p)
	var rest []string
	cur := p
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				real = filepath.Join(real, rest[i])
			}
			return real, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("resolve %s: %w", cur, err)
		}
		if _, lerr := os.Lstat(cur); lerr == nil {
			return "", fmt.Errorf("resolve %s: dangling symlink", cur)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", fmt.Errorf("resolve %s: no existing ancestor", p)
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
}

// within reports whether p is base or lies below it.
func within(base, p string) bool {
	if base == p || base == "/" {
		return true
	}
	return strings.HasPrefix(p, base+"/")
}
