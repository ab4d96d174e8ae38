package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/isolate/verify"
	"github.com/awf-project/awf/rootfs"
)

func init() {
	// Keep the main goroutine on the main thread: libcontainer joins sandbox
	// mount namespaces on locked threads, and a locked goroutine that ends on
	// the main thread would leave the whole process's main thread (and the
	// sandbox's mounts) stuck in that namespace.
	runtime.LockOSThread()
	// verify reads loaded seccomp filters through a helper re-execution.
	verify.HelperIfRequested()
}

const isolateVerifyUsage = `usage: awf isolate verify [--runtime NAME|all]... [--require NAME...]... [--json]
                         [--rootfs DIR [--digest D]] [--policy FILE] [--private-root DIR]
                         [--state-dir DIR] [--cgroup-parent NAME] [--runsc PATH]
                         [--docker-socket PATH] [--probe ID|PREFIX/]... [--progress]
                         [--format text|json|junit|sarif] [--config FILE]
       awf isolate verify --agent [--agent-network host|none]... [--agent-user NAME]
                         [--json] [--rootfs DIR [--digest D]] [--policy FILE]
                         [--cgroup-parent NAME] [--progress]
       awf isolate verify --enclave [--runtime NAME]... [--enclave-probe PATH] [--json]
       awf isolate verify --timing [--timing-n N] [--runtime NAME]... [--json] [--progress]
                         [--rootfs DIR [--digest D]] [--policy FILE]

Checks this host (kernel, cgroup mode, overlayfs, seccomp, openat2, user
namespaces, runsc, Docker, CI hazards) and runs the escape and limit battery
inside each runtime through the same code path as a real query (a sandbox
the warm pool prepared ahead, then handed the script; each result says its
path), reads the seccomp filter loaded in a live sandbox and compares it with
the golden table of the policy, and checks that nothing is left after each
probe.

Every report is pinned: awf version and commit, kernel, distribution,
libseccomp, libcontainer, runsc, Docker Engine and the rootfs's Python
versions, the sha256 of the policy, of its compiled filter per architecture
and of the rootfs manifest, the configuration and the time. --format json
(or --json) writes the whole evidence, docs/verify-report.schema.json;
junit writes JUnit XML for CI dashboards; sarif writes the failures as a
SARIF 2.1.0 log.

NAME is direct, gvisor, docker or sbx (default: direct). A runtime whose host
component is absent is BLOCKED. BLOCKED fails the run for a runtime named by
--runtime or --require; "--runtime all" tolerates BLOCKED runtimes that are
not required (sbx is always BLOCKED). Without --rootfs a root filesystem is
built for the run. Exits 0 only when nothing FAILs and no required runtime is
BLOCKED, 1 otherwise, 2 on usage errors.

With --agent it checks the agent's view instead: it starts the real agent
shim as awf run would, over a throwaway run with something private in every
place the agent must not see, and runs a battery of probes inside it as an
unprivileged agent user (--agent-user, default: a throwaway system user),
once per agent.network mode (default: host and none), while a direct
sandbox starts 1,000 threads. Exits 0 only when no probe FAILs.

With --config FILE it verifies what awf run would run with FILE: the
configured query runtime (unless --runtime is given; it is then required),
the rootfs pin, runsc, the Docker socket and the embedded policy, and adds
the config/ probes, which drive every configured limit (memory, pids, file
size, descriptors, output cap, timeout) past its value and measure the CPU
quota. The report pins the configured limits.

With --timing it runs the timing self-test instead: N fast and N slow
scripts (default N 20, about 45 s on direct) that fall in the same bucket,
in random order, through a real broker over its Unix socket. It compares
the response times the client sees with a two-sample Kolmogorov-Smirnov
test, counts the responses outside the bucket (early, overrun, late wake)
and reports the host's wake-up jitter. It fails when the client tells the
classes apart, when any response leaves the bucket, or when the classes do
not differ inside the broker (the check has no power). docs/verify.md.
`

// listFlag is a repeatable flag that also accepts comma-separated values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// spreadValues lets a list flag take several words, as in
// "--require direct gvisor docker": every bare word after one of the named
// flags becomes another occurrence of that flag, until the next flag or "--".
func spreadValues(args []string, names ...string) []string {
	isList := func(a string) (string, bool) {
		for _, n := range names {
			for _, p := range []string{"-" + n, "--" + n} {
				if a == p || strings.HasPrefix(a, p+"=") {
					return p, true
				}
			}
		}
		return "", false
	}
	out := make([]string, 0, len(args))
	current := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch flagName, ok := isList(a); {
		case a == "--":
			return append(out, args[i:]...)
		case ok:
			current = flagName
			out = append(out, a)
			if a == flagName && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
		case strings.HasPrefix(a, "-"):
			current = ""
			out = append(out, a)
		case current != "":
			out = append(out, current, a)
		default:
			out = append(out, a)
		}
	}
	return out
}

