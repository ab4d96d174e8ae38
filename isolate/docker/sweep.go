package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate/workspace"
)

// createSettle is how long Sweep keeps looking for the container of a
// journal whose container the Engine did not know yet: a create that a
// killed broker sent is finished by the Engine after its client is gone,
// so the container can appear after the first look (a kill right after
// readiness meets the warm pool's first create).
const createSettle = 1500 * time.Millisecond

// createPoll is how often Sweep looks again within createSettle.
const createPoll = 100 * time.Millisecond

// viewStoreSuffix ends the name of a run's repository view store (the
// workspace that workspace.Books names run id + "-views").
const viewStoreSuffix = "-views"

// Sweep removes every container labelled with this state dir and every
// workspace under it that this runtime is not running right now, as left by
// a crash: the sandboxes' workspaces (each with its repository overlay),
// then the view stores of other runs (see workspace.RepoViews), which are
// workspaces too, once no overlay of those sandboxes uses them. A sandbox
// that cannot be removed makes the runtime unusable.
func (r *Runtime) Sweep(ctx context.Context) error {
	var errs []error
	removed, pending, err := r.removeStale(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	names, err := r.books.Leftovers()
	if err != nil {
		errs = append(errs, err)
	}
	// View stores go after the sandboxes whose overlays use them.
	var stores []string
	names = slices.DeleteFunc(names, func(name string) bool {
		if strings.HasSuffix(name, viewStoreSuffix) {
			stores = append(stores, name)
			return true
		}
		return false
	})
	names = append(names, stores...)
	for _, name := range names {
		dir := filepath.Join(r.dir, name)
		// A container removeStale just removed was created already: only
		// one the Engine does not know yet can still appear.
		if j, err := workspace.ReadJournal(dir); err == nil && j.Container != "" && !removed[j.Container] {
			gone, err := r.removeNamed(ctx, j.Container)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			pending = pending || gone
		}
		if err := workspace.Remove(ctx, dir); err != nil {
			errs = append(errs, err)
		}
	}
	if pending {
		if err := r.settleCreates(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return r.books.Swept(errors.Join(errs...))
}

// removeStale removes every container labelled with this state dir that
// this runtime is not running right now, and returns the ids and names
// (without the Engine's leading "/") of those it removed. unsettled says
// that the listing showed a container the Engine did not know when asked to
// remove it: the Engine lists a container while its create is still under
// way, before it can be removed, so that create can still finish after
// this sweep.
func (r *Runtime) removeStale(ctx context.Context) (removed map[string]bool, unsettled bool, err error) {
	filters, _ := json.Marshal(map[string][]string{"label": {labelState + "=" + r.stateTag}})
	var list []struct {
		ID     string            `json:"Id"`
		Names  []string          `json:"Names"`
		Labels map[string]string `json:"Labels"`
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err = r.eng.call(cctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}, "filters": {string(filters)}}, nil, &list)
	cancel()
	if err != nil {
		return nil, false, fmt.Errorf("list containers: %w", err)
	}
	removed = map[string]bool{}
	var errs []error
	for _, c := range list {
		if r.books.IsLive(c.Labels[labelRun] + "-" + c.Labels[labelSandbox]) {
			continue
		}
		notFound, err := r.removeNamed(ctx, c.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if notFound {
			unsettled = true
			continue
		}
		removed[c.ID] = true
		for _, n := range c.Names {
			removed[strings.TrimPrefix(n, "/")] = true
		}
	}
	return removed, unsettled, errors.Join(errs...)
}

// removeNamed force-removes the container named name and reports whether
// the Engine did not know it (it may still be being created).
func (r *Runtime) removeNamed(ctx context.Context, name string) (notFound bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err = r.eng.call(cctx, http.MethodDelete, "/containers/"+url.PathEscape(name), url.Values{"force": {"1"}, "v": {"1"}}, nil, nil)
	switch {
	case err == nil:
		return false, nil
	case isNotFound(err):
		return true, nil
	case removalInProgress(err):
		return false, r.removeContainer(ctx, name)
	}
	return false, fmt.Errorf("remove container %s: %w", name, err)
}

// settleCreates looks again, for createSettle, for containers of this
// state dir that a create still under way in the Engine adds, and removes
// them. While the Engine still lists a container it cannot yet remove, its
// create is known to be under way, and the sweep waits for it up to
// callTimeout rather than leave the container it will finish.
func (r *Runtime) settleCreates(ctx context.Context) error {
	start := time.Now()
	var err error
	unsettled := true
	for unsettled || time.Since(start) < createSettle {
		if unsettled && time.Since(start) >= callTimeout {
			return errors.Join(err, fmt.Errorf("a container of this state dir is still being created after %v", callTimeout))
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(createPoll):
		}
		_, unsettled, err = r.removeStale(ctx)
	}
	return err
}
