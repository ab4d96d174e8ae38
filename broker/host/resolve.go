package host

import (
	"context"
	"io"

	"github.com/awf-project/awf/broker/config"
)

// ResolveRootFS returns the root filesystem and digest a run of cfg uses:
// the configured one after verifying it, or awf's own under cache (""
// means DefaultRootFSCache), built and pinned on first use. awf query calls
// it so that its dry run runs on the very root awf run would.
func ResolveRootFS(ctx context.Context, pinned *config.RootFS, cache string, progress io.Writer) (dir, digest string, err error) {
	return resolveRootFS(ctx, pinned, cache, progress)
}
