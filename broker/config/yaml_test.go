package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/awf-project/awf/tests/fixture"
)

var digestA = "sha256:" + strings.Repeat("a", 64)

// yamlPairs are configurations written in both syntaxes; each pair must load
// to the same value. Together they use every top-level block of the schema
// (TestYAMLPairsCoverEveryBlock).
var yamlPairs = []struct {
	name, json, yaml string
}{
	{"empty", `{}`, "# nothing configured\n{}\n"},
	{"bounded queries, every key",
		`{"$schema":"https://awf.example/awf-config.schema.json","boundedQueries":{"enabled":true,` +
			`"privateRepos":["my-org/svc",{"repo":"my-org/Docs","sensitivity":"public","source":"/srv/git/docs","ref":"release/v1.2"},` +
			`{"repo":"o/sealed","sensitivity":"sealed","source":"https://git.example/o/sealed.git"},{"repo":"3scale/app","sensitivity":"confidential"}],` +
			`"runtime":"gvisor","timeout":45,"memoryLimit":"1g","interpreter":"python3","maxInvocations":100,` +
			`"rootfs":{"path":"/var/lib/awf/rootfs","digest":"` + digestA + `"},"dockerSocket":"/run/docker.sock","runscPath":"/usr/bin/runsc"}}`,
		`$schema: https://awf.example/awf-config.schema.json
boundedQueries:
  enabled: true
  privateRepos:
    - my-org/svc              # the deprecated bare form
    - repo: my-org/Docs
      sensitivity: public
      source: /srv/git/docs
      ref: release/v1.2
    - {repo: o/sealed, sensitivity: sealed, source: "https://git.example/o/sealed.git"}
    - repo: 3scale/app
      sensitivity: 'confidential'
  runtime: gvisor
  timeout: 45
  memoryLimit: 1g
  interpreter: python3
  maxInvocations: 100
  rootfs:
    path: /var/lib/awf/rootfs
    digest: ` + digestA + `
  dockerSocket: /run/docker.sock
  runscPath: /usr/bin/runsc
`},
	{"bounded queries disabled", `{"boundedQueries":{"enabled":false,"runtime":"docker","memoryLimit":"512M"}}`,
		"boundedQueries:\n  enabled: false\n  runtime: docker\n  memoryLimit: 512M\n"},
	{"numbers keep their JSON meaning", `{"boundedQueries":{"timeout":3e1,"maxInvocations":32.0},"agent":{"user":1001}}`,
		"boundedQueries:\n  timeout: 3e1\n  maxInvocations: 32.0\nagent:\n  user: 1001\n"},
	{"agent, every key", `{"agent":{"user":"runner","env":{"allow":["OPENAI_API_KEY","ANTHROPIC_API_KEY"]},"network":"none","allowPersistedCredentials":true}}`,
		"agent:\n  user: runner\n  env:\n    allow: [OPENAI_API_KEY, ANTHROPIC_API_KEY]\n  network: none\n  allowPersistedCredentials: true\n"},
	{"agent empty allow list", `{"agent":{"env":{"allow":[]},"allowPersistedCredentials":false}}`,
		"agent:\n  env:\n    allow: []\n  allowPersistedCredentials: false\n"},
	{"api proxy, every key",
		`{"apiProxy":{"targets":{"openai":{"baseUrl":"https://llm.example.com:8443/openai","apiKeyEnv":"MY_OPENAI_KEY","model":"gpt-4o-mini"},` +
			`"anthropic":{"baseUrl":"http://127.0.0.1:8000","model":"claude-sonnet-4-5"}},` +
			`"maxModelRequests":100,"maxModelTokens":4096,"maxRequestBytes":1048576,"maxResponseBytes":2097152,"timeout":120}}`,
		`apiProxy:
  targets:
    openai:
      baseUrl: https://llm.example.com:8443/openai
      apiKeyEnv: MY_OPENAI_KEY
      model: gpt-4o-mini
    anthropic:
      baseUrl: "http://127.0.0.1:8000"
      model: claude-sonnet-4-5
  maxModelRequests: 100
  maxModelTokens: 4096
  maxRequestBytes: 1048576
  maxResponseBytes: 2097152
  timeout: 120
`},
	{"api proxy defaults", `{"apiProxy":{"targets":{"openai":{}}}}`, "apiProxy:\n  targets:\n    openai: {}\n"},
	{"quoting and block scalars", `{"$schema":"line one\nline two\n","agent":{"user":"on"}}`,
		"$schema: |\n  line one\n  line two\nagent:\n  user: \"on\"\n"},
	{"bounded agents, every key",
		`{"boundedAgents":{"enabled":true,"privateRepos":[{"repo":"o/r","sensitivity":"internal","source":"/srv/r","ref":"main"}],` +
			`"runtime":"gvisor","profile":"anthropic","model":"claude-3-5-haiku@2024","timeout":100,"memoryLimit":"1g","cpuLimit":"0.5",` +
			`"pidsLimit":64,"tmpfsLimit":"128m","maxOutputBytes":4096,"maxTaskBytes":8192,"maxInvocations":4,"maxModelRequests":16,"maxModelTokens":2048}}`,
		`boundedAgents:
  enabled: true
  privateRepos:
    - repo: o/r
      sensitivity: internal
      source: /srv/r
      ref: main
  runtime: gvisor
  profile: anthropic
  model: claude-3-5-haiku@2024
  timeout: 100
  memoryLimit: 1g
  cpuLimit: "0.5"     # a string: plain 0.5 would be a number
  pidsLimit: 64
  tmpfsLimit: 128m
  maxOutputBytes: 4096
  maxTaskBytes: 8192
  maxInvocations: 4
  maxModelRequests: 16
  maxModelTokens: 2048
`},
	{"sealed probes, the seed's own YAML",
		`{"sealedProbes":{"enabled":true,"privateRepos":["lpcox/foo","lpcox/bar"],"runtime":"gvisor","timeout":30,"memoryLimit":"512m","interpreter":"python3","maxInvocations":32}}`,
		`sealedProbes:
  enabled: true
  privateRepos:
    - "lpcox/foo"
    - "lpcox/bar"
  runtime: gvisor          # docker | gvisor | sbx
  timeout: 30              # seconds per invocation
  memoryLimit: "512m"
  interpreter: python3     # v1: fixed standard-library-only environment
  maxInvocations: 32       # conservative bounded default; exact default may be adjusted
`},
	{"sealed probes, object repositories", `{"sealedProbes":{"enabled":true,"runtime":"direct","privateRepos":[{"repo":"o/r","source":"/srv/git/r","ref":"main"},"o/bare"]}}`,
		"sealedProbes:\n  enabled: true\n  runtime: direct\n  privateRepos:\n    - repo: o/r\n      source: /srv/git/r\n      ref: main\n    - o/bare\n"},
	{"flow style is YAML too", `{"agent":{"user":"runner","network":"host"}}`, "{agent: {user: runner, network: host}}\n"},
	{"explicit document markers", `{"agent":{"user":"runner"}}`, "---\nagent:\n  user: runner\n...\n"},
}

