package enclave

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Sweep removes what enclaves of runs other than liveRunID left behind (a
// crashed broker): SweepRuns with only liveRunID alive.
func Sweep(ctx context.Context, liveRunID string) error {
	return SweepRuns(ctx, func(run string) bool { return run == liveRunID })
}

// SweepRuns removes the enclave resources of every run for which live
// returns false: their namespaces in NetNSDir (and in LegacyNetNSDir, where
// an older broker kept them), with the links in them, and their cgroups in
// the cgroup v2 tree. Hooks and filters need no sweep:
// they are links held by descriptors, which died with the broker, or
// filters that go with their interface. A cgroup that still has a process
// is reported, not forced: the backend's own sweep kills sandboxes first.
// A host may run several brokers: live must answer true for each of them.
func SweepRuns(ctx context.Context, live func(runID string) bool) error {
	keep := func(name string) bool {
		run, ok := runOf(name)
		return !ok || live(run)
	}
	var errs []error
	for _, dir := range netNSDirs {
		ents, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("enclave sweep: %w", err)
		}
		for _, ent := range ents {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("enclave sweep: %w", err)
			}
			if keep(ent.Name()) {
				continue
			}
			p := filepath.Join(dir, ent.Name())
			if strings.HasSuffix(ent.Name(), "-p") {
				if err := deleteLinks(p); err != nil {
					errs = append(errs, err)
				}
			}
			if err := removeNetNS(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if root, err := cgroup2Root(); err == nil {
		ents, err := os.ReadDir(root)
		if err != nil {
			errs = append(errs, err)
		}
		for _, ent := range ents {
			if ent.IsDir() && !keep(ent.Name()) {
				if err := os.Remove(filepath.Join(root, ent.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, fmt.Errorf("cgroup %s: %w", ent.Name(), err))
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("enclave sweep: %w", err)
	}
	return nil
}

// netNSDirs are the directories the sweep and Leftovers read: awf's own,
// and iproute2's, where a broker before NetNSDir kept its namespaces.
var netNSDirs = []string{NetNSDir, LegacyNetNSDir}

// runOf returns the run ID in a resource's name.
func runOf(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return "", false
	}
	run, _, ok := strings.Cut(rest, ".")
	return run, ok && run != ""
}

// Leftovers lists the enclave resources of runs other than liveRunID that
// exist now ("" = of every run), for tests and verify's leftover check.
func Leftovers(liveRunID string) []string {
	var out []string
	match := func(name string) bool {
		run, ok := runOf(name)
		return ok && (liveRunID == "" || run != liveRunID)
	}
	for _, dir := range netNSDirs {
		ents, _ := os.ReadDir(dir)
		for _, ent := range ents {
			if match(ent.Name()) {
				out = append(out, filepath.Join(dir, ent.Name()))
			}
		}
	}
	if root, err := cgroup2Root(); err == nil {
		ents, _ := os.ReadDir(root)
		for _, ent := range ents {
			if ent.IsDir() && match(ent.Name()) {
				out = append(out, filepath.Join(root, ent.Name()))
			}
		}
	}
	return out
}

// Resources lists every resource of run runID that exists now.
func Resources(runID string) []string {
	var out []string
	for _, p := range Leftovers("") {
		if run, _ := runOf(filepath.Base(p)); run == runID {
			out = append(out, p)
		}
	}
	return out
}
