#!/usr/bin/env bash
# make demo: an agent asks five bounded questions about a private repository it
# cannot read, through the real broker and sandbox, and the operator reads the
# protected audit log afterwards. Runs as root on Debian 12 after `make build`.
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
awf="$here/bin/awf"
bold=; dim=; off=
if [ -t 1 ]; then bold=$(tput bold 2>/dev/null || true); dim=$(tput dim 2>/dev/null || true); off=$(tput sgr0 2>/dev/null || true); fi
say() { printf '\n%s== %s ==%s\n' "$bold" "$*" "$off"; }

[ "$(id -u)" = 0 ] || { echo "demo: run as root (sudo make demo): awf builds sandboxes and namespaces" >&2; exit 1; }
[ -x "$awf" ] && [ -x "$here/bin/bounded-query" ] || { echo "demo: run make build first" >&2; exit 1; }

work=$(mktemp -d /tmp/awf-demo.XXXXXX)
chmod 755 "$work"
demo_user=awf-demo
created_user=
provider_pid=
cleanup() {
  if [ -n "$provider_pid" ]; then exec 9>&-; wait "$provider_pid" 2>/dev/null || true; fi
  rm -rf "$work"
  if [ -n "$created_user" ]; then userdel "$demo_user" 2>/dev/null || true; fi
}
trap cleanup EXIT

say "1. An example private repository (a local git clone stands in for GitHub)"
# The clone is private to root: its parent is 0700. (awf also covers every
# configured source in the agent's view, whatever its mode.)
private="$work/private"
mkdir -m 700 "$private"
repo="$private/example-service"
mkdir -p "$repo/src/service" "$repo/tests"
cd "$repo"
git init -q -b main
git -c user.email=dev@example.com -c user.name=dev commit -q --allow-empty -m "start"
cat > LICENSE <<'EOF'
                                 Apache License
                           Version 2.0, January 2004
EOF
printf '# example-service\nInternal billing service.\n' > README.md
printf 'Report vulnerabilities to security@example.com.\n' > SECURITY.md
printf '[project]\nname = "example-service"\nrequires-python = ">=3.11"\n' > pyproject.toml
for m in api billing db models; do printf 'def %s():\n    return 42\n' "$m" > "src/service/$m.py"; done
printf 'def test_api():\n    assert True\n' > tests/test_api.py
git add -A
git -c user.email=dev@example.com -c user.name=dev commit -q -m "service skeleton"
cd - >/dev/null
echo "created $repo ($(git -C "$repo" rev-list --count HEAD) commits, $(git -C "$repo" ls-files | wc -l) files; $(stat -c '%A %U' "$private") on its parent)"

say "2. The agent user and the configuration"
if ! id "$demo_user" >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$demo_user"
  created_user=1
fi
echo "the agent runs as '$demo_user' (uid $(id -u "$demo_user")): no capabilities, no view of the repository"
# The bounded agent's provider: a scripted fake (tests/demo/provider) on
# loopback, behind the real API proxy. It is not a model.
(cd "$here" && CGO_ENABLED=0 GOFLAGS= go build -o "$work/provider" ./tests/demo/provider)
mkfifo "$work/provider.in"
"$work/provider" "$work/provider-ca.pem" < "$work/provider.in" > "$work/provider.url" &
provider_pid=$!
exec 9> "$work/provider.in"
for _ in $(seq 50); do [ -s "$work/provider.url" ] && break; sleep 0.1; done
provider_url=$(cat "$work/provider.url")
[ -n "$provider_url" ] || { echo "demo: the fake provider did not start" >&2; exit 1; }
echo "bounded agents ask a SCRIPTED FAKE PROVIDER at $provider_url (not a model) through the real API proxy"
cfg="$work/awf.json"
cat > "$cfg" <<EOF
{
  "boundedQueries": {
    "enabled": true,
    "privateRepos": [
      { "repo": "example-org/example-service", "sensitivity": "internal", "source": "$repo" }
    ],
    "runtime": "direct",
    "timeout": 30,
    "maxInvocations": 16
  },
  "agent": { "user": "$demo_user" },
  "apiProxy": { "targets": { "openai": { "baseUrl": "$provider_url" } } },
  "boundedAgents": {
    "enabled": true,
    "privateRepos": [
      { "repo": "example-org/example-service", "sensitivity": "internal", "source": "$repo" }
    ],
    "runtime": "direct",
    "model": "gpt-4o-mini",
    "timeout": 30
  }
}
EOF
cat "$cfg"
"$awf" config validate "$cfg"

