package gvisor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/awf-project/awf/isolate/workspace"
)

// Sweep removes every sandbox under the state dir that this runtime is not
// running right now: it kills and deletes the runsc container, removes the
// cgroup named in the journal and unmounts and deletes the workspace. It is
// meant for start-up (after a crash) and teardown. A sandbox that cannot be
// removed makes the runtime unusable.
func (r *Runtime) Sweep(ctx context.Context) error {
	names, err := r.books.Leftovers()
	if err != nil {
		return fmt.Errorf("gvisor: sweep: %w", err)
	}
	var errs []error
	for _, name := range names {
		if err := r.sweepOne(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	return r.books.Swept(errors.Join(errs...))
}

func (r *Runtime) sweepOne(ctx context.Context, name string) error {
	dir := filepath.Join(r.dir, name)
	j, jerr := workspace.ReadJournal(dir)
	var errs []error
	if jerr == nil {
		if err := reclaimContainer(ctx, r.runsc, filepath.Join(dir, "runsc"), j.Container); err != nil {
			errs = append(errs, err)
		}
		if j.Cgroup != "" {
			v2, err := cgroupV2()
			if err == nil {
				err = (&cgroup{v2: v2, rel: j.Cgroup}).remove(ctx)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := workspace.Remove(ctx, dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
