package verify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/docker"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/rootfs"
)

// Pins say exactly what a report tested, so that a security team can file
// it and compare it with the next one: the software on both sides of the
// sandbox boundary, the hashes of the policy, of the filters compiled from it
// and of the root filesystem, and the configuration the run used. A pin that
// could not be read says why in its place ("unknown: ..."); it is never
// left out, so two reports always compare field by field.
type Pins struct {
	// AWF is proto.Version(): the string every awf report and audit record carries.
	AWF string `json:"awf"`
	// Revision is the VCS revision the binary was built from ("" when the
	// build info has none, as in a test binary).
	Revision string `json:"vcs_revision"`
	// Modified is true when that checkout had uncommitted changes.
	Modified bool `json:"vcs_modified"`
	// Kernel is uname's system name, release, version and machine.
	Kernel string `json:"kernel"`
	// Distribution is PRETTY_NAME of /etc/os-release.
	Distribution string `json:"distribution"`
	// Libseccomp is the version of the libseccomp the filter compiler links.
	Libseccomp string `json:"libseccomp"`
	// Libcontainer is the version of the runc module (libcontainer) built in.
	Libcontainer string `json:"libcontainer"`
	// Runsc is the first line of "runsc --version", or why there is none.
	Runsc string `json:"runsc"`
	// Docker is the version of the Engine on the configured socket (the
	// ServerVersion of GET /info, the request host/docker makes in every
	// run), or why there is none.
	Docker string `json:"docker_engine"`
	// Python is the version of the root filesystem's interpreter.
	Python string `json:"python"`
	// Policy pins the seccomp policy and its compiled filters.
	Policy PolicyPin `json:"policy"`
	// RootFS pins the root filesystem.
	RootFS RootFSPin `json:"rootfs"`
	// Config is the configuration the run used.
	Config RunConfig `json:"config"`
}

// PolicyPin identifies the policy and what the kernel is given for it.
type PolicyPin struct {
	// Name is the policy's name.
	Name string `json:"name"`
	// Source is the file the policy was read from, or "embedded".
	Source string `json:"source"`
	// SHA256 is "sha256:HEX" of the source bytes.
	SHA256 string `json:"sha256"`
	// Canonical is Policy.Digest(), the sha256 of the canonical text, which
	// does not move with comments or formatting.
	Canonical string `json:"canonical_sha256"`
	// Filters maps each architecture of the policy to "sha256:HEX" of the
	// BPF program compiled for it (policy.ProgramSHA256).
	Filters map[string]string `json:"filters"`
}

// RootFSPin identifies the root filesystem.
type RootFSPin struct {
	// Path is where the root filesystem was.
	Path string `json:"path"`
	// Digest is the sha256 of its manifest (rootfs.Verify).
	Digest string `json:"digest"`
}

// RunConfig is the configuration a run used.
type RunConfig struct {
	Runtimes     []string  `json:"runtimes"`
	Required     []string  `json:"required"`
	Probes       []string  `json:"probes"`
	StateDir     string    `json:"state_dir"`
	CgroupParent string    `json:"cgroup_parent"`
	RunscPath    string    `json:"runsc_path"`
	DockerSocket string    `json:"docker_socket"`
	SandboxCPUs  string    `json:"sandbox_cpus"`
	PrivateRoot  string    `json:"private_root"`
	Limits       LimitsPin `json:"limits"`
}

// LimitsPin is isolate.Limits in the report's units.
type LimitsPin struct {
	MemoryBytes     int64  `json:"memory_bytes"`
	Pids            int64  `json:"pids"`
	CPUMilli        int64  `json:"cpu_milli"`
	FileSizeBytes   int64  `json:"file_size_bytes"`
	NoFile          uint64 `json:"nofile"`
	WallMillis      int64  `json:"wall_ms"`
	QueryTmpfsBytes int64  `json:"query_tmpfs_bytes"`
	RepoUpperBytes  int64  `json:"repo_upper_bytes"`
	TmpTmpfsBytes   int64  `json:"tmp_tmpfs_bytes"`
	OutputBytes     int64  `json:"output_bytes"`
	CaptureBytes    int64  `json:"capture_bytes"`
}

