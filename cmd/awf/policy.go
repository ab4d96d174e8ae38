package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/awf-project/awf/policy"
)

const policyUsage = `usage: awf policy lint FILE...
       awf policy show FILE
       awf policy table FILE [--arch A]
       awf policy diff OLD NEW [--arch A] [--summary]
       awf policy bpf FILE [--arch A]
       awf policy export FILE --format docker|oci|libcontainer
       awf policy import PROFILE.json
       awf policy attest PID [FILE] [--arch A] [--json]

FILE is a *.policy file, "-" for standard input, or "@default" for the
built-in python3.policy.

lint    reports syntax errors, unknown names, duplicates, dangerous allows and
        missing reasons; exits 1 if there is any error.
show    prints the header and the rules by group, with their reasons.
table   prints the decision table computed from the compiled BPF: one line per
        arch, syscall and argument case (default: every arch in the header).
        FILE may also be Docker or OCI seccomp JSON, as for diff.
diff    prints the semantic differences between the two decision tables
        ("+ allow statx (x86_64)"); exits 1 if there are any. OLD and NEW may
        each be a .policy file, a Docker seccomp profile or OCI seccomp JSON
        (told apart by content); decisions are compared, not text. Without
        --arch the architectures both sides cover are compared, and one
        that only one side covers is a "- arch"/"+ arch" line of its own.
        --summary prints, instead, the calls one side allows (wholly or
        under conditions) and the other does not, and those both allow
        only under conditions.
bpf     prints the libseccomp program (before runc's ENOSYS stub) as a
        disassembly with its sha256.
export  prints the host-arch filter as a Docker profile (archMap with every
        reviewed arch, defaultErrnoRet), an OCI seccomp section or
        libcontainer's configuration (JSON).
import  reads a Docker/moby seccomp profile or OCI seccomp JSON (strictly:
        unknown fields and duplicate keys are refused) and prints a .policy
        draft whose every reason is "reason needed", which lint refuses until
        a reviewer writes one. includes/excludes are resolved for no
        capabilities on x86_64 and aarch64; each dropped or assumed element
        has a comment.
attest  reads the seccomp filter of every thread of the live process PID
        (ptrace; root) and proves it is what FILE (default @default)
        compiles to: the same program, the same program behind runc's ENOSYS
        stub, or another program with the same decisions. Prints MATCH or
        MISMATCH with the differences; exits 0 on a match, 1 on a mismatch
        (any thread without the filter, stacked filters, other decisions),
        2 if the process cannot be read. Host-kernel filters only (direct
        and docker sandboxes); gVisor enforces the policy in its Sentry.
`

// policyCommand is the policy leaf sub: its arguments go through the one
// policy parser (parsePolicyArgs), then to run.
func policyCommand(sub string, run func(context.Context, env, policyArgs) int) command {
	return func(ctx context.Context, e env) int {
		pa, err := parsePolicyArgs(e.args)
		if err != nil {
			fmt.Fprintf(e.stderr, "awf policy %s: %v\n%s", sub, err, policyUsage)
			return 2
		}
		return run(ctx, e, pa)
	}
}

// policyArgs is a parsed policy command line.
type policyArgs struct {
	arch    string
	summary bool
	json    bool
	format  string
	files   []string
}

func parsePolicyArgs(args []string) (policyArgs, error) {
	var pa policyArgs
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		switch name {
		case "--arch", "--format":
			if !hasVal {
				if i+1 >= len(args) {
					return pa, fmt.Errorf("%s needs a value", name)
				}
				i++
				val = args[i]
			}
			if name == "--arch" {
				c, err := policy.CanonicalArch(val)
				if err != nil {
					return pa, err
				}
				pa.arch = c
			} else {
				pa.format = val
			}
		case "--summary":
			pa.summary = true
		case "--json":
			pa.json = true
		case "--":
			pa.files = append(pa.files, args[i+1:]...)
			return pa, nil
		default:
			if strings.HasPrefix(a, "--") {
				return pa, fmt.Errorf("unknown flag %s", a)
			}
			pa.files = append(pa.files, a)
		}
	}
	return pa, nil
}