func TestYAMLAndJSONLoadToTheSameValue(t *testing.T) {
	for _, tc := range yamlPairs {
		t.Run(tc.name, func(t *testing.T) {
			jtree, err := DecodeJSON([]byte(tc.json))
			require.NoError(t, err)
			ytree, err := DecodeYAML([]byte(tc.yaml))
			require.NoError(t, err)
			assert.Equal(t, jtree, ytree, "the decoded trees")

			want, err := Load([]byte(tc.json))
			require.NoError(t, err)
			got, err := LoadYAML([]byte(tc.yaml))
			require.NoError(t, err)
			assert.Equal(t, want, got)

			// Every way a --config source arrives: both file names, the
			// content rule for other names, and standard input.
			dir := t.TempDir()
			sources := map[string]string{"c.json": tc.json, "c.yaml": tc.yaml, "c.yml": tc.yaml, "c.conf": tc.json}
			if DetectFormat("-", []byte(tc.yaml)) == FormatYAML {
				sources["c"] = tc.yaml
			}
			for name, doc := range sources {
				p := filepath.Join(dir, name)
				require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
				c, err := LoadPath(p, nil)
				require.NoError(t, err, name)
				assert.Equal(t, want, c, name)
			}
			for _, doc := range []string{tc.json, tc.yaml} {
				if DetectFormat("-", []byte(doc)) == FormatYAML && doc == tc.json {
					continue
				}
				if strings.HasPrefix(strings.TrimSpace(doc), "{") && doc == tc.yaml {
					continue // flow YAML on stdin is read as JSON, by the rule
				}
				c, err := LoadPath("-", strings.NewReader(doc))
				require.NoError(t, err, "stdin %q", doc)
				assert.Equal(t, want, c, "stdin")
			}
		})
	}
}

