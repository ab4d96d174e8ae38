#!/usr/bin/env bash
# One bounded query through `awf run` on the cgroup v2 host: real staging,
# broker, CLI and direct sandbox. The VM is emulated, so its timers wake late
# and the timing buckets pad answers upward; one query keeps the step short.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=$(pwd)
work=$(mktemp -d /tmp/awf-cgroup2-e2e.XXXXXX)
chmod 755 "$work"
user=awf-cgroup2-e2e
cleanup() { rm -rf "$work"; userdel "$user" 2>/dev/null || true; }
trap cleanup EXIT

repo="$work/repo"
mkdir -p "$repo"
git -C "$repo" init -q -b main
printf 'Report vulnerabilities to security@example.com.\n' > "$repo/SECURITY.md"
git -C "$repo" add -A
git -C "$repo" -c user.email=e2e@example.com -c user.name=e2e commit -q -m init
id "$user" >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"

cat > "$work/awf.json" <<JSON
{
  "boundedQueries": {
    "enabled": true,
    "privateRepos": [{ "repo": "e2e/app", "sensitivity": "internal", "source": "$repo" }],
    "runtime": "direct",
    "timeout": 120
  },
  "agent": { "user": "$user" }
}
JSON
cat > "$work/agent.sh" <<'AGENT'
#!/bin/sh
printf 'import json, os\njson.dump(os.path.isfile("/query/repo/SECURITY.md"), open("/query/out", "w"))\n' |
  bounded-query --repo e2e/app --schema '{"type":"boolean"}'
AGENT
chmod 755 "$work/agent.sh"

cd /
# inside.sh copies bin into the guest's memory (AWF_CGROUP2_BIN); awf finds
# bounded-query beside itself.
got=$("${AWF_CGROUP2_BIN:-$here/bin}/awf" run --config "$work/awf.json" -- /bin/sh "$work/agent.sh")
echo "e2e: the agent got: $got"
[ "$got" = '{"status":"ok","result":true}' ] || { echo "e2e: want {\"status\":\"ok\",\"result\":true}"; exit 1; }
echo "e2e: awf run answered the bounded query on cgroup v2"
