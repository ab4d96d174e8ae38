package verify

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/runtimes"
)

// The seed's two tables, primary × query (seedmatrix.go) and primary ×
// enclave (enclavematrix.go), are one form with another second side: the
// seed's nine cells in its order, then awf's own, each with its state in
// capitals, the seed's condition and this host's reason. That form (the
// order of the cells, the text, the lines for an unmet requirement) is
// written here once; each table says only what its side is called.

// seedCell is one cell of either table, as the renderers read it.
type seedCell struct {
	primary, side, origin, state, condition, reason string
}

// seedCeller is a cell type of one of the seed's tables.
type seedCeller interface{ seedCell() seedCell }

func (c SeedCell) seedCell() seedCell {
	return seedCell{c.Primary, c.Query, c.Origin, c.State, c.Condition, c.Reason}
}

func (c EnclaveCell) seedCell() seedCell {
	return seedCell{c.Primary, c.Enclave, c.Origin, c.State, c.Condition, c.Reason}
}

// seedTable is one of the seed's tables for this host.
type seedTable struct {
	// side names the second side: "query" or "enclave".
	side string
	// primaries and sides are the seed's rows and columns, in its order.
	primaries, sides []string
	cells            []seedCell
	// proof, when set, is a line said before the seed's cells.
	proof string
	// own starts the heading of awf's own cells ("awf's own cells").
	own string
}

// newSeedTable is the table of cells.
func newSeedTable[C seedCeller](side, own string, primaries, sides []string, cells []C) seedTable {
	t := seedTable{side: side, own: own, primaries: primaries, sides: sides}
	for _, c := range cells {
		t.cells = append(t.cells, c.seedCell())
	}
	return t
}

// inSeedOrder calls add for the seed's nine cells (its primaries × sides,
// in its order), then for awf's own: every other primary-agent × runtime
// pair, in the runtime matrix's order.
func inSeedOrder(sides []string, add func(primary, side, origin string)) {
	for _, p := range SeedPrimaries() {
		for _, s := range sides {
			add(p, s, OriginSeed)
		}
	}
	for _, p := range AgentRuntimes() {
		for _, s := range runtimes.Names() {
			if !slices.Contains(SeedPrimaries(), p) || !slices.Contains(sides, s) {
				add(p, s, OriginAWF)
			}
		}
	}
}

// findCell returns the first of cells that match accepts, or false.
func findCell[C any](cells []C, match func(C) bool) (C, bool) {
	for _, c := range cells {
		if match(c) {
			return c, true
		}
	}
	var zero C
	return zero, false
}

// parseCellPair splits "FIRST/SECOND" and checks both names: the first is
// an agent runtime, the second a query or enclave runtime.
func parseCellPair(s, first, second string) (string, string, error) {
	a, b, ok := strings.Cut(s, "/")
	if !ok || !slices.Contains(AgentRuntimes(), a) || !slices.Contains(runtimes.Names(), b) {
		return "", "", fmt.Errorf("%q: want %s/%s with %s in %v and %s in %v", s, first, second, first, AgentRuntimes(), second, runtimes.Names())
	}
	return a, b, nil
}

// unmet lists every required pair that is not SUPPORTED, as
// "prefix docker/sbx: BLOCKED: reason", for the command's exit status.
func (t seedTable) unmet(required []string, parse func(string) (string, string, error), prefix string) []string {
	var out []string
	for _, r := range required {
		p, s, err := parse(r)
		if err != nil {
			out = append(out, prefix+err.Error())
			continue
		}
		c, _ := findCell(t.cells, func(c seedCell) bool { return c.primary == p && c.side == s })
		if c.state != "SUPPORTED" {
			// The whole reason, on one line: the exit status's evidence is
			// never shortened.
			out = append(out, fmt.Sprintf("%s%s/%s: %s: %s", prefix, p, s, c.state, strings.Join(strings.Fields(c.reason), " ")))
		}
	}
	return out
}

// seedTitle is a runtime's name as the seed's tables print it.
func seedTitle(n string) string {
	switch n {
	case "docker":
		return "Docker"
	case "gvisor":
		return "gVisor"
	}
	return n
}

// writeText writes the seed's grid ("Primary agent", one column per
// runtime of the second side, each cell its state), the seed's cells with
// the seed's condition and this host's reason, then awf's own cells,
// marked as such.
func (t seedTable) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"Primary agent"}
	for _, s := range t.sides {
		head = append(head, seedTitle(s)+" "+t.side)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, p := range t.primaries {
		row := []string{seedTitle(p)}
		for _, s := range t.sides {
			c, _ := findCell(t.cells, func(c seedCell) bool { return c.primary == p && c.side == s })
			row = append(row, c.state)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	pair := "PRIMARY/" + strings.ToUpper(t.side)
	cells := func(origin string) {
		for _, c := range t.cells {
			if c.origin == origin {
				fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\n", c.primary, c.side, c.state, c.condition, oneLine(c.reason))
			}
		}
	}
	fmt.Fprintln(tw)
	if t.proof != "" {
		fmt.Fprintln(tw, t.proof)
	}
	fmt.Fprintln(tw, pair+"\tSTATE\tSEED CONDITION\tTHIS HOST")
	cells(OriginSeed)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "%s (not in the seed: the host primary agent, the direct %s runtime)\n", t.own, t.side)
	fmt.Fprintln(tw, pair+"\tSTATE\tCONDITION\tTHIS HOST")
	cells(OriginAWF)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("matrix: write: %w", err)
	}
	return nil
}

// withScratchRuntime opens runtime name on a fresh state directory of its
// own, under a run id of its own, and judges it with judge; the directory
// is removed afterwards, and it can never be a broker's. A runtime that
// cannot be opened is unavailable with the reason.
func withScratchRuntime(name, prefix string, host isolate.HostConfig, open func(string, isolate.HostConfig) (isolate.Runtime, error),
	judge func(isolate.Runtime) Availability) Availability {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return Availability{CellUnavailable, fmt.Sprintf("state directory: %v", err)}
	}
	defer os.RemoveAll(dir)
	h := host
	h.RunID = "matrix-" + randHex(8)
	h.StateDir = dir
	rt, err := open(name, h)
	if err != nil {
		return Availability{CellUnavailable, err.Error()}
	}
	defer rt.Close()
	return judge(rt)
}
