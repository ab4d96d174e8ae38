package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fakeprovider"
)

// The real keys are random per test binary, so that no file (not even a
// copy of this source) holds them unless awf leaked them.
var (
	e2eOpenAIKey    = "sk-e2e-" + randomHex(16)
	e2eAnthropicKey = "sk-ant-e2e-" + randomHex(16)
)

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// apiProxyConfig writes a config with bounded queries, the given agent
// network and an apiProxy block whose two targets are the fake provider.
func apiProxyConfig(t *testing.T, fake *fakeprovider.Server, network string) string {
	t.Helper()
	doc := map[string]any{
		"boundedQueries": bq{Enabled: true, PrivateRepos: []repo{local("acme/api", "internal")},
			RootFS: sharedRootFS()},
		// Allowing the key variables changes nothing: with apiProxy they
		// are scrubbed whatever agent.env.allow says.
		"agent": map[string]any{"user": agentUser, "network": network,
			"env": map[string]any{"allow": []string{"OPENAI_API_KEY", "E2E_ANTHROPIC_KEY"}}},
		"apiProxy": map[string]any{
			"targets": map[string]any{
				"openai":    map[string]any{"baseUrl": fake.URL(), "model": "gpt-4o-mini"},
				"anthropic": map[string]any{"baseUrl": fake.URL(), "model": "claude-sonnet-4-5", "apiKeyEnv": "E2E_ANTHROPIC_KEY"},
			},
			"maxModelRequests": 3,
			"maxModelTokens":   256,
		},
	}
	return writeDoc(t, doc)
}

// apiProxyAgent is the agent: it uses only the SDK-style variables it was
// given, as an unmodified SDK would, and looks for the real keys everywhere
// it can read. The script spells each key in two halves, so that the
// script file itself does not hold it.
func apiProxyAgent(t *testing.T) string {
	half := func(s string) string { return fmt.Sprintf("'%s''%s'", s[:len(s)/2], s[len(s)/2:]) }
	return agentScript(t, `
K1=`+half(e2eOpenAIKey)+`
K2=`+half(e2eAnthropicKey)+`
echo "OPENAI_BASE_URL $OPENAI_BASE_URL"
echo "ANTHROPIC_BASE_URL $ANTHROPIC_BASE_URL"
case "$OPENAI_API_KEY" in awf-cap-*) echo "OPENAI_KEY capability";; *) echo "OPENAI_KEY other";; esac
[ "$OPENAI_API_KEY" = "$ANTHROPIC_API_KEY" ] && echo "SAME_CAP yes"
echo "ENV_HITS $(env | grep -c -F -e "$K1" -e "$K2")"
echo "KEYVAR ${E2E_ANTHROPIC_KEY:-unset}"
# /proc is copied before grep starts: grep's own argv holds the keys.
P=$(mktemp)
cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' >"$P"
echo "PROC_HITS $(grep -c -F -e "$K1" -e "$K2" "$P")"
rm -f "$P"
echo "FILE_HITS $(grep -r -l -s -F -e "$K1" -e "$K2" /tmp /run /var/tmp /var/lib/awf /var/log/awf /etc "$HOME" 2>/dev/null | wc -l)"
echo "PRIVATE $(ls /var/lib/awf/private 2>/dev/null | wc -l)"
o=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' \
  -d '{"model":"gpt-4o-mini","max_completion_tokens":64,"messages":[{"role":"user","content":"hi"}]}' "$OPENAI_BASE_URL/chat/completions")
echo "OPENAI_STATUS $o"
a=$(curl -s -w ' %{http_code}' -H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' -H 'Content-Type: application/json' \
  -d '{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}' "$ANTHROPIC_BASE_URL/v1/messages")
echo "ANTHROPIC_STATUS ${a##* }"
case "$a" in *tool_use*) echo "ANTHROPIC_BODY reply";; *) echo "ANTHROPIC_BODY other";; esac
w=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer awf-cap-0000" -H 'Content-Type: application/json' \
  -d '{"model":"gpt-4o-mini","max_completion_tokens":64,"messages":[]}' "$OPENAI_BASE_URL/chat/completions")
echo "WRONG_CAP_STATUS $w"
m=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' \
  -d '{"model":"gpt-5-pro","max_completion_tokens":64,"messages":[]}' "$OPENAI_BASE_URL/chat/completions")
echo "OTHER_MODEL_STATUS $m"
x=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' \
  -d '{"model":"gpt-4o-mini","max_completion_tokens":64,"messages":[]}' "$OPENAI_BASE_URL/chat/completions")
echo "THIRD_STATUS $x"
y=$(curl -s -w ' %{http_code}' -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' \
  -d '{"model":"gpt-4o-mini","max_completion_tokens":64,"messages":[]}' "$OPENAI_BASE_URL/chat/completions")
echo "FOURTH_STATUS ${y##* }"
case "$y" in *max_model_requests_exceeded*) echo "FOURTH_TYPE exhausted";; *) echo "FOURTH_TYPE other";; esac
`)
}

