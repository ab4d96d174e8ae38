package direct

import (
	"fmt"
	"path/filepath"
)

// confineNetwork hands the job's first process to the template's network
// (isolate.Network.Confine) while init still waits on the exec fifo, so the
// per-process controls hold before the job runs anything. The namespace
// itself was joined when init was created (the description's path).
func (sb *sandbox) confineNetwork() error {
	n := sb.t.Network
	if n == nil || n.Confine == nil {
		return nil
	}
	dir := ""
	if sb.r.cg.v2() {
		dir = filepath.Join(cgroupRoot, sb.r.cg.parentRel, sb.id)
	}
	if err := n.Confine(sb.pid, dir); err != nil {
		return fmt.Errorf("confine network: %w", err)
	}
	return nil
}
