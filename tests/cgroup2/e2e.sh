#!/usr/bin/env bash
# One end-to-end `awf run` on the cgroup v2 host: the demo's five bounded
# questions through the real broker, CLI and direct sandbox. Four must be
# answered and the crashing one must be the canonical error.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp /tmp/awf-cgroup2-e2e.XXXXXX)
trap 'rm -f "$out"' EXIT
tests/demo/demo.sh >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || { echo "e2e: demo exited $rc"; exit 1; }
ok=$(grep -c 'answer:  {"status":"ok","result":' "$out")
err=$(grep -c 'answer:  {"status":"error"}' "$out")
[ "$ok" -eq 4 ] && [ "$err" -eq 1 ] || { echo "e2e: want 4 answers and 1 error, got $ok and $err"; exit 1; }
grep -q 'answer:  {"status":"ok","result":true}' "$out" || { echo "e2e: the boolean question got the wrong answer"; exit 1; }
echo "e2e: awf run answered 4 questions and gave 1 canonical error"