func limitsPin(l isolate.Limits) LimitsPin {
	return LimitsPin{
		MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUMilli: l.CPUMilli, FileSizeBytes: l.FileSizeBytes,
		NoFile: l.NoFile, WallMillis: l.Wall.Milliseconds(), QueryTmpfsBytes: l.QueryTmpfsBytes,
		RepoUpperBytes: l.RepoUpperBytes, TmpTmpfsBytes: l.TmpTmpfsBytes, OutputBytes: l.OutputBytes,
		CaptureBytes: l.CaptureBytes,
	}
}

// unknown is the value of a pin that could not be read.
func unknown(err error) string { return "unknown: " + err.Error() }

// gatherPins reads every pin of a run. It never fails: a pin it cannot read
// says why.
func gatherPins(ctx context.Context, o Options, pol *policy.Policy, lim isolate.Limits) Pins {
	p := Pins{AWF: proto.Version(), Libseccomp: policy.LibseccompVersion()}
	p.Revision, p.Modified, p.Libcontainer = buildPins()
	p.Kernel = unameString()
	p.Distribution = distribution("/etc/os-release")
	runsc := cmpOr(o.Host.RunscPath, "runsc")
	if rp, err := exec.LookPath(runsc); err != nil {
		p.Runsc = unknown(fmt.Errorf("runsc not found (%s)", runsc))
	} else if v, err := runscVersion(ctx, rp); err != nil {
		p.Runsc = unknown(err)
	} else {
		p.Runsc = v
	}
	sock := cmpOr(o.Host.DockerSocket, DefaultDockerSocket)
	if info, err := docker.Info(ctx, sock); err != nil {
		p.Docker = unknown(fmt.Errorf("no Docker Engine at %s (%v)", sock, err))
	} else {
		p.Docker = info.Version
	}
	p.Python = rootPython(ctx, o.RootFS)
	p.Policy = policyPin(o, pol)
	p.RootFS = RootFSPin{Path: absOrSelf(o.RootFS), Digest: o.RootFSDigest}
	if p.RootFS.Digest == "" {
		vctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		d, err := rootfs.Verify(vctx, o.RootFS, "")
		cancel()
		if err != nil {
			d = unknown(err)
		}
		p.RootFS.Digest = d
	}
	p.Config = RunConfig{
		Runtimes: nonNil(o.Runtimes), Required: nonNil(o.Required), Probes: nonNil(o.Probes),
		StateDir: o.Host.StateDir, CgroupParent: o.Host.CgroupParent, RunscPath: o.Host.RunscPath,
		DockerSocket: o.Host.DockerSocket, SandboxCPUs: o.Host.SandboxCPUs, PrivateRoot: o.PrivateRoot,
		Limits: limitsPin(lim),
	}
	return p
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return slices.Clone(xs)
}

// runcModule is the module libcontainer ships in.
const runcModule = "github.com/opencontainers/runc"

// buildPins reads the VCS revision and the libcontainer version from the
// binary's build info, the same source proto.Version reads.
func buildPins() (rev string, modified bool, libcontainer string) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false, "unknown: no build info"
	}
	rev, modified = proto.BuildRevision(bi)
	return rev, modified, moduleVersion(bi, runcModule)
}

// moduleVersion is a dependency's version, with its replacement if any.
func moduleVersion(bi *debug.BuildInfo, path string) string {
	for _, d := range bi.Deps {
		if d.Path != path {
			continue
		}
		if d.Replace != nil {
			return fmt.Sprintf("%s (replaced by %s %s)", d.Version, d.Replace.Path, d.Replace.Version)
		}
		return d.Version
	}
	if len(bi.Deps) == 0 {
		// go test links no dependency list into its binaries.
		return "unknown: the build info lists no dependencies (a test binary)"
	}
	return "unknown: " + path + " is not in the build info"
}

// unameString is "sysname release version machine".
func unameString() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return unknown(err)
	}
	return strings.Join([]string{unix.ByteSliceToString(u.Sysname[:]), unix.ByteSliceToString(u.Release[:]),
		unix.ByteSliceToString(u.Version[:]), unix.ByteSliceToString(u.Machine[:])}, " ")
}

