package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/cgroupfs"
	"github.com/awf-project/awf/isolate/docker"
	"github.com/awf-project/awf/proto"
)

// HostFacts describe the host a report was made on.
type HostFacts struct {
	Kernel      string   `json:"kernel"`
	Arch        string   `json:"arch"`
	CgroupMode  string   `json:"cgroup_mode"` // cgroupfs's mode: v2-delegated, v2, hybrid or v1
	Controllers []string `json:"controllers"`
	Overlay     bool     `json:"overlayfs"`
	Seccomp     []string `json:"seccomp_actions"`
	Openat2     bool     `json:"openat2"`
	Userns      string   `json:"userns"`
	Runsc       string   `json:"runsc,omitempty"`
	Docker      string   `json:"docker,omitempty"`
}

// HostOptions say what the host checks look at.
type HostOptions struct {
	// CgroupParent is the dedicated parent cgroup name (default "awf").
	CgroupParent string
	// RunscPath is the runsc binary ("" = look up PATH).
	RunscPath string
	// DockerSocket is the Engine socket the docker backend would use.
	DockerSocket string
	// PrivateRoot is the directory that will hold the seeds and audit log.
	// Its ancestors must not be writable by other users.
	PrivateRoot string
	// Environ is the environment to scan for credentials (nil = os.Environ()).
	Environ []string
	// SandboxCPUs is the sandboxes' (and the broker's) side of the CPU split
	// awf run makes (HostConfig.SandboxCPUs); the agent gets the rest.
	SandboxCPUs string
}

// CheckHost runs every host check and returns the facts and the results.
func CheckHost(ctx context.Context, o HostOptions) (HostFacts, []Result) {
	if o.CgroupParent == "" {
		o.CgroupParent = isolate.DefaultCgroupParent
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	var f HostFacts
	var rs []Result

	kernel, arch := uname()
	f.Kernel, f.Arch = kernel, arch
	rs = append(rs, checkKernel(kernel, arch))

	cf := gatherCgroup(o.CgroupParent)
	r, mode := classifyCgroup(cf)
	f.CgroupMode, f.Controllers = mode, cf.controllers()
	rs = append(rs, r)

	of := gatherOverlay()
	f.Overlay = of.Available
	rs = append(rs, checkOverlay(of))

	actions, selfMode := gatherSeccomp()
	f.Seccomp = actions
	rs = append(rs, checkSeccomp(actions, selfMode))

	oerr := tryOpenat2()
	f.Openat2 = oerr == nil
	rs = append(rs, checkOpenat2(oerr))

	uf := gatherUserns()
	f.Userns = uf.summary()
	rs = append(rs, checkUserns(uf))

	rr := checkRunsc(ctx, o.RunscPath)
	if rr.Status == Pass {
		f.Runsc = rr.Evidence
	}
	rs = append(rs, rr)

	dr := checkDocker(ctx, o.DockerSocket)
	if dr.Status == Pass {
		f.Docker = dr.Evidence
	}
	rs = append(rs, dr)

	rs = append(rs, checkEngineSockets(ctx, engineSocketCandidates(o.DockerSocket, o.Environ)))
	rs = append(rs, checkTokenEnv(o.Environ))
	rs = append(rs, checkPrivateRoot(o.PrivateRoot, gatherAncestors(o.PrivateRoot)))
	rs = append(rs, checkCPUSplit(runtime.NumCPU(), cpusAllowed(), o.SandboxCPUs))
	rs = append(rs, checkDeviations(isolate.Deviations()))
	return f, rs
}

// checkDeviations reports the declared deviations of the backends from the
// one sandbox description (isolate.Deviations), so that a report says
// which controls a backend renders differently; docs/runtimes.md has the
// same table with the reasons.
func checkDeviations(ds []isolate.Deviation) Result {
	const id = "host/deviations"
	by := map[string][]string{}
	var backends []string
	for _, d := range ds {
		if by[d.Backend] == nil {
			backends = append(backends, d.Backend)
		}
		by[d.Backend] = append(by[d.Backend], d.Field+": "+d.Instead)
	}
	if len(backends) == 0 {
		return hostResult(id, Pass, "every backend renders the sandbox description as it is")
	}
	parts := make([]string, 0, len(backends))
	for _, b := range backends {
		parts = append(parts, fmt.Sprintf("%s (%d): %s", b, len(by[b]), strings.Join(by[b], "; ")))
	}
	return hostResult(id, Pass, "direct renders the sandbox description as it is; declared deviations (docs/runtimes.md): %s", strings.Join(parts, " | "))
}

// cpusAllowed is this process's Cpus_allowed_list, as the kernel writes it.
func cpusAllowed() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// checkCPUSplit reports the CPU split: on two or more CPUs the sandboxes
// (and the broker) must have their own, so that the agent cannot time a live
// sandbox through a shared core; one CPU cannot be split.
func checkCPUSplit(ncpu int, allowed, sandbox string) Result {
	const id = "host/cpu-split"
	switch {
	case ncpu < 2:
		return hostResult(id, Warn, "one CPU (%s): the agent and the sandboxes share it, so a live sandbox can be timed through it; metered queries still freeze the agent", allowed)
	case sandbox == "":
		return hostResult(id, Fail, "%d CPUs (%s) but no CPU split: the sandboxes would share cores with the agent", ncpu, allowed)
	}
	return hostResult(id, Pass, "sandboxes and the broker on CPUs %s, the agent on the rest of %s", sandbox, allowed)
}

func hostResult(id string, s Status, format string, args ...any) Result {
	return Result{ID: id, Group: "host", Status: s, Evidence: fmt.Sprintf(format, args...)}
}

// uname returns the kernel release and machine.
func uname() (release, machine string) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown", runtime.GOARCH
	}
	return unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Machine[:])
}

