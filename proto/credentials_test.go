package proto_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/awf-project/awf/proto"
)

func TestClassifyVariable(t *testing.T) {
	for _, tc := range []struct {
		name string
		want proto.VariableClass
	}{
		{"GH_TOKEN", proto.GitHubCredential},
		{"GITHUB_TOKEN", proto.GitHubCredential},
		{"GITHUB_PERSONAL_ACCESS_TOKEN", proto.GitHubCredential},
		{"GH_ENTERPRISE_TOKEN", proto.GitHubCredential},
		{"GITHUB_ENTERPRISE_TOKEN", proto.GitHubCredential},
		{"GITHUB_PAT", proto.GitHubCredential},
		{"COPILOT_GITHUB_TOKEN", proto.GitHubCredential},
		{"gh_token", proto.GitHubCredential},
		{"HOMEBREW_GITHUB_API_TOKEN", proto.GitHubCredential},
		{"GH_COPILOT_TOKEN", proto.GitHubCredential},
		{"COPILOT_API_KEY", proto.GitHubCredential},
		{"MY_GITHUB_APP_PRIVATE_KEY", proto.GitHubCredential},
		{"ACTIONS_GITHUB_TOKEN", proto.GitHubCredential},
		{"ACTIONS_RUNTIME_TOKEN", proto.ActionsRuntime},
		{"ACTIONS_ID_TOKEN_REQUEST_TOKEN", proto.ActionsRuntime},
		{"ACTIONS_ID_TOKEN_REQUEST_URL", proto.ActionsRuntime},
		{"ACTIONS_CACHE_URL", proto.ActionsRuntime},
		{"ACTIONS_RUNTIME_URL", proto.ActionsRuntime},
		{"ACTIONS_RESULTS_URL", proto.ActionsRuntime},
		{"ACTIONS_SOMETHING_NEW", proto.ActionsRuntime},
		{"actions_cache_url", proto.ActionsRuntime},
		{"OPENAI_API_KEY", proto.OtherCredential},
		{"ANTHROPIC_API_KEY", proto.OtherCredential},
		{"AWS_ACCESS_KEY_ID", proto.OtherCredential},
		{"AWS_SECRET_ACCESS_KEY", proto.OtherCredential},
		{"SSH_AUTH_SOCK", proto.OtherCredential},
		{"GIT_ASKPASS", proto.OtherCredential},
		{"GIT_CONFIG_PARAMETERS", proto.OtherCredential},
		{"GIT_CONFIG_KEY_0", proto.OtherCredential},
		{"GIT_CONFIG_VALUE_0", proto.OtherCredential},
		{"db_password", proto.OtherCredential},
		{"MY_SERVICE_SECRET", proto.OtherCredential},
		{"HF_TOKEN", proto.OtherCredential},
		{"CI_JOB_JWT", proto.OtherCredential},
		{"PATH", proto.NotCredential},
		{"HOME", proto.NotCredential},
		{"GITHUB_REPOSITORY", proto.NotCredential},
		{"GITHUB_SERVER_URL", proto.NotCredential},
		{"GITHUB_ACTIONS", proto.NotCredential},
		{"GH_HOST", proto.NotCredential},
		{"TOKEN", proto.NotCredential},
		{"TOKENIZER", proto.NotCredential},
		{"ACTIONS", proto.NotCredential},
		{"", proto.NotCredential},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, proto.ClassifyVariable(tc.name), "class of %q is %v", tc.name, proto.ClassifyVariable(tc.name))
			assert.Equal(t, tc.want != proto.NotCredential, proto.IsCredentialVariable(tc.name))
			assert.Equal(t, tc.want == proto.GitHubCredential, proto.IsGitHubCredentialVariable(tc.name))
			assert.Equal(t, tc.want == proto.ActionsRuntime, proto.IsActionsRuntimeVariable(tc.name))
			assert.Equal(t, tc.want == proto.GitHubCredential || tc.want == proto.ActionsRuntime, proto.NeverAllowed(tc.name))
		})
	}
}

func TestCredentialListsAreClassified(t *testing.T) {
	for _, n := range proto.GitHubCredentialVariables() {
		assert.Equal(t, proto.GitHubCredential, proto.ClassifyVariable(n), n)
	}
	for _, n := range proto.ActionsRuntimeVariables() {
		assert.Equal(t, proto.ActionsRuntime, proto.ClassifyVariable(n), n)
	}
	for _, n := range proto.CredentialVariableNames() {
		assert.True(t, proto.IsCredentialVariable(n), n)
		assert.Equal(t, strings.ToUpper(n), n, "names are listed upper-case")
	}
	a := proto.GitHubCredentialVariables()
	a[0] = "CHANGED"
	assert.Equal(t, "GH_TOKEN", proto.GitHubCredentialVariables()[0], "the lists are fresh copies")
}

// byLists is IsCredentialVariable restated from the exported lists, as the
// verify probe renders them into Python.
func byLists(name string) bool {
	up := strings.ToUpper(name)
	if slices.Contains(proto.CredentialVariableNames(), up) {
		return true
	}
	for _, p := range proto.CredentialVariablePrefixes() {
		if strings.HasPrefix(up, p) {
			return true
		}
	}
	for _, s := range proto.CredentialVariableSuffixes() {
		if strings.HasSuffix(up, s) {
			return true
		}
	}
	return false
}

// FuzzIsCredentialVariable: the rules never panic, ignore case, agree with
// the exported lists (which the verify probe uses), and each class implies
// the general rule.
func FuzzIsCredentialVariable(f *testing.F) {
	for _, s := range []string{"GH_TOKEN", "ACTIONS_CACHE_URL", "OPENAI_API_KEY", "PATH", "gh_enterprise_token", "GIT_CONFIG_KEY_3", "X_GITHUB_Y_PAT", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		c := proto.ClassifyVariable(name)
		if got := proto.IsCredentialVariable(name); got != byLists(name) {
			t.Fatalf("IsCredentialVariable(%q) = %v, the exported lists say %v", name, got, !got)
		}
		if up := strings.ToUpper(name); proto.ClassifyVariable(up) != c {
			t.Fatalf("class of %q (%v) differs from class of %q (%v)", name, c, up, proto.ClassifyVariable(up))
		}
		if proto.NeverAllowed(name) && !proto.IsCredentialVariable(name) {
			t.Fatalf("%q is never allowed but not a credential", name)
		}
	})
}

// TestCredentialDocsListEveryRule keeps docs/bounded-queries.md in step
// with the lists: every GitHub and Actions name, every prefix and suffix,
// and every other name that no prefix or suffix already catches.
func TestCredentialDocsListEveryRule(t *testing.T) {
	b, err := os.ReadFile("../docs/bounded-queries.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	want := append(proto.GitHubCredentialVariables(), proto.ActionsRuntimeVariables()...)
	want = append(want, proto.CredentialVariablePrefixes()...)
	want = append(want, proto.CredentialVariableSuffixes()...)
	for _, n := range proto.CredentialVariableNames() {
		caught := false
		for _, s := range proto.CredentialVariableSuffixes() {
			caught = caught || strings.HasSuffix(n, s)
		}
		for _, p := range proto.CredentialVariablePrefixes() {
			caught = caught || strings.HasPrefix(n, p)
		}
		if !caught {
			want = append(want, n)
		}
	}
	for _, w := range want {
		assert.True(t, strings.Contains(doc, "`"+w+"`"), "docs/bounded-queries.md does not name `%s`", w)
	}
}
