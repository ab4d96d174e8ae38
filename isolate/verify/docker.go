package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/awf-project/awf/proto"
)

// DefaultDockerSocket is where the Docker Engine listens unless configured otherwise.
const DefaultDockerSocket = "/var/run/docker.sock"

// engineInfo is the part of GET /info that verify reads.
type engineInfo struct {
	Version  string
	Runtimes []string
}

// dockerInfo asks the Engine on sock for its version and registered runtimes.
func dockerInfo(ctx context.Context, sock string) (engineInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
	get := func(path string, v any) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+path, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
		}
		return json.Unmarshal(body, v)
	}
	var ver struct{ Version string }
	if err := get("/version", &ver); err != nil {
		return engineInfo{}, err
	}
	var info struct{ Runtimes map[string]json.RawMessage }
	if err := get("/info", &info); err != nil {
		return engineInfo{}, err
	}
	out := engineInfo{Version: ver.Version}
	out.Runtimes = sortedKeys(info.Runtimes)
	return out, nil
}

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