// parseKernel returns the major and minor version of a kernel release string.
func parseKernel(rel string) (major, minor int, ok bool) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minorText := parts[1]
	if i := strings.IndexFunc(minorText, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorText = minorText[:i]
	}
	minor, err2 := strconv.Atoi(minorText)
	return major, minor, err1 == nil && err2 == nil
}

// checkKernel needs at least 5.6 (openat2, pidfd, clone3 fallbacks) and
// warns below 5.15 (older cgroup v2 and overlayfs behaviour is untested).
func checkKernel(rel, arch string) Result {
	const id = "host/kernel"
	major, minor, ok := parseKernel(rel)
	switch {
	case !ok:
		return hostResult(id, Fail, "cannot parse kernel release %q", rel)
	case major < 5 || major == 5 && minor < 6:
		return hostResult(id, Fail, "Linux %s (%s) is older than 5.6: no openat2, so no safe copier or output read", rel, arch)
	case major == 5 && minor < 15:
		return hostResult(id, Warn, "Linux %s (%s) is older than 5.15, the oldest kernel awf is tested on", rel, arch)
	}
	return hostResult(id, Pass, "Linux %s (%s)", rel, arch)
}

// cgroupFacts is what the cgroup check looks at.
type cgroupFacts struct {
	RootMagic     int64    // statfs type of /sys/fs/cgroup
	UnifiedMagic  int64    // statfs type of /sys/fs/cgroup/unified, 0 if absent
	V2Controllers []string // cgroup.controllers of the v2 root, or of Base
	// Base is the cgroup (relative to the v2 root) a service manager
	// delegated to this process (cgroupfs.DelegatedBase): the runtimes
	// place every cgroup below it. "" when there is none.
	Base          string
	V1Controllers []string // enabled v1 controllers with a mounted hierarchy
	Parent        string   // the awf parent cgroup name, below Base
	ParentExists  bool
	ParentSubtree []string // cgroup.subtree_control of the v2 parent
	Delegated     bool     // a delegation mark (trusted.delegate) on the parent or an ancestor
	SwapAccount   bool     // memory.swap.max (v2) or memory.memsw.* (v1) exists
	// Cgroup2 is the cgroup2 mount (the root on v2, the unified tree on
	// hybrid), nil when there is none or it could not be read.
	Cgroup2 *cgroupfs.Cgroup2Mount
}

