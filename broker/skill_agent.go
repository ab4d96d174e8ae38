package broker

import (
	"github.com/awf-project/awf/proto"
)

// AgentSkillOptions are the configured values the bounded-agent skill
// states: the caller plans its questions with them.
type AgentSkillOptions struct {
	TimeoutSeconds, MaxInvocations, MaxTaskBytes int
}

// AgentSkill renders the bounded-agent SKILL.md: each repository with its
// sensitivity and initial run budget, the separate ledger, the charge
// formula, the buckets, the task contract, the provider-disclosure warning
// and a worked example. It never shows a remaining balance, and it names
// no model, provider, endpoint or runtime: the caller can choose none.
func AgentSkill(repos []SkillRepo, o AgentSkillOptions) string {
	b, w := newSkill("bounded-agent", "Bounded agent",
		"Hand a narrow judgment question about a private repository you cannot read to a fixed model loop that can. Use only when no deterministic bounded-query script can answer it, the answer fits a small schema, and the repository's budget affords it.")
	w("`bounded-agent` gives your task text to a fixed awf model loop that runs in a fresh, single-use enclave with a\n")
	w("read-only view of one repository and three read-only tools (list files, read a file, search). The enclave's\n")
	w("only network peer is awf's API proxy; it has no shell, no credentials and no view of the host or your\n")
	w("workspace. You see only one canonical JSON line: `{\"status\":\"ok\",\"result\":<value>}` or `{\"status\":\"error\"}`.\n")
	w("Every failure looks the same, on purpose: you never see the transcript, the tool calls or why it failed.\n\n")
	w("**Provider disclosure.** The loop sends repository content (file listings, excerpts and search hits that\n")
	w("the model chooses) to the configured model provider. The budget bounds what *you* learn, not what the\n")
	w("provider sees. Prefer `bounded-query` whenever a deterministic script can answer the question.\n\n")
	w("## Available repositories\n\n")
	skillRepos(w, repos, "never launches an enclave")
	w("\nThese budgets are the bounded-agent subsystem's own: its ledger is separate from bounded queries', so\n")
	w("spending here never consumes a query's balance, nor the other way round.\n\n")
	w("## Invoking\n\n")
	w("```sh\nbounded-agent --repo OWNER/REPO --schema '<finite schema JSON>' <<'TASK'\n<your question>\nTASK\n```\n\n")
	w("- `--repo` and `--schema` are required, exactly once each, in any order. No other option, no `--flag=value`\n")
	w("  form and no positional argument is accepted: you cannot choose a model, provider, tool, runtime, limit or\n")
	w("  endpoint.\n")
	w("- The schema is at most %d bytes. The task arrives on stdin (not a terminal), is UTF-8 and at most %d bytes.\n", proto.MaxSchemaBytes, o.MaxTaskBytes)
	w("- The command always prints exactly one JSON line and exits 0.\n\n")
	w("## Response schema\n\n")
	w("The same finite schema language as `bounded-query`:\n\n")
	skillSchemaTable(w)
	w("There are no free strings: a bounded agent cannot return source code, text or anything variable-length.\n\n")
	w("## Task contract\n\n")
	w("- Ask one narrow question whose answer is a member of the schema. The model reads the repository with its\n")
	w("  tools and must finish with a value that conforms; anything else is the error line.\n")
	w("- One invocation has %d s of wall-clock time.\n\n", o.TimeoutSeconds)
	w("Worked example: which subsystem owns retry policy? (4 values, charge 6 bits)\n\n")
	w("```sh\nbounded-agent --repo %s --schema '{\"type\":\"enum\",\"values\":[\"net\",\"store\",\"api\",\"none\"]}' <<'TASK'\n", exampleRepo(repos))
	w("Which subsystem owns the retry policy for outbound HTTP calls: net, store, api, or none?\nTASK\n```\n\n")
	w("## Budget\n\n")
	w("Each accepted invocation is charged before the enclave starts, and never refunded:\n\n")
	skillCharge(w)
	skillRunCap(w, "invocation", o.MaxInvocations)
	return b.String()
}
