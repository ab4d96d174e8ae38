// Package rootfs builds and verifies the minimal, read-only, digest-pinned
// Python 3 root filesystem that every sandbox runs on.
//
// Build copies the host interpreter, the shared libraries it and its
// extension modules need, and the standard library (minus tests, GUI and
// installer packages) with precompiled unchecked-hash .pyc files. It adds a
// minimal /etc and every mount point the sandbox backends use, and nothing
// else: no shell and no package manager. The digest is the sha256 of a
// canonical manifest of every path, its type, mode, owner and content hash or
// link target, so Verify can re-check a tree against a pinned value.
package rootfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DefaultPython is the host interpreter copied when Options.Python is empty.
// It must be the distribution's interpreter, never a version-manager shim.
const DefaultPython = "/usr/bin/python3"

// MountPoints returns the directories that exist, empty, in every built root
// so that no sandbox backend ever has to create one in the shared tree. It
// returns a fresh slice each call.
func MountPoints() []string {
	return []string{"/proc", "/dev", "/sys", "/tmp", "/query", "/query/repo", "/awf"}
}

// Aliases returns the relative symbolic links at the top of every built
// root, name → target, a fresh map each call. /probe → query gives a sealed
// probe the v1 paths of the original design (/probe/repo, /probe/out) on
// the one sandbox shape: they resolve inside the sandbox's own /query.
func Aliases() map[string]string { return map[string]string{"probe": "query"} }

// CacheName names awf's own cached root under its cache directory. It
// changes whenever the shape Build produces changes (mount points, aliases),
// so a root cached by an older awf is never reused: the next run builds the
// new shape beside it instead of failing preflight on a missing path.
const CacheName = "python3-layout2"

// Options control Build.
type Options struct {
	Python string // host interpreter to copy ("" = DefaultPython)
	Out    string // directory to create; must not exist or be empty
}

// Build creates a root filesystem and returns its digest ("sha256:<hex>").
// On failure the partly built directory is removed.
func Build(ctx context.Context, o Options) (digest string, err error) {
	if o.Python == "" {
		o.Python = DefaultPython
	}
	if o.Out == "" {
		return "", errors.New("rootfs: no output directory")
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return "", fmt.Errorf("rootfs: output %s: %w", o.Out, err)
	}
	created, err := prepareOut(out)
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			cleanOut(out, created)
		}
	}()
	b := &builder{ctx: ctx, out: out}
	if err := b.build(o.Python); err != nil {
		return "", fmt.Errorf("rootfs: build %s: %w", out, err)
	}
	return Verify(ctx, out, "")
}

// Verify recomputes dir's digest and, when want is not empty, compares it.
// It fails on any entry that is not a directory, regular file or symlink.
func Verify(ctx context.Context, dir, want string) (string, error) {
	m, err := Manifest(ctx, dir)
	if err != nil {
		return "", err
	}
	got := DigestOf(m)
	if want != "" && got != want {
		return got, fmt.Errorf("rootfs: %s has digest %s, want %s", dir, got, want)
	}
	return got, nil
}

// prepareOut makes sure out is a new or empty directory and reports whether
// it created it.
func prepareOut(out string) (bool, error) {
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(out, 0o755); err != nil {
			return false, fmt.Errorf("rootfs: create %s: %w", out, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("rootfs: output %s: %w", out, err)
	case len(ents) > 0:
		return false, fmt.Errorf("rootfs: output %s is not empty", out)
	}
	return false, os.Chmod(out, 0o755)
}

// cleanOut removes what a failed build left.
func cleanOut(out string, created bool) {
	if created {
		_ = os.RemoveAll(out)
		return
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		_ = os.RemoveAll(filepath.Join(out, e.Name()))
	}
}
