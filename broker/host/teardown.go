package host

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/isolate/workspace"
	"golang.org/x/sys/unix"
)

// Teardown stops the broker, sweeps the runtime from outside, removes the
// agent's cgroups, keeps a copy of the audit directory for the operator, and
// removes the seeds, the private root and the ingress directory. It runs
// with its own deadline even when ctx is already done.
func Teardown(ctx context.Context, r *Run, b *BrokerProc) error {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	var errs []error
	if b != nil {
		if err := b.Stop(tctx); err != nil {
			errs = append(errs, err)
		}
		if err := b.waitKiller(tctx); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() != nil {
		// awf was interrupted (SIGINT/SIGTERM): the audit says so, after
		// the broker's own records.
		if a, err := broker.OpenAudit(r.Layout.AuditDir, AuditFile(r.Spec)); err == nil {
			a.Lifecycle(broker.LifecycleCancelled, "awf run was interrupted; the agent was stopped and its running query killed")
			_ = a.Close()
		}
	}
	swept := true
	if r.Spec.Runtime != "" {
		if err := sweepWith(tctx, r.Spec); err != nil {
			errs = append(errs, err)
			swept = false
		}
	}
	// Before removeFiles: the run lock, released there, marks the agent's
	// cgroups as alive for the orphan sweep of a concurrent run.
	if err := RemoveAgentCgroup(tctx, r.Spec.AgentCgroup); err != nil {
		errs = append(errs, err)
	}
	if err := archiveAudit(r.Layout); err != nil {
		errs = append(errs, err)
	}
	if !swept {
		// What the sweep could not reclaim (a sandbox that would not die)
		// is recorded only in the runtime's journal in the private root:
		// the root stays, root-only as after a crash, and the next
		// start-up sweep (SweepOrphans) retries it. The ingress goes now.
		if err := os.RemoveAll(r.Layout.IngressRoot); err != nil {
			errs = append(errs, err)
		}
		if r.lock != nil {
			r.lock.Close()
			r.lock = nil
		}
		errs = append(errs, fmt.Errorf("private root %s kept for the next start-up sweep", r.Layout.PrivateRoot))
		return errors.Join(errs...)
	}
	if err := r.removeFiles(tctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// sweepWith opens the run's runtime on its state dir and sweeps it.
func sweepWith(ctx context.Context, s Spec) error {
	if err := sweepProbes(ctx, s); err != nil {
		return err
	}
	if err := sweepAgents(ctx, s); err != nil {
		return err
	}
	if _, err := os.Stat(s.Layout.StateDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	rt, err := runtimes.Open(s.Runtime, s.HostConfig())
	if err != nil {
		return fmt.Errorf("teardown sweep: %w", err)
	}
	defer rt.Close()
	if err := rt.Sweep(ctx); err != nil {
		return fmt.Errorf("teardown sweep: %w", err)
	}
	return nil
}

// archiveAudit copies the audit directory to the operator's archive (0700).
func archiveAudit(l Layout) error {
	ents, err := os.ReadDir(l.AuditDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("archive audit: %w", err)
	}
	if err := os.MkdirAll(l.AuditArchive, 0o700); err != nil {
		return fmt.Errorf("archive audit: %w", err)
	}
	if err := os.Chmod(filepath.Dir(l.AuditArchive), 0o700); err != nil {
		return fmt.Errorf("archive audit: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(l.AuditDir, e.Name()))
		if err != nil {
			return fmt.Errorf("archive audit: %w", err)
		}
		if err := os.WriteFile(filepath.Join(l.AuditArchive, e.Name()), b, 0o600); err != nil {
			return fmt.Errorf("archive audit: %w", err)
		}
	}
	return nil
}

// orphanMinAge is how old a private root without a lock file must be before
// the orphan sweep treats it as abandoned.
const orphanMinAge = 10 * time.Minute

// SweepOrphans removes what crashed runs left: every private root under
// privateBase whose run lock can be taken is swept with its runtime,
// released, archived and removed, with its ingress directory, and its
// agent cgroup is thawed and removed first (named by the spec, or by the run
// id when the spec is unreadable). Only runs under privateBase are touched:
// an agent cgroup exists only while its run's private root does, since
// Prepare creates it last and Teardown removes it before the root. It
// returns how many it reclaimed.
func SweepOrphans(ctx context.Context, privateBase, ingressBase, auditArchive string) (int, error) {
	ents, err := os.ReadDir(privateBase)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("orphan sweep: %w", err)
	}
	n := 0
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || len(e.Name()) != 32 {
			continue
		}
		l := NewLayout(e.Name(), privateBase, ingressBase, auditArchive)
		lock, err := os.OpenFile(l.LockPath, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err == nil {
			if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
				lock.Close()
				continue // a live run holds it
			}
		} else if info, ierr := e.Info(); ierr != nil || time.Since(info.ModTime()) < orphanMinAge {
			// A run creates its root and then its lock: a young root without
			// a lock may be one being prepared right now.
			continue
		}
		if err := reclaimRoot(ctx, l, lock); err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", l.RunID, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// reclaimRoot reclaims the private root of l, whose run is dead and whose
// lock (nil when it has none) the caller holds: every process and cgroup
// carrying the run id is killed, the agent cgroup removed, the runtime
// swept, every remaining cgroup of the run removed, the audit archived and
// the files removed. On error the lock is released and the root kept.
func reclaimRoot(ctx context.Context, l Layout, lock *os.File) error {
	r := &Run{Layout: l, lock: lock}
	s, serr := ReadSpec(l.SpecPath)
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := KillRun(kctx, l.RunID, nil)
	cancel()
	// The agent's cgroup first: the private root is its journal.
	if err == nil {
		var ag AgentCgroup
		ag, err = orphanAgentCgroup(l.RunID)
		if serr == nil && s.AgentCgroup.FreezerDir != "" {
			ag, err = s.AgentCgroup, nil
		}
		if err == nil {
			err = RemoveAgentCgroup(ctx, ag)
		}
	}
	if err == nil && serr == nil {
		r.Spec = s
		err = sweepWith(ctx, s)
	}
	if err == nil {
		// What the runtime's own sweep did not recognise (a sandbox whose
		// journal was never written or is unreadable) still carries the
		// run id in its name.
		err = removeRunCgroups(ctx, l.RunID)
	}
	if err == nil {
		// Likewise its mounts, all below the run's state directory (a
		// root without a spec is never swept by its runtime): left there
		// they make the root unremovable and fail every later sweep.
		if _, serr := os.Stat(l.StateDir); serr == nil {
			err = workspace.UnmountBelow(ctx, l.StateDir)
		}
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return err
	}
	_ = archiveAudit(l)
	return r.removeFiles(ctx)
}

// Summary condenses an audit log for the operator: requests answered and
// failed (by reason), and bits charged per repository.
func Summary(auditPath string) (string, error) {
	f, err := os.Open(auditPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return summarize(f)
}

func summarize(r io.Reader) (string, error) {
	type rec struct {
		Kind, Repo, Reason, InvocationID string
		Bits                             *int64
	}
	answered, failed := 0, 0
	reasons := map[string]int{}
	bits := map[string]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var x rec
		if json.Unmarshal(sc.Bytes(), &x) != nil {
			continue
		}
		switch x.Kind {
		case "invocation":
			answered++
		case "failure":
			if x.InvocationID == "framing" || x.InvocationID == "transport" || x.InvocationID == "server" {
				continue
			}
			failed++
			reasons[x.Reason]++
		default:
			continue
		}
		if x.Bits != nil && x.Repo != "" {
			bits[x.Repo] += *x.Bits
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests: %d answered, %d failed", answered+failed, answered, failed)
	if len(reasons) > 0 {
		var rs []string
		for k, v := range reasons {
			rs = append(rs, fmt.Sprintf("%s ×%d", k, v))
		}
		sort.Strings(rs)
		fmt.Fprintf(&b, " (%s)", strings.Join(rs, ", "))
	}
	var repos []string
	for k := range bits {
		repos = append(repos, k)
	}
	sort.Strings(repos)
	for _, k := range repos {
		fmt.Fprintf(&b, "\n  %s: %d bits charged", k, bits[k])
	}
	return b.String(), nil
}

// StartupSweep is the orphan sweep every long-lived command (awf run, awf
// broker) does before it prepares a run, over the default bases; what was
// reclaimed is reported on w, each line starting with prefix. A dead run
// that cannot be reclaimed (its Docker Engine is gone, say) stops the new
// run: its sandboxes may still be running, beyond their wall limit, beside
// the new run's on the same CPUs, and nothing but this sweep would notice.
// Its root is kept, root-only, and the error says how to go on.
func StartupSweep(ctx context.Context, w io.Writer, prefix string) error {
	n, err := SweepOrphans(ctx, DefaultPrivateBase, DefaultIngressBase, DefaultAuditArchive)
	if n > 0 {
		fmt.Fprintf(w, "%s: reclaimed %d run(s) left by a crash\n", prefix, n)
	}
	if err != nil {
		return fmt.Errorf("orphan sweep: %w (a dead run's sandboxes may still run: restore its runtime, or stop them and remove its private root under %s, then start again)", err, DefaultPrivateBase)
	}
	return nil
}
