package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/awf-project/awf/broker/apiproxy"
	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/isolate"
)

// apiProxyKeys reads the apiProxy block's keys once, before awf scrubs its
// environment, and returns them with the variable names to scrub. Without
// the block it returns nothing.
func apiProxyKeys(cfg *config.Config) (map[apiproxy.Protocol]string, []string, error) {
	if cfg.APIProxy == nil {
		return nil, nil, nil
	}
	if !cfg.BoundedQueries.Enabled {
		// Its audit log lives in the run's protected audit directory, which
		// only a run with bounded queries has.
		return nil, nil, fmt.Errorf("apiProxy needs boundedQueries.enabled: true")
	}
	keys, err := apiproxy.ReadKeys(cfg.APIProxy, os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	return keys, apiproxy.KeyVariables(cfg.APIProxy), nil
}

// startAPIProxy starts the run's API proxy when apiProxy is configured and
// gives the agent its capability: it returns the agent's environment with
// the SDK variables set, and sets the shim's hand-off when the agent has no
// network of its own. With no block it returns env unchanged and a nil
// process. control is the proxy's end of the bounded agents' control
// channel (nil without them), enclave their limits; it is closed here.
func startAPIProxy(ctx context.Context, exe string, c *config.APIProxy, r *host.Run, keys map[apiproxy.Protocol]string,
	shim *host.ShimArgs, env []string, control *os.File, enclave *apiproxy.Limits, logw io.Writer) (*apiproxy.Process, []string, error) {
	if control != nil {
		defer control.Close()
	}
	if c == nil {
		return nil, env, nil
	}
	spec := apiproxy.SpecFor(c, filepath.Join(r.Layout.AuditDir, apiproxy.AuditFile))
	u, err := apiproxy.ProxyUser(ctx, apiproxy.Others{AgentUID: r.Agent.UID,
		SandboxUID: isolate.SandboxUID, SandboxGID: isolate.SandboxGID})
	if err != nil {
		return nil, env, err
	}
	spec.User = &u
	if control != nil {
		if enclave == nil {
			return nil, env, errors.New("api proxy: bounded agents without their limits")
		}
		spec.Control, spec.Enclave = true, enclave
	}
	var proxyEnd *os.File
	if shim.Network == host.NetworkNone && spec.Agent != nil {
		// The agent's namespace has only loopback: the shim listens there
		// and hands the listener to the proxy (host.NewAPIProxyHandoff).
		p, s, err := host.NewAPIProxyHandoff()
		if err != nil {
			return nil, env, err
		}
		defer p.Close()
		proxyEnd, shim.APIProxyHandoff, spec.Handoff = p, s, true
	}
	specPath := filepath.Join(r.Layout.PrivateRoot, "api-proxy.json")
	if err := apiproxy.WriteSpec(specPath, spec); err != nil {
		return nil, env, err
	}
	px, err := apiproxy.StartWithControl(ctx, exe, specPath, keys, proxyEnd, control, logw)
	if err != nil {
		return nil, env, err
	}
	if spec.Agent == nil {
		fmt.Fprintf(logw, "awf: api proxy on %s (no target names a model: the agent gets no capability)\n", px.Addr)
		return px, env, nil
	}
	if shim.APIProxyHandoff != nil {
		_, port, _ := net.SplitHostPort(px.Addr)
		n, err := strconv.Atoi(port)
		if err != nil {
			px.Stop()
			return nil, env, fmt.Errorf("api proxy: address %q", px.Addr)
		}
		shim.APIProxyPort = n
	}
	var protos []apiproxy.Protocol
	for p := range spec.Agent.Models {
		protos = append(protos, p)
	}
	fmt.Fprintf(logw, "awf: api proxy on %s; the agent's SDK variables point at it\n", px.Addr)
	return px, host.APIProxyEnv(env, px.Addr, px.AgentToken, protos), nil
}

// stopAPIProxy stops the proxy before teardown archives its log.
func stopAPIProxy(px *apiproxy.Process, logw io.Writer) {
	if px == nil {
		return
	}
	if err := px.Stop(); err != nil {
		fmt.Fprintf(logw, "awf run: %v\n", err)
	}
}
