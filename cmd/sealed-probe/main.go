// Command sealed-probe is the agent's sealed-probe CLI (v1 of the original
// design): it sends one Python script, one repository and exactly three
// outcome labels to the probe broker and prints exactly one canonical line.
//
//	sealed-probe --repo OWNER/REPO --outcome A --outcome B --outcome C < probe.py
//
// It accepts nothing else: no executable, image, command, working
// directory, environment, URL, ref, path, mount, socket, runtime, timeout
// or credential. It always exits 0, never writes to stderr, and prints
// {"result":"ERROR"} for every failure, local or remote. The socket is
// $AWF_SEALED_PROBE_SOCKET, as the reference's client reads it.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/awf-project/awf/broker/client"
	"github.com/awf-project/awf/proto"
)

func main() { client.Main(proto.ProbeErrorBody, run) }

// args are the CLI's operands.
type args struct {
	repo     string
	outcomes []string
}

// parseArgs accepts exactly one --repo VALUE and three --outcome VALUE, in
// any order; everything else (other flags, --flag=value, --, short
// options, positionals, repeats) is refused. The values are checked by the
// broker's own rules, so what passes here passes there.
func parseArgs(argv []string) (args, error) {
	var a args
	haveRepo := false
	for i := 0; i < len(argv); i++ {
		switch argv[i] {
		case "--repo", "--outcome":
			if i+1 >= len(argv) {
				return args{}, fmt.Errorf("%s needs a value", argv[i])
			}
			if argv[i] == "--repo" {
				if haveRepo {
					return args{}, errors.New("--repo given twice")
				}
				a.repo, haveRepo = argv[i+1], true
			} else {
				a.outcomes = append(a.outcomes, argv[i+1])
			}
			i++
		default:
			return args{}, fmt.Errorf("unexpected argument %q", argv[i])
		}
	}
	if !haveRepo {
		return args{}, errors.New("--repo is required")
	}
	if err := proto.ValidateRepoSlug(a.repo); err != nil {
		return args{}, err
	}
	if err := proto.ValidateOutcomes(a.outcomes); err != nil {
		return args{}, err
	}
	return a, nil
}

func run(argv []string) string {
	a, err := parseArgs(argv)
	if err != nil {
		return proto.ProbeErrorBody
	}
	headers := [][2]string{{proto.HeaderProbeVersion, proto.ProbeProtocolVersion}, {proto.HeaderRepo, a.repo}}
	for i, name := range []string{proto.HeaderOutcome1, proto.HeaderOutcome2, proto.HeaderOutcome3} {
		headers = append(headers, [2]string{name, a.outcomes[i]})
	}
	resp, err := client.Send(os.Getenv(proto.ProbeSocketEnv), os.Stdin,
		client.Job{Route: proto.ProbeRoute, Headers: headers, MaxBody: proto.MaxProbeScriptBytes})
	if err != nil {
		return proto.ProbeErrorBody
	}
	// Only the canonical body of a declared outcome, or the error body, is
	// ever printed; anything else is a failure.
	for _, want := range proto.ProbeResultBodies(a.outcomes) {
		if string(resp) == want {
			return want
		}
	}
	return proto.ProbeErrorBody
}
