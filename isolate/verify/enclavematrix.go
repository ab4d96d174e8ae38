package verify

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/docker"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/isolate/runtimes"
)

// The seed's primary-agent × bounded-agent enclave matrix is 3 × 3 as well:
// the primary on Docker, gVisor or sbx, the enclave on Docker, gVisor or
// sbx. The two are separate sandbox decisions with separate proofs, so each
// enclave runtime is proven once and every cell combines that proof with
// the primary's (the same agent proofs as the query matrix); no cell starts
// an enclave of its own. awf's own cells (the host primary, the direct
// enclave) follow the seed's, marked as awf's.

// SeedEnclaves returns the seed's enclave runtimes, in its order.
func SeedEnclaves() []string { return []string{"docker", "gvisor", "sbx"} }

// EnclaveCell is one primary × enclave cell in the seed's terms.
type EnclaveCell struct {
	Primary   string `json:"primary"`
	Enclave   string `json:"enclave"`
	Origin    string `json:"origin"`
	State     string `json:"state"` // SUPPORTED, UNAVAILABLE, BLOCKED
	Condition string `json:"condition"`
	Reason    string `json:"reason"`
}

// EnclaveMatrix is the seed's enclave table for this host, then awf's own
// cells, with the one proof of each enclave runtime they were built from.
type EnclaveMatrix struct {
	Version   int      `json:"version"`
	Primaries []string `json:"primaries"`
	Enclaves  []string `json:"enclaves"`
	// Proof says how the enclave runtimes were proven: "preflight" (what
	// bounded agents' preflight proves) or "network" (also the enclave
	// network probes, once per runtime, in a real enclave).
	Proof string `json:"proof"`
	// Runtimes is each enclave runtime's availability.
	Runtimes map[string]Availability `json:"runtimes"`
	Cells    []EnclaveCell           `json:"cells"`
}

// EnclaveMatrixOptions control BuildEnclaveMatrix.
type EnclaveMatrixOptions struct {
	// Host is the host configuration the runtimes are opened with.
	Host isolate.HostConfig
	// Open opens a runtime (nil = runtimes.Open).
	Open func(name string, h isolate.HostConfig) (isolate.Runtime, error)
	// Network, when set, also runs the enclave network probes of awf
	// isolate verify --enclave (RunEnclave) once, in one real enclave per
	// runtime whose preflight passed; Runtimes and Open are filled in.
	Network *EnclaveOptions
	// RunNetwork replaces RunEnclave (tests).
	RunNetwork func(ctx context.Context, o EnclaveOptions) (*EnclaveReport, error)
}

// enclaveRenderer is what bounded agents' preflight requires of the
// enclave runtime besides its probe (broker/host.probeEnclaveRuntime): that
// it renders the enclave's read-only layout and its network.
type enclaveRenderer interface {
	RunEnclave(ctx context.Context, t isolate.Template, l enclave.Layout, job isolate.Job) (isolate.Outcome, []byte)
}

// SbxEnclaveMissingControls are the controls an sbx enclave would need and
// the audited sbx CLI lacks: an enforced network whose one peer is the API
// proxy (an advisory HTTP_PROXY is not one), then every query control sbx
// lacks besides "no network", which an enclave replaces by that one peer.
func SbxEnclaveMissingControls() []string {
	out := []string{"an enforced API-proxy-only network (one peer; not an advisory HTTP_PROXY)"}
	for _, c := range SbxMissingControls() {
		if c != "no network" {
			out = append(out, c)
		}
	}
	return out
}

// BuildEnclaveMatrix proves each enclave runtime once and evaluates every
// primary × enclave combination independently against m's agent proofs.
// queries are m's query-runtime probes: an enclave runtime's own probe is
// the same Probe, so it is not run twice.
func (m *Matrix) BuildEnclaveMatrix(ctx context.Context, o EnclaveMatrixOptions) *EnclaveMatrix {
	if o.Open == nil {
		o.Open = runtimes.Open
	}
	em := &EnclaveMatrix{Version: MatrixVersion, Primaries: SeedPrimaries(), Enclaves: SeedEnclaves(),
		Proof: "preflight", Runtimes: map[string]Availability{}}
	var passed []string
	for _, name := range runtimes.Names() {
		a := enclavePreflight(name, m.Queries[name], o)
		em.Runtimes[name] = a
		if a.State == CellSupported {
			passed = append(passed, name)
		}
	}
	if o.Network != nil {
		em.Proof = "network"
		for name, a := range enclaveNetwork(ctx, passed, o) {
			em.Runtimes[name] = a
		}
	}
	inSeedOrder(SeedEnclaves(), func(p, e, origin string) {
		c := combineSide(p, e, "enclave", m.Agents[p], em.Runtimes[e])
		em.Cells = append(em.Cells, EnclaveCell{Primary: p, Enclave: e, Origin: origin,
			State: strings.ToUpper(c.State), Condition: enclaveCondition(p, e), Reason: c.Reason})
	})
	return em
}

