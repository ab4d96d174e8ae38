package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fixture"
)

// TestWarmPoolAnswers runs queries through the real direct runtime with a
// warm pool of 2 per repository and without one: the answers are the same
// and correct, a query never sees what an earlier one wrote (each pooled
// sandbox is fresh), and the audit log records the pool's fill and close.
func TestWarmPoolAnswers(t *testing.T) {
	before := runDirs()
	script := agentScript(t, `
B='{"type":"boolean"}'
printf 'import os\nopen("/tmp/m","w").write("x")\nopen("/query/m","w").write("x")\nopen("/query/out","w").write("true" if os.path.isfile("/query/repo/SECURITY.md") else "false")\n' > /tmp/w.$$.py
printf 'import os\nopen("/query/out","w").write("true" if os.path.exists("/tmp/m") or os.path.exists("/query/m") else "false")\n' > /tmp/r.$$.py
printf 'import os\nopen("/query/out","w").write("true" if os.path.exists("/query/repo/NOPE") else "false")\n' > /tmp/n.$$.py
echo "Q1 $(bounded-query --repo demo/a --schema "$B" < /tmp/w.$$.py)"
echo "Q2 $(bounded-query --repo demo/a --schema "$B" < /tmp/r.$$.py)"
echo "Q3 $(bounded-query --repo demo/b --schema "$B" < /tmp/r.$$.py)"
echo "Q4 $(bounded-query --repo demo/a --schema "$B" < /tmp/n.$$.py)"
rm -f /tmp/w.$$.py /tmp/r.$$.py /tmp/n.$$.py
`)
	yes, no := `{"status":"ok","result":true}`, `{"status":"ok","result":false}`
	for _, c := range []struct {
		name string
		size int
	}{{"pool of 2", 2}, {"no pool", 0}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := fixture.WriteConfig(t, t.TempDir(), map[string]any{
				"enabled":      true,
				"privateRepos": []repo{local("demo/a", "public"), local("demo/b", "public")},
				"warmPool":     c.size,
				"rootfs":       map[string]any{"path": rootfsDir, "digest": rootfsHash},
			}, agentUser)
			r := awfRun(t, cfg, script)
			require.Equal(t, 0, r.code, r.stderr)
			got := lines(r.stdout)
			assert.Equal(t, map[string]string{"Q1": yes, "Q2": no, "Q3": no, "Q4": no}, got, r.stderr)

			events := map[string]string{}
			for _, rec := range auditRecords(t, r.stderr) {
				if ev, _ := rec["event"].(string); strings.HasPrefix(ev, "pool-") {
					events[ev], _ = rec["detail"].(string)
				}
				assert.NotEqual(t, "cleanup-failed", rec["reason"])
			}
			if c.size == 0 {
				assert.Empty(t, events, "no pool, no pool records")
				return
			}
			// The first fill runs after the broker is ready, one seed a
			// step, so a query may take a sandbox before the record is
			// written (idle below 4), or run cold for a seed no step has
			// reached yet.
			assert.Regexp(t, `^idle=[0-4] seeds=2 size=2 backend=direct$`, events["pool-filled"])
			assert.NotContains(t, events, "pool-fill-failed")
			assert.NotContains(t, events, "pool-close-failed")
			// The refill follows each answer on the lane that answer's job
			// held, so once a seed is filled its queries find a prepared
			// sandbox: every query is counted, none failed.
			m := regexp.MustCompile(`^warm=(\d+) cold=(\d+) prepared=\d+ failed=0 destroyed=\d+$`).FindStringSubmatch(events["pool-closed"])
			require.NotNil(t, m, events["pool-closed"])
			warm, _ := strconv.Atoi(m[1])
			cold, _ := strconv.Atoi(m[2])
			assert.Equal(t, 4, warm+cold, events["pool-closed"])
			assert.LessOrEqual(t, cold, 2, "only a query before its seed's first step runs cold: %s", events["pool-closed"])
		})
	}
	assertNoNewRunDirs(t, before)
}
