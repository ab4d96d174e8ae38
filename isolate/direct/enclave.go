package direct

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/proto"
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
	t0 := time.Now()
	p, err := r.PrepareEnclave(ctx, t, l, job.Argv)
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "%v", err), nil
	}
	return p.run(ctx, nil, job, t0)
}

// PreparedEnclave is one enclave sandbox prepared ahead of its invocation
// (PrepareEnclave): created, every control in place and the network
// joined and confined, and its program (the job's argv) started under
// them, waiting on descriptor 3 (isolate.BootstrapFD, the read end of a
// pipe whose write end the runtime keeps) for its start: a program there
// must read nothing of the invocation before it (agentloop.AwaitStart).
// Run writes the invocation's files, then hands over the start, the
// framing of an empty script (isolate.HandScript), and the wall-clock
// deadline counts from there; a handover that fails kills the enclave. A
// cold RunEnclave goes the same way, handing over at once, so that the
// program cannot tell the two apart by its start. It is single-use: Run
// runs one job in it and destroys it; Destroy destroys it unused. It is
// journalled as every sandbox is, so a crashed broker's Sweep reclaims
// it.
type PreparedEnclave struct {
	sb *sandbox
	l  enclave.Layout
	mu sync.Mutex
	// taken is set by the first Run or Destroy.
	taken bool
}

// PrepareEnclave prepares the enclave RunEnclave would run argv in,
// without running it, so that a caller can prepare it before the
// invocation is known (the network must be the invocation's, built
// ahead too). l's Files may be left out: Run writes the invocation's
// files into the enclave's read-only directory before the job starts.
func (r *Runtime) PrepareEnclave(ctx context.Context, t isolate.Template, l enclave.Layout, argv []string) (*PreparedEnclave, error) {
	switch err := l.Validate(); {
	case err != nil:
		return nil, fmt.Errorf("direct: %w", err)
	case t.Network == nil:
		return nil, errors.New("direct: an enclave needs its network")
	case t.Repo != "":
		return nil, errors.New("direct: an enclave binds its seed read-only, never through a writable overlay")
	case len(argv) == 0:
		return nil, errors.New("direct: an enclave job needs its argv")
	}
	// The job's own argv: init checks that the program exists, and the
	// enclave's root holds no interpreter.
	sb, err := r.prepare(ctx, t, slices.Clone(argv), &l)
	if err != nil {
		return nil, fmt.Errorf("prepare enclave: %w", err)
	}
	return &PreparedEnclave{sb: sb, l: l}, nil
}

// Run writes files (the invocation's, added to the prepared layout's)
// into the enclave's read-only directory, runs job, whose argv must be
// the prepared one, reads the result and transcript back as RunEnclave
// does, and destroys the enclave. Timings.Start counts from Run.
func (p *PreparedEnclave) Run(ctx context.Context, files []enclave.RootFile, job isolate.Job) (isolate.Outcome, []byte) {
	return p.run(ctx, files, job, time.Now())
}

func (p *PreparedEnclave) run(ctx context.Context, files []enclave.RootFile, job isolate.Job, t0 time.Time) (isolate.Outcome, []byte) {
	p.mu.Lock()
	taken := p.taken
	p.taken = true
	p.mu.Unlock()
	if taken {
		return isolate.Err(isolate.KindLaunchFailed, "direct: enclave %s already used", p.sb.id), nil
	}
	sb := p.sb
	l := p.l
	l.Files = append(slices.Clone(l.Files), files...)
	var err error
	switch {
	case !slices.Equal(job.Argv, sb.argv):
		err = fmt.Errorf("the enclave was prepared for %q, not %q", sb.argv, job.Argv)
	case len(files) > 0:
		// Before the start: the program waits on its descriptor and
		// has read nothing yet.
		err = l.StageFiles(filepath.Join(sb.sc.root, enclaveHostDir))
	}
	var out isolate.Outcome
	var transcript []byte
	if err != nil {
		out = isolate.Err(isolate.KindLaunchFailed, "direct: %v", err)
	} else {
		sb.mu.Lock()
		sb.used = true
		sb.mu.Unlock()
		out = sb.exec(ctx, job)
		out.Timings.Start += time.Since(t0) - out.Timings.Run - out.Timings.Read
		if sb.qfd >= 0 {
			if b, kind, _ := readOutput(sb.qfd, filepath.Join(l.Out, l.Transcript), l.TranscriptBytes); kind == isolate.KindOK {
				transcript = b
			}
		}
	}
	out, destroyed := isolate.DestroyAfter(ctx, sb, out, 10*time.Second, "destroy enclave")
	if !destroyed {
		return out, nil
	}
	return out, transcript
}

// Destroy destroys the enclave unused (a Run after it fails); after a Run
// it does nothing.
func (p *PreparedEnclave) Destroy(ctx context.Context) error {
	p.mu.Lock()
	taken := p.taken
	p.taken = true
	p.mu.Unlock()
	if taken {
		return nil
	}
	return p.sb.Destroy(ctx)
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
	// The program waits for its start on the bootstrap's descriptor,
	// prepared or cold alike (sandbox.go), and this says so.
	d.Process.Env = append(slices.Clone(l.Env), fmt.Sprintf("%s=%d", proto.EnclaveStartEnv, isolate.BootstrapFD))
	d.Process.Cwd = isolate.TmpDir
	return nil
}
