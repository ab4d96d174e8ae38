// Package direct is the default sandbox backend: it builds namespaces, cgroups,
// seccomp and mounts itself through runc's libcontainer, with no container engine.
//
// STUB: the direct-sandbox work replaces the bodies.
package direct

import (
	"errors"

	"github.com/awf-project/awf/isolate"
)

// InitIfRequested must be called from an init function of every binary that
// uses this package. When the process was started as libcontainer's container
// init it never returns.
func InitIfRequested() {}

// New returns the direct runtime.
func New(h isolate.HostConfig) (isolate.Runtime, error) {
	return nil, errors.New("direct: not implemented yet")
}
