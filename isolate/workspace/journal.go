package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"
)

// Journal records one sandbox's resources so that they can be found and
// removed after a crash. It is written before any resource exists and
// updated as the sandbox gains resources.
type Journal struct {
	Backend      string    `json:"backend"`
	RunID        string    `json:"run_id"`
	SandboxID    string    `json:"sandbox_id"`
	InvocationID string    `json:"invocation_id,omitempty"`
	Name         string    `json:"name"`                // workspace directory name
	Cgroup       string    `json:"cgroup,omitempty"`    // cgroup path below each hierarchy root
	Container    string    `json:"container,omitempty"` // container id or name
	Repo         string    `json:"repo,omitempty"`      // seed the repo view was copied from
	Created      time.Time `json:"created"`
}

// createStore creates the directory of a store's workspace (a runtime's
// image or view store), which an earlier try may have left, and writes its
// journal before anything is mounted in it, so that a sweep can find it.
func (w *Workspace) createStore() error {
	if err := os.MkdirAll(filepath.Dir(w.Dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(w.Dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return w.WriteJournal()
}

// WriteJournal atomically replaces the workspace's journal.
func (w *Workspace) WriteJournal() error {
	if err := ReplaceJSON(w.Dir, journalName, w.Journal); err != nil {
		return fmt.Errorf("workspace: journal: %w", err)
	}
	return nil
}

// ReplaceJSON atomically replaces dir/name with v as JSON, mode 0600: it
// writes a hidden sibling "."+name+".tmp" and renames it over name, so a
// reader finds the old record or the new one, never half of one; a crash
// between the two leaves only the hidden file, which a sweep may remove. It
// is every backend's journal write. It does not fsync: a journal must
// survive a crash of the broker, not of the host, and a host crash takes
// every process, mount and cgroup it describes with it.
func ReplaceJSON(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("commit %s: %w", name, err)
	}
	return nil
}

// ReadJournal reads the journal of the workspace directory dir. A workspace
// that crashed before its journal was written has none; the error then
// wraps os.ErrNotExist.
func ReadJournal(dir string) (Journal, error) {
	var j Journal
	b, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		return j, fmt.Errorf("workspace: read journal of %s: %w", dir, err)
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return j, fmt.Errorf("workspace: decode journal of %s: %w", dir, err)
	}
	return j, nil
}

// List returns the workspace directory names under parent. A missing parent
// has none.
func List(parent string) ([]string, error) {
	ents, err := os.ReadDir(parent)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workspace: list %s: %w", parent, err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && ValidName(e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

var (
	idPattern   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })
	namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`) })
)

// ValidID checks a run or invocation id: 1 to 64 letters, digits, '_', '.'
// or '-', starting with a letter or digit. Ids end up in names, labels and
// paths.
func ValidID(kind, id string) error {
	if !idPattern().MatchString(id) {
		return fmt.Errorf("%s id %q: want 1-64 of [A-Za-z0-9_.-], starting with a letter or digit", kind, id)
	}
	return nil
}

// ValidName checks a workspace directory name.
func ValidName(name string) error {
	if !namePattern().MatchString(name) {
		return fmt.Errorf("workspace: bad name %q", name)
	}
	return nil
}

// NewSandboxID returns a fresh random 16-hex sandbox id.
func NewSandboxID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("workspace: sandbox id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
