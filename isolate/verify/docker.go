package verify

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/awf-project/awf/proto"
)

// DefaultDockerSocket is where the Docker Engine listens unless configured otherwise.
const DefaultDockerSocket = "/var/run/docker.sock"

// engineSocketCandidates lists the container-engine sockets a CI host may expose.
func engineSocketCandidates(configured string, environ []string) []string {
	var c []string
	for _, p := range proto.ContainerEngineSockets() {
		if m, _ := filepath.Glob(p); strings.ContainsRune(p, '*') {
			c = append(c, m...)
		} else {
			c = append(c, p)
		}
	}
	if configured != "" {
		c = append(c, configured)
	}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "DOCKER_HOST=unix://"); ok && v != "" {
			c = append(c, v)
		}
	}
	slices.Sort(c)
	return slices.Compact(c)
}

// checkEngineSockets warns about every engine socket that accepts a
// connection: whoever can open one controls the host as root.
func checkEngineSockets(ctx context.Context, candidates []string) Result {
	const id = "hazard/docker-sock"
	var open []string
	for _, p := range candidates {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "unix", p)
		if err == nil {
			c.Close()
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		return hostResult(id, Pass, "no container-engine socket accepts connections (checked %d paths)", len(candidates))
	}
	return hostResult(id, Warn, "reachable container-engine socket: %s; any process that can open it, including an agent, is root on this host; the sandbox must not see it (probe net/engine-sockets)", strings.Join(open, " "))
}