// attachCost says whether a sandbox's cgroup attach waits for an RCU grace
// period (see cgroupfs.Cgroup2Mount), and what the operator can do.
func (c cgroupFacts) attachCost() string {
	switch {
	case c.Cgroup2 == nil:
		return "each sandbox start waits for an RCU grace period in its cgroup attach (no cgroup2 mount to set favordynmods on)"
	case c.Cgroup2.FavorDynmods:
		return fmt.Sprintf("cgroup2 at %s is mounted favordynmods: a sandbox's cgroup attach does not wait for an RCU grace period", c.Cgroup2.Point)
	}
	return fmt.Sprintf("each sandbox start waits for an RCU grace period in its cgroup attach (up to about 10 ms, depending on the host's RCU state): `mount -o remount,favordynmods %s` removes the wait, at a small cost to every fork and exit on the host", c.Cgroup2.Point)
}

func (c cgroupFacts) controllers() []string {
	if c.RootMagic == unix.CGROUP2_SUPER_MAGIC {
		return c.V2Controllers
	}
	return c.V1Controllers
}

func gatherCgroup(parent string) cgroupFacts {
	c := cgroupFacts{Parent: parent}
	c.Cgroup2, _ = cgroupfs.FindCgroup2() // nil on error: reported as unknown
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) == nil {
		c.RootMagic = int64(st.Type)
	}
	if unix.Statfs("/sys/fs/cgroup/unified", &st) == nil {
		c.UnifiedMagic = int64(st.Type)
	}
	if c.RootMagic == unix.CGROUP2_SUPER_MAGIC {
		// Where the runtimes place their cgroups, looked up without
		// claiming the subtree: verify only looks. An error (no cgroup v2
		// entry) leaves the base at the root.
		c.Base, _ = cgroupfs.V2Base(false)
		c.V2Controllers = fieldsOf(filepath.Join(cgroupfs.Root, c.Base, "cgroup.controllers"))
		p := filepath.Join(cgroupfs.Root, c.Base, parent)
		if _, err := os.Stat(p); err == nil {
			c.ParentExists = true
			c.ParentSubtree = fieldsOf(filepath.Join(p, "cgroup.subtree_control"))
		}
		c.Delegated = hasDelegateMark(p)
		_, err := os.Stat("/sys/fs/cgroup/" + firstChildWith("memory.swap.max"))
		c.SwapAccount = err == nil
		return c
	}
	c.V1Controllers = v1Controllers()
	_, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")
	c.SwapAccount = err == nil
	return c
}

// firstChildWith returns the name of a top-level v2 cgroup that has file, or "".
func firstChildWith(file string) string {
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range ents {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", e.Name(), file)); err == nil {
				return filepath.Join(e.Name(), file)
			}
		}
	}
	return "no-such-file"
}

// hasDelegateMark reports whether p or one of its ancestors below the v2 root
// carries a service manager's delegation mark (cgroupfs.Delegated).
func hasDelegateMark(p string) bool {
	for ; p != cgroupfs.Root && p != "/" && p != "."; p = filepath.Dir(p) {
		if cgroupfs.Delegated(p) {
			return true
		}
	}
	return false
}

// v1Controllers lists the enabled v1 controllers that have a mounted hierarchy.
func v1Controllers() []string {
	b, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || strings.HasPrefix(f[0], "#") || f[3] != "1" {
			continue
		}
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", f[0])); err == nil {
			out = append(out, f[0])
		}
	}
	slices.Sort(out)
	return out
}