// cmdIsolateVerify implements "awf isolate verify".
func cmdIsolateVerify(ctx context.Context, e env) int {
	if len(e.args) > 0 && e.args[0] == "--agent-probes" {
		return agentProbes(e)
	}
	fs := e.flags("awf isolate verify", isolateVerifyUsage)
	var rts, req, probes listFlag
	fs.Var(&rts, "runtime", "runtime to verify: direct, gvisor, docker, sbx or all (repeatable)")
	fs.Var(&req, "require", "runtime whose BLOCKED verdict fails the run (repeatable)")
	fs.Var(&probes, "probe", "run only this probe ID or ID prefix ending in / (repeatable)")
	asJSON := fs.Bool("json", false, "write the versioned JSON report (same as --format json)")
	format := fs.String("format", "text", "report format: "+strings.Join(verify.Formats(), ", "))
	rootDir := fs.String("rootfs", "", "root filesystem (default: build one for this run)")
	digest := fs.String("digest", "", "pinned rootfs digest to check --rootfs against")
	policyFile := fs.String("policy", "", "seccomp policy file (default: the embedded policy)")
	privateRoot := fs.String("private-root", host.DefaultPrivateBase, "private base directory whose parents the hazard check inspects")
	stateDir := fs.String("state-dir", "", "parent of the runtimes' state directories (default: a scratch directory)")
	cgroupParent := fs.String("cgroup-parent", isolate.DefaultCgroupParent, "dedicated parent cgroup")
	runsc := fs.String("runsc", "", "runsc binary (default: look up PATH)")
	dockerSock := fs.String("docker-socket", "", "Docker Engine socket (default: DOCKER_HOST=unix://PATH, else "+host.DefaultDockerSocket+")")
	progress := fs.Bool("progress", false, "print each result to standard error as it is known")
	agent := fs.Bool("agent", false, "check the agent's view instead of the sandboxes")
	var agentNets listFlag
	fs.Var(&agentNets, "agent-network", "with --agent: agent.network mode to check, host or none (repeatable; default both)")
	agentUser := fs.String("agent-user", "", "with --agent: the agent user (default: a throwaway system user)")
	enclave := fs.Bool("enclave", false, "run the bounded-agent network probes from inside a real enclave")
	enclaveProbe := fs.String("enclave-probe", "", "with --enclave: the static enclave-probe binary (default: next to awf)")
	configFile := fs.String("config", "", "verify the runtime, limits and policy of this configuration")
	timing := fs.Bool("timing", false, "run the timing self-test through a real broker")
	timingN := fs.Int("timing-n", 0, "with --timing: requests per class (default 20)")
	if err := fs.Parse(spreadValues(e.args, "runtime", "require", "agent-network")); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprint(e.stderr, isolateVerifyUsage)
		return 2
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(e.stderr, "awf isolate verify: "+format+"\n", args...)
		return 2
	}
	if *asJSON {
		if *format != "text" && *format != "json" {
			return fail("--json and --format %s disagree", *format)
		}
		*format = "json"
	}
	if !slices.Contains(verify.Formats(), *format) {
		return fail("unknown --format %q (want %s)", *format, strings.Join(verify.Formats(), ", "))
	}
	var configured *isolate.Limits
	if *configFile != "" {
		vc, err := loadVerifyConfig(*configFile, e.stdin)
		if err != nil {
			return fail("config: %v", err)
		}
		configured = vc.apply(&rts, rootDir, digest, runsc, dockerSock)
	}
	names, required, err := verifyRuntimes(rts, req)
	if err != nil {
		return fail("%v", err)
	}
	if *enclave {
		return runEnclaveVerify(ctx, e, enclaveVerify{runtimes: names, required: required, explicit: len(rts) > 0, probe: *enclaveProbe,
			format: *format, stateDir: *stateDir, cgroupParent: *cgroupParent, runsc: *runsc, dockerSocket: *dockerSock})
	}
	pol, err := loadRunPolicy(*policyFile)
	if err != nil {
		return fail("policy: %v", err)
	}
	root := *rootDir
	var rootDigest string
	if root == "" {
		dir, err := os.MkdirTemp("", "awf-verify-rootfs-")
		if err != nil {
			return fail("%v", err)
		}
		defer os.RemoveAll(dir)
		root = filepath.Join(dir, "root")
		bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		d, err := rootfs.Build(bctx, rootfs.Options{Out: root})
		cancel()
		if err != nil {
			return fail("build root filesystem: %v", err)
		}
		rootDigest = d
		if *progress {
			fmt.Fprintf(e.stderr, "built root filesystem %s\n", d)
		}
	} else {
		vctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		d, err := rootfs.Verify(vctx, root, *digest)
		cancel()
		if err != nil {
			return fail("root filesystem: %v", err)
		}
		rootDigest = d
	}
	if *timing {
		return runTimingVerify(ctx, e, timingVerify{runtimes: names, required: required, n: *timingN, asJSON: *format == "json",
			progress: *progress, rootfs: root, policy: pol,
			host: isolate.HostConfig{StateDir: *stateDir, CgroupParent: *cgroupParent, RunscPath: *runsc, DockerSocket: timingDockerSocket(*dockerSock)}})
	}
	if *agent {
		return runAgentVerify(ctx, e, agentVerify{networks: agentNets, user: *agentUser, cgroupParent: *cgroupParent, asJSON: *asJSON, progress: *progress}, root, pol)
	}
	// The probes run pinned the way awf run pins sandboxes.
	split, err := host.SplitCPUs()
	if err != nil {
		return fail("%v", err)
	}
	// The socket is resolved as awf run resolves it; a DOCKER_HOST that
	// names no Unix socket matters only when docker is verified.
	sock, _, err := host.DockerSocket(*dockerSock, os.Getenv("DOCKER_HOST"))
	if err != nil && slices.Contains(names, "docker") {
		return fail("%v", err)
	}
	opts := verify.Options{
		Runtimes: names, Required: required, RootFS: root, RootFSDigest: rootDigest, Policy: pol, PolicyFile: *policyFile,
		PrivateRoot: *privateRoot, Probes: probes, Configured: configured,
		Host: isolate.HostConfig{StateDir: *stateDir, CgroupParent: *cgroupParent, RunscPath: *runsc, DockerSocket: sock,
			SandboxCPUs: split.Sandbox},
	}
	if *progress {
		opts.Progress = func(rt string, r verify.Result) {
			fmt.Fprintf(e.stderr, "%-7s %-7s %s: %s\n", rt, r.Status, r.ID, r.Evidence)
		}
	}
	rep, err := verify.Run(ctx, opts)
	if err != nil {
		return fail("%v", err)
	}
	if err := rep.Write(e.stdout, *format); err != nil {
		return fail("%v", err)
	}
	return rep.ExitCode()
}