// TestYAMLPairsCoverEveryBlock keeps yamlPairs complete as blocks are added
// to the schema: each top-level property must appear in some pair.
func TestYAMLPairsCoverEveryBlock(t *testing.T) {
	root, err := DecodeJSON(Schema())
	require.NoError(t, err)
	for k := range root.(map[string]any)["properties"].(map[string]any) {
		found := false
		for _, tc := range yamlPairs {
			tree, err := DecodeJSON([]byte(tc.json))
			require.NoError(t, err)
			if _, ok := tree.(map[string]any)[k]; ok {
				found = true
			}
		}
		assert.True(t, found, "no yamlPairs case uses the top-level block %q", k)
	}
}

// TestJSONCasesLoadAlikeAsYAML: a JSON document is also a YAML one, and the
// YAML reader must give it the same meaning, for every case of the loader
// and schema table: same acceptance, same Config, same problems.
func TestJSONCasesLoadAlikeAsYAML(t *testing.T) {
	var docs []string
	for _, tc := range configCases {
		docs = append(docs, tc.doc)
	}
	for _, tc := range agentCases {
		docs = append(docs, tc.doc)
	}
	for _, tc := range probeCases {
		docs = append(docs, tc.doc)
	}
	for _, doc := range docs {
		t.Run(doc, func(t *testing.T) {
			jc, jerr := Load([]byte(doc))
			tree, err := DecodeJSON([]byte(doc))
			require.NoError(t, err)
			block := blockYAML(t, tree)
			for _, y := range []string{doc, block} {
				yc, yerr := LoadYAML([]byte(y))
				require.Equal(t, jerr == nil, yerr == nil, "json=%v yaml=%v\n%s", jerr, yerr, y)
				if jerr == nil {
					assert.Equal(t, jc, yc, y)
					continue
				}
				var ye *YAMLError
				require.ErrorAs(t, yerr, &ye)
				assert.Equal(t, strings.TrimPrefix(jerr.Error(), "config: "), strings.Join(problemTexts(ye), "; "), y)
				for _, p := range ye.Problems {
					assert.Positive(t, p.Line, "%s\n%s", p, y)
					assert.Positive(t, p.Column, "%s\n%s", p, y)
				}
			}
		})
	}
}

// blockYAML writes a decoded JSON tree as block-style YAML, every string
// double-quoted so that none is read as anything else.
func blockYAML(t *testing.T, tree any) string {
	t.Helper()
	var node func(v any) *yaml.Node
	node = func(v any) *yaml.Node {
		switch v := v.(type) {
		case map[string]any:
			n := &yaml.Node{Kind: yaml.MappingNode}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Value: k}, node(v[k]))
			}
			return n
		case []any:
			n := &yaml.Node{Kind: yaml.SequenceNode}
			for _, e := range v {
				n.Content = append(n.Content, node(e))
			}
			return n
		case string:
			return &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Value: v}
		case json.Number:
			return &yaml.Node{Kind: yaml.ScalarNode, Value: string(v)}
		case bool:
			return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatBool(v)}
		default:
			return &yaml.Node{Kind: yaml.ScalarNode, Value: "null"}
		}
	}
	out, err := yaml.Marshal(node(tree))
	require.NoError(t, err)
	return string(out)
}

// problemTexts renders each problem without its position, as the JSON loader
// words it.
func problemTexts(e *YAMLError) []string {
	var out []string
	for _, p := range e.Problems {
		p.Line, p.Column = 0, 0
		out = append(out, p.String())
	}
	return out
}

