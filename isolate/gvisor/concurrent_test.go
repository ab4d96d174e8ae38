package gvisor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/awf-project/awf/isolate"
)

// TestConcurrentSandboxesAreIndependent runs sandboxes side by side: each
// gets its own answer and nothing is left behind.
func TestConcurrentSandboxesAreIndependent(t *testing.T) {
	r := newTestRuntime(t)
	const n = 3
	var wg sync.WaitGroup
	outs := make([]isolate.Outcome, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			script := fmt.Sprintf("import os\nassert os.listdir('/query') == ['repo']\nopen('/query/out', 'w').write('%d')\n", i)
			outs[i] = r.Run(ctx, isolate.Spec{Template: template(t, r, ""), Job: isolate.Job{InvocationID: fmt.Sprintf("c%d", i), Script: []byte(script)}})
		}()
	}
	wg.Wait()
	for i, o := range outs {
		if assert.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr) {
			assert.Equal(t, fmt.Sprint(i), string(o.Output))
		}
	}
}
