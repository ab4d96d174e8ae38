package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exportedMutables returns "file: Name" for each exported package-level
// variable declared in src that is not an error sentinel (a value made by
// errors.New or fmt.Errorf, which callers compare with errors.Is). Any
// other exported variable, a slice, a map, a struct, an address or a
// number, is state that any importer can change for every other.
func exportedMutables(t *testing.T, path string, src any) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
	require.NoError(t, err)
	sentinel := func(e ast.Expr) bool {
		c, ok := e.(*ast.CallExpr)
		if !ok {
			return false
		}
		sel, ok := c.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		return ok && (pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf")
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !n.IsExported() || n.Name == "_" {
					continue
				}
				if i < len(vs.Values) && len(vs.Values) == len(vs.Names) && sentinel(vs.Values[i]) {
					continue
				}
				out = append(out, path+": "+n.Name)
			}
		}
	}
	return out
}

// TestNoExportedMutableSlices: a fact other packages read (an argv, a list
// of variables, a table, the timing buckets, an address an eBPF pin allows)
// is a constant or a function returning a fresh copy, never an exported
// variable, which any importer could change for every other.
func TestNoExportedMutableSlices(t *testing.T) {
	var found []string
	files := 0
	for _, top := range []string{"cmd", "broker", "isolate", "rootfs", "staging", "policy", "proto"} {
		root := filepath.Join("..", "..", top)
		require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			files++
			found = append(found, exportedMutables(t, p, nil)...)
			return nil
		}))
	}
	require.Greater(t, files, 100, "the walk found too few product files to mean anything")
	assert.Empty(t, found, "exported package-level variables; make each a constant or a function that returns a copy")
}

// TestExportedMutablesDetector: the detector sees each form an exported
// variable takes, and passes error sentinels, constants, functions and
// unexported variables.
func TestExportedMutablesDetector(t *testing.T) {
	src := `package p
var A = []string{"x"}
var B map[string]int
var C, d = []int{1}, []int{2}
var (
	E = map[string]bool{}
	F []byte
	G = [2]int{1, 2}
	H = "s"
	i = []int{}
	M = other.Buckets()
	N = netip.MustParseAddr("169.254.0.1")
	ErrX = errors.New("x")
	ErrY = fmt.Errorf("y: %w", ErrX)
	ErrZ error
	_ = errors.New("blank")
)
var P, ErrQ = 1, errors.New("q")
const K = 1
func L() []string { return nil }
`
	assert.Equal(t, []string{"p.go: A", "p.go: B", "p.go: C", "p.go: E", "p.go: F", "p.go: G", "p.go: H", "p.go: M", "p.go: N", "p.go: ErrZ", "p.go: P"},
		exportedMutables(t, "p.go", src))
}
