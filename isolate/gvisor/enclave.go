package gvisor

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/isolate/workspace"
)

// RunEnclave runs job in one fresh, single-use enclave laid out as l: the
// template's network (required), no repository copy and no /query or
// /awf, but l's read-only directory, its read-only binds and, as l.Out,
// the workspace's bounded host tmpfs, from which the result and the
// transcript are read back on the host side after runsc has exited and
// before teardown. The transcript is nil when missing or over its cap.
func (r *Runtime) RunEnclave(ctx context.Context, t isolate.Template, l enclave.Layout, job isolate.Job) (isolate.Outcome, []byte) {
	switch err := l.Validate(); {
	case err != nil:
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: %v", err), nil
	case t.Network == nil:
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: an enclave needs its network"), nil
	case t.Repo != "":
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: an enclave binds its seed read-only, never a writable copy"), nil
	case len(job.Argv) == 0:
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: an enclave job needs its argv"), nil
	case l.OutBytes != t.Limits.QueryTmpfsBytes:
		// The out tmpfs is the workspace's, which has the template's size.
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: the enclave's out tmpfs must be the template's QueryTmpfsBytes"), nil
	}
	t0 := time.Now()
	sb, err := r.prepareTemplate(ctx, t)
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: prepare enclave: %v", err), nil
	}
	sb.enc = &l
	out := sb.Exec(ctx, job)
	out.Timings.Start = time.Since(t0) - out.Timings.Run - out.Timings.Read
	var transcript []byte
	if b, kind, _ := workspace.ReadFileFrom(sb.ws.QueryDir(), filepath.Join(l.Out, l.Transcript), l.TranscriptBytes); kind == isolate.KindOK {
		transcript = b
	}
	out, destroyed := isolate.DestroyAfter(ctx, sb, out, 30*time.Second, "gvisor: destroy enclave")
	if !destroyed {
		return out, nil
	}
	return out, transcript
}

// renderEnclave replaces a query's /query, /query/repo and /awf in the
// bundle by the enclave's layout: the directory staged in the workspace
// and bound read-only, each bind read-only (noexec but for the loop), and
// the workspace's /query tmpfs bound at l.Out; the process gets the
// layout's environment and /tmp as its directory.
func renderEnclave(l enclave.Layout, ws *workspace.Workspace, s *specs.Spec) error {
	host := ws.Path("enclave")
	if err := l.Stage(host); err != nil {
		return err
	}
	if s.Process.User.UID == 0 || s.Process.User.GID == 0 {
		return errors.New("enclave: the sandbox user is root")
	}
	ms := slices.DeleteFunc(slices.Clone(s.Mounts), func(m specs.Mount) bool {
		return m.Destination == isolate.QueryDir || m.Destination == isolate.RepoDir || m.Destination == isolate.ScriptDir
	})
	ro := []string{"rbind", "ro", "nosuid", "nodev"}
	ms = append(ms, specs.Mount{Destination: l.Dir, Type: "bind", Source: host, Options: append(slices.Clone(ro), "noexec")})
	for _, b := range l.Binds {
		opts := slices.Clone(ro)
		if !b.Exec {
			opts = append(opts, "noexec")
		}
		ms = append(ms, specs.Mount{Destination: b.Path, Type: "bind", Source: b.Source, Options: opts})
	}
	ms = append(ms, specs.Mount{Destination: l.Out, Type: "bind", Source: ws.QueryDir(), Options: []string{"rbind", "rw", "nosuid", "nodev", "noexec"}})
	s.Mounts = ms
	// The query's hints name the workspace's /query tmpfs, which is bound
	// here at l.Out: an enclave keeps runsc's default, shared, access.
	dropMountHints(s.Annotations)
	proc := *s.Process
	proc.Env = slices.Clone(l.Env)
	proc.Cwd = isolate.TmpDir
	s.Process = &proc
	return nil
}