func TestYAMLRefusesWithLineAndColumn(t *testing.T) {
	cases := []struct {
		name, doc string
		line, col int
		want      string
	}{
		{"unknown top-level key", "agent:\n  user: runner\ncontainer: {}\n", 3, 1, `config: unknown key "container"`},
		{"unknown nested key", "boundedQueries:\n  enabled: false\n  timeoutSeconds: 5\n", 3, 3, `boundedQueries: unknown key "timeoutSeconds"`},
		{"unknown key in a list item", "boundedQueries:\n  privateRepos:\n    - repo: o/r\n      sensitivity: public\n      x: 1\n", 5, 7, `boundedQueries.privateRepos[0]: unknown key "x"`},
		{"duplicate key", "agent:\n  user: runner\n  user: root\n", 3, 3, `agent: duplicate key "user" (first at 2:3)`},
		{"duplicate top-level key", "agent: {}\nagent: {}\n", 2, 1, `duplicate key "agent" (first at 1:1)`},
		{"duplicate key, other quoting", "agent:\n  user: a\n  'user': b\n", 3, 3, `duplicate key "user"`},
		{"anchor", "agent: &a\n  user: runner\n", 1, 8, "agent: anchors are not allowed (&a)"},
		{"anchor and alias", "agent: &a {}\nboundedQueries: *a\n", 1, 8, "anchors are not allowed (&a)"},
		{"anchor on a scalar", "agent:\n  user: &u runner\n", 2, 9, "agent.user: anchors are not allowed (&u)"},
		{"standard tag", "agent:\n  user: !!str 1001\n", 2, 9, "agent.user: tags are not allowed (!!str)"},
		{"custom tag", "agent: !mytag\n  user: runner\n", 1, 8, "agent: tags are not allowed (!mytag)"},
		{"non-specific tag", "agent:\n  user: ! runner\n", 2, 9, "agent.user: tags are not allowed (!)"},
		{"non-specific tag on flow", "! {agent: {}}\n", 1, 1, "tags are not allowed (!)"},
		{"tag on a key", "agent:\n  !k user: runner\n", 2, 3, "tags are not allowed (!k)"},
		{"tag on an empty value", "agent: !\n", 1, 8, "agent: tags are not allowed (!)"},
		{"tag on a list item", "agent:\n  env:\n    allow:\n      - !x A\n", 4, 9, "agent.env.allow[0]: tags are not allowed (!x)"},
		{"tag after non-ASCII text", "$schema: \"ééé\"\nagent: {user: \"é\", network: ! host}\n", 2, 29, "agent.network: tags are not allowed (!)"},
		{"tag on the document's root", "--- !cfg\nagent: {}\n", 1, 5, "tags are not allowed (!cfg)"},
		{"bare tag on the document's root", "--- !\nagent: {}\n", 1, 5, "tags are not allowed (!)"},
		{"lone CR", "agent: {}\rboundedQueries: {}\r", 1, 10, "line breaks other than LF and CRLF are not allowed (U+000D)"},
		{"NEL", "agent: {}\u0085boundedQueries: {}\n", 1, 10, "(U+0085)"},
		{"line separator", "agent: {}\nx: \"a\u2028b\"\n", 2, 6, "(U+2028)"},
		{"merge key", "agent:\n  <<: {user: runner}\n", 2, 3, "agent: merge keys (<<) are not allowed"},
		{"integer key", "agent:\n  1: x\n", 2, 3, `agent: keys must be strings: "1" is a number`},
		{"boolean key", "true: 1\n", 1, 1, `keys must be strings: "true" is a boolean`},
		{"null key", "~: 1\n", 1, 1, `keys must be strings: "~" is a null`},
		{"empty key", "? \n: 1\n", 1, 2, `keys must be strings: "" is a null`},
		{"sequence key", "? [a, b]\n: 1\n", 1, 3, "keys must be strings, not a sequence"},
		{"mapping key", "{? {a: 1} : 1}\n", 1, 4, "keys must be strings, not a mapping"},
		{"YAML 1.1 boolean key", "yes: 1\n", 1, 1, "key: plain yes is a boolean to some YAML readers"},
		{"two documents", "agent: {}\n---\nagent: {}\n", 2, 1, "a second document starts here"},
		{"an empty second document", "agent: {}\n---\n", 2, 1, "a second document starts here"},
		{"not UTF-8", "agent:\n  user: r\xffx\n", 2, 10, "the document is not valid UTF-8"},
		{"UTF-16", "\xff\xfea\x00:\x00 \x001\x00\n\x00", 1, 1, "the document is not valid UTF-8"},
		{"byte order mark", "\ufeffagent: {}\n", 1, 1, "a byte order mark is not allowed"},
		{"yes", "boundedQueries:\n  enabled: yes\n", 2, 12, "boundedQueries.enabled: plain yes is a boolean to some YAML readers"},
		{"no", "boundedQueries:\n  enabled: no\n", 2, 12, "plain no is a boolean"},
		{"on", "agent:\n  allowPersistedCredentials: on\n", 2, 30, "plain on is a boolean"},
		{"off", "agent:\n  network: off\n", 2, 12, "agent.network: plain off is a boolean"},
		{"y", "agent:\n  user: y\n", 2, 9, "plain y is a boolean"},
		{"True", "boundedQueries:\n  enabled: True\n", 2, 12, "plain True is a boolean"},
		{"FALSE", "boundedQueries:\n  enabled: FALSE\n", 2, 12, "plain FALSE is a boolean"},
		{"octal", "boundedQueries:\n  timeout: 017\n", 2, 12, "plain 017 is not a number as JSON writes one"},
		{"YAML 1.2 octal", "boundedQueries:\n  timeout: 0o17\n", 2, 12, "plain 0o17 is not a number as JSON writes one"},
		{"hexadecimal", "boundedQueries:\n  timeout: 0x1E\n", 2, 12, "plain 0x1E is not a number"},
		{"binary", "boundedQueries:\n  timeout: 0b11110\n", 2, 12, "plain 0b11110 is not a number"},
		{"underscores", "boundedQueries:\n  maxInvocations: 1_000\n", 2, 19, "plain 1_000 is not a number"},
		{"leading plus", "boundedQueries:\n  timeout: +30\n", 2, 12, "plain +30 is not a number"},
		{"leading dot", "boundedQueries:\n  timeout: .5\n", 2, 12, "plain .5 is not a number"},
		{"trailing dot", "boundedQueries:\n  timeout: 30.\n", 2, 12, "plain 30. is not a number"},
		{"infinity", "boundedQueries:\n  timeout: .inf\n", 2, 12, "plain .inf is not a number"},
		{"not a number", "boundedQueries:\n  timeout: .NaN\n", 2, 12, "plain .NaN is not a number"},
		{"base 60", "boundedQueries:\n  timeout: 1:30\n", 2, 12, "plain 1:30 is not a number"},
		{"timestamp", "boundedQueries:\n  privateRepos:\n    - {repo: o/r, sensitivity: public, ref: 2024-01-01}\n", 3, 45, "plain 2024-01-01 is read as !!timestamp"},
		{"Null", "agent: Null\n", 1, 8, "agent: plain Null is read as !!null"},
		{"syntax error", "agent:\n\tuser: x\n", 2, 0, "2: invalid YAML: found character that cannot start any token"},
		{"unclosed flow", "agent: {user: x\n", 0, 0, "invalid YAML: "},
		{"empty", "", 0, 0, "the document is empty"},
		{"comments only", "# nothing\n", 0, 0, "the document is empty"},
		{"too deep", "agent: " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n", 1, 40, "nesting deeper than 32"},
		{"too large", "$schema: " + strings.Repeat("x", MaxConfigBytes) + "\n", 0, 0, "config is larger than"},
		{"loader: out of range", "boundedQueries:\n  timeout: 900\n", 2, 12, "boundedQueries.timeout: 900 is out of range 1..540"},
		{"loader: missing key", "boundedQueries:\n  enabled: true\n", 2, 3, "boundedQueries.privateRepos: is required when enabled is true"},
		{"loader: list item", "boundedQueries:\n  privateRepos:\n    - repo: o/r\n      sensitivity: secret\n", 4, 20, `boundedQueries.privateRepos[0].sensitivity: "secret" is not one of`},
		{"loader: not an object", "- a\n", 1, 1, "config: must be an object"},
		{"loader: null block", "agent:\n", 1, 7, "agent: must be an object"},
		{"loader: quoted number", "boundedQueries:\n  timeout: '30'\n", 2, 12, "boundedQueries.timeout: must be an integer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadYAML([]byte(tc.doc))
			require.Error(t, err)
			var ye *YAMLError
			require.ErrorAs(t, err, &ye)
			require.NotEmpty(t, ye.Problems)
			p := ye.Problems[0]
			if tc.name != "unclosed flow" {
				assert.Equal(t, [2]int{tc.line, tc.col}, [2]int{p.Line, p.Column}, "%v", err)
			}
			assert.Contains(t, err.Error(), tc.want)
			if tc.col > 0 {
				assert.Contains(t, err.Error(), fmt.Sprintf("config: %d:%d: ", tc.line, tc.col))
			}
			// The name of the source prefixes the position.
			_, err = LoadSource("awf.yaml", []byte(tc.doc))
			require.ErrorAs(t, err, &ye)
			if tc.col > 0 {
				assert.Contains(t, err.Error(), fmt.Sprintf("config: awf.yaml:%d:%d: ", tc.line, tc.col))
			}
		})
	}
}

