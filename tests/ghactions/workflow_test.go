// Package ghactions tests the GitHub Actions example (docs/examples/github):
// the structure of the workflow and of the composite action, and, as root, the
// workflow's steps run as a script on this host.
package ghactions

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

// step is one step of a job or of a composite action.
type step struct {
	Name  string            `yaml:"name"`
	ID    string            `yaml:"id"`
	If    string            `yaml:"if"`
	Uses  string            `yaml:"uses"`
	Run   string            `yaml:"run"`
	Shell string            `yaml:"shell"`
	With  map[string]string `yaml:"with"`
	Env   map[string]string `yaml:"env"`
}

type job struct {
	RunsOn  string `yaml:"runs-on"`
	Timeout int    `yaml:"timeout-minutes"`
	Steps   []step `yaml:"steps"`
}

type workflow struct {
	Name        string            `yaml:"name"`
	On          map[string]any    `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Jobs        map[string]job    `yaml:"jobs"`
}

type actionInput struct {
	Description string `yaml:"description"`
	Required    bool   `yaml:"required"`
	Default     string `yaml:"default"`
}

type actionOutput struct {
	Description string `yaml:"description"`
	Value       string `yaml:"value"`
}

type action struct {
	Name        string                  `yaml:"name"`
	Description string                  `yaml:"description"`
	Inputs      map[string]actionInput  `yaml:"inputs"`
	Outputs     map[string]actionOutput `yaml:"outputs"`
	Runs        struct {
		Using string `yaml:"using"`
		Steps []step `yaml:"steps"`
	} `yaml:"runs"`
}

// repoRoot is the module root (this package is tests/ghactions).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

const exampleDir = "docs/examples/github"

// actionUses is how the workflow names the composite action: the awf
// checkout's copy of exampleDir.
const actionUses = "./.awf/" + exampleDir

// decodeStrict decodes one YAML file into v, refusing unknown keys so that a
// key the structs do not know (a typo such as "with:" misspelt) fails here.
func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	d := yaml.NewDecoder(f)
	d.KnownFields(true)
	require.NoError(t, d.Decode(v), path)
}

func loadExamples(t *testing.T) (workflow, action) {
	t.Helper()
	root := repoRoot(t)
	var w workflow
	var a action
	decodeStrict(t, filepath.Join(root, exampleDir, "workflow.yml"), &w)
	decodeStrict(t, filepath.Join(root, exampleDir, "action.yml"), &a)
	return w, a
}

var (
	outputRef = regexp.MustCompile(`steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)`)
	exprRef   = regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)
)

// TestExampleStructure holds the example files to what GitHub requires and
// to the rules docs/github-actions.md states, so that they cannot rot.
func TestExampleStructure(t *testing.T) {
	w, a := loadExamples(t)

	t.Run("workflow", func(t *testing.T) {
		assert.NotEmpty(t, w.Name)
		assert.NotEmpty(t, w.On, "on: must name at least one event")
		assert.Equal(t, map[string]string{"contents": "read"}, w.Permissions, "the job needs to read its own repository only")
		require.Len(t, w.Jobs, 1)
		for name, j := range w.Jobs {
			assert.Regexp(t, `^ubuntu-(latest|2[24]\.04)$`, j.RunsOn, "job %s: a runner deps.sh supports", name)
			assert.Positive(t, j.Timeout, "job %s: a timeout", name)
			require.NotEmpty(t, j.Steps)
			ids := map[string]bool{}
			checkouts, usesAction := 0, 0
			for i, s := range j.Steps {
				assert.NotEmpty(t, s.Name, "step %d: a name", i)
				assert.True(t, (s.Uses == "") != (s.Run == ""), "step %q: exactly one of uses and run", s.Name)
				if s.ID != "" {
					ids[s.ID] = true
				}
				for _, m := range outputRef.FindAllStringSubmatch(s.If+" "+strings.Join(mapValues(s.With), " "), -1) {
					assert.True(t, ids[m[1]], "step %q refers to step %s before it", s.Name, m[1])
					if m[1] == "awf" {
						assert.Contains(t, a.Outputs, m[2], "step %q reads output %s, which action.yml does not declare", s.Name, m[2])
					}
				}
				switch {
				case strings.HasPrefix(s.Uses, "actions/checkout@"):
					checkouts++
					assert.Equal(t, "false", s.With["persist-credentials"], "step %q: the agent must not find the job's token in .git/config", s.Name)
				case s.Uses == actionUses:
					usesAction++
					for in := range s.With {
						assert.Contains(t, a.Inputs, in, "step %q passes input %s, which action.yml does not declare", s.Name, in)
					}
					for in, spec := range a.Inputs {
						if spec.Required && spec.Default == "" {
							assert.Contains(t, s.With, in, "step %q omits the required input %s", s.Name, in)
						}
					}
					assert.Equal(t, "${{ secrets.AWF_STAGING_TOKEN }}", s.Env["GH_TOKEN"], "step %q: the staging token", s.Name)
				case strings.HasPrefix(s.Uses, "actions/setup-go@"):
					assert.Equal(t, ".awf/go.mod", s.With["go-version-file"], "step %q", s.Name)
				case strings.HasPrefix(s.Uses, "actions/upload-artifact@"):
					assert.NotEmpty(t, s.With["name"], "step %q", s.Name)
					assert.NotEmpty(t, s.With["path"], "step %q", s.Name)
				case s.Uses != "":
					t.Errorf("step %q uses %s, which this test cannot stand in for", s.Name, s.Uses)
				default:
					checkSudo(t, s)
				}
			}
			assert.Equal(t, 2, checkouts, "the agent's repository and awf")
			assert.Equal(t, 1, usesAction, "the workflow uses %s once", actionUses)
		}
	})

	t.Run("action", func(t *testing.T) {
		assert.NotEmpty(t, a.Name)
		assert.NotEmpty(t, a.Description)
		assert.Equal(t, "composite", a.Runs.Using)
		for _, want := range []string{"awf-dir", "config", "command"} {
			require.Contains(t, a.Inputs, want)
		}
		for n, in := range a.Inputs {
			assert.NotEmpty(t, in.Description, "input %s", n)
		}
		ids := map[string]bool{}
		for _, s := range a.Runs.Steps {
			assert.NotEmpty(t, s.Name)
			assert.Equal(t, "bash", s.Shell, "step %q: a composite action's run step names its shell", s.Name)
			assert.NotEmpty(t, s.Run, "step %q", s.Name)
			if s.ID != "" {
				ids[s.ID] = true
			}
			checkSudo(t, s)
			// Inputs reach the scripts through env only, never spliced into
			// the script text (where a quote in an input would be code).
			for _, m := range exprRef.FindAllStringSubmatch(s.Run, -1) {
				t.Errorf("step %q: expression %q inside run: pass it through env", s.Name, m[0])
			}
			for k, v := range s.Env {
				for _, m := range exprRef.FindAllStringSubmatch(v, -1) {
					name, ok := strings.CutPrefix(m[1], "inputs.")
					assert.True(t, ok, "step %q env %s: only inputs.* expressions", s.Name, k)
					assert.Contains(t, a.Inputs, name, "step %q env %s", s.Name, k)
				}
			}
		}
		for n, out := range a.Outputs {
			assert.NotEmpty(t, out.Description, "output %s", n)
			m := outputRef.FindStringSubmatch(out.Value)
			require.NotNil(t, m, "output %s: value must be a step's output", n)
			assert.True(t, ids[m[1]], "output %s names step %s, which does not exist", n, m[1])
		}
	})
}

// checkSudo holds every sudo -E in a run script to sudo -E env "PATH=$PATH"
// (sudo resets PATH, which would lose setup-go's toolchain), and every make
// and every awf run or isolate call to going through it.
func checkSudo(t *testing.T, s step) {
	t.Helper()
	for _, line := range strings.Split(s.Run, "\n") {
		if strings.Contains(line, "sudo -E") {
			assert.Contains(t, line, `sudo -E env "PATH=$PATH" `, "step %q: %s", s.Name, line)
		}
		for _, needsGo := range []string{"make ", "/bin/awf\" run", "/bin/awf isolate", "/bin/awf\" config"} {
			if strings.Contains(line, needsGo) {
				assert.Contains(t, line, `sudo -E env "PATH=$PATH" `, "step %q: %s runs as root with the runner's PATH", s.Name, line)
			}
		}
	}
}

func mapValues(m map[string]string) []string {
	vs := make([]string, 0, len(m))
	for _, v := range m {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}
