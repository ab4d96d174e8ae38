package broker

import (
	"github.com/awf-project/awf/proto"
)

// ProbeSkill renders the sealed_probe SKILL.md: the configured repositories,
// the CLI and its rules, the script contract, the four symbols and the
// invocation cap. It is guidance for the agent, not a security boundary:
// the broker enforces every rule it states.
func ProbeSkill(repos []string, timeoutSeconds, maxInvocations int) string {
	b, w := newSkill("sealed_probe", "Sealed probe",
		"Ask a three-way question about a private repository you cannot read, by running a short Python script against a sealed copy of it. Use only when the answer is one of three outcomes you name.")
	w("`sealed-probe` runs a short Python 3 script you write against a fresh, private, writable copy of one\n")
	w("repository, in a sandbox with no network, no credentials and no view of the host or your workspace.\n")
	w("You name exactly three outcomes; you see exactly one line: `{\"result\":\"<one of them>\"}` or\n")
	w("`{\"result\":\"ERROR\"}`. Every failure is the same `ERROR`, on purpose: you cannot learn why.\n\n")
	w("## Available repositories\n\n")
	for _, r := range repos {
		w("- `%s`\n", r)
	}
	w("\n## Invoking\n\n")
	w("```sh\nsealed-probe --repo OWNER/REPO --outcome YES --outcome NO --outcome UNKNOWN < probe.py\n```\n\n")
	w("- `--repo` exactly once and `--outcome` exactly three times, in any order. No other option, no\n")
	w("  `--flag=value` form and no positional argument is accepted.\n")
	w("- Outcomes are distinct, non-empty, at most %d UTF-8 bytes, without control characters or a leading or\n", proto.MaxOutcomeBytes)
	w("  trailing space, and never `ERROR` (reserved for failures). Choose three that cover every answer,\n")
	w("  for instance YES, NO and UNKNOWN.\n")
	w("- The script arrives on stdin (not a terminal), is UTF-8 and at most %d bytes.\n", proto.MaxProbeScriptBytes)
	w("- The command always prints exactly one JSON line and exits 0.\n\n")
	w("## Script contract\n\n")
	w("- Python 3 standard library only. The repository is at `/probe/repo`; you may read and modify your\n")
	w("  copy (changes are discarded afterwards).\n")
	w("- Write exactly one JSON object `{\"result\": \"<outcome>\"}` to `/probe/out` (at most %d bytes).\n", proto.MaxProbeResultBytes)
	w("- stdout, stderr, the exit status and every other file are discarded. The script runs as an\n")
	w("  unprivileged user, with a %d s time limit.\n", timeoutSeconds)
	w("- Anything else gives `ERROR`: a missing or oversized file, malformed JSON, duplicate keys, extra\n")
	w("  fields, trailing content, a value that is not one of your outcomes, a non-zero exit, a timeout.\n")
	w("  Writing `ERROR` yourself is the same as failing.\n\n")
	w("```python\nimport json\nfrom pathlib import Path\n\nrepo = Path(\"/probe/repo\")\n")
	w("answer = \"YES\" if (repo / \"SECURITY.md\").is_file() else \"NO\"\n")
	w("Path(\"/probe/out\").write_text(json.dumps({\"result\": answer}))\n```\n\n")
	w("## Budget\n\n")
	w("At most %d probes per run are answered (every request counts, even rejected ones); after that every\n", maxInvocations)
	w("probe is `ERROR` and nothing runs. Each answer is one of four symbols, at most two bits. Responses\n")
	w("arrive only at fixed times after the probe starts: %s.\n", skillBuckets())
	return b.String()
}
