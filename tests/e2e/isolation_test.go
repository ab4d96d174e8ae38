package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgentIsolation checks, from inside the agent, that it cannot read the
// seeds, the private root, the audit log or the token, cannot see the
// broker's processes, holds no capability, and cannot reach the socket of
// another run (a second broker for the same agent user). From outside, it
// checks that the broker runs in its own empty network namespace.
func TestAgentIsolation(t *testing.T) {
	const token = "ghp_e2eSecretTokenValue0123456789"
	other := startForeground(t, writeConfig(t, bq{PrivateRepos: []repo{local("other/app", "public")}}))
	otherPID, _ := brokerPID(t, other.socket)

	// From outside: the broker has its own network namespace with only lo.
	hostNet, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	brokerNet, err := os.Readlink("/proc/" + strconv.Itoa(otherPID) + "/ns/net")
	require.NoError(t, err)
	assert.NotEqual(t, hostNet, brokerNet, "broker shares the host network namespace")
	routes, err := os.ReadFile("/proc/" + strconv.Itoa(otherPID) + "/net/route")
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(string(routes)), "\n")+1, "broker network namespace has routes:\n%s", routes)

	cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/app", "internal")}})
	script := agentScript(t, `
echo "uid $(id -u)"
echo "private [$(ls -A /var/lib/awf/private 2>&1)]"
echo "seedmap $(cat /var/lib/awf/private/*/seed-map.json 2>&1 | head -c 80)"
echo "archive $(ls /var/log/awf 2>&1 | head -c 80)"
echo "archive-read $(cat /var/log/awf/*/bounded-query.jsonl 2>/dev/null | wc -c)"
echo "token-env $(env | grep -c -e GH_TOKEN -e GITHUB_TOKEN -e ghp_e2e)"
# ghp_e2[e]: the pattern must not match grep's own argv, which /proc shows.
echo "token-proc $(cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -c 'ghp_e2[e]')"
echo "token-cmdline $(cat /proc/*/cmdline 2>/dev/null | tr '\0' '\n' | grep -c 'ghp_e2[e]')"
echo "broker-visible $(cat /proc/*/cmdline 2>/dev/null | tr '\0' ' ' | grep -c 'broker --ser[v]e')"
echo "procs $(ls -d /proc/[0-9]* | wc -l)"
echo "caps $(grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status | awk '{print $2}' | tr '\n' ' ')"
echo "nnp $(grep NoNewPrivs /proc/self/status | awk '{print $2}')"
echo "ingress [$(ls -A /run/awf-ingress)]"
echo "other-socket-exists $(test -e "$OTHER_SOCKET" && echo yes || echo no)"
echo 'open("/query/out","w").write("1")' > /tmp/iso.$$.py
echo "other-query $(AWF_BOUNDED_QUERY_SOCKET=$OTHER_SOCKET bounded-query --repo other/app --schema '{"type":"const","value":1}' < /tmp/iso.$$.py)"
echo "own-query $(bounded-query --repo demo/app --schema '{"type":"const","value":1}' < /tmp/iso.$$.py)"
echo "skill $(grep -c '^- .demo/app. — 64 bits/run' "$AWF_BOUNDED_QUERY_SKILL")"
echo "repos $AWF_BOUNDED_QUERY_REPOS"
echo "network $(cat /proc/net/dev | grep -c :)"
rm -f /tmp/iso.$$.py
`)
	r := awfRun(t, cfg, script, "GH_TOKEN="+token, "GITHUB_PERSONAL_ACCESS_TOKEN="+token, "OTHER_SOCKET="+other.socket)
	require.Equal(t, 0, r.code, r.stderr)
	got := lines(r.stdout)
	assert.NotEqual(t, "0", got["uid"])
	assert.Equal(t, "[]", got["private"])
	assert.Contains(t, got["seedmap"], "No such file")
	assert.Equal(t, "0", got["archive-read"], "audit archive readable")
	assert.Equal(t, "0", got["token-env"])
	assert.Equal(t, "0", got["token-proc"])
	assert.Equal(t, "0", got["token-cmdline"])
	assert.Equal(t, "0", got["broker-visible"])
	assert.Equal(t, "0000000000000000 0000000000000000 0000000000000000 0000000000000000", strings.TrimSpace(got["caps"]))
	assert.Equal(t, "1", got["nnp"])
	assert.NotContains(t, got["ingress"], other.socket[len("/run/awf-ingress/"):len("/run/awf-ingress/")+32])
	assert.Equal(t, "no", got["other-socket-exists"])
	assert.Equal(t, errLine, got["other-query"])
	assert.Equal(t, `{"status":"ok","result":1}`, got["own-query"])
	assert.Equal(t, "1", got["skill"])
	assert.Equal(t, "demo/app", got["repos"])
	assert.NotEqual(t, "1", got["network"], "the agent's network is untouched (host interfaces visible)")
	assert.NotContains(t, r.stdout+r.stderr, token)
	// The other run's broker never counted the attempt.
	other.stop(t)
	assert.Contains(t, other.stderr.String(), "0 requests", other.stderr.String())
}
