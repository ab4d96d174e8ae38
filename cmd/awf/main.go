// Command awf is the operator CLI: it stages private repositories, runs the
// bounded-query broker around an agent command, and offers the schema, policy,
// rootfs, isolate, config and audit tools that operators and security teams use.
//
// Parsing is Go's standard flag package plus one command tree (tree below):
// the tree dispatches every level, answers -h/--help on stdout with exit 0,
// reports usage errors on stderr with exit 2, accepts --flag=value for every
// value flag, and generates shell completion. No CLI library: each leaf keeps
// the parser it has (most use flag.FlagSet), the tree adds the shared rules
// around them, and the binary gains no dependency. A library such as cobra
// would remove no more hand-rolled parsing than the tree does while making
// every subcommand file depend on it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/proto"
)

func init() {
	// libcontainer re-executes this binary as the container init.
	direct.InitIfRequested()
}

// env is what every subcommand gets: arguments and standard streams.
type env struct {
	args   []string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// flags returns the flag set of the subcommand name: errors and -h go to
// e.stderr, and usage is the text printed for them.
func (e env) flags(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, usage) }
	return fs
}

// indentedJSON is the form of every JSON report awf prints (--json,
// policy export): two-space indented, with a final newline.
func indentedJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

// command runs one subcommand and returns the process exit status.
type command func(ctx context.Context, e env) int

// node is one level of the command tree: a group (subs) or a leaf (run).
type node struct {
	name    string
	summary string // one line, for the parent's help and completion
	usage   string // full help text; a group without one gets a generated list
	run     command
	subs    []*node
	// values are the leaf's flags that take a value (accepted as --f V and
	// --f=V); bools are its flags that take none. Both feed completion, and
	// a test checks them against the usage text.
	values, bools []string
	// internal are first arguments that select a hidden mode (a re-executed
	// helper process): the arguments then pass through untouched.
	internal []string
}

// tree is the whole command line of awf; dispatch, help, completion and the
// CLI table test all walk it, so a subcommand missing here does not exist.
// Each group lives in its own file.
func tree() *node {
	policyLeaf := func(name, summary string, run func(env, policyArgs) int, values ...string) *node {
		return &node{name: name, summary: summary, usage: policyUsage, values: values,
			run: policyCommand(name, func(_ context.Context, e env, pa policyArgs) int { return run(e, pa) })}
	}
	return &node{name: "awf", subs: []*node{
		{name: "run", summary: "run an agent command with the bounded-query broker", usage: runUsage, run: cmdRun,
			values: []string{"config"}, internal: []string{"--agent-shim", apiProxyFlag}},
		{name: "broker", summary: "run the broker in the foreground", usage: brokerUsage, run: cmdBroker,
			values: []string{"config"}, internal: []string{"--serve"}},
		{name: "config", summary: "validate a configuration or print its JSON Schema", subs: []*node{
			{name: "validate", summary: "check a configuration file", usage: configValidateUsage, run: configValidate,
				values: []string{"config"}, bools: []string{"preflight"}},
			{name: "schema", summary: "print the configuration's JSON Schema", usage: configSchemaUsage, run: configSchema},
		}},
		{name: "schema", summary: "check schemas and validate answers", usage: schemaUsage, subs: []*node{
			{name: "check", summary: "print a schema's cardinality and charge", usage: schemaUsage, run: schemaCheck,
				bools: []string{"json"}},
			{name: "validate", summary: "validate a /query/out file against a schema", usage: schemaUsage, run: schemaValidate,
				values: []string{"schema"}},
		}},
		{name: "policy", summary: "lint, show, compare and export seccomp policies", usage: policyUsage, subs: []*node{
			policyLeaf("lint", "lint policy files", policyLint),
			policyLeaf("show", "print a policy by group", policyShow),
			policyLeaf("table", "print the decision table", policyTable, "arch"),
			policyLeaf("diff", "compare two decision tables", policyDiff, "arch"),
			policyLeaf("bpf", "disassemble the compiled filter", policyBPF, "arch"),
			policyLeaf("export", "export as Docker, OCI or libcontainer JSON", policyExport, "format"),
			policyLeaf("import", "draft a policy from a Docker or OCI profile", policyImport),
			{name: "attest", summary: "prove a live process runs the compiled filter", usage: policyUsage, run: policyCommand("attest", policyAttest),
				values: []string{"arch"}, bools: []string{"json"}},
		}},
		{name: "rootfs", summary: "build and verify the Python root filesystem", usage: rootfsUsage, subs: []*node{
			{name: "build", summary: "build the root filesystem", usage: rootfsUsage, run: rootfsBuild,
				values: []string{"python", "out"}},
			{name: "verify", summary: "recompute and check a root filesystem's digest", usage: rootfsUsage, run: rootfsVerify,
				values: []string{"digest"}},
		}},
		{name: "isolate", summary: "run, verify and compare the sandbox runtimes", subs: []*node{
			{name: "run", summary: "run one script in the direct sandbox", usage: isolateRunUsage, run: cmdIsolateRun,
				values: []string{"repo", "schema", "rootfs", "digest", "policy", "wall"}, bools: []string{"show-output"}},
			{name: "verify", summary: "check this host and run the escape battery", usage: isolateVerifyUsage, run: cmdIsolateVerify,
				values: []string{"runtime", "require", "rootfs", "digest", "policy", "private-root", "state-dir", "cgroup-parent",
					"runsc", "docker-socket", "probe", "agent-network", "agent-user", "format", "enclave-probe", "timing-n", "config"},
				bools: []string{"json", "progress", "agent", "enclave", "timing"}, internal: []string{"--agent-probes"}},
			{name: "matrix", summary: "print the agent × query and agent × enclave runtime matrix", usage: isolateMatrixUsage, run: cmdIsolateMatrix,
				values: []string{"require", "require-enclave", "enclave-probe", "docker-socket", "cgroup-parent", "runsc"}, bools: []string{"json", "enclave-network"}},
		}},
		{name: "audit", summary: "read the protected audit log of a run", subs: []*node{
			{name: "summary", summary: "summarize a run's audit log", usage: auditSummaryUsage, run: cmdAuditSummary,
				values: []string{"format", "log-dir"}},
			{name: "show", summary: "print a run's audit records", usage: auditShowUsage, run: cmdAuditShow,
				values: []string{"log-dir"}, bools: []string{"json"}},
		}},
		{name: "query", summary: "dry-run one bounded query and show what the agent never sees", usage: queryUsage, run: cmdQuery,
			values: []string{"config", "repo", "schema", "output-bytes"}},
		{name: "completion", summary: "print a bash or zsh completion script", usage: completionUsage, run: cmdCompletion},
		{name: "version", summary: "print awf's version", usage: versionUsage, run: cmdVersion},
	}}
}