// TestYAMLRefusesAliasNodes: an alias always follows its anchor, which is
// refused first, so the alias check is reached only through a node.
func TestYAMLRefusesAliasNodes(t *testing.T) {
	w := &yamlWalker{src: []byte("a: *x\n")}
	err := w.properties(&yaml.Node{Kind: yaml.AliasNode, Value: "x", Line: 1, Column: 4}, "a")
	require.Error(t, err)
	assert.Equal(t, "config: 1:4: a: aliases are not allowed (*x); write the value out", err.Error())
}

func TestYAMLLoaderReportsEveryProblem(t *testing.T) {
	_, err := LoadYAML([]byte("boundedQueries:\n  timeout: 900\n  runtime: kvm\nagent:\n  user: Bob\n"))
	var ye *YAMLError
	require.ErrorAs(t, err, &ye)
	var at []string
	for _, p := range ye.Problems {
		at = append(at, fmt.Sprintf("%d:%d %s", p.Line, p.Column, p.Path))
	}
	assert.ElementsMatch(t, []string{"2:12 boundedQueries.timeout", "3:12 boundedQueries.runtime", "5:9 agent.user"}, at)
}

func TestYAMLCRLF(t *testing.T) {
	c, err := LoadYAML([]byte("agent:\r\n  user: runner\r\n  network: none\r\n"))
	require.NoError(t, err)
	assert.Equal(t, "none", c.Agent.Network)
	_, err = LoadYAML([]byte("agent:\r\n  user: runner\r\n  network: ! none\r\n"))
	assert.ErrorContains(t, err, "config: 3:12: agent.network: tags are not allowed (!)")
}

