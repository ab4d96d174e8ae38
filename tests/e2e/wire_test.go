package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/proto"
)

const (
	okTrue    = `{"status":"ok","result":true}`
	secScript = "import json, os\nwith open('/query/out', 'w') as f:\n    json.dump(os.path.isfile('/query/repo/SECURITY.md'), f)\n"
)

// TestReferenceWrapperRequests drives the broker with requests built byte for
// byte as the reference's wrapper builds them, and with the reference
// wrapper's own curl command line when curl is installed.
func TestReferenceWrapperRequests(t *testing.T) {
	cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/app", "internal")}, MaxInvocations: 20})
	b := startForeground(t, cfg)

	assert.Equal(t, okTrue, body(t, exchange(t, b.socket, wrapperRequest("demo/app", `{"type":"boolean"}`, secScript))))
	obj := `{"type":"object","fields":{"license":{"type":"enum","values":["MIT","Apache-2.0","other"]},"py":{"type":"integer","minimum":0,"maximum":15}}}`
	script := "import os, json\nlic = open('/query/repo/LICENSE').read().split()[0]\npy = len([f for f in os.listdir('/query/repo/src') if f.endswith('.py')])\njson.dump({'py': py, 'license': lic}, open('/query/out', 'w'), indent=2)\n"
	assert.Equal(t, `{"status":"ok","result":{"license":"MIT","py":2}}`, body(t, exchange(t, b.socket, wrapperRequest("demo/app", obj, script))))
	assert.Equal(t, errLine, body(t, exchange(t, b.socket, wrapperRequest("demo/nope", `{"type":"boolean"}`, secScript))))

	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Log("curl is not installed: the byte-exact requests above stand for the wrapper")
		return
	}
	// The reference wrapper's transport, verbatim in its options.
	wrapper := `#!/bin/sh
b64=$(printf '%s' "$2" | base64 | tr -d '\n' | tr '+/' '-_' | tr -d '=')
curl --silent --show-error --noproxy '*' --max-time 660 --unix-socket "$AWF_BOUNDED_QUERY_SOCKET" \
  -H 'X-AWF-Query-Version: 2' -H "X-AWF-Repo: $1" -H "X-AWF-Schema-B64: $b64" \
  -H 'Content-Type: application/octet-stream' -H 'Expect:' --data-binary @- http://localhost/query
`
	wp := filepath.Join(t.TempDir(), "wrapper.sh")
	require.NoError(t, os.WriteFile(wp, []byte(wrapper), 0o755))
	run := func(repo, schema, stdin string) string {
		cmd := exec.Command("/bin/sh", wp, repo, schema)
		cmd.Env = []string{"PATH=" + filepath.Dir(curl) + ":/usr/bin:/bin", proto.QuerySocketEnv + "=" + b.socket}
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		require.NoError(t, err)
		return string(out)
	}
	assert.Equal(t, okTrue, run("demo/app", `{"type":"boolean"}`, secScript))
	assert.Equal(t, errLine, run("demo/app", `{"type":"boolean"}`, "raise SystemExit(1)\n"))
	assert.Equal(t, errLine, run("demo/app", `{"type":"enum","values":[1,"a"]}`, secScript))
}

// TestEightConcurrentClients sends eight requests at once through the real
// CLI; the serialized lane answers each one correctly.
func TestEightConcurrentClients(t *testing.T) {
	cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/pub", "public")}, MaxInvocations: 20})
	script := agentScript(t, `
i=1
while [ $i -le 8 ]; do
  ( printf 'open("/query/out","w").write("%d")\n' $i | bounded-query --repo demo/pub --schema '{"type":"integer","minimum":0,"maximum":9}' > /tmp/cc.$$.$i ) &
  i=$((i+1))
done
wait
i=1
while [ $i -le 8 ]; do echo "C$i $(cat /tmp/cc.$$.$i)"; rm -f /tmp/cc.$$.$i; i=$((i+1)); done
`)
	r := awfRun(t, cfg, script)
	require.Equal(t, 0, r.code, r.stderr)
	got := lines(r.stdout)
	for i := 1; i <= 8; i++ {
		assert.Equal(t, fmt.Sprintf(`{"status":"ok","result":%d}`, i), got["C"+strconv.Itoa(i)], "client %d", i)
	}
}

// TestRawConcurrentRequests does the same over raw sockets against the
// foreground broker.
func TestRawConcurrentRequests(t *testing.T) {
	cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/pub", "public")}, MaxInvocations: 20})
	b := startForeground(t, cfg)
	var wg sync.WaitGroup
	out := make([]string, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			out[i] = exchange(t, b.socket, wrapperRequest("demo/pub", `{"type":"integer","minimum":0,"maximum":9}`, fmt.Sprintf("open('/query/out','w').write('%d')", i)))
		}(i)
	}
	wg.Wait()
	for i, o := range out {
		assert.Equal(t, fmt.Sprintf(`{"status":"ok","result":%d}`, i), body(t, o))
	}
}