const versionUsage = `usage: awf version
       awf --version

Prints awf's version: the module version ("devel" for a checkout build),
"+" and the commit it was built from, and ".modified" if that checkout had
uncommitted changes. Audit records carry the same string.
`

func cmdVersion(ctx context.Context, e env) int {
	if len(e.args) != 0 {
		fmt.Fprint(e.stderr, versionUsage)
		return 2
	}
	fmt.Fprintf(e.stdout, "awf %s\n", proto.Version())
	return 0
}

// find returns the direct subcommand named name.
func (n *node) find(name string) *node {
	for _, s := range n.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

// help is the node's help text.
func (n *node) help(path string) string {
	if n.usage != "" {
		return n.usage
	}
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s COMMAND [ARGS...]\n\ncommands:\n", path)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, s := range n.subs {
		fmt.Fprintf(tw, "  %s\t%s\n", s.name, s.summary)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nRun \"%s COMMAND --help\" for a command's options.\n", path)
	if path == "awf" {
		b.WriteString("\"awf --version\" prints the version.\n")
	}
	return b.String()
}

// wantsHelp reports whether -h or --help is among a leaf's own arguments
// (before "--", and not the value of a value flag).
func (n *node) wantsHelp(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return false
		case a == "-h" || a == "--help" || a == "-help":
			return true
		case n.isValueFlag(a):
			i++
		}
	}
	return false
}

// isValueFlag reports whether a is exactly one of the leaf's value flags
// (with one or two dashes, without "=").
func (n *node) isValueFlag(a string) bool {
	name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	return name != a && slices.Contains(n.values, name)
}

// splitEquals rewrites --f=V into --f V for the leaf's value flags, before
// "--", so that leaves with their own parsers accept both spellings.
func (n *node) splitEquals(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if f, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(f, "-") && n.isValueFlag(f) {
			out = append(out, f, v)
			continue
		}
		out = append(out, a)
	}
	return out
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...)
	}
	// "awf help X Y" is "awf X Y --help".
	if len(args) > 0 && args[0] == "help" {
		args = append(slices.Clone(args[1:]), "--help")
	}
	n, path := tree(), "awf"
	for n.run == nil {
		if len(args) == 0 {
			fmt.Fprint(stderr, n.help(path))
			return 2
		}
		switch a := args[0]; {
		case a == "-h" || a == "--help" || a == "-help":
			fmt.Fprint(stdout, n.help(path))
			return 0
		case n.find(a) != nil:
			n, path, args = n.find(a), path+" "+a, args[1:]
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "%s: unknown flag %q\n%s", path, a, n.help(path))
			return 2
		default:
			what := "subcommand"
			if path == "awf" {
				what = "command"
			}
			fmt.Fprintf(stderr, "%s: unknown %s %q\n%s", path, what, a, n.help(path))
			return 2
		}
	}
	if len(args) == 0 || !slices.Contains(n.internal, args[0]) {
		if n.wantsHelp(args) {
			fmt.Fprint(stdout, n.help(path))
			return 0
		}
		args = n.splitEquals(args)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return n.run(ctx, env{args: args, stdin: stdin, stdout: stdout, stderr: stderr})
}
