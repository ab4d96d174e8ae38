package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate/trial"
)

// probeWall bounds the trial container's run.
const probeWall = 60 * time.Second

// engineInfo is the part of GET /info the probe checks and Info reports.
type engineInfo struct {
	Runtimes        map[string]json.RawMessage `json:"Runtimes"`
	MemoryLimit     bool                       `json:"MemoryLimit"`
	SwapLimit       bool                       `json:"SwapLimit"`
	PidsLimit       bool                       `json:"PidsLimit"`
	CPUCfsQuota     bool                       `json:"CpuCfsQuota"`
	SecurityOptions []string                   `json:"SecurityOptions"`
	CgroupVersion   string                     `json:"CgroupVersion"`
	OSType          string                     `json:"OSType"`
	ServerVersion   string                     `json:"ServerVersion"`
	DefaultRuntime  string                     `json:"DefaultRuntime"`
	DockerRootDir   string                     `json:"DockerRootDir"`
}

// Probe proves that the Engine answers on its Unix socket, speaks the API
// version the backend uses, can enforce every limit (memory and swap, pids,
// cpu quota, seccomp), and can run a trivial container under the full set of
// controls.
func (r *Runtime) Probe(ctx context.Context) error {
	if err := r.Usable(); err != nil {
		return err
	}
	if err := checkSocket(r.eng.sock); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := r.eng.version(cctx); err != nil {
		return fmt.Errorf("docker: the Engine at %s does not answer: %w", r.eng.sock, err)
	}
	var info engineInfo
	if err := r.eng.call(cctx, http.MethodGet, "/info", nil, nil, &info); err != nil {
		return fmt.Errorf("docker: engine info: %w", err)
	}
	if missing := info.missing(); len(missing) > 0 {
		return fmt.Errorf("docker: the Engine %s cannot enforce: %s", info.ServerVersion, strings.Join(missing, "; "))
	}
	if err := r.trial(ctx); err != nil {
		return fmt.Errorf("docker: trial container: %w", err)
	}
	r.mu.Lock()
	r.probed = true
	r.mu.Unlock()
	return nil
}

// EngineInfo is what an operator's report says of an Engine: its version
// and the names of the OCI runtimes registered with it, sorted.
type EngineInfo struct {
	Version  string
	Runtimes []string
	RootDir  string // the Engine's data root, where it keeps every container's root and /etc files
}

// Info asks the Engine on sock for its version and registered runtimes
// (GET /info), through the backend's own client, within 5 seconds. It
// checks no control: verify's host report describes an Engine whether or
// not the backend can use it, and Probe decides that.
func Info(ctx context.Context, sock string) (EngineInfo, error) {
	e := newEngine(sock)
	defer e.hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var info engineInfo
	if err := e.call(ctx, http.MethodGet, "/info", nil, nil, &info); err != nil {
		return EngineInfo{}, err
	}
	return EngineInfo{Version: info.ServerVersion, Runtimes: slices.Sorted(maps.Keys(info.Runtimes)), RootDir: info.DockerRootDir}, nil
}

// missing lists the controls the Engine reports it cannot enforce.
func (i engineInfo) missing() []string {
	var m []string
	if i.OSType != "linux" {
		m = append(m, "Linux containers (OSType "+i.OSType+")")
	}
	if !i.MemoryLimit {
		m = append(m, "memory limit")
	}
	if !i.SwapLimit && hostHasSwap() {
		m = append(m, "memory+swap limit (swap is on and the kernel has no swap accounting)")
	}
	if !i.PidsLimit {
		m = append(m, "pids limit")
	}
	if !i.CPUCfsQuota {
		m = append(m, "cpu quota")
	}
	seccomp := false
	for _, o := range i.SecurityOptions {
		if strings.HasPrefix(o, "name=seccomp") {
			seccomp = true
		}
	}
	if !seccomp {
		m = append(m, "seccomp")
	}
	return m
}

func hostHasSwap() bool {
	b, err := os.ReadFile("/proc/swaps")
	return err != nil || len(strings.Split(strings.TrimSpace(string(b)), "\n")) > 1
}

func (r *Runtime) ensureProbed(ctx context.Context) error {
	r.mu.Lock()
	ok := r.probed
	r.mu.Unlock()
	if ok {
		return nil
	}
	return r.Probe(ctx)
}

// trial imports a one-file probe image and runs it with every control.
func (r *Runtime) trial(ctx context.Context) error {
	// The probe's tree lives in the runtime's state dir, not in /tmp: a
	// broker killed mid-probe leaves it where the run's reclaim removes it.
	// The leading dot keeps it out of the workspaces Sweep lists.
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	root, err := os.MkdirTemp(r.dir, ".probe-")
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer os.RemoveAll(root)
	if err := trial.BuildRoot(root); err != nil {
		return err
	}
	// Fixed times make the probe layer, and so its tag, stable.
	epoch := time.Unix(0, 0)
	_ = filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, epoch, epoch) })
	ictx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	layer, err := treeDigest(ictx, root)
	if err != nil {
		return err
	}
	image, _, err := r.eng.ensureImage(ictx, root, probeRepo, strings.TrimPrefix(layer, "sha256:"), map[string]string{})
	if err != nil {
		return err
	}
	prof, _ := json.Marshal(map[string]any{
		"defaultAction": "SCMP_ACT_ALLOW",
		"syscalls":      []map[string]any{{"names": []string{"ptrace", "unshare", "setns", "mount"}, "action": "SCMP_ACT_KILL_PROCESS"}},
	})
	sb, err := r.prepare(ctx, trial.Template(r.runID, probeWall), image, "seccomp="+string(prof), nil, trial.Job().Argv)
	if err != nil {
		return err
	}
	return trial.Run(ctx, sb, callTimeout)
}