func fieldsOf(p string) []string {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// classifyCgroup turns cgroup facts into the mode and a verdict. A v1 or
// hybrid host is a WARN with the reason, never a silent PASS.
func classifyCgroup(c cgroupFacts) (Result, string) {
	const id = "host/cgroup"
	ctl := c.controllers()
	var missing []string
	required := cgroupfs.SandboxControllers()
	for _, r := range required {
		if !slices.Contains(ctl, r) {
			missing = append(missing, r)
		}
	}
	swap := "no swap accounting file seen"
	if c.SwapAccount {
		swap = "swap accounting on"
	}
	var mode string
	switch {
	case c.RootMagic == unix.CGROUP2_SUPER_MAGIC && c.Base != "":
		mode = cgroupfs.ModeV2Delegated
	case c.RootMagic == unix.CGROUP2_SUPER_MAGIC:
		mode = cgroupfs.ModeV2
	case c.RootMagic == unix.TMPFS_MAGIC && c.UnifiedMagic == unix.CGROUP2_SUPER_MAGIC:
		mode = cgroupfs.ModeHybrid
	case c.RootMagic == unix.TMPFS_MAGIC:
		mode = cgroupfs.ModeV1
	default:
		return hostResult(id, Fail, "/sys/fs/cgroup is not a cgroup mount (filesystem type %#x)", c.RootMagic), "none"
	}
	if len(missing) > 0 {
		return hostResult(id, Fail, "%s: required controllers missing: %s (available: %s)", mode, strings.Join(missing, " "), strings.Join(ctl, " ")), mode
	}
	switch {
	case mode == cgroupfs.ModeV2Delegated:
		return hostResult(id, Pass, "cgroup v2 inside %q, which a service manager delegated to this process: its cgroups go below %q, and it moves itself into %q; controllers %s; %s; %s",
			"/"+c.Base, "/"+filepath.Join(c.Base, c.Parent), "/"+filepath.Join(c.Base, cgroupfs.SupervisorLeaf), strings.Join(ctl, " "), swap, c.attachCost()), mode
	case mode == cgroupfs.ModeV2 && (c.Delegated || c.ParentExists && containsAll(c.ParentSubtree, required)):
		return hostResult(id, Pass, "cgroup v2 with a delegated parent %q (subtree: %s); controllers %s; %s; %s",
			c.Parent, strings.Join(c.ParentSubtree, " "), strings.Join(ctl, " "), swap, c.attachCost()), mode
	case mode == cgroupfs.ModeV2:
		how := "does not exist yet"
		if c.ParentExists {
			how = "does not delegate cpu, memory and pids to its children"
		}
		return hostResult(id, Warn, "cgroup v2 but not delegated: parent %q %s, so awf writes under the root outside any Delegate=yes unit (single-writer rule); controllers %s; %s; %s",
			c.Parent, how, strings.Join(ctl, " "), swap, c.attachCost()), mode
	case mode == cgroupfs.ModeHybrid:
		return hostResult(id, Warn, "hybrid cgroups: v1 controllers (%s) with a v2 tree at /sys/fs/cgroup/unified; the runtimes take runc's deprecated v1 path: no cgroup.kill; %s; %s",
			strings.Join(ctl, " "), swap, c.attachCost()), mode
	default:
		return hostResult(id, Warn, "cgroup v1 only (%s): runc's deprecated v1 path, no cgroup.kill; %s; %s", strings.Join(ctl, " "), swap, c.attachCost()), mode
	}
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// overlayFacts is what the overlayfs check looks at.
type overlayFacts struct {
	Available bool
	Params    map[string]string // module parameters that change semantics
}

func gatherOverlay() overlayFacts {
	var o overlayFacts
	b, _ := os.ReadFile("/proc/filesystems")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[len(f)-1] == "overlay" {
			o.Available = true
		}
	}
	o.Params = map[string]string{}
	for _, p := range []string{"redirect_dir", "metacopy", "index", "xino_auto", "redirect_always_follow"} {
		if v, err := os.ReadFile("/sys/module/overlay/parameters/" + p); err == nil {
			o.Params[p] = strings.TrimSpace(string(v))
		}
	}
	return o
}

// checkOverlay passes when overlayfs is available; the mount options the
// runtimes pass (redirect_dir=off, metacopy=off, index=off) override the
// module defaults, which are reported as evidence.
func checkOverlay(o overlayFacts) Result {
	const id = "host/overlayfs"
	if !o.Available {
		return hostResult(id, Warn, "overlayfs is not available: repository views fall back to the openat2 copier, whose cost grows with repository size")
	}
	var ps []string
	for _, k := range sortedKeys(o.Params) {
		ps = append(ps, k+"="+o.Params[k])
	}
	def := "no module parameters visible"
	if len(ps) > 0 {
		def = "module defaults " + strings.Join(ps, " ")
	}
	return hostResult(id, Pass, "overlayfs available (%s); views mount with redirect_dir=off,metacopy=off,index=off", def)
}

func gatherSeccomp() (actions []string, selfMode string) {
	actions = fieldsOf("/proc/sys/kernel/seccomp/actions_avail")
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			selfMode = strings.TrimSpace(v)
		}
	}
	return actions, selfMode
}