say "3. The agent's script: five bounded questions"
agent="$work/agent.sh"
cat > "$agent" <<'AGENT'
#!/bin/sh
# This runs as the agent. It cannot read the repository; it can only ask.
R=example-org/example-service
n=0
ask() { # question, schema; the Python script arrives on stdin
  n=$((n+1))
  t0=$(date +%s%N)
  answer=$(bounded-query --repo "$R" --schema "$2")
  t1=$(date +%s%N)
  printf '\nQ%d. %s\n    schema:  %s\n    answer:  %s   (after %d ms)\n' "$n" "$1" "$2" "$answer" $(( (t1-t0)/1000000 ))
}
echo "agent: my skill file is $AWF_BOUNDED_QUERY_SKILL; repositories: $AWF_BOUNDED_QUERY_REPOS"
peek() { # the agent tries to list a directory it must not read
  if out=$(ls -A "$1" 2>&1); then
    if [ -z "$out" ]; then echo "agent: cannot read $1: empty"; else echo "agent: I CAN READ $1: $out"; exit 1; fi
  else
    echo "agent: cannot read $1: ${out##*: }"
  fi
}
peek /var/lib/awf/private   # every run's seeds, seed map and audit log
peek "$DEMO_REPO"           # the configured local source

ask "Is there a SECURITY.md at the root? (boolean)" '{"type":"boolean"}' <<'EOF'
import json, os
json.dump(os.path.isfile('/query/repo/SECURITY.md'), open('/query/out', 'w'))
EOF

ask "Which license is it? (enum)" '{"type":"enum","values":["MIT","Apache-2.0","GPL-3.0","unknown"]}' <<'EOF'
import json
text = open('/query/repo/LICENSE').read()
lic = 'Apache-2.0' if 'Apache License' in text else 'MIT' if 'MIT License' in text else 'GPL-3.0' if 'GNU GENERAL' in text else 'unknown'
json.dump(lic, open('/query/out', 'w'))
EOF

ask "How many Python files are under src/? (integer 0..255)" '{"type":"integer","minimum":0,"maximum":255}' <<'EOF'
import json, os
n = sum(f.endswith('.py') for _, _, fs in os.walk('/query/repo/src') for f in fs)
json.dump(min(n, 255), open('/query/out', 'w'))
EOF

ask "Does it have tests, and does it require Python >= 3.10? (object)" '{"type":"object","fields":{"hasTests":{"type":"boolean"},"py310":{"type":"boolean"}}}' <<'EOF'
import json, os, re
has_tests = os.path.isdir('/query/repo/tests')
m = re.search(r'requires-python\s*=\s*">=\s*3\.(\d+)', open('/query/repo/pyproject.toml').read())
json.dump({'py310': bool(m and int(m.group(1)) >= 10), 'hasTests': has_tests}, open('/query/out', 'w'))
EOF

ask "Is there a Dockerfile? (this script crashes: the answer is the one error)" '{"type":"boolean"}' <<'EOF'
open('/query/repo/Dockerfile').read()   # no such file: the script fails
EOF

# A bounded agent: a fixed model loop reads the repository in an enclave
# whose only peer is the API proxy. Here the "model" is the demo's scripted
# fake provider, so the answer shows the path, not a judgment.
t0=$(date +%s%N)
answer=$(printf 'Does the README describe what the service does?' | bounded-agent --repo "$R" --schema '{"type":"boolean"}')
t1=$(date +%s%N)
printf '\nQ6. Does the README describe what the service does? (bounded agent; FAKE PROVIDER, not a model)\n    schema:  {"type":"boolean"}\n    answer:  %s   (after %d ms)\n' "$answer" $(( (t1-t0)/1000000 ))
AGENT
chmod 755 "$agent"
echo "$agent asks: a boolean, an enum, an integer, an object, one that errors, and one bounded-agent question"

say "4. awf run: preflight, staging, broker, agent, teardown"
cd /
# The key is a placeholder: the fake provider checks none. SSL_CERT_FILE
# makes the fake's CA the API proxy's only root.
DEMO_REPO="$repo" OPENAI_API_KEY=sk-demo-fake-provider SSL_CERT_FILE="$work/provider-ca.pem" \
  "$awf" run --config "$cfg" -- /bin/sh "$agent" 2>&1 | tee "$work/awf.out"
archive=$(sed -n 's/^awf: audit log kept in //p' "$work/awf.out" | tail -1)
[ -n "$archive" ] || { echo "demo: awf run kept no audit log" >&2; exit 1; }

say "5. What the operator sees: the protected audit log ($archive)"
"$awf" audit summary "$archive" --format text
echo
echo "${dim}Seeds, the private root, the socket and the sandboxes are gone; the audit log stays in $archive.${off}"
echo
echo "To ask a real model instead of the fake provider: drop apiProxy.targets.openai.baseUrl from the"
echo "configuration, export OPENAI_API_KEY with your key, and read the provider-disclosure section of"
echo "docs/bounded-agents.md first: the provider sees the repository content the loop reads."