// readPolicySource returns a policy's name and text.
func readPolicySource(stdin io.Reader, file string) (string, []byte, error) {
	switch file {
	case "@default":
		return policy.DefaultName, policy.DefaultSource(), nil
	case "-":
		src, err := io.ReadAll(io.LimitReader(stdin, 1<<20+1))
		return "<stdin>", src, err
	}
	src, err := os.ReadFile(file)
	return file, src, err
}

func loadPolicy(e env, file string) (*policy.Policy, bool) {
	name, src, err := readPolicySource(e.stdin, file)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf policy: %v\n", err)
		return nil, false
	}
	p, err := policy.Parse(name, src)
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return nil, false
	}
	return p, true
}

// onePolicy loads the single policy FILE that show, bpf and export take, or
// reports why not and returns the exit status: 2 for usage, 1 for a policy
// that cannot be read or parsed.
func onePolicy(e env, pa policyArgs, sub string) (*policy.Policy, int) {
	if !oneFile(e, pa, sub) {
		return nil, 2
	}
	p, ok := loadPolicy(e, pa.files[0])
	if !ok {
		return nil, 1
	}
	return p, 0
}

func oneFile(e env, pa policyArgs, sub string) bool {
	if len(pa.files) != 1 {
		fmt.Fprintf(e.stderr, "awf policy %s: want exactly one FILE\n%s", sub, policyUsage)
		return false
	}
	return true
}

func policyLint(e env, pa policyArgs) int {
	if len(pa.files) == 0 {
		fmt.Fprintf(e.stderr, "awf policy lint: want at least one FILE\n%s", policyUsage)
		return 2
	}
	status := 0
	for _, f := range pa.files {
		name, src, err := readPolicySource(e.stdin, f)
		if err != nil {
			fmt.Fprintf(e.stderr, "awf policy lint: %v\n", err)
			status = 1
			continue
		}
		findings := policy.Lint(name, src)
		for _, fd := range findings {
			fmt.Fprintln(e.stdout, fd.String())
		}
		if policy.HasErrors(findings) {
			status = 1
			continue
		}
		p, err := policy.Parse(name, src)
		if err != nil {
			fmt.Fprintln(e.stderr, err)
			status = 1
			continue
		}
		fmt.Fprintf(e.stdout, "%s: ok: version %d, %d rules in %d groups, %s\n", name, p.Version, len(p.Rules), len(p.Groups), p.Digest())
	}
	return status
}

func policyShow(e env, pa policyArgs) int {
	p, status := onePolicy(e, pa, "show")
	if p == nil {
		return status
	}
	w := e.stdout
	fmt.Fprintf(w, "policy  %s (version %d, %s)\n", p.Name, p.Version, p.Digest())
	fmt.Fprintf(w, "arch    %s\n", strings.Join(p.Arches, " "))
	if p.Scope != policy.ScopeQuery {
		fmt.Fprintf(w, "scope   %s: %s\n", p.Scope, p.ScopeReason)
	}
	fmt.Fprintf(w, "default %s: %s\n", p.DefaultAction, p.DefaultReason)
	for _, g := range p.Groups {
		rules := p.GroupRules(g.Name)
		fmt.Fprintf(w, "\n[%s] %s (%d rules)\n", g.Name, g.Description, len(rules))
		for _, r := range rules {
			head := r.Action.String() + " " + r.Syscall
			if c := r.Condition(); c != "" {
				head += " if " + c
			}
			if r.Sensitive {
				head += " +sensitive"
			}
			fmt.Fprintf(w, "  %-40s %s\n", head, r.Reason)
		}
	}
	return 0
}

