// Package layering checks the README's statement of the import graph
// against the graph the go tool computes.
package layering

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/awf-project/awf"

// readLayers parses the README's layering block: lines "N prefix...", each
// prefix a package path relative to the module.
func readLayers(t *testing.T, readme string) map[string]int {
	t.Helper()
	f, err := os.Open(readme)
	require.NoError(t, err)
	defer f.Close()
	layers := map[string]int{}
	sc := bufio.NewScanner(f)
	state := 0 // 0 before the marker, 1 before the fence, 2 inside
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && strings.HasPrefix(line, "<!-- layering:"):
			state = 1
		case state == 1 && strings.HasPrefix(line, "```"):
			state = 2
		case state == 2 && strings.HasPrefix(line, "```"):
			require.NotEmpty(t, layers, "the README's layering block is empty")
			return layers
		case state == 2:
			fs := strings.Fields(line)
			require.GreaterOrEqual(t, len(fs), 2, "layering line %q", line)
			n, err := strconv.Atoi(fs[0])
			require.NoError(t, err, "layering line %q", line)
			for _, p := range fs[1:] {
				_, dup := layers[p]
				require.False(t, dup, "%s listed twice", p)
				layers[p] = n
			}
		}
	}
	require.NoError(t, sc.Err())
	t.Fatal("README.md has no layering block (<!-- layering: ... --> then a fenced block)")
	return nil
}

// layerOf returns the layer of pkg by its longest listed prefix.
func layerOf(layers map[string]int, pkg string) (int, bool) {
	best, layer := -1, 0
	for p, n := range layers {
		if (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > best {
			best, layer = len(p), n
		}
	}
	return layer, best >= 0
}

// TestREADMELayering fails on any package the README's layers do not
// place and on any import of a package in a higher layer. Test-only
// imports are checked too, except imports of the test fixtures under tests/
// (a fake provider, helpers), which any test may use.
func TestREADMELayering(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	layers := readLayers(t, filepath.Join(root, "README.md"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-f",
		`{{.ImportPath}} {{join .Imports " "}} | {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	edges := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fs := strings.Fields(line)
		from := strings.TrimPrefix(strings.TrimPrefix(fs[0], module), "/")
		lf, ok := layerOf(layers, from)
		if !assert.True(t, ok, "package %s is in no layer of the README", from) {
			continue
		}
		testImport := false
		for _, imp := range fs[1:] {
			if imp == "|" {
				testImport = true
				continue
			}
			to, ok := strings.CutPrefix(imp, module+"/")
			if !ok || testImport && strings.HasPrefix(to, "tests/") || to == from {
				continue
			}
			lt, ok := layerOf(layers, to)
			if !assert.True(t, ok, "package %s is in no layer of the README", to) {
				continue
			}
			edges++
			assert.LessOrEqual(t, lt, lf, "%s (layer %d) imports %s (layer %d): the README says imports go down", from, lf, to, lt)
		}
	}
	require.Greater(t, edges, 20, "the graph looks empty")
}
