package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// AgentBinDir is where the seed's workflows find the agent CLIs: the
// sealed-probe design installs /usr/local/bin/sealed-probe, and scripts
// written against it call that path as well as the name on PATH.
const AgentBinDir = "/usr/local/bin"

// installAgentCLIs makes every CLI of the run's skill directory appear in
// AgentBinDir, in the agent's mount namespace only: a read-only overlay
// whose upper layer is a directory of symbolic links (built in scratch,
// a tmpfs the caller detaches afterwards; the overlay keeps it) and whose
// lower layer is the host's own AgentBinDir, so every tool the host has
// there stays. Nothing is written to the host. A host without AgentBinDir
// gets nothing (the CLIs are still on PATH), and so does one whose
// directory overlayfs cannot stack on (a line on stderr says so); a CLI
// named like a host tool there wins, in this view only.
func installAgentCLIs(skillDir, scratch string) error {
	if skillDir == "" {
		return nil
	}
	fi, err := os.Stat(AgentBinDir)
	if errors.Is(err, os.ErrNotExist) || err == nil && !fi.IsDir() {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent shim: %s: %w", AgentBinDir, err)
	}
	ents, err := os.ReadDir(skillDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent shim: skill directory: %w", err)
	}
	links := filepath.Join(scratch, "bin")
	if err := os.Mkdir(links, 0o755); err != nil {
		return fmt.Errorf("agent shim: %w", err)
	}
	n := 0
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			continue
		}
		if err := os.Symlink(filepath.Join(skillDir, e.Name()), filepath.Join(links, e.Name())); err != nil {
			return fmt.Errorf("agent shim: %w", err)
		}
		n++
	}
	if n == 0 {
		return nil
	}
	opts := "lowerdir=" + links + ":" + AgentBinDir
	if err := unix.Mount("awf-bin", AgentBinDir, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		// A convenience, not a control: a host whose directory overlayfs
		// cannot stack on still runs, with the CLIs on PATH only.
		fmt.Fprintf(os.Stderr, "awf: the agent CLIs are on PATH but not in %s (overlay: %v)\n", AgentBinDir, err)
	}
	return nil
}
