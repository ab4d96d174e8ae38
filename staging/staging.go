// Package staging is the trusted host phase: it clones or imports each
// configured repository, scrubs it, makes it read-only, verifies it, and
// records its commit. It also provides the safe descriptor-relative copier.
//
// STUB: the API below is the contract; the staging work replaces the bodies.
package staging

import (
	"context"
	"errors"
	"io"
)

var errStub = errors.New("staging: not implemented yet")

// Repo is one configured private repository. Only the operator chooses these.
type Repo struct {
	Slug        string // owner/name
	Sensitivity string // public, internal, confidential, sealed
	Source      string // "" (GitHub), an https URL, or a local path
	Ref         string // "" (default branch), a branch, tag or commit
}

// Options control Stage.
type Options struct {
	PrivateRoot string    // 0700 directory owned by root; seeds go in PrivateRoot/seeds
	RunID       string    // 32 hex
	Token       string    // staging credential ("" = none)
	ServerURL   string    // "" = https://github.com
	Progress    io.Writer // one line per repository; nil = discard
}

// Seed is one staged, scrubbed, read-only repository.
type Seed struct {
	Repo        string // lower-cased slug
	SeedID      string // HMAC of the slug under the run id, 32 hex
	Dir         string // absolute path of the read-only seed
	Commit      string // resolved commit
	Sensitivity string
}

// Stage stages every repo and writes the seed map. On failure nothing is left.
func Stage(ctx context.Context, o Options, repos []Repo) ([]Seed, error) { return nil, errStub }

// Release restores write bits and removes every seed under privateRoot.
func Release(ctx context.Context, privateRoot string) error { return errStub }

// CopyLimits bound the safe copier.
type CopyLimits struct {
	MaxBytes int64
	MaxFiles int64
	MaxDepth int
}

// CopyTree copies src into the fresh directory dst without following any link out.
func CopyTree(ctx context.Context, src, dst string, l CopyLimits) error { return errStub }