// enclavePreflight is what bounded agents' preflight proves of one enclave
// runtime, with probe the runtime's Probe result from the query matrix:
// sbx and docker are BLOCKED whatever is installed (the missing controls),
// the others need their probe and must render enclaves.
func enclavePreflight(name string, probe Availability, o EnclaveMatrixOptions) Availability {
	switch name {
	case "sbx":
		return Availability{CellBlocked, "mandatory sbx enclave probes: missing controls: " + strings.Join(SbxEnclaveMissingControls(), ", ")}
	case "docker":
		return Availability{CellBlocked, "missing control: " + docker.EnclaveMissingControl}
	}
	if probe.State != CellSupported {
		return probe
	}
	return withScratchRuntime(name, "awf-matrix-enclave-", o.Host, o.Open, func(rt isolate.Runtime) Availability {
		if _, ok := rt.(enclaveRenderer); !ok {
			return Availability{CellBlocked, "missing control: the runtime does not render the enclave's read-only layout and network"}
		}
		return Availability{CellSupported, "preflight: probe passed and the runtime renders enclaves (network not exercised)"}
	})
}

// enclaveNetwork runs the enclave network probes once for all of names and
// returns each runtime's availability from its verdict. Only PASS is
// SUPPORTED: a FAIL is fail-closed, BLOCKED with its failing checks.
func enclaveNetwork(ctx context.Context, names []string, o EnclaveMatrixOptions) map[string]Availability {
	out := map[string]Availability{}
	if len(names) == 0 {
		return out
	}
	run := o.RunNetwork
	if run == nil {
		run = RunEnclave
	}
	eo := *o.Network
	eo.Runtimes, eo.Required = names, nil
	if eo.Open == nil {
		eo.Open = o.Open
	}
	rep, err := run(ctx, eo)
	if err != nil {
		for _, n := range names {
			out[n] = Availability{CellUnavailable, "enclave network check: " + err.Error()}
		}
		return out
	}
	for _, n := range names {
		out[n] = Availability{CellUnavailable, "enclave network check: no verdict"}
	}
	for _, rr := range rep.Runtimes {
		if !slices.Contains(names, rr.Name) {
			continue
		}
		switch rr.Status {
		case Pass:
			out[rr.Name] = Availability{CellSupported, fmt.Sprintf("enclave network probes passed in a real enclave (%d checks)", len(rr.Results))}
		case Blocked:
			out[rr.Name] = Availability{CellBlocked, "enclave network check: " + rr.Reason}
		default:
			var bad []string
			for _, r := range rr.Results {
				if r.Status != Pass {
					bad = append(bad, fmt.Sprintf("%s %s: %s", r.Status, r.ID, r.Evidence))
				}
			}
			out[rr.Name] = Availability{CellBlocked, fmt.Sprintf("enclave network check %s: %s", rr.Status, strings.Join(bad, "; "))}
		}
	}
	return out
}

// enclaveCondition is the seed's "Supported when …" text of an enclave
// cell, or awf's for its own. awf's gvisor enclave runs runsc directly, so
// where the seed says "runsc is registered" awf needs runsc on the host.
func enclaveCondition(primary, enc string) string {
	switch {
	case enc == "sbx" && primary == "host":
		return "awf: blocked by mandatory sbx enclave probes, whatever the primary"
	case enc == "sbx":
		return "Blocked by mandatory sbx enclave probes"
	case primary == "docker" && enc == "docker":
		return "Supported when Docker is available"
	case primary == "gvisor" && enc == "docker":
		return "Supported when the primary `runsc` runtime is available"
	case primary == "sbx" && enc == "docker":
		return "Supported when primary sbx ingress (Unix passthrough or authenticated `sbx-http`) is proven"
	case primary == "sbx" && enc == "gvisor":
		return "Supported when primary sbx ingress and `runsc` are proven"
	case enc == "gvisor" && primary != "host":
		return "Supported when `runsc` is registered"
	case primary == "host" && enc == "direct":
		return "awf: supported when awf run can start the agent and bounded agents' preflight passes on direct"
	case primary == "host":
		return "awf: supported when awf run can start the agent and bounded agents' preflight passes on " + enc
	case enc == "direct":
		return "awf: supported when the " + primary + " primary is and bounded agents' preflight passes on direct"
	}
	return ""
}

// Cell returns the cell for primary/enclave, or false.
func (em *EnclaveMatrix) Cell(primary, enc string) (EnclaveCell, bool) {
	return findCell(em.Cells, func(c EnclaveCell) bool { return c.Primary == primary && c.Enclave == enc })
}

// ParseEnclavePair splits "PRIMARY/ENCLAVE" and checks both names.
func ParseEnclavePair(s string) (primary, enc string, err error) {
	return parseCellPair(s, "PRIMARY", "ENCLAVE")
}

func (em *EnclaveMatrix) table() seedTable {
	t := newSeedTable("enclave", "awf's own enclave cells", em.Primaries, em.Enclaves, em.Cells)
	t.proof = fmt.Sprintf("enclave runtimes proven once each (%s)", em.Proof)
	return t
}

// Unmet lists every required PRIMARY/ENCLAVE pair that is not SUPPORTED,
// as "enclave docker/docker: BLOCKED: reason".
func (em *EnclaveMatrix) Unmet(required []string) []string {
	return em.table().unmet(required, ParseEnclavePair, "enclave ")
}

// WriteText writes the seed's enclave table ("Primary agent", one column
// per enclave runtime), its nine cells with the seed's condition and this
// host's reason, then awf's own cells, marked as such.
func (em *EnclaveMatrix) WriteText(w io.Writer) error { return em.table().writeText(w) }

// WriteJSON writes the enclave matrix as JSON.
func (em *EnclaveMatrix) WriteJSON(w io.Writer) error { return writeJSON(w, em, "matrix: write") }