func policyTable(e env, pa policyArgs) int {
	if !oneFile(e, pa, "table") {
		return 2
	}
	src, err := loadDecisions(e.stdin, pa.files[0])
	if err != nil {
		fmt.Fprintf(e.stderr, "awf policy table: %v\n", err)
		return 1
	}
	t, err := src.tables(pa.arch)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf policy table: %v\n", err)
		return 1
	}
	if src.format != policy.FormatPolicy {
		fmt.Fprintf(e.stdout, "# %s: %s seccomp JSON, resolved for %s\n", pa.files[0], src.format, policy.ImportAssumption)
	}
	if _, err := t.WriteTo(e.stdout); err != nil {
		return 1
	}
	return 0
}

func policyDiff(e env, pa policyArgs) int {
	if len(pa.files) != 2 {
		fmt.Fprintf(e.stderr, "awf policy diff: want OLD and NEW\n%s", policyUsage)
		return 2
	}
	var srcs [2]decisionSource
	for i, f := range pa.files {
		s, err := loadDecisions(e.stdin, f)
		if err != nil {
			fmt.Fprintf(e.stderr, "awf policy diff: %v\n", err)
			return 2
		}
		srcs[i] = s
	}
	// Without --arch, the decisions of the architectures both sides cover
	// are compared; an architecture only one side covers is a difference of
	// its own (one line, counted in the exit status), never a table of
	// "deny" rows the other side never claimed.
	arch, only := pa.arch, []string(nil)
	var common []string
	if arch == "" {
		common, only = commonArches(pa.files, srcs)
		if len(common) == 0 {
			fmt.Fprintf(e.stderr, "awf policy diff: %s and %s cover no architecture in common\n", pa.files[0], pa.files[1])
			return 2
		}
	}
	var ts [2]policy.Table
	for i, s := range srcs {
		if common != nil {
			s.arches = common
		}
		t, err := s.tables(arch)
		if err != nil {
			fmt.Fprintf(e.stderr, "awf policy diff: %v\n", err)
			return 2
		}
		ts[i] = t
	}
	for i, s := range srcs {
		if s.format != policy.FormatPolicy {
			fmt.Fprintf(e.stdout, "# %s: %s seccomp JSON, resolved for %s\n", pa.files[i], s.format, policy.ImportAssumption)
		}
	}
	lines := only
	if pa.summary {
		lines = append(lines, contrastLines(pa.files, policy.Contrasts(ts[0], ts[1]))...)
	} else {
		lines = append(lines, policy.Diff(ts[0], ts[1])...)
	}
	for _, l := range lines {
		fmt.Fprintln(e.stdout, l)
	}
	if len(lines) > 0 {
		return 1
	}
	return 0
}

// commonArches returns the architectures both sources cover, in the first
// source's order, and one "- arch"/"+ arch" line for each that only one of
// them covers.
func commonArches(files []string, srcs [2]decisionSource) (common, only []string) {
	for _, a := range srcs[0].arches {
		if slices.Contains(srcs[1].arches, a) {
			common = append(common, a)
		} else {
			only = append(only, fmt.Sprintf("- arch %s : only %s covers it; its decisions are not compared", a, files[0]))
		}
	}
	for _, a := range srcs[1].arches {
		if !slices.Contains(srcs[0].arches, a) {
			only = append(only, fmt.Sprintf("+ arch %s : only %s covers it; its decisions are not compared", a, files[1]))
		}
	}
	return common, only
}

// contrastLines groups contrasts under a heading each.
func contrastLines(files []string, cs []policy.Contrast) []string {
	groups := []struct {
		title string
		match func(c policy.Contrast) bool
	}{
		{files[0] + " allows, " + files[1] + " denies", func(c policy.Contrast) bool { return c.A.Permits() && !c.B.Permits() }},
		{files[1] + " allows, " + files[0] + " denies", func(c policy.Contrast) bool { return c.B.Permits() && !c.A.Permits() }},
		{"both allow, at least one only under conditions", func(c policy.Contrast) bool { return c.A.Permits() && c.B.Permits() }},
	}
	var out []string
	for _, g := range groups {
		var body []string
		for _, c := range cs {
			if g.match(c) {
				body = append(body, "  "+c.String())
			}
		}
		out = append(out, fmt.Sprintf("## %s: %d", g.title, len(body)))
		out = append(out, body...)
	}
	return out
}