// apiProxyRecords reads the archived api-proxy.jsonl named in awf's stderr.
func apiProxyRecords(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	raw := archivedLog(t, stderr, "api-proxy.jsonl")
	for _, k := range []string{e2eOpenAIKey, e2eAnthropicKey, "awf-cap-", `"hi"`} {
		assert.NotContains(t, string(raw), k, "the proxy log holds metadata only")
	}
	return jsonLines(t, raw)
}

func TestAPIProxyPrimaryAgent(t *testing.T) {
	for _, network := range []string{"host", "none"} {
		t.Run("network "+network, func(t *testing.T) {
			fake := fakeprovider.New(t,
				fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "list_files", Args: map[string]any{"path": "."}},
				fakeprovider.Turn{Kind: fakeprovider.Finish},
				fakeprovider.Turn{Kind: fakeprovider.Prose})
			ca := filepath.Join(t.TempDir(), "fake-ca.pem")
			require.NoError(t, os.WriteFile(ca, fake.CertPEM(), 0o644))
			proxyUIDs := watchProxyUIDs(t)
			res := awfRun(t, apiProxyConfig(t, fake, network), apiProxyAgent(t),
				"OPENAI_API_KEY="+e2eOpenAIKey, "E2E_ANTHROPIC_KEY="+e2eAnthropicKey,
				// The system roots, as Go reads them: the fake's CA only.
				"SSL_CERT_FILE="+ca)
			require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
			got := lines(res.stdout)
			assert.Regexp(t, `^http://127\.0\.0\.1:[0-9]+/v1$`, got["OPENAI_BASE_URL"])
			assert.Regexp(t, `^http://127\.0\.0\.1:[0-9]+$`, got["ANTHROPIC_BASE_URL"])
			assert.Equal(t, "capability", got["OPENAI_KEY"])
			assert.Equal(t, "yes", got["SAME_CAP"], "one capability for the primary agent")
			assert.Equal(t, "0", got["ENV_HITS"], "a real key is in the agent's environment")
			assert.Equal(t, "unset", got["KEYVAR"], "the key variable is removed")
			assert.Equal(t, "0", got["PROC_HITS"], "a real key is visible in the agent's /proc")
			assert.Equal(t, "0", got["FILE_HITS"], "a real key is in a file the agent can read")
			assert.Equal(t, "0", got["PRIVATE"], "the agent sees the private roots (and the proxy log)")
			proxyUser, err := user.Lookup("awf-proxy") // docs/api-proxy.md
			require.NoError(t, err, "awf makes the proxy's user")
			seen := proxyUIDs()
			require.NotEmpty(t, seen, "no api proxy process was seen")
			for pid, uids := range seen {
				assert.Equal(t, strings.Repeat(proxyUser.Uid+" ", 4), uids, "proxy %d serves as root, not as its own user", pid)
			}
			assert.Equal(t, "200", got["OPENAI_STATUS"])
			assert.Equal(t, "200", got["ANTHROPIC_STATUS"])
			assert.Equal(t, "reply", got["ANTHROPIC_BODY"])
			assert.Equal(t, "401", got["WRONG_CAP_STATUS"])
			assert.Equal(t, "403", got["OTHER_MODEL_STATUS"])
			assert.Equal(t, "200", got["THIRD_STATUS"])
			assert.Equal(t, "403", got["FOURTH_STATUS"], "maxModelRequests 3 is spent")
			assert.Equal(t, "exhausted", got["FOURTH_TYPE"])
			assert.NotContains(t, res.stderr, e2eOpenAIKey)
			assert.NotContains(t, res.stderr, e2eAnthropicKey)

			reqs := fake.Requests()
			require.Len(t, reqs, 3, "exactly the three allowed requests reached the provider")
			assert.Equal(t, "/v1/chat/completions", reqs[0].Path)
			assert.Equal(t, "Bearer "+e2eOpenAIKey, reqs[0].Header.Get("Authorization"))
			assert.Equal(t, "/v1/messages", reqs[1].Path)
			assert.Equal(t, e2eAnthropicKey, reqs[1].Header.Get("X-Api-Key"))
			assert.Equal(t, "2023-06-01", reqs[1].Header.Get("Anthropic-Version"))
			for _, r := range reqs {
				for k, vs := range r.Header {
					for _, v := range vs {
						assert.NotContains(t, v, "awf-cap-", "the capability reached the provider in %s", k)
					}
				}
			}
			assert.Positive(t, fake.Conns())

			recs := apiProxyRecords(t, res.stderr)
			var outcomes []string
			for _, r := range recs {
				outcomes = append(outcomes, fmt.Sprintf("%v/%v/%v", r["caller"], r["outcome"], r["status"]))
			}
			assert.Equal(t, []string{
				"agent/forwarded/200", "agent/forwarded/200",
				"unauthenticated/capability_invalid/401", "agent/model_not_allowed/403",
				"agent/forwarded/200", "agent/max_model_requests_exceeded/403",
			}, outcomes)
			assert.EqualValues(t, 11, recs[0]["inputTokens"], "usage from the response")
			assert.EqualValues(t, 5, recs[1]["outputTokens"])
			assertRunRemoved(t, res.stderr)
		})
	}
}

