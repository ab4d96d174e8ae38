package direct

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate/workspace"
)

// Journal entry kinds.
const (
	entrySandbox = "sandbox" // a container with its cgroup leaf and scratch tmpfs
	entryRoot    = "root"    // a read-only bind of a root filesystem
	entryView    = "view"    // the store of seed copies, the repo overlays' lower layers
)

// entry is one journalled resource. It is written before the resource is
// created and removed after the resource is gone, so a crash at any point
// leaves enough for Sweep.
type entry struct {
	Kind         string    `json:"kind"`
	Name         string    `json:"name"` // journal file name without .json
	RunID        string    `json:"run_id"`
	InvocationID string    `json:"invocation_id,omitempty"`
	Container    string    `json:"container,omitempty"` // libcontainer id
	Scratch      string    `json:"scratch,omitempty"`   // host tmpfs mount point
	Mount        string    `json:"mount,omitempty"`     // read-only root bind
	View         string    `json:"view,omitempty"`      // view store directory
	CgroupPaths  []string  `json:"cgroup_paths,omitempty"`
	Created      time.Time `json:"created"`
}

// writeJournal writes e atomically, as every backend writes its journal
// (workspace.ReplaceJSON); readJournal removes the hidden temporary file
// that a crash between its write and rename leaves.
func writeJournal(dir string, e entry) error {
	if err := workspace.ReplaceJSON(dir, e.Name+".json", e); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// removeJournal deletes one entry; a missing entry is fine.
func removeJournal(dir, name string) error {
	err := os.Remove(filepath.Join(dir, name+".json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// readJournal lists every entry. Unreadable entries are errors: a resource
// that cannot be identified cannot be reclaimed.
func readJournal(dir string) ([]entry, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var out []entry
	for _, de := range ents {
		name := de.Name()
		if strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(filepath.Join(dir, name)) // a write that never completed
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		var e entry
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("journal %s: %w", name, err)
		}
		if e.Name+".json" != name {
			return nil, fmt.Errorf("journal %s: names entry %q", name, e.Name)
		}
		out = append(out, e)
	}
	return out, nil
}