// checkSeccomp needs filter mode with the actions the policies use.
func checkSeccomp(actions []string, selfMode string) Result {
	const id = "host/seccomp"
	if selfMode == "" {
		return hostResult(id, Fail, "the kernel reports no seccomp support (no Seccomp line in /proc/self/status)")
	}
	var missing []string
	for _, a := range []string{"kill_process", "errno", "allow", "log"} {
		if !slices.Contains(actions, a) {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		return hostResult(id, Fail, "seccomp actions missing: %s (available: %s)", strings.Join(missing, " "), strings.Join(actions, " "))
	}
	if selfMode != "0" {
		return hostResult(id, Warn, "seccomp filter mode available (actions: %s), but verify itself already runs under seccomp mode %s, so sandbox filters stack on an outer filter", strings.Join(actions, " "), selfMode)
	}
	return hostResult(id, Pass, "seccomp filter mode available; actions: %s", strings.Join(actions, " "))
}

// tryOpenat2 resolves "." beneath a descriptor of "/" with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, the way the
// copier and the output read use it. (An absolute path is always refused
// beneath a directory, with EXDEV.)
func tryOpenat2() error {
	root, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, ".", &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_DIRECTORY,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

func checkOpenat2(err error) Result {
	const id = "host/openat2"
	if err != nil {
		return hostResult(id, Fail, "openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS failed (%v): the safe copier and the output read cannot work", err)
	}
	return hostResult(id, Pass, "openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS works")
}

// usernsFacts are the unprivileged user namespace sysctls.
type usernsFacts struct {
	MaxUserNS        string // user.max_user_namespaces
	UnprivClone      string // kernel.unprivileged_userns_clone (Debian), "" if absent
	AppArmorRestrict string // kernel.apparmor_restrict_unprivileged_userns (Ubuntu), "" if absent
}

func gatherUserns() usernsFacts {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return usernsFacts{
		MaxUserNS:        read("/proc/sys/user/max_user_namespaces"),
		UnprivClone:      read("/proc/sys/kernel/unprivileged_userns_clone"),
		AppArmorRestrict: read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
	}
}

func (u usernsFacts) enabled() bool {
	return u.MaxUserNS != "" && u.MaxUserNS != "0" && u.UnprivClone != "0" && u.AppArmorRestrict != "1"
}

func (u usernsFacts) summary() string {
	parts := []string{"user.max_user_namespaces=" + orNA(u.MaxUserNS)}
	if u.UnprivClone != "" {
		parts = append(parts, "kernel.unprivileged_userns_clone="+u.UnprivClone)
	}
	if u.AppArmorRestrict != "" {
		parts = append(parts, "kernel.apparmor_restrict_unprivileged_userns="+u.AppArmorRestrict)
	}
	return strings.Join(parts, " ")
}

func orNA(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

// checkUserns reports the sysctls. Unprivileged user namespaces being
// enabled is not a failure: the sandbox denies unshare and namespace clone
// flags by seccomp, which the privilege probes prove.
func checkUserns(u usernsFacts) Result {
	const id = "host/userns"
	if u.enabled() {
		return hostResult(id, Pass, "unprivileged user namespaces are enabled (%s); the sandbox must deny them by seccomp (probes priv/unshare-userns, priv/userns-mount, priv/clone-newns)", u.summary())
	}
	return hostResult(id, Pass, "unprivileged user namespaces are disabled (%s)", u.summary())
}

// checkRunsc looks for runsc and asks it for its version.
func checkRunsc(ctx context.Context, path string) Result {
	const id = "host/runsc"
	if path == "" {
		path = "runsc"
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return hostResult(id, Warn, "runsc not found (%s): the gvisor runtime is BLOCKED", path)
	}
	v, err := runscVersion(ctx, p)
	if err != nil {
		return hostResult(id, Warn, "%v: the gvisor runtime is BLOCKED", err)
	}
	return hostResult(id, Pass, "%s at %s", v, p)
}

// runscVersion is the first line of "runsc --version", bounded by a
// deadline so that a hung binary cannot hold verify; the host check and the
// report's pins print the same string.
func runscVersion(ctx context.Context, p string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, p, "--version")
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s --version failed (%v)", p, err)
	}
	first, _, _ := bytes.Cut(out, []byte("\n"))
	return strings.TrimSpace(string(first)), nil
}

// checkDocker pings the Engine on the configured socket.
func checkDocker(ctx context.Context, sock string) Result {
	const id = "host/docker"
	if sock == "" {
		sock = DefaultDockerSocket
	}
	info, err := docker.Info(ctx, sock)
	if err != nil {
		return hostResult(id, Warn, "no Docker Engine at %s (%v): the docker runtime is BLOCKED", sock, err)
	}
	rt := "runsc not registered"
	if slices.Contains(info.Runtimes, "runsc") {
		rt = "runsc registered"
	}
	return hostResult(id, Pass, "Docker Engine %s at %s (%s)", info.Version, sock, rt)
}

// credentialNames returns the sorted names in environ that look like
// credentials, by the one rule in proto.
func credentialNames(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if proto.IsCredentialVariable(name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// checkTokenEnv warns about credentials in awf's own environment. Only the
// names are reported, never the values.
func checkTokenEnv(environ []string) Result {
	const id = "hazard/token-env"
	names := credentialNames(environ)
	if len(names) == 0 {
		return hostResult(id, Pass, "no credential variables in the environment")
	}
	return hostResult(id, Warn, "credential variables in awf's environment: %s; only staging may use them, and the sandbox must not see them (probe priv/env)", strings.Join(names, " "))
}

// ancestorInfo is one existing directory on the path to the private root.
type ancestorInfo struct {
	Path string
	Mode os.FileMode
	UID  uint32
	Err  error
}

// gatherAncestors stats root and every ancestor of it, from "/" down.
func gatherAncestors(root string) []ancestorInfo {
	if root == "" {
		return nil
	}
	root = filepath.Clean(root)
	var paths []string
	for p := root; ; p = filepath.Dir(p) {
		paths = append(paths, p)
		if p == "/" || p == "." {
			break
		}
	}
	slices.Reverse(paths)
	var out []ancestorInfo
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				break
			}
			out = append(out, ancestorInfo{Path: p, Err: err})
			break
		}
		mode := os.FileMode(st.Mode & 0o777)
		if st.Mode&unix.S_ISVTX != 0 {
			mode |= os.ModeSticky
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			mode |= os.ModeSymlink
		}
		out = append(out, ancestorInfo{Path: p, Mode: mode, UID: st.Uid})
	}
	return out
}