// verifyRuntimes expands --runtime and --require. Runtimes named explicitly
// are required; "all" adds every runtime without requiring it.
func verifyRuntimes(rts, req []string) (names, required []string, err error) {
	if len(rts) == 0 {
		rts = []string{"direct"}
	}
	known := func(n string) error {
		if !slices.Contains(runtimes.Names(), n) {
			return fmt.Errorf("unknown runtime %q (want %s or all)", n, strings.Join(runtimes.Names(), ", "))
		}
		return nil
	}
	for _, n := range rts {
		if n == "all" {
			for _, a := range runtimes.Names() {
				if !slices.Contains(names, a) {
					names = append(names, a)
				}
			}
			continue
		}
		if err := known(n); err != nil {
			return nil, nil, err
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
		required = append(required, n)
	}
	for _, n := range req {
		if err := known(n); err != nil {
			return nil, nil, err
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
		required = append(required, n)
	}
	return names, required, nil
}

const isolateMatrixUsage = `usage: awf isolate matrix [--json] [--require PRIMARY/QUERY]... [--require-enclave PRIMARY/ENCLAVE]...
                         [--enclave-network [--enclave-probe PATH]] [--docker-socket PATH]
                         [--cgroup-parent NAME] [--runsc PATH]

Prints the primary-agent × query-runtime availability matrix of this host in
the seed's format: its 3 × 3 table (Docker, gVisor and sbx on both sides),
each cell SUPPORTED, UNAVAILABLE or BLOCKED with the seed's condition and
this host's reason, then awf's own cells, marked as such: the host primary
agent (a process under awf run) and the direct query runtime. PRIMARY is
docker, gvisor, sbx or host; QUERY is docker, gvisor, sbx or direct. The sbx
query cells are always BLOCKED, with the missing controls listed.

Then the primary-agent × bounded-agent enclave matrix, in the same form:
the seed's 3 × 3 table (Docker, gVisor and sbx enclaves), then awf's own
cells (the host primary, the direct enclave). ENCLAVE is docker, gvisor, sbx
or direct. Each enclave runtime is proven once and combined with each
primary: by default with what bounded agents' preflight proves (the
runtime's probe and that it renders enclaves); with --enclave-network also
by the network probes awf isolate verify runs in an enclave, in one real
enclave per runtime (--enclave-probe: the static enclave-probe binary, default next
to awf). The docker enclave cells are always BLOCKED (the Engine cannot join
an existing network namespace), the sbx ones by the mandatory sbx enclave
probes.

--json writes the matrix with a "seed" object of the query cells and an
"enclave" object of the enclave cells. Exits 1, printing each unmet pair
with its state and reason, when a --require (query) or --require-enclave
pair is not SUPPORTED; 2 on usage errors; 0 otherwise.
`

// cmdIsolateMatrix implements "awf isolate matrix".
func cmdIsolateMatrix(ctx context.Context, e env) int {
	fs := e.flags("awf isolate matrix", isolateMatrixUsage)
	var req listFlag
	fs.Var(&req, "require", "PRIMARY/QUERY pair that must be SUPPORTED (repeatable)")
	var reqEnclave listFlag
	fs.Var(&reqEnclave, "require-enclave", "PRIMARY/ENCLAVE pair that must be SUPPORTED (repeatable)")
	enclaveNetwork := fs.Bool("enclave-network", false, "prove each enclave runtime with the enclave network probes too, once, in a real enclave")
	enclaveProbe := fs.String("enclave-probe", "", "with --enclave-network: the static enclave-probe binary (default: next to awf)")
	asJSON := fs.Bool("json", false, "write the versioned JSON matrix")
	dockerSock := fs.String("docker-socket", "", "Docker Engine socket (default: DOCKER_HOST=unix://PATH, else "+host.DefaultDockerSocket+")")
	cgroupParent := fs.String("cgroup-parent", "awf", "dedicated parent cgroup")
	runsc := fs.String("runsc", "", "runsc binary (default: look up PATH)")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprint(e.stderr, isolateMatrixUsage)
		return 2
	}
	for _, r := range req {
		if _, _, err := verify.ParsePair(r); err != nil {
			fmt.Fprintf(e.stderr, "awf isolate matrix: --require %v\n", err)
			return 2
		}
	}
	for _, r := range reqEnclave {
		if _, _, err := verify.ParseEnclavePair(r); err != nil {
			fmt.Fprintf(e.stderr, "awf isolate matrix: --require-enclave %v\n", err)
			return 2
		}
	}
	if *enclaveProbe != "" && !*enclaveNetwork {
		fmt.Fprintf(e.stderr, "awf isolate matrix: --enclave-probe needs --enclave-network\n")
		return 2
	}
	sock, _, err := host.DockerSocket(*dockerSock, os.Getenv("DOCKER_HOST"))
	if err != nil {
		fmt.Fprintf(e.stderr, "awf isolate matrix: %v\n", err)
		return 2
	}
	hc := isolate.HostConfig{CgroupParent: *cgroupParent, RunscPath: *runsc, DockerSocket: sock}
	m := verify.BuildMatrix(ctx, verify.MatrixOptions{Host: hc})
	m.Seed = m.InSeedTerms()
	eo := verify.EnclaveMatrixOptions{Host: hc}
	if *enclaveNetwork {
		probe := *enclaveProbe
		if probe == "" {
			exe, err := os.Executable()
			if err != nil {
				fmt.Fprintf(e.stderr, "awf isolate matrix: %v\n", err)
				return 2
			}
			probe = filepath.Join(filepath.Dir(exe), "enclave-probe")
		}
		split, err := host.SplitCPUs()
		if err != nil {
			fmt.Fprintf(e.stderr, "awf isolate matrix: %v\n", err)
			return 2
		}
		nh := hc
		nh.SandboxCPUs = split.Sandbox
		eo.Network = &verify.EnclaveOptions{Host: nh, ProbeBinary: probe, HostAddrs: hostAddrs()}
	}
	m.Enclave = m.BuildEnclaveMatrix(ctx, eo)
	if *asJSON {
		err = m.WriteJSON(e.stdout)
	} else if err = m.Seed.WriteText(e.stdout); err == nil {
		fmt.Fprintln(e.stdout)
		err = m.Enclave.WriteText(e.stdout)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "awf isolate matrix: %v\n", err)
		return 2
	}
	if unmet := append(m.Seed.Unmet(req), m.Enclave.Unmet(reqEnclave)...); len(unmet) > 0 {
		for _, u := range unmet {
			fmt.Fprintf(e.stderr, "awf isolate matrix: required %s\n", u)
		}
		return 1
	}
	return 0
}
