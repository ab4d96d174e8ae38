// Package gvisor is the gvisor sandbox backend.
//
// STUB: the runtimes work replaces the bodies.
package gvisor

import (
	"errors"

	"github.com/awf-project/awf/isolate"
)

// New returns the gvisor runtime.
func New(h isolate.HostConfig) (isolate.Runtime, error) {
	return nil, errors.New("gvisor: not implemented yet")
}
