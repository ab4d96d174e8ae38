package enclave

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/rootfs"
)

// RootFile is one file of a minimal root.
type RootFile struct {
	Path    string // inside the root
	Content []byte
	Mode    os.FileMode
}

// Root builds a minimal root filesystem in dir for a static program: the
// mount points every backend needs, dirs (further mount points) and files,
// and nothing else (no interpreter, no shell, no libraries). Both enclave
// roots use it: the network probe's (awf isolate verify --enclave) and the
// bounded-agent loop's.
//
// A backend may prepare a sandbox for isolate.DefaultArgv before it knows
// the job, and libcontainer's init checks that the program exists when it
// starts: an empty placeholder satisfies the check and can run nothing.
func Root(ctx context.Context, dir string, dirs []string, files []RootFile) error {
	for _, d := range append(rootfs.MountPoints(), dirs...) {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("enclave root: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("enclave root: %w", err)
	}
	files = append(files, RootFile{Path: isolate.DefaultArgv()[0], Mode: 0o555})
	for _, f := range files {
		if !filepath.IsAbs(f.Path) {
			return errors.New("enclave root: file path " + f.Path + " is not absolute")
		}
		p := filepath.Join(dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("enclave root: %w", err)
		}
		if err := os.WriteFile(p, f.Content, f.Mode); err != nil {
			return fmt.Errorf("enclave root: %w", err)
		}
	}
	if _, err := rootfs.Verify(ctx, dir, ""); err != nil {
		return fmt.Errorf("enclave root: %w", err)
	}
	return nil
}

// Layout is an enclave's filesystem as every backend renders it: a
// read-only directory at Dir holding Files and the mount points of Binds
// and Out, each bind read-only, and Out a bounded tmpfs, the only writable
// place besides /tmp. Every path is absolute and under Dir. After the job,
// the backend reads Result (the job's output, at most the template's
// Limits.OutputBytes) and Transcript (at most TranscriptBytes) back from
// Out on the host side, before teardown.
type Layout struct {
	Dir   string
	Files []RootFile
	Binds []Bind
	// Out is a tmpfs of OutBytes owned by the sandbox user.
	Out      string
	OutBytes int64
	Env      []string
	// Result and Transcript are file names inside Out.
	Result, Transcript string
	TranscriptBytes    int64
}

// Bind is one read-only bind mount of a host file or directory.
type Bind struct {
	Source string // host path
	Path   string // inside the enclave
	// Exec leaves the bind executable (the loop binary only).
	Exec bool
}

// Validate checks the layout's shape: every path absolute, clean and
// strictly under Dir, no two the same.
func (l Layout) Validate() error {
	under := func(p string) bool {
		return filepath.IsAbs(p) && filepath.Clean(p) == p && len(p) > len(l.Dir)+1 && p[:len(l.Dir)+1] == l.Dir+"/"
	}
	if !filepath.IsAbs(l.Dir) || filepath.Clean(l.Dir) != l.Dir || l.Dir == "/" {
		return fmt.Errorf("enclave layout: directory %q", l.Dir)
	}
	seen := map[string]bool{}
	paths := []string{l.Out}
	for _, f := range l.Files {
		paths = append(paths, f.Path)
	}
	for _, b := range l.Binds {
		if !filepath.IsAbs(b.Source) {
			return fmt.Errorf("enclave layout: bind source %q is not absolute", b.Source)
		}
		paths = append(paths, b.Path)
	}
	for _, p := range paths {
		if !under(p) || seen[p] {
			return fmt.Errorf("enclave layout: path %q is not a distinct path under %s", p, l.Dir)
		}
		seen[p] = true
	}
	if l.OutBytes <= 0 || l.TranscriptBytes <= 0 || l.Result == "" || l.Transcript == "" ||
		filepath.Base(l.Result) != l.Result || filepath.Base(l.Transcript) != l.Transcript {
		return errors.New("enclave layout: out size, result and transcript names are required")
	}
	return nil
}

// Stage writes the layout's host side into dir (which must be empty or
// absent): Files read-only, and an empty mount point for each bind (a
// file for a file, a directory for a directory) and for Out. dir is what
// the backend binds read-only at l.Dir.
func (l Layout) Stage(dir string) error {
	if err := l.Validate(); err != nil {
		return err
	}
	rel := func(p string) string { return filepath.Join(dir, p[len(l.Dir):]) }
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("enclave layout: %w", err)
	}
	mk := func(p string, isDir bool) error {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if isDir {
			return os.Mkdir(p, 0o755)
		}
		return os.WriteFile(p, nil, 0o444)
	}
	for _, b := range l.Binds {
		fi, err := os.Stat(b.Source)
		if err != nil {
			return fmt.Errorf("enclave layout: %w", err)
		}
		if err := mk(rel(b.Path), fi.IsDir()); err != nil {
			return fmt.Errorf("enclave layout: %w", err)
		}
	}
	if err := mk(rel(l.Out), true); err != nil {
		return fmt.Errorf("enclave layout: %w", err)
	}
	return l.StageFiles(dir)
}

// StageFiles writes only the layout's Files into dir, read-only: Stage's
// last step, which a backend that staged the rest ahead (with no Files)
// takes once the invocation's files are known, before the job runs. dir
// is the host side, which the job only ever sees read-only.
func (l Layout) StageFiles(dir string) error {
	if err := l.Validate(); err != nil {
		return err
	}
	for _, f := range l.Files {
		p := filepath.Join(dir, f.Path[len(l.Dir):])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("enclave layout: %w", err)
		}
		if err := os.WriteFile(p, f.Content, 0o444); err != nil {
			return fmt.Errorf("enclave layout: %w", err)
		}
	}
	return nil
}