// distribution is PRETTY_NAME of an os-release file, or NAME VERSION_ID.
func distribution(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return unknown(err)
	}
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok {
			kv[k] = strings.Trim(v, `"'`)
		}
	}
	if kv["PRETTY_NAME"] != "" {
		return kv["PRETTY_NAME"]
	}
	if s := strings.TrimSpace(kv["NAME"] + " " + kv["VERSION_ID"]); s != "" {
		return s
	}
	return "unknown: " + path + " names no distribution"
}

// rootPython asks the root filesystem's own interpreter for its version,
// chrooted into the root (never the host's interpreter), under a deadline.
func rootPython(ctx context.Context, root string) string {
	if root == "" {
		return "unknown: no root filesystem"
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, rootfs.DefaultPython, "-I", "-S", "-c", "import sys; print(sys.version.split()[0])")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return unknown(fmt.Errorf("%s in %s: %w", rootfs.DefaultPython, root, err))
	}
	return strings.TrimSpace(string(out))
}

// policyPin hashes the policy's source and the filter compiled for each of
// its architectures.
func policyPin(o Options, pol *policy.Policy) PolicyPin {
	pp := PolicyPin{Name: pol.Name, Canonical: pol.Digest(), Filters: map[string]string{}}
	var src []byte
	switch {
	case o.PolicyFile != "":
		pp.Source = o.PolicyFile
		b, err := os.ReadFile(o.PolicyFile)
		if err != nil {
			pp.SHA256 = unknown(err)
		}
		src = b
	case o.Policy == nil || isDefault(pol):
		pp.Source, src = "embedded", policy.DefaultSource()
	default:
		// A policy built in memory has no file: its canonical text is its source.
		pp.Source, src = "canonical", []byte(pol.Canonical())
	}
	if pp.SHA256 == "" {
		sum := sha256.Sum256(src)
		pp.SHA256 = "sha256:" + hex.EncodeToString(sum[:])
	}
	for _, arch := range pol.Arches {
		prog, err := pol.BPF(arch)
		if err != nil {
			pp.Filters[arch] = unknown(err)
			continue
		}
		pp.Filters[arch] = policy.ProgramSHA256(prog)
	}
	return pp
}

// isDefault reports whether pol is the embedded policy, decision for decision
// and name for name.
func isDefault(pol *policy.Policy) bool {
	d, err := policy.Default()
	return err == nil && pol.Name == d.Name && pol.Digest() == d.Digest()
}

// absOrSelf makes a path absolute for the report, or leaves it as it is.
func absOrSelf(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// writeText prints the pins as the text report's header.
func (p Pins) writeText(w io.Writer) {
	rev := p.Revision
	if rev == "" {
		rev = "no VCS revision in the build info"
	} else if p.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(w, "awf %s, %s\n", p.AWF, rev)
	fmt.Fprintf(w, "os: %s; %s\n", p.Distribution, p.Kernel)
	fmt.Fprintf(w, "libseccomp %s, libcontainer %s, python %s\n", p.Libseccomp, p.Libcontainer, p.Python)
	fmt.Fprintf(w, "runsc: %s; Docker Engine: %s\n", p.Runsc, p.Docker)
	fmt.Fprintf(w, "policy %s (%s) %s, canonical %s\n", p.Policy.Name, p.Policy.Source, p.Policy.SHA256, p.Policy.Canonical)
	for _, a := range sortedKeys(p.Policy.Filters) {
		fmt.Fprintf(w, "filter %s %s\n", a, p.Policy.Filters[a])
	}
	fmt.Fprintf(w, "rootfs %s %s\n", p.RootFS.Path, p.RootFS.Digest)
	c := p.Config
	fmt.Fprintf(w, "config: runtimes %s, required %s, probes %s, cgroup parent %s, sandbox CPUs %s\n",
		listOr(c.Runtimes, "none"), listOr(c.Required, "none"), listOr(c.Probes, "all"), c.CgroupParent, cmpOr(c.SandboxCPUs, "any"))
	l := c.Limits
	fmt.Fprintf(w, "limits: memory %d B, pids %d, cpu %d milli-CPU, wall %d ms, file size %d B, nofile %d, output %d B\n",
		l.MemoryBytes, l.Pids, l.CPUMilli, l.WallMillis, l.FileSizeBytes, l.NoFile, l.OutputBytes)
}

func listOr(xs []string, none string) string {
	if len(xs) == 0 {
		return none
	}
	return strings.Join(xs, ",")
}