// decisionSource is anything with decision tables: a .policy file or an
// imported Docker/OCI profile.
type decisionSource struct {
	format string
	arches []string
	table  func(arch string) (policy.Table, error)
}

// tables merges the source's tables for arch, or for every arch it covers.
func (s decisionSource) tables(arch string) (policy.Table, error) {
	want := s.arches
	if arch != "" {
		want = []string{arch}
	}
	parts := make([]policy.Table, 0, len(want))
	for _, a := range want {
		t, err := s.table(a)
		if err != nil {
			return policy.Table{}, err
		}
		parts = append(parts, t)
	}
	return policy.Merge(parts...), nil
}

// loadDecisions reads file and tells its format by content.
func loadDecisions(stdin io.Reader, file string) (decisionSource, error) {
	name, src, err := readPolicySource(stdin, file)
	if err != nil {
		return decisionSource{}, err
	}
	if policy.DetectFormat(src) == policy.FormatPolicy {
		p, err := policy.Parse(name, src)
		if err != nil {
			return decisionSource{}, err
		}
		return decisionSource{format: policy.FormatPolicy, arches: p.Arches, table: p.Table}, nil
	}
	im, err := policy.Import(name, src)
	if err != nil {
		return decisionSource{}, err
	}
	return decisionSource{format: im.Format, arches: im.Arches, table: im.Table}, nil
}

func policyImport(e env, pa policyArgs) int {
	if !oneFile(e, pa, "import") {
		return 2
	}
	name, src, err := readPolicySource(e.stdin, pa.files[0])
	if err != nil {
		fmt.Fprintf(e.stderr, "awf policy import: %v\n", err)
		return 1
	}
	im, err := policy.Import(name, src)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf policy import: %v\n", err)
		return 1
	}
	fmt.Fprint(e.stdout, im.Draft())
	return 0
}

func policyBPF(e env, pa policyArgs) int {
	p, status := onePolicy(e, pa, "bpf")
	if p == nil {
		return status
	}
	archs := p.Arches
	if pa.arch != "" {
		archs = []string{pa.arch}
	}
	for _, a := range archs {
		prog, err := p.BPF(a)
		if err != nil {
			fmt.Fprintf(e.stderr, "awf policy bpf: %v\n", err)
			return 1
		}
		fmt.Fprintf(e.stdout, "# %s %s: %d instructions, libseccomp %s (before runc's ENOSYS stub)\n", p.Name, a, len(prog), policy.LibseccompVersion())
		for _, l := range policy.Disassemble(prog) {
			fmt.Fprintln(e.stdout, l)
		}
		fmt.Fprintf(e.stdout, "%s  %s\n", policy.ProgramSHA256(prog), a)
	}
	return 0
}

func policyExport(e env, pa policyArgs) int {
	p, status := onePolicy(e, pa, "export")
	if p == nil {
		return status
	}
	var out []byte
	var err error
	switch pa.format {
	case "docker":
		out, err = p.DockerJSON()
	case "oci", "libcontainer":
		var v any
		if pa.format == "oci" {
			v, err = p.OCI()
		} else {
			v, err = p.Libcontainer()
		}
		if err == nil {
			out, err = indentedJSON(v)
		}
	default:
		fmt.Fprintf(e.stderr, "awf policy export: --format must be docker, oci or libcontainer\n")
		return 2
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "awf policy export: %v\n", err)
		return 1
	}
	_, _ = e.stdout.Write(out)
	return 0
}
