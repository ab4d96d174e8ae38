package verify

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/docker"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/isolate/sbx"
)

// Cell states of the runtime matrix.
const (
	// CellSupported means both runtimes are proven available on this host.
	CellSupported = "supported"
	// CellUnavailable means a runtime's host component is absent.
	CellUnavailable = "unavailable"
	// CellBlocked means a security preflight refuses the combination by
	// design, whatever is installed.
	CellBlocked = "blocked"
)

// AgentRuntimes returns where the primary agent can run: as a process on the
// host under awf run, or in a Docker, gVisor or sbx sandbox. It returns a
// fresh slice each call.
func AgentRuntimes() []string { return []string{"host", "docker", "gvisor", "sbx"} }

// MatrixVersion is the version of the JSON matrix format.
const MatrixVersion = 1

// Availability is one runtime's state with its reason.
type Availability struct {
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// Cell is one agent-runtime × query-runtime combination.
type Cell struct {
	Agent  string `json:"agent"`
	Query  string `json:"query"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	// Controls is, when the query runtime is BLOCKED by missing controls
	// (sbx), its capability probe in the seed's structured form.
	Controls []sbx.ControlStatus `json:"controls,omitempty"`
}

// Matrix is the availability of every combination on this host.
type Matrix struct {
	Version int                     `json:"version"`
	Agents  map[string]Availability `json:"agents"`
	Queries map[string]Availability `json:"queries"`
	Cells   []Cell                  `json:"cells"`
	// Seed is the same matrix in the seed's terms (seedmatrix.go), set by
	// the command before it writes the JSON.
	Seed *SeedMatrix `json:"seed,omitempty"`
	// Enclave is the primary-agent × bounded-agent enclave matrix
	// (enclavematrix.go), set by the command before it writes the JSON.
	Enclave *EnclaveMatrix `json:"enclave,omitempty"`
}

// MatrixOptions control BuildMatrix.
type MatrixOptions struct {
	// Host is the host configuration the query runtimes are probed with;
	// RunID and StateDir are filled in.
	Host isolate.HostConfig
	// Open opens a query runtime (nil = runtimes.Open).
	Open func(name string, h isolate.HostConfig) (isolate.Runtime, error)
	// Agent, when set, replaces the agent-runtime probe (for tests).
	Agent func(ctx context.Context, name string) Availability
}

// BuildMatrix probes every agent and query runtime once and evaluates all
// combinations independently. It never runs a job.
func BuildMatrix(ctx context.Context, o MatrixOptions) *Matrix {
	if o.Open == nil {
		o.Open = runtimes.Open
	}
	if o.Agent == nil {
		o.Agent = func(ctx context.Context, name string) Availability {
			return agentAvailability(ctx, name, o.Host.DockerSocket)
		}
	}
	m := &Matrix{Version: MatrixVersion, Agents: map[string]Availability{}, Queries: map[string]Availability{}}
	for _, a := range AgentRuntimes() {
		m.Agents[a] = o.Agent(ctx, a)
	}
	controls := map[string][]sbx.ControlStatus{}
	for _, q := range runtimes.Names() {
		m.Queries[q], controls[q] = queryAvailability(ctx, q, o)
	}
	for _, a := range AgentRuntimes() {
		for _, q := range runtimes.Names() {
			c := combine(a, q, m.Agents[a], m.Queries[q])
			if c.State == CellBlocked && m.Queries[q].State == CellBlocked {
				c.Controls = controls[q]
			}
			m.Cells = append(m.Cells, c)
		}
	}
	return m
}

// combine decides one cell. A blocked side blocks the cell; otherwise an
// unavailable side makes it unavailable. Nothing ever falls back.
func combine(agent, query string, a, q Availability) Cell {
	return combineSide(agent, query, "query", a, q)
}

// combineSide is combine with the second side named side ("query" or
// "enclave") in the reasons.
func combineSide(agent, query, side string, a, q Availability) Cell {
	c := Cell{Agent: agent, Query: query}
	switch {
	case q.State == CellBlocked:
		c.State, c.Reason = CellBlocked, side+" runtime "+query+": "+q.Reason
	case a.State == CellBlocked:
		c.State, c.Reason = CellBlocked, "agent runtime "+agent+": "+a.Reason
	case a.State == CellUnavailable:
		c.State, c.Reason = CellUnavailable, "agent runtime "+agent+": "+a.Reason
	case q.State == CellUnavailable:
		c.State, c.Reason = CellUnavailable, side+" runtime "+query+": "+q.Reason
	default:
		c.State, c.Reason = CellSupported, fmt.Sprintf("agent: %s; %s: %s", a.Reason, side, q.Reason)
	}
	return c
}

// queryAvailability opens and probes one query runtime in a scratch state
// directory. sbx is always blocked, with its controls in the seed's
// structured form.
func queryAvailability(ctx context.Context, name string, o MatrixOptions) (Availability, []sbx.ControlStatus) {
	tr := traitsFor(name)
	if len(tr.missing) > 0 {
		reason, cs := tr.blocking(ctx)
		return Availability{CellBlocked, reason}, cs
	}
	return withScratchRuntime(name, "awf-matrix-", o.Host, o.Open, func(rt isolate.Runtime) Availability {
		if err := ProbeRuntime(ctx, rt); err != nil {
			return Availability{CellUnavailable, err.Error()}
		}
		return Availability{CellSupported, "probe passed"}
	}), nil
}

// agentAvailability checks where a primary agent can run.
func agentAvailability(ctx context.Context, name, sock string) Availability {
	if sock == "" {
		sock = DefaultDockerSocket
	}
	switch name {
	case "host":
		return Availability{CellSupported, "a host process under awf run, reaching the broker through its Unix socket"}
	case "docker", "gvisor":
		info, err := docker.Info(ctx, sock)
		if err != nil {
			return Availability{CellUnavailable, fmt.Sprintf("no Docker Engine at %s: %v", sock, err)}
		}
		if name == "gvisor" && !slices.Contains(info.Runtimes, "runsc") {
			return Availability{CellUnavailable, fmt.Sprintf("runsc is not registered with Docker Engine %s", info.Version)}
		}
		return Availability{CellSupported, "Docker Engine " + info.Version}
	case "sbx":
		if _, err := exec.LookPath("sbx"); err != nil {
			return Availability{CellUnavailable, "the sbx CLI is not installed"}
		}
		return Availability{CellBlocked, "no proven ingress from an sbx microVM to the broker (Unix passthrough or authenticated loopback)"}
	}
	return Availability{CellUnavailable, "unknown agent runtime"}
}

// Cell returns the cell for agent/query, or false.
func (m *Matrix) Cell(agent, query string) (Cell, bool) {
	return findCell(m.Cells, func(c Cell) bool { return c.Agent == agent && c.Query == query })
}

// ParsePair splits "AGENT/QUERY" and checks both names.
func ParsePair(s string) (agent, query string, err error) {
	return parseCellPair(s, "AGENT", "QUERY")
}

// Unmet lists the required pairs whose cell is not supported, with reasons.
func (m *Matrix) Unmet(required []string) []string {
	var out []string
	for _, r := range required {
		a, q, err := ParsePair(r)
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		if c, _ := m.Cell(a, q); c.State != CellSupported {
			out = append(out, fmt.Sprintf("%s/%s is %s: %s", a, q, c.State, c.Reason))
		}
	}
	return out
}

// WriteJSON writes the versioned JSON matrix.
func (m *Matrix) WriteJSON(w io.Writer) error { return writeJSON(w, m, "matrix: write") }

// WriteText writes the grid, then one line per cell with its reason.
func (m *Matrix) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "AGENT \\ QUERY\t%s\n", strings.Join(runtimes.Names(), "\t"))
	for _, a := range AgentRuntimes() {
		row := []string{a}
		for _, q := range runtimes.Names() {
			c, _ := m.Cell(a, q)
			row = append(row, c.State)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "CELL\tSTATE\tREASON\n")
	for _, c := range m.Cells {
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\n", c.Agent, c.Query, c.State, oneLine(c.Reason))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("matrix: write: %w", err)
	}
	return nil
}
