package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/awf-project/awf/isolate/cgroupfs"
	"github.com/awf-project/awf/isolate/trial"
	"github.com/awf-project/awf/isolate/workspace"
)

// Platform probe deadlines. KVM can hang on hosts with a /dev/kvm that does
// not really work (nested virtualisation), so its probe is short.
const (
	kvmProbeWall    = 3 * time.Second
	ptraceProbeWall = 30 * time.Second
)

// Probe proves that runsc works here: the binary runs, it supports
// --oci-seccomp, and a trivial container starts under the full set of
// controls (uid 65534, no capabilities, cgroup limits, no network, a seccomp
// filter) and reports its exit status. It picks the platform: kvm when a
// trial run works within a short deadline, else ptrace. This runsc build has
// no systrap platform.
func (r *Runtime) Probe(ctx context.Context) error {
	if err := r.Usable(); err != nil {
		return err
	}
	if r.runsc == "" {
		return fmt.Errorf("gvisor: %w", r.runscErr)
	}
	if err := checkRunscFlags(ctx, r.runsc); err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	if r.unimplemented() == nil {
		m, err := unimplementedSyscalls(ctx, r.runsc)
		if err != nil {
			return fmt.Errorf("gvisor: %w", err)
		}
		r.mu.Lock()
		r.unimpl = m
		r.mu.Unlock()
	}
	if err := checkSwap(); err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	if p := r.currentPlatform(); p != "" {
		return r.trial(ctx, p, ptraceProbeWall)
	}
	var kvmErr error
	if kvmUsable() {
		if kvmErr = r.trial(ctx, "kvm", kvmProbeWall); kvmErr == nil {
			r.setPlatform("kvm")
			return nil
		}
	}
	if err := r.trial(ctx, "ptrace", ptraceProbeWall); err != nil {
		if kvmErr != nil {
			err = fmt.Errorf("%w (kvm also failed: %v)", err, kvmErr)
		}
		return fmt.Errorf("gvisor: runsc cannot start a sandbox on this host: %w", err)
	}
	r.setPlatform("ptrace")
	return nil
}

// ensureProbed runs Probe once, before the first sandbox.
func (r *Runtime) ensureProbed(ctx context.Context) error {
	if r.currentPlatform() != "" {
		return nil
	}
	return r.Probe(ctx)
}

func (r *Runtime) setPlatform(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.platform = p
}

// Platform returns the platform chosen by Probe, or "" before a successful Probe.
func (r *Runtime) Platform() string { return r.currentPlatform() }

// kvmUsable reports whether /dev/kvm can be opened at all.
func kvmUsable() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// checkRunscFlags runs `runsc flags` and requires every flag the backend uses.
func checkRunscFlags(ctx context.Context, runsc string) error {
	out, err := runscCommand(ctx, runsc, 10*time.Second, "flags")
	if err != nil {
		return fmt.Errorf("runsc at %s does not run: %w", runsc, err)
	}
	var missing []string
	for _, f := range []string{"oci-seccomp", "network", "platform", "host-uds", "host-fifo", "overlay2", "root", "log"} {
		if !strings.Contains(out, "-"+f+" ") && !strings.Contains(out, "-"+f+"\n") {
			missing = append(missing, "--"+f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("runsc at %s lacks %s: it cannot enforce every control (the seccomp policy needs --oci-seccomp)", runsc, strings.Join(missing, ", "))
	}
	return nil
}

// checkSwap refuses a cgroup v1 host that has swap but no swap accounting:
// the memory limit would then not bound memory plus swap.
func checkSwap() error {
	v2, err := cgroupfs.Unified()
	if err != nil || v2 {
		return err
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "memory", "memory.memsw.limit_in_bytes")); err == nil {
		return nil
	}
	b, err := os.ReadFile("/proc/swaps")
	if err != nil {
		return fmt.Errorf("read /proc/swaps: %w", err)
	}
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) > 1 {
		return errors.New("swap is enabled but the kernel has no swap accounting (memsw): the memory limit cannot cover swap; disable swap or boot with swapaccount=1")
	}
	return nil
}

// trial runs the probe container on platform p.
func (r *Runtime) trial(ctx context.Context, p string, wall time.Duration) error {
	prev := r.currentPlatform()
	r.setPlatform(p)
	defer r.setPlatform(prev)
	sb, err := r.prepare(ctx, trial.Template(r.runID, wall), probeSeccomp(), buildProbeRoot)
	if err != nil {
		return err
	}
	if err := trial.Run(ctx, sb, 10*time.Second); err != nil {
		return fmt.Errorf("platform %s: %w", p, err)
	}
	return nil
}

// probeSeccomp allows only what the probe program does.
func probeSeccomp() *specs.LinuxSeccomp {
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActKill,
		Architectures: []specs.Arch{specs.ArchX86_64},
		Syscalls:      []specs.LinuxSyscall{{Names: []string{"exit", "exit_group"}, Action: specs.ActAllow}},
	}
}

// buildProbeRoot makes the trial's root in the sandbox's workspace, where
// workspace.Remove takes it with the rest.
func buildProbeRoot(ws *workspace.Workspace) (string, error) {
	root := ws.Path("probe-root")
	return root, trial.BuildRoot(root)
}

func goarchName() string { return runtime.GOARCH }
