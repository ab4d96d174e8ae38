package main

import (
	"context"
	"fmt"

	"github.com/awf-project/awf/broker/apiproxy"
)

// apiProxyFlag selects the hidden mode "awf run --api-proxy SPEC": the API
// proxy process that awf run starts when apiProxy is configured. It is not
// meant to be run by hand: its keys arrive on an inherited pipe.
const apiProxyFlag = "--api-proxy"

// apiProxyServe is the API proxy process.
func apiProxyServe(ctx context.Context, e env) int {
	if len(e.args) != 2 {
		fmt.Fprintf(e.stderr, "awf run: %s takes exactly one spec path\n", apiProxyFlag)
		return 2
	}
	spec, err := apiproxy.ReadSpec(e.args[1])
	if err != nil {
		fmt.Fprintf(e.stderr, "awf api-proxy: %v\n", err)
		return 1
	}
	if err := apiproxy.Serve(ctx, spec); err != nil {
		fmt.Fprintf(e.stderr, "awf api-proxy: %v\n", err)
		return 1
	}
	return 0
}
