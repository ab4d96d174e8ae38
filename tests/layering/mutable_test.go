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
// variable of slice or map type declared in src (by its type or by a
// composite literal value).
func exportedMutables(t *testing.T, path string, src any) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
	require.NoError(t, err)
	mutable := func(e ast.Expr) bool {
		for {
			switch x := e.(type) {
			case *ast.ArrayType:
				return x.Len == nil
			case *ast.MapType:
				return true
			case *ast.CompositeLit:
				e = x.Type
				if e == nil {
					return false
				}
			case *ast.ParenExpr:
				e = x.X
			default:
				return false
			}
		}
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
				if !n.IsExported() {
					continue
				}
				if (vs.Type != nil && mutable(vs.Type)) || (i < len(vs.Values) && mutable(vs.Values[i])) {
					out = append(out, path+": "+n.Name)
				}
			}
		}
	}
	return out
}

// TestNoExportedMutableSlices: a fact other packages read (an argv, a list
// of variables, a table) is a function returning a fresh copy, never an
// exported slice or map, which any importer could change for every other.
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
	assert.Empty(t, found, "exported package-level slices or maps; make each a function that returns a copy")
}

// TestExportedMutablesDetector: the detector sees each form a mutable
// exported variable takes, and passes the immutable ones.
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
)
const K = 1
func L() []string { return nil }
`
	assert.Equal(t, []string{"p.go: A", "p.go: B", "p.go: C", "p.go: E", "p.go: F"}, exportedMutables(t, "p.go", src))
}
