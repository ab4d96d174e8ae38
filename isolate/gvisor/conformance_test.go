package gvisor

import (
	"context"
	"testing"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestConformance reads the description's controls from inside a gVisor
// sandbox: the same job and expectations as every backend's.
func TestConformance(t *testing.T) {
	r := newTestRuntime(t)
	isolatetest.Conformance(t, Name, func(seed string) isolate.Template { return template(t, r, seed) }, func(tpl isolate.Template, script string) isolate.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return r.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "conformance", Script: []byte(script)}})
	})
}
