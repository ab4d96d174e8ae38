package direct_test

import (
	"testing"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestConformance reads the description's controls from inside a direct
// sandbox: the same job and expectations as every backend's.
func TestConformance(t *testing.T) {
	e := newEnv(t)
	isolatetest.Behaviour(t, direct.Name, e.template(t, seedRepo(t)), func(tpl isolate.Template, script string) isolate.Outcome {
		return e.run(t, tpl, script)
	})
}

// TestOutputCapturedAndCapped is the output capture every backend keeps
// alike (the other backends run it in their isolatetest.Suite).
func TestOutputCapturedAndCapped(t *testing.T) {
	e := newEnv(t)
	isolatetest.OutputCapturedAndCapped(t, e.template(t, ""), func(tpl isolate.Template, script string) isolate.Outcome {
		return e.run(t, tpl, script)
	})
}

// TestHostDiskUnseen: no free count a direct script can read moves while
// the host writes to its disk (the other backends run it in their Suite).
func TestHostDiskUnseen(t *testing.T) {
	e := newEnv(t)
	isolatetest.HostDiskUnseen(t, e.rt, e.template(t, seedRepo(t)), nil, false)
}
