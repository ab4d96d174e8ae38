// Package runtimes opens a sandbox backend by its configuration name. It is
// the one place that knows every backend, so the broker and verify stay
// independent of them.
package runtimes

import (
	"fmt"
	"strings"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/docker"
	"github.com/awf-project/awf/isolate/gvisor"
	"github.com/awf-project/awf/isolate/sbx"
)

// Names returns the runtime names in the order verify reports them, a fresh
// slice each call.
func Names() []string { return []string{"direct", "gvisor", "docker", "sbx"} }

// Open returns the named runtime. It does not probe it; call Probe.
func Open(name string, h isolate.HostConfig) (isolate.Runtime, error) {
	switch name {
	case "direct":
		return direct.New(h)
	case "gvisor":
		return gvisor.New(h)
	case "docker":
		return docker.New(h)
	case "sbx":
		return sbx.New(h)
	default:
		return nil, fmt.Errorf("runtime %q: unknown (want %s)", name, strings.Join(Names(), ", "))
	}
}
