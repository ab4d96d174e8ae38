package broker

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
)

// SkillRepo is one repository as the generated skill advertises it.
type SkillRepo struct {
	Repo        string
	Sensitivity string
}

// Skill renders the bounded-query SKILL.md with the default sandbox facts
// (SkillWith).
func Skill(repos []SkillRepo, timeoutSeconds, maxInvocations int) string {
	return SkillWith(repos, timeoutSeconds, maxInvocations, SandboxFacts{Limits: isolate.DefaultLimits()})
}

// SandboxFacts are what a query author needs to know of the sandbox: the
// Python version of the root filesystem and the limits.
type SandboxFacts struct {
	Python string // "3.11"; "" = unknown
	Limits isolate.Limits
}

// SandboxFactsFor reads the Python version of the root filesystem at
// rootfsDir (its usr/lib/python3.N) and takes the default limits with the
// configured memory (0 = the default), as the broker does.
func SandboxFactsFor(rootfsDir string, memoryBytes int64) SandboxFacts {
	f := SandboxFacts{Limits: isolate.DefaultLimits()}
	if memoryBytes > 0 {
		f.Limits.MemoryBytes = memoryBytes
	}
	if m, _ := filepath.Glob(filepath.Join(rootfsDir, "usr", "lib", "python3.*")); len(m) == 1 {
		f.Python = strings.TrimPrefix(filepath.Base(m[0]), "python")
	}
	return f
}

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }

// SkillWith renders the bounded-query SKILL.md: each repository with its
// sensitivity and initial run budget, the charge formula, the buckets, the
// script contract with the sandbox's facts, and a worked example. It never
// shows a remaining balance.
func SkillWith(repos []SkillRepo, timeoutSeconds, maxInvocations int, f SandboxFacts) string {
	b, w := newSkill("bounded-query", "Bounded query",
		"Ask a narrow, finite question about a private repository you cannot read. Use only when the answer fits a small schema and the repository's budget affords it.")
	w("`bounded-query` runs a short Python 3 script you write against a fresh, private, writable copy of one\n")
	w("repository, in a sandbox with no network, no credentials and no view of the host or your workspace. You\n")
	w("see only one canonical JSON line: `{\"status\":\"ok\",\"result\":<value>}` or `{\"status\":\"error\"}`.\n")
	w("Every failure looks the same, on purpose: you cannot learn why a query failed.\n\n")
	w("## Available repositories\n\n")
	skillRepos(w, repos, "never runs a script")
	w("\n## Invoking\n\n")
	w("```sh\nbounded-query --repo OWNER/REPO --schema '<finite schema JSON>' < script.py\n```\n\n")
	w("- `--repo` and `--schema` are required, exactly once each, in any order. No other option, no `--flag=value`\n")
	w("  form and no positional argument is accepted.\n")
	w("- The schema is at most %d bytes. The script arrives on stdin (not a terminal), is UTF-8 and at most %d bytes.\n", proto.MaxSchemaBytes, proto.MaxScriptBytes)
	w("- The command always prints exactly one JSON line and exits 0.\n\n")
	w("## Response schema\n\n")
	skillSchemaTable(w)
	w("A literal is a string (at most %d UTF-8 bytes, no control characters), a safe integer, a boolean or\n", proto.MaxLiteralStringBytes)
	w("null; enum members share one JSON type and are unique. Limits: depth %d, %d nodes, %d fields/items/variants,\n", proto.MaxSchemaDepth, proto.MaxSchemaNodes, proto.MaxObjectFields)
	w("array length at most %d. There are no free strings, floats, regexes, optional fields or recursion.\n\n", proto.MaxArrayLength)
	w("## Script contract\n\n")
	python := "Python 3"
	if f.Python != "" {
		python += " (" + f.Python + ")"
	}
	w("- %s, standard library only. The repository is at `/query/repo`: a single-commit shallow clone of\n", python)
	w("  its configured ref (one commit: no history, no other branches or tags). You may modify your copy; the\n")
	w("  changes go to a %s layer that is thrown away.\n", mib(f.Limits.RepoUpperBytes))
	w("- One process: threads work, but `os.fork`, `os.system` and anything else that forks are killed by the\n")
	w("  seccomp policy, and `subprocess`, `os.pipe`, `socket` and `asyncio` raise PermissionError. There is\n")
	w("  no network.\n")
	w("- `/tmp` is a %s tmpfs (noexec), `/query` a %s one; memory %s, at most %d processes and threads,\n",
		mib(f.Limits.TmpTmpfsBytes), mib(f.Limits.QueryTmpfsBytes), mib(f.Limits.MemoryBytes), f.Limits.Pids)
	w("  files at most %s each.\n", mib(f.Limits.FileSizeBytes))
	w("- Write exactly one JSON value conforming to the schema to `/query/out` (at most %d bytes).\n", proto.MaxResultBytes)
	w("- stdout, stderr and the exit status are discarded. The script runs as an unprivileged user, with a\n")
	w("  %d s time limit.\n", timeoutSeconds)
	w("- Non-conformant outputs (all give the error line): a missing or oversized file, malformed JSON,\n")
	w("  duplicate keys, trailing content, a value outside the schema, a non-zero exit, a timeout.\n")
	w("- When a query keeps failing, ask your operator to run it with `awf query` (the same repository, schema\n")
	w("  and script): it shows them what you never see, such as the traceback, the system call the policy\n")
	w("  killed or why the output does not match the schema.\n\n")
	w("Worked example: does the repository have a SECURITY.md at its root? (cardinality 2, charge 5 bits)\n\n")
	w("```sh\nbounded-query --repo %s --schema '{\"type\":\"boolean\"}' <<'EOF'\nimport json, os\nwith open('/query/out', 'w') as f:\n    json.dump(os.path.isfile('/query/repo/SECURITY.md'), f)\nEOF\n```\n\n", exampleRepo(repos))
	w("## Budget\n\n")
	w("Each accepted query is charged before it runs, and never refunded:\n\n")
	skillCharge(w)
	w("(%d bit for ok/error, %d bits for the six timing buckets). The cheapest query (a const) costs %d bits; a\n", proto.ResultStatusBits, proto.TimingBucketBits, proto.MinChargeBits)
	w("boolean 5, a 4-member enum 6, an integer in 0..255 12. There is no per-query cap beyond the budget.\n")
	skillRunCap(w, "query", maxInvocations)
	return b.String()
}

