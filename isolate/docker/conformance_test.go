package docker

import (
	"testing"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestConformance reads the description's controls from inside a
// container: the same job and expectations as every backend's.
func TestConformance(t *testing.T) {
	r := newTestRuntime(t)
	isolatetest.Conformance(t, Name, func(seed string) isolate.Template { return template(t, r, seed) }, func(tpl isolate.Template, script string) isolate.Outcome {
		return run(t, r, tpl, script)
	})
}
