package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// The seed's primary-agent × query-runtime matrix is 3 × 3: Docker, gVisor
// and sbx on both sides. awf adds a primary agent of its own (a host process
// under awf run, "host") and a query runtime of its own (libcontainer,
// "direct"); those cells are reported after the seed's and marked as awf's,
// so that the seed's table is never read as including them.

// SeedPrimaries returns the seed's primary-agent runtimes, in its order.
func SeedPrimaries() []string { return []string{"docker", "gvisor", "sbx"} }

// SeedQueries returns the seed's query runtimes, in its order.
func SeedQueries() []string { return []string{"docker", "gvisor", "sbx"} }

// Origins of a seed-matrix cell.
const (
	OriginSeed = "seed" // one of the seed's nine cells
	OriginAWF  = "awf"  // awf's own host primary or direct query
)

// SeedCell is one cell in the seed's terms: its state in capitals, as the
// seed's report prints it, the seed's condition for it to be supported, and
// this host's reason.
type SeedCell struct {
	Primary   string `json:"primary"`
	Query     string `json:"query"`
	Origin    string `json:"origin"`
	State     string `json:"state"` // SUPPORTED, UNAVAILABLE, BLOCKED
	Condition string `json:"condition"`
	Reason    string `json:"reason"`
}

// SeedMatrix is the seed's table for this host, then awf's own cells.
type SeedMatrix struct {
	Version   int        `json:"version"`
	Primaries []string   `json:"primaries"`
	Queries   []string   `json:"queries"`
	Cells     []SeedCell `json:"cells"`
}

// seedCondition is the seed's "Supported when …" text of a cell, or awf's
// for its own cells. awf's gvisor query runs runsc directly (not through
// Docker), so where the seed says "runsc is registered" awf needs runsc on
// the host; the reason says which was checked.
func seedCondition(primary, query string) string {
	switch {
	case query == "sbx":
		return "Blocked by mandatory sbx query probes"
	case primary == "docker" && query == "docker":
		return "Supported when Docker is available"
	case primary == "gvisor" && query == "docker":
		return "Supported when the primary runsc runtime is available"
	case primary == "sbx" && query == "docker":
		return "Supported when primary sbx and broker ingress probes pass"
	case primary == "sbx" && query == "gvisor":
		return "Supported when primary sbx, ingress, and runsc probes pass"
	case query == "gvisor" && primary != "host":
		return "Supported when runsc is registered"
	case primary == "host" && query == "direct":
		return "awf: supported when awf run can start the agent and libcontainer's probe passes"
	case primary == "host":
		return "awf: supported when awf run can start the agent and the " + query + " query probe passes"
	case query == "direct":
		return "awf: supported when the " + primary + " primary is and libcontainer's probe passes"
	}
	return ""
}

// InSeedTerms returns the matrix in the seed's terms.
func (m *Matrix) InSeedTerms() *SeedMatrix {
	s := &SeedMatrix{Version: MatrixVersion, Primaries: SeedPrimaries(), Queries: SeedQueries()}
	add := func(c Cell, origin string) {
		s.Cells = append(s.Cells, SeedCell{Primary: c.Agent, Query: c.Query, Origin: origin,
			State: strings.ToUpper(c.State), Condition: seedCondition(c.Agent, c.Query), Reason: c.Reason})
	}
	for _, p := range SeedPrimaries() {
		for _, q := range SeedQueries() {
			if c, ok := m.Cell(p, q); ok {
				add(c, OriginSeed)
			}
		}
	}
	for _, c := range m.Cells {
		if !slices.Contains(SeedPrimaries(), c.Agent) || !slices.Contains(SeedQueries(), c.Query) {
			add(c, OriginAWF)
		}
	}
	return s
}

// Cell returns the cell for primary/query, or false.
func (s *SeedMatrix) Cell(primary, query string) (SeedCell, bool) {
	for _, c := range s.Cells {
		if c.Primary == primary && c.Query == query {
			return c, true
		}
	}
	return SeedCell{}, false
}

// Unmet lists every required PRIMARY/QUERY pair that is not SUPPORTED, as
// "docker/sbx: BLOCKED: reason", for the command's exit status.
func (s *SeedMatrix) Unmet(required []string) []string {
	var out []string
	for _, r := range required {
		p, q, err := ParsePair(r)
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		if c, _ := s.Cell(p, q); c.State != "SUPPORTED" {
			out = append(out, fmt.Sprintf("%s/%s: %s: %s", p, q, c.State, strings.Join(strings.Fields(c.Reason), " ")))
		}
	}
	return out
}

// WriteText writes the seed's table ("Primary agent", one column per query
// runtime, each cell its state), the nine cells with the seed's condition
// and this host's reason, then awf's own cells, marked as such.
func (s *SeedMatrix) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	title := func(n string) string {
		switch n {
		case "docker":
			return "Docker"
		case "gvisor":
			return "gVisor"
		}
		return n
	}
	head := []string{"Primary agent"}
	for _, q := range s.Queries {
		head = append(head, title(q)+" query")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, p := range s.Primaries {
		row := []string{title(p)}
		for _, q := range s.Queries {
			c, _ := s.Cell(p, q)
			row = append(row, c.State)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "PRIMARY/QUERY\tSTATE\tSEED CONDITION\tTHIS HOST")
	for _, c := range s.Cells {
		if c.Origin == OriginSeed {
			fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\n", c.Primary, c.Query, c.State, c.Condition, oneLine(c.Reason))
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "awf's own cells (not in the seed: the host primary agent, the direct query runtime)")
	fmt.Fprintln(tw, "PRIMARY/QUERY\tSTATE\tCONDITION\tTHIS HOST")
	for _, c := range s.Cells {
		if c.Origin == OriginAWF {
			fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\n", c.Primary, c.Query, c.State, c.Condition, oneLine(c.Reason))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("matrix: write: %w", err)
	}
	return nil
}

// WriteJSON writes the seed matrix as JSON.
func (s *SeedMatrix) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("matrix: write: %w", err)
	}
	return nil
}
