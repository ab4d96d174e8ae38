// Package workspace is the host side of one sandbox for the backends that
// cannot build the sandbox's mounts themselves (gvisor and docker). It owns a
// private directory under the runtime's state dir that holds:
//
//   - query: a size-capped tmpfs, owned by uid 65534, that becomes /query;
//   - repofs: a size-capped tmpfs that holds either the private, writable
//     copy of the seed (made with the safe copier; docker) or the upper and
//     work directories of an overlay over the runtime's view of the seed
//     (see RepoViews; gvisor), which becomes /query/repo;
//   - awf: a root-owned, read-only directory with the job's script, which
//     becomes /awf;
//   - a journal naming the sandbox, so that a sweep after a crash can find
//     and remove everything.
//
// Because /query is a host tmpfs, the broker reads /query/out from the host
// side, relative to a directory descriptor, without following any link and
// with a size cap (ReadOutput). Nothing here runs untrusted code.
package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/staging"
)

// SandboxUID and SandboxGID are the ids every job runs as: the
// description's (isolate.Describe), which owns them.
const (
	SandboxUID = isolate.SandboxUID
	SandboxGID = isolate.SandboxGID
)

// Names of the entries inside a workspace directory.
const (
	queryName   = "query"
	repoFSName  = "repofs"
	repoTree    = "tree"
	awfName     = "awf"
	scriptName  = "query-script.py"
	journalName = "journal.json"
)

// Repository copy bounds beyond the byte size, which is the repo tmpfs size.
const (
	maxRepoFiles = 1 << 20
	maxRepoDepth = 256
)

// Workspace is one sandbox's host directory and mounts.
type Workspace struct {
	// Dir is the workspace directory (0700, root).
	Dir string
	// Journal is what was recorded about the sandbox.
	Journal Journal
}

// QueryDir is the host directory that becomes /query.
func (w *Workspace) QueryDir() string { return filepath.Join(w.Dir, queryName) }

// RepoDir is the host directory that becomes /query/repo, or "" when the
// sandbox has no repository view.
func (w *Workspace) RepoDir() string {
	if w.Journal.Repo == "" {
		return ""
	}
	return filepath.Join(w.Dir, repoFSName, repoTree)
}

// AwfDir is the host directory that becomes /awf (read-only).
func (w *Workspace) AwfDir() string { return filepath.Join(w.Dir, awfName) }

// ScriptPath is the host path of the job's script.
func (w *Workspace) ScriptPath() string { return filepath.Join(w.Dir, awfName, scriptName) }

// Path returns a path inside the workspace directory for backend scratch
// files (bundle, runsc state, logs).
func (w *Workspace) Path(name string) string { return filepath.Join(w.Dir, name) }

// Create makes the workspace parent/j.Name: it writes the journal first, so
// that a crash at any later point leaves a record for Sweep, then mounts the
// /query tmpfs and, when seed is not empty, the repo tmpfs with a private copy
// of seed. On error everything created is removed.
func Create(ctx context.Context, parent string, j Journal, l isolate.Limits, seed string) (w *Workspace, err error) {
	return create(ctx, parent, j, l, seed, "")
}

// create is Create; with view set (the runtime's view of seed, see
// RepoViews), the repository is an overlay over view instead of a copy.
func create(ctx context.Context, parent string, j Journal, l isolate.Limits, seed, view string) (w *Workspace, err error) {
	if err := ValidName(j.Name); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("workspace: state dir %s: %w", parent, err)
	}
	dir := filepath.Join(parent, j.Name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace: create %s: %w", dir, err)
	}
	j.Repo = seed
	w = &Workspace{Dir: dir, Journal: j}
	defer func() {
		if err != nil {
			_ = Remove(context.WithoutCancel(ctx), dir)
		}
	}()
	if err := w.WriteJournal(); err != nil {
		return nil, err
	}
	if err := mountTmpfs(w.QueryDir(), l.QueryTmpfsBytes, 0o700); err != nil {
		return nil, err
	}
	// The repo view's mount point must exist inside /query.
	if err := os.Mkdir(filepath.Join(w.QueryDir(), "repo"), 0o755); err != nil {
		return nil, fmt.Errorf("workspace: repo mount point: %w", err)
	}
	// The script's directory is a root-owned tmpfs of its own
	// (isolate.ScriptDirBytes says why).
	if err := MountTmpfs(w.AwfDir(), isolate.ScriptDirBytes, 0o755, 0, 0); err != nil {
		return nil, err
	}
	switch {
	case seed != "" && view != "":
		if err := w.mountRepoOverlay(view, l.RepoUpperBytes); err != nil {
			return nil, err
		}
	case seed != "":
		if err := w.copyRepo(ctx, seed, l.RepoUpperBytes); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// copyRepo copies seed into a fresh tmpfs of size bytes with the safe copier,
// owned by the sandbox user and owner-writable. The seed itself is only read.
func (w *Workspace) copyRepo(ctx context.Context, seed string, size int64) error {
	fs := filepath.Join(w.Dir, repoFSName)
	if err := mountTmpfs(fs, size, 0o700); err != nil {
		return err
	}
	dst := filepath.Join(fs, repoTree)
	lim := staging.CopyLimits{
		MaxBytes: size, MaxFiles: maxRepoFiles, MaxDepth: maxRepoDepth,
		Owner:    &staging.Ownership{UID: SandboxUID, GID: SandboxGID},
		Writable: true,
	}
	if err := staging.CopyTree(ctx, seed, dst, lim); err != nil {
		return fmt.Errorf("workspace: copy repository view: %w", err)
	}
	return nil
}

// WriteScript places the job's script, read-only and root-owned, where the
// sandbox sees it at isolate.ScriptPath.
func (w *Workspace) WriteScript(script []byte) error {
	p := w.ScriptPath()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o444)
	if err != nil {
		return fmt.Errorf("workspace: script: %w", err)
	}
	if _, err := f.Write(script); err != nil {
		f.Close()
		return fmt.Errorf("workspace: write script: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("workspace: close script: %w", err)
	}
	if err := os.Chmod(w.AwfDir(), 0o555); err != nil {
		return fmt.Errorf("workspace: seal script dir: %w", err)
	}
	return sealDir(w.AwfDir())
}

// Remove unmounts everything mounted at or below dir and deletes dir. It is
// what both the normal teardown and the sweep use. A missing dir is not an
// error.
func Remove(ctx context.Context, dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unmountBelow(ctx, dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("workspace: remove %s: %w", dir, err)
	}
	return nil
}