func TestDetectFormat(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      Format
	}{
		{"a.json", "agent: {}", FormatJSON},
		{"a.JSON", "", FormatJSON},
		{"a.yaml", `{"agent":{}}`, FormatYAML},
		{"a.yml", "", FormatYAML},
		{"A.YML", "", FormatYAML},
		{"-", `{"agent":{}}`, FormatJSON},
		{"-", " \n\t\r{}", FormatJSON},
		{"-", "agent: {}", FormatYAML},
		{"-", "# {\n{}", FormatYAML},
		{"-", "", FormatYAML},
		{"awf.conf", "{}", FormatJSON},
		{"awf", "agent: {}", FormatYAML},
		{"dir.json/awf", "agent: {}", FormatYAML},
	} {
		assert.Equal(t, tc.want, DetectFormat(tc.name, []byte(tc.doc)), "%s %q", tc.name, tc.doc)
	}
	// A .json file holding YAML is a JSON error, not a YAML document.
	_, err := LoadSource("awf.json", []byte("agent: {}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid JSON")
}

func TestReadSourceBoundsStdin(t *testing.T) {
	src, err := ReadSource("-", strings.NewReader("agent: {}\n"))
	require.NoError(t, err)
	assert.Equal(t, "agent: {}\n", string(src))

	_, err = ReadSource("-", strings.NewReader(strings.Repeat(" ", MaxConfigBytes+1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than")

	p := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("#", MaxConfigBytes+1)), 0o600))
	_, err = LoadPath(p, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than")

	_, err = LoadPath(filepath.Join(t.TempDir(), "missing.yaml"), nil)
	assert.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
}

// TestReadSourceRefusesATerminal: --config - on a terminal would wait for a
// document nobody is typing.
func TestReadSourceRefusesATerminal(t *testing.T) {
	slave := fixture.OpenPTY(t)
	_, err := ReadSource("-", slave)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "standard input, which is a terminal")
	_, err = LoadPath("-", slave)
	require.Error(t, err)

	// Not a terminal: a pipe and /dev/null are read (and the empty
	// document is refused by the loader, not here).
	null, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer null.Close()
	src, err := ReadSource("-", null)
	require.NoError(t, err)
	assert.Empty(t, src)
	_, err = LoadPath("-", null)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "terminal")
}