// checkPrivateRoot fails when any existing directory on the path to the
// private root can be changed by another user: world- or group-writable
// without the sticky bit, owned by someone other than root, or a symlink.
// A sticky world-writable parent (like /tmp) is a WARN: others cannot
// replace the root, but they can take its name first.
func checkPrivateRoot(root string, anc []ancestorInfo) Result {
	const id = "hazard/private-root"
	if root == "" {
		return hostResult(id, Warn, "no private root configured to check")
	}
	if len(anc) == 0 {
		return hostResult(id, Fail, "cannot stat any ancestor of %s", root)
	}
	var warns []string
	for _, a := range anc {
		switch {
		case a.Err != nil:
			return hostResult(id, Fail, "cannot stat %s: %v", a.Path, a.Err)
		case a.Mode&os.ModeSymlink != 0:
			return hostResult(id, Fail, "%s is a symlink: whoever controls its target controls the private root", a.Path)
		case a.UID != 0:
			return hostResult(id, Fail, "%s is owned by uid %d, not root: that user can replace the private root", a.Path, a.UID)
		case a.Mode&0o022 != 0 && a.Mode&os.ModeSticky == 0:
			return hostResult(id, Fail, "%s is writable by other users (mode %#o) without the sticky bit: they can replace the private root", a.Path, a.Mode.Perm())
		case a.Mode&0o022 != 0:
			warns = append(warns, fmt.Sprintf("%s (mode %#o, sticky)", a.Path, a.Mode.Perm()))
		}
	}
	last := anc[len(anc)-1]
	if last.Path == filepath.Clean(root) && last.Mode.Perm()&0o077 != 0 {
		return hostResult(id, Fail, "%s has mode %#o; it must be 0700", root, last.Mode.Perm())
	}
	if len(warns) > 0 {
		return hostResult(id, Warn, "world-writable sticky parent on the way to %s: %s; another user can create the name first", root, strings.Join(warns, ", "))
	}
	state := "exists, 0700, root-owned"
	if last.Path != filepath.Clean(root) {
		state = "does not exist yet; " + last.Path + " is the nearest existing parent"
	}
	return hostResult(id, Pass, "every parent of %s is root-owned and not writable by others (%s)", root, state)
}
