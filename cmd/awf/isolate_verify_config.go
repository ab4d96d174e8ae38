package main

import (
	"fmt"
	"io"
	"time"

	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/isolate"
)

// verifyConfig is what "awf isolate verify --config" takes from the
// operator's configuration: what awf run would run its queries with.
type verifyConfig struct {
	runtime      string
	limits       isolate.Limits
	rootfs       *config.RootFS
	dockerSocket string
	runsc        string
}

// loadVerifyConfig reads the configuration and derives the query sandbox's
// runtime, limits and host settings exactly as awf run and awf query do
// (isolate.DefaultLimits with boundedQueries.memoryLimit and
// timeoutSeconds). The policy is the embedded one: awf run has no other.
func loadVerifyConfig(path string, stdin io.Reader) (*verifyConfig, error) {
	cfg, err := config.LoadPath(path, stdin)
	if err != nil {
		return nil, err
	}
	bq := cfg.BoundedQueries
	l := isolate.DefaultLimits()
	l.MemoryBytes = bq.MemoryBytes
	l.Wall = time.Duration(bq.TimeoutSeconds) * time.Second
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &verifyConfig{runtime: bq.Runtime, limits: l, rootfs: bq.RootFS, dockerSocket: bq.DockerSocket, runsc: bq.RunscPath}, nil
}

// apply fills the flags the operator did not give from the configuration:
// the configured runtime (then required), its rootfs pin, runsc and the
// Docker socket. It returns the configured limits for the battery.
func (vc *verifyConfig) apply(rts *listFlag, rootDir, digest, runsc, dockerSock *string) *isolate.Limits {
	if len(*rts) == 0 {
		*rts = listFlag{vc.runtime}
	}
	if *rootDir == "" && vc.rootfs != nil {
		*rootDir, *digest = vc.rootfs.Path, vc.rootfs.Digest
	}
	if *runsc == "" {
		*runsc = vc.runsc
	}
	if *dockerSock == "" {
		*dockerSock = vc.dockerSocket
	}
	l := vc.limits
	return &l
}