func TestAPIProxyRefusesWithoutKey(t *testing.T) {
	fake := fakeprovider.New(t)
	res := awfRun(t, apiProxyConfig(t, fake, "host"), agentScript(t, "echo RAN yes\n"), "OPENAI_API_KEY="+e2eOpenAIKey)
	assert.Equal(t, 125, res.code)
	assert.Contains(t, res.stderr, "$E2E_ANTHROPIC_KEY is empty or unset")
	// It stops before anything is staged or started.
	assert.NotContains(t, res.stderr, "broker ready")
	assert.NotContains(t, res.stderr, "audit log kept in")
	assert.NotContains(t, res.stdout, "RAN")
	assert.Zero(t, fake.Count())
}

// assertRunRemoved checks that the run whose archive awf reported has no
// private root and no ingress directory left. It names this run only, so
// other awf runs on the same host cannot disturb it.
func assertRunRemoved(t *testing.T, stderr string) {
	t.Helper()
	const marker = "audit log kept in /var/log/awf/"
	i := strings.LastIndex(stderr, marker)
	require.GreaterOrEqual(t, i, 0, "no audit archive in:\n%s", stderr)
	id := strings.TrimSpace(strings.SplitN(stderr[i+len(marker):], "\n", 2)[0])
	require.Regexp(t, `^[0-9a-f]{32}$`, id)
	for _, d := range []string{"/var/lib/awf/private/" + id, "/run/awf-ingress/" + id} {
		_, err := os.Stat(d)
		assert.True(t, os.IsNotExist(err), "run directory left behind: %s", d)
	}
}

// watchProxyUIDs polls the host's /proc, until the test ends, for api proxy
// processes (awf's "run --api-proxy" child). What it returns gives, for each
// one seen, the real, effective, saved and filesystem uids of its last
// sighting: after the proxy has served, they are the ones it served as.
func watchProxyUIDs(t *testing.T) func() map[int]string {
	t.Helper()
	var mu sync.Mutex
	seen := map[int]string{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, pid := range hostProcesses("\x00run\x00--api-proxy\x00") {
				st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
				if err != nil {
					continue
				}
				for _, line := range strings.Split(string(st), "\n") {
					if v, ok := strings.CutPrefix(line, "Uid:"); ok {
						mu.Lock()
						seen[pid] = strings.Join(strings.Fields(v), " ") + " "
						mu.Unlock()
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return func() map[int]string {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}
