package direct

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
)

// enclaveHostDir is the scratch directory bound read-only at the layout's
// directory.
const enclaveHostDir = "enclave"

// RunEnclave runs job in one fresh, single-use enclave laid out as l: the
// template's network (required: the enclave's only link), no repository
// overlay and no /query or /awf, but l's read-only directory, its
// read-only binds (the seed, the loop binary) and its bounded tmpfs. The
// result and the transcript are read back from the host side through the
// tmpfs's descriptor after the job has exited and before teardown; the
// transcript is for the operator only and is nil when it is missing or
// over its cap.
func (r *Runtime) RunEnclave(ctx context.Context, t isolate.Template, l enclave.Layout, job isolate.Job) (isolate.Outcome, []byte) {
	switch err := l.Validate(); {
	case err != nil:
		return isolate.Err(isolate.KindLaunchFailed, "direct: %v", err), nil
	case t.Network == nil:
		return isolate.Err(isolate.KindLaunchFailed, "direct: an enclave needs its network"), nil
	case t.Repo != "":
		return isolate.Err(isolate.KindLaunchFailed, "direct: an enclave binds its seed read-only, never through a writable overlay"), nil
	case len(job.Argv) == 0:
		return isolate.Err(isolate.KindLaunchFailed, "direct: an enclave job needs its argv"), nil
	}
	t0 := time.Now()
	// The job's own argv: init checks that the program exists, and the
	// enclave's root holds no interpreter.
	sb, err := r.prepare(ctx, t, slices.Clone(job.Argv), &l)
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "prepare enclave: %v", err), nil
	}
	sb.used = true
	out := sb.exec(ctx, job)
	out.Timings.Start += time.Since(t0) - out.Timings.Run - out.Timings.Read
	var transcript []byte
	if sb.qfd >= 0 {
		if b, kind, _ := readOutput(sb.qfd, filepath.Join(l.Out, l.Transcript), l.TranscriptBytes); kind == isolate.KindOK {
			transcript = b
		}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := sb.Destroy(dctx); err != nil {
		return isolate.Outcome{Kind: isolate.KindCleanupFailed, ExitCode: out.ExitCode, Detail: fmt.Sprintf("destroy enclave after %s: %v", out.Kind, err), Timings: out.Timings}, nil
	}
	return out, transcript
}

// renderEnclave replaces a query's /query and /awf in the container
// configuration by the enclave's layout, staged in the sandbox's scratch
// tmpfs: the directory read-only, each bind read-only (noexec but for the
// loop binary), the out tmpfs bounded and the sandbox user's; and gives
// the process the layout's environment and /tmp as its directory.
func renderEnclave(l enclave.Layout, scratch string, d *specs.Spec, cfg *configs.Config) error {
	host := filepath.Join(scratch, enclaveHostDir)
	if err := l.Stage(host); err != nil {
		return err
	}
	if d.Process.User.UID == 0 || d.Process.User.GID == 0 {
		return errors.New("enclave: the sandbox user is root")
	}
	ms := cfg.Mounts[:0:0]
	for _, m := range cfg.Mounts {
		if m.Destination == isolate.QueryDir || m.Destination == isolate.ScriptDir || m.Destination == isolate.RepoDir {
			continue
		}
		ms = append(ms, m)
	}
	const ro = unix.MS_BIND | unix.MS_REC | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV
	ms = append(ms, &configs.Mount{Source: host, Destination: l.Dir, Device: "bind", Flags: ro | unix.MS_NOEXEC})
	for _, b := range l.Binds {
		flags := ro | unix.MS_NOEXEC
		if b.Exec {
			flags = ro
		}
		ms = append(ms, &configs.Mount{Source: b.Source, Destination: b.Path, Device: "bind", Flags: flags})
	}
	ms = append(ms, &configs.Mount{Source: "tmpfs", Destination: l.Out, Device: "tmpfs",
		Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC,
		Data:  fmt.Sprintf("mode=700,uid=%d,gid=%d,size=%d", d.Process.User.UID, d.Process.User.GID, l.OutBytes)})
	cfg.Mounts = ms
	d.Process.Env = slices.Clone(l.Env)
	d.Process.Cwd = isolate.TmpDir
	return nil
}
