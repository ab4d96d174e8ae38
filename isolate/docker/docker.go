// Package docker is the docker sandbox backend.
//
// STUB: the runtimes work replaces the bodies.
package docker

import (
	"errors"

	"github.com/awf-project/awf/isolate"
)

// New returns the docker runtime.
func New(h isolate.HostConfig) (isolate.Runtime, error) {
	return nil, errors.New("docker: not implemented yet")
}
