package verify

import (
	"io"
	"strings"

	"github.com/awf-project/awf/isolate/sbx"
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
	// Controls is, for a cell whose query runtime is BLOCKED by missing
	// controls (sbx), the seed's structured list: one object per control
	// with control, required, supported and evidence.
	Controls []sbx.ControlStatus `json:"controls,omitempty"`
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
	inSeedOrder(SeedQueries(), func(p, q, origin string) {
		if c, ok := m.Cell(p, q); ok {
			s.Cells = append(s.Cells, SeedCell{Primary: p, Query: q, Origin: origin,
				State: strings.ToUpper(c.State), Condition: seedCondition(p, q), Reason: c.Reason, Controls: c.Controls})
		}
	})
	return s
}

// Cell returns the cell for primary/query, or false.
func (s *SeedMatrix) Cell(primary, query string) (SeedCell, bool) {
	return findCell(s.Cells, func(c SeedCell) bool { return c.Primary == primary && c.Query == query })
}

func (s *SeedMatrix) table() seedTable {
	return newSeedTable("query", "awf's own cells", s.Primaries, s.Queries, s.Cells)
}

// Unmet lists every required PRIMARY/QUERY pair that is not SUPPORTED, as
// "docker/sbx: BLOCKED: reason", for the command's exit status.
func (s *SeedMatrix) Unmet(required []string) []string {
	return s.table().unmet(required, ParsePair, "")
}

// WriteText writes the seed's table ("Primary agent", one column per query
// runtime, each cell its state), the nine cells with the seed's condition
// and this host's reason, then awf's own cells, marked as such.
func (s *SeedMatrix) WriteText(w io.Writer) error { return s.table().writeText(w) }

// WriteJSON writes the seed matrix as JSON.
func (s *SeedMatrix) WriteJSON(w io.Writer) error { return writeJSON(w, s, "matrix: write") }
