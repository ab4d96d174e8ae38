// Package sbx is the sbx sandbox backend.
//
// STUB: the runtimes work replaces the bodies.
package sbx

import (
	"errors"

	"github.com/awf-project/awf/isolate"
)

// New returns the sbx runtime.
func New(h isolate.HostConfig) (isolate.Runtime, error) {
	return nil, errors.New("sbx: not implemented yet")
}
