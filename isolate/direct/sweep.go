package direct

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/workspace"
)

// Sweep implements isolate.Runtime: it reclaims every journalled resource
// that is not live in this runtime (containers, their processes, cgroup
// leaves, scratch tmpfs, root binds and repository view stores), and any
// container state, scratch directory, root bind or view store left
// without a journal entry. A resource that cannot be reclaimed makes the
// runtime unusable.
func (r *Runtime) Sweep(ctx context.Context) error {
	if r.closed.Load() {
		return errors.New("direct: runtime closed")
	}
	ents, err := readJournal(r.journal)
	if err != nil {
		r.markBroken(err)
		return err
	}
	var errs []error
	known := map[string]bool{}
	for _, e := range ents {
		known[e.Name] = true
		known[e.Container] = true
		if r.isActive(e.Name) {
			continue
		}
		if err := r.reclaim(ctx, e); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Name, err))
		}
	}
	// Resources without a journal entry cannot come from this runtime's
	// normal path (the entry is written first), but an operator or a
	// cleanup that removed journal files can leave them: reclaim every
	// container state, scratch dir and root bind that is not live. A
	// sandbox's container, scratch dir and cgroup leaves share its name.
	unjournalled := map[string]entry{}
	for _, dir := range []string{r.libct, r.scratch} {
		ents, _ := os.ReadDir(dir)
		for _, de := range ents {
			id := de.Name()
			if known[id] || r.isActive(id) || !idPattern().MatchString(id) {
				continue
			}
			unjournalled[id] = entry{Kind: entrySandbox, Name: id, Container: id,
				Scratch: filepath.Join(r.scratch, id), CgroupPaths: r.cg.leafPaths(id)}
		}
	}
	// Root binds and view stores: the entry's name is the directory's with
	// a prefix.
	for _, k := range []struct {
		dir, prefix string
		valid       func(string) bool
		entry       func(name, path string) entry
	}{
		{r.roots, "root-", idPattern().MatchString, func(name, p string) entry { return entry{Kind: entryRoot, Name: name, Mount: p} }},
		{r.viewDir, "view-", isViewDir, func(name, p string) entry { return entry{Kind: entryView, Name: name, View: p} }},
	} {
		des, _ := os.ReadDir(k.dir)
		for _, de := range des {
			name := k.prefix + de.Name()
			if known[name] || r.isActive(name) || !k.valid(de.Name()) {
				continue
			}
			unjournalled[name] = k.entry(name, filepath.Join(k.dir, de.Name()))
		}
	}
	// In name order, as the journal is read: sandboxes (awf-…) go before
	// the root binds and view stores their mounts use.
	for _, name := range slices.Sorted(maps.Keys(unjournalled)) {
		if err := r.reclaim(ctx, unjournalled[name]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.markBroken(err)
		return fmt.Errorf("direct: sweep: %w", err)
	}
	return nil
}

func (r *Runtime) isActive(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active[name]
}

// reclaim removes one leftover resource.
func (r *Runtime) reclaim(ctx context.Context, e entry) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	switch e.Kind {
	case entryRoot:
		if !within(e.Mount, r.roots) {
			return fmt.Errorf("journalled mount %s is outside %s", e.Mount, r.roots)
		}
		errs = append(errs, workspace.DetachAndRemove(e.Mount))
	case entryView:
		// removeViews checks that the path is a store in the views
		// directory and removes the journal entry.
		return r.removeViews(ctx, e.Name, e.View)
	case entrySandbox:
		if err := r.checkCgroups(e); err != nil {
			return err
		}
		// Thawed first: a leaf left frozen (a killer that died between its
		// freeze and its thaw, or froze a leaf already empty) reads as
		// paused to libcontainer, which then refuses the stopped
		// container's status, and a frozen process never takes its
		// SIGKILL on cgroup v1.
		leaves := r.sandboxCgroups(e)
		thawDirs(leaves)
		if e.Container != "" {
			if !idPattern().MatchString(e.Container) {
				return fmt.Errorf("journalled container id %q is invalid", e.Container)
			}
			errs = append(errs, r.reclaimContainer(ctx, e.Container))
		}
		errs = append(errs, removeDirs(ctx, leaves))
		if e.Scratch != "" {
			if !within(e.Scratch, r.scratch) {
				return fmt.Errorf("journalled scratch %s is outside %s", e.Scratch, r.scratch)
			}
			errs = append(errs, workspace.UnmountRoot(filepath.Join(e.Scratch, rootMountName)))
			errs = append(errs, workspace.DetachAndRemove(e.Scratch))
		}
	default:
		return fmt.Errorf("unknown journal kind %q", e.Kind)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return r.untrack(e.Name)
}

// reclaimContainer kills and destroys a container a crashed broker left.
func (r *Runtime) reclaimContainer(ctx context.Context, id string) error {
	dir := filepath.Join(r.libct, id)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	ctr, err := libcontainer.Load(r.libct, id)
	if err != nil {
		// State never completed (crash during Create): the cgroup step
		// below kills anything left; only the directory remains.
		return os.RemoveAll(dir)
	}
	for {
		st, err := ctr.Status()
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		if st == libcontainer.Stopped {
			break
		}
		_ = ctr.Signal(unix.SIGKILL)
		select {
		case <-ctx.Done():
			return fmt.Errorf("container %s still %s: %w", id, st, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := destroyContainer(ctx, ctr); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// checkCgroups refuses a journalled cgroup path outside the cgroup mount.
func (r *Runtime) checkCgroups(e entry) error {
	var errs []error
	for _, p := range e.CgroupPaths {
		if !within(p, cgroupRoot) {
			errs = append(errs, fmt.Errorf("journalled cgroup %s is outside %s", p, cgroupRoot))
		}
	}
	return errors.Join(errs...)
}

// sandboxCgroups lists a leftover sandbox's cgroup leaves: the journalled
// paths and this runtime's (the crashed broker may have placed its
// sandboxes differently). checkCgroups first.
func (r *Runtime) sandboxCgroups(e entry) []string {
	return append(slices.Clone(e.CgroupPaths), r.cg.leafPaths(e.Container)...)
}
