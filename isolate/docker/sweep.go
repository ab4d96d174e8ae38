package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"

	"github.com/awf-project/awf/isolate/workspace"
)

// Sweep removes every container labelled with this state dir and every
// workspace under it that this runtime is not running right now, as left by
// a crash. A sandbox that cannot be removed makes the runtime unusable.
func (r *Runtime) Sweep(ctx context.Context) error {
	var errs []error
	filters, _ := json.Marshal(map[string][]string{"label": {labelState + "=" + r.stateTag}})
	var list []struct {
		ID     string            `json:"Id"`
		Labels map[string]string `json:"Labels"`
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err := r.eng.call(cctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}, "filters": {string(filters)}}, nil, &list)
	cancel()
	if err != nil {
		errs = append(errs, fmt.Errorf("list containers: %w", err))
	}
	for _, c := range list {
		if r.books.IsLive(c.Labels[labelRun] + "-" + c.Labels[labelSandbox]) {
			continue
		}
		if err := r.removeContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	names, err := r.books.Leftovers()
	if err != nil {
		errs = append(errs, err)
	}
	for _, name := range names {
		dir := filepath.Join(r.dir, name)
		if j, err := workspace.ReadJournal(dir); err == nil {
			if err := r.removeContainer(ctx, j.Container); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := workspace.Remove(ctx, dir); err != nil {
			errs = append(errs, err)
		}
	}
	return r.books.Swept(errors.Join(errs...))
}