func exampleRepo(repos []SkillRepo) string {
	for _, r := range repos {
		if r.Sensitivity != proto.SensitivitySealed {
			return r.Repo
		}
	}
	if len(repos) > 0 {
		return repos[0].Repo
	}
	return "owner/repo"
}

// The skills' shared parts: each fact the three skills state alike is
// written once here.

// newSkill starts a SKILL.md: its front matter (name, description) and
// its title. w appends formatted text to b.
func newSkill(name, title, description string) (b *strings.Builder, w func(string, ...any)) {
	b = &strings.Builder{}
	w = func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("---\nname: %s\ndescription: %s\n---\n\n# %s\n\n", name, description, title)
	return b, w
}

// skillRepos writes the available repositories, each with its initial run
// budget; zeroBits is what a 0-bit repository's job never does.
func skillRepos(w func(string, ...any), repos []SkillRepo, zeroBits string) {
	for _, r := range repos {
		bits, metered, _ := proto.SensitivityBudget(r.Sensitivity)
		switch {
		case !metered:
			w("- `%s` — unmetered (`%s`)\n", r.Repo, r.Sensitivity)
		case bits == 0:
			w("- `%s` — 0 bits/run (`%s` — %s)\n", r.Repo, r.Sensitivity, zeroBits)
		default:
			w("- `%s` — %d bits/run (`%s`)\n", r.Repo, bits, r.Sensitivity)
		}
	}
}

// skillSchemaTable writes the finite schema language (proto's), one row a
// type with its shape and its number of values.
func skillSchemaTable(w func(string, ...any)) {
	w("| type | shape | values |\n|---|---|---|\n")
	w("| const | `{\"type\":\"const\",\"value\":<literal>}` | 1 |\n")
	w("| boolean | `{\"type\":\"boolean\"}` | 2 |\n")
	w("| enum | `{\"type\":\"enum\",\"values\":[<literal>,...]}` | number of members |\n")
	w("| integer | `{\"type\":\"integer\",\"minimum\":N,\"maximum\":M}` | M-N+1 |\n")
	w("| object | `{\"type\":\"object\",\"fields\":{\"name\":<schema>,...}}` | product of fields |\n")
	w("| tuple | `{\"type\":\"tuple\",\"items\":[<schema>,...]}` | product of items |\n")
	w("| array | `{\"type\":\"array\",\"items\":<schema>,\"length\":N}` | items^N |\n")
	w("| union | `{\"type\":\"union\",\"variants\":{\"tag\":<schema>,...}}` | sum of variants; value `{\"tag\":..,\"value\":..}` |\n\n")
}

// skillCharge writes the charge formula (proto's).
func skillCharge(w func(string, ...any)) {
	w("    charge = %d + ceil(log2(cardinality)) + %d bits\n\n", proto.ResultStatusBits, proto.TimingBucketBits)
}

// skillRunCap writes the timing buckets, the per-run request cap and that
// the balance is never shown; job names what starts ("query").
func skillRunCap(w func(string, ...any), job string, maxInvocations int) {
	w("Responses arrive only at fixed times after the %s starts: %s.\n", job, skillBuckets())
	w("At most %d requests per run are answered (every request counts, even rejected ones). The remaining\n", maxInvocations)
	w("balance is never shown.\n\n")
	w("Design one high-value, low-cardinality question per invocation.\n")
}

// skillBuckets lists the timing buckets as the skills say them: "10ms,
// 100ms, 1s, 10s, 60s or 600s".
func skillBuckets() string {
	var out []string
	for _, b := range proto.TimingBuckets() {
		if b < time.Second {
			out = append(out, fmt.Sprintf("%dms", b.Milliseconds()))
		} else {
			out = append(out, fmt.Sprintf("%ds", int64(b/time.Second)))
		}
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}
