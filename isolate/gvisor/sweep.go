package gvisor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/awf-project/awf/isolate/cgroupfs"
	"github.com/awf-project/awf/isolate/workspace"
)

// Sweep removes every sandbox under the state dir that this runtime is not
// running right now: it kills every process of its runsc container and
// removes runsc's state for it, removes the cgroup named in the journal and
// unmounts and deletes the workspace (its repo overlay with it). The
// sandboxes are swept in parallel, each on its own, and then the view
// stores of other runs (see workspace.RepoViews), which are workspaces too. It is meant for start-up (after a crash) and teardown.
// A sandbox that cannot be removed makes the runtime unusable.
func (r *Runtime) Sweep(ctx context.Context) error {
	names, err := r.books.Leftovers()
	if err != nil {
		return fmt.Errorf("gvisor: sweep: %w", err)
	}
	// View stores go after the sandboxes whose overlays use them.
	var sandboxes, stores []string
	for _, name := range names {
		if strings.HasSuffix(name, "-views") {
			stores = append(stores, name)
		} else {
			sandboxes = append(sandboxes, name)
		}
	}
	var errs []error
	for _, batch := range [][]string{sandboxes, stores} {
		berrs := make([]error, len(batch))
		var wg sync.WaitGroup
		for i, name := range batch {
			wg.Go(func() { berrs[i] = r.sweepOne(ctx, name) })
		}
		wg.Wait()
		errs = append(errs, berrs...)
	}
	return r.books.Swept(errors.Join(errs...))
}

func (r *Runtime) sweepOne(ctx context.Context, name string) error {
	dir := filepath.Join(r.dir, name)
	j, jerr := workspace.ReadJournal(dir)
	var errs []error
	// Even without a journal: a runsc process names its state root, which
	// is the workspace's.
	if err := reclaimContainer(ctx, r.runsc, filepath.Join(dir, "runsc"), j.Container); err != nil {
		errs = append(errs, err)
	}
	if jerr == nil && j.Cgroup != "" {
		v2, err := cgroupfs.Unified()
		if err == nil {
			err = (&cgroup{v2: v2, rel: j.Cgroup}).remove(ctx)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// A process that did not die may still use the workspace: it
		// stays, for the next sweep.
		return errors.Join(errs...)
	}
	if err := workspace.Remove(ctx, dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
