// Package rootfs builds and verifies the minimal, read-only, digest-pinned
// Python 3 root filesystem that every sandbox runs on.
//
// STUB: the API below is the contract; the rootfs work replaces the bodies.
package rootfs

import (
	"context"
	"errors"
)

var errStub = errors.New("rootfs: not implemented yet")

// Options control Build.
type Options struct {
	Python string // host interpreter to copy ("" = /usr/bin/python3)
	Out    string // directory to create; must not exist or be empty
}

// Build creates a root filesystem and returns its digest ("sha256:<hex>").
func Build(ctx context.Context, o Options) (string, error) { return "", errStub }

// Verify recomputes dir's digest and, when want is not empty, compares it.
func Verify(ctx context.Context, dir, want string) (string, error) { return "", errStub }
