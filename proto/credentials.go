package proto

import "strings"

// Credential variables: which environment variable names carry a credential.
//
// This is the one list. The broker removes these variables from the agent's
// environment, awf scrubs them from its own, and "awf isolate verify" looks
// for them on the host and inside sandboxes (its Python probe renders the
// same names, prefixes and suffixes). Names are compared case-insensitively:
// a lower-case gh_token is read by nobody, but removing it costs nothing.
//
// Three classes, most severe first:
//   - GitHub credentials: any of them can clone a private repository
//     directly, around the bound. Always removed from the agent; an operator
//     can never allow one.
//   - Actions runtime variables (every ACTIONS_* name): the runner's private
//     interface to its services. The runtime and OIDC request tokens mint
//     credentials, and the URLs are only useful with them. Always removed.
//   - Other credentials (model keys, cloud keys, SSH agent, askpass helpers,
//     git configuration carried in the environment): removed unless the
//     operator allows the name (agent.env.allow), because an agent may need
//     its own model key.
//
// The functions return fresh slices: there is no shared mutable list.

// VariableClass is what ClassifyVariable says about one variable name.
type VariableClass int

const (
	// NotCredential is a variable no rule matches.
	NotCredential VariableClass = iota
	// OtherCredential is credential-looking but names neither GitHub nor Actions.
	OtherCredential
	// GitHubCredential is a GitHub token or key.
	GitHubCredential
	// ActionsRuntime is a GitHub Actions runner service variable.
	ActionsRuntime
)

func (c VariableClass) String() string {
	switch c {
	case OtherCredential:
		return "credential"
	case GitHubCredential:
		return "GitHub credential"
	case ActionsRuntime:
		return "Actions runtime variable"
	}
	return "not a credential"
}

// GitHubCredentialVariables returns the GitHub token variables that tools
// read by name: gh and the REST clients (GH_TOKEN, GITHUB_TOKEN), the tokens
// gh uses for a GH_HOST that is not github.com (GH_ENTERPRISE_TOKEN,
// GITHUB_ENTERPRISE_TOKEN), the MCP server's and Copilot's. Any other
// credential-looking name that starts with GH_ or COPILOT_ or contains GITHUB
// is a GitHub credential too (IsGitHubCredentialVariable).
func GitHubCredentialVariables() []string {
	return []string{
		"GH_TOKEN", "GITHUB_TOKEN", "GITHUB_PERSONAL_ACCESS_TOKEN",
		"GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN",
		"GITHUB_PAT", "COPILOT_GITHUB_TOKEN",
	}
}

// ActionsRuntimeVariables returns the Actions runner service variables known
// today. Every other ACTIONS_* name is treated the same way, so a variable
// a later runner adds is covered without a change here.
func ActionsRuntimeVariables() []string {
	return []string{
		"ACTIONS_RUNTIME_TOKEN", "ACTIONS_RUNTIME_URL",
		"ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL",
		"ACTIONS_CACHE_URL", "ACTIONS_CACHE_SERVICE_V2", "ACTIONS_RESULTS_URL",
	}
}

// otherCredentialNames are credential variables whose names no suffix rule
// catches, or that CI systems and clouds set and are worth naming.
func otherCredentialNames() []string {
	return []string{
		"CI_JOB_TOKEN", "CI_JOB_JWT", "CI_JOB_JWT_V2", "GITLAB_TOKEN",
		"BUILDKITE_AGENT_ACCESS_TOKEN", "CIRCLE_TOKEN",
		"NPM_TOKEN", "NODE_AUTH_TOKEN", "PYPI_TOKEN", "TWINE_PASSWORD", "CARGO_REGISTRY_TOKEN",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE",
		"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
		// Not tokens, but each hands out one: an SSH agent, askpass helpers,
		// a netrc, a kube config, registry auth, git config in the environment
		// (which can carry an http.extraheader).
		"SSH_AUTH_SOCK", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "NETRC", "KUBECONFIG",
		"DOCKER_AUTH_CONFIG", "VAULT_TOKEN", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
	}
}

// CredentialVariableNames returns every name that is a credential by name
// alone, in all three classes.
func CredentialVariableNames() []string {
	n := GitHubCredentialVariables()
	n = append(n, ActionsRuntimeVariables()...)
	return append(n, otherCredentialNames()...)
}

// CredentialVariablePrefixes returns the name prefixes that make a variable
// a credential: the Actions runner's, and git's numbered environment config.
func CredentialVariablePrefixes() []string {
	return []string{"ACTIONS_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"}
}

// CredentialVariableSuffixes returns the name suffixes that make a variable
// a credential.
func CredentialVariableSuffixes() []string {
	return []string{
		"_TOKEN", "_SECRET", "_SECRET_KEY", "_PASSWORD", "_PASSWD", "_API_KEY", "_APIKEY",
		"_ACCESS_KEY", "_PRIVATE_KEY", "_CREDENTIALS", "_PAT", "_JWT",
	}
}

// isGitHubName reports whether an upper-cased name says GitHub: a GH_ or
// COPILOT_ prefix, or GITHUB anywhere.
func isGitHubName(up string) bool {
	return strings.HasPrefix(up, "GH_") || strings.HasPrefix(up, "COPILOT_") || strings.Contains(up, "GITHUB")
}

func hasAny(up string, list []string, f func(string, string) bool) bool {
	for _, s := range list {
		if f(up, s) {
			return true
		}
	}
	return false
}

// ClassifyVariable says which class, if any, a variable name belongs to.
func ClassifyVariable(name string) VariableClass {
	up := strings.ToUpper(name)
	eq := func(a, b string) bool { return a == b }
	suffix := hasAny(up, CredentialVariableSuffixes(), strings.HasSuffix)
	switch {
	case hasAny(up, GitHubCredentialVariables(), eq), suffix && isGitHubName(up):
		return GitHubCredential
	case strings.HasPrefix(up, "ACTIONS_"):
		return ActionsRuntime
	case suffix, hasAny(up, otherCredentialNames(), eq), hasAny(up, CredentialVariablePrefixes(), strings.HasPrefix):
		return OtherCredential
	}
	return NotCredential
}

// IsCredentialVariable reports whether a variable of this name carries a
// credential in any class. It is exactly: the name is one of
// CredentialVariableNames, or starts with one of CredentialVariablePrefixes,
// or ends with one of CredentialVariableSuffixes (all upper-cased).
func IsCredentialVariable(name string) bool { return ClassifyVariable(name) != NotCredential }

// IsGitHubCredentialVariable reports whether name is a GitHub credential.
func IsGitHubCredentialVariable(name string) bool {
	return ClassifyVariable(name) == GitHubCredential
}

// IsActionsRuntimeVariable reports whether name is an Actions runner
// service variable (any ACTIONS_* name).
func IsActionsRuntimeVariable(name string) bool {
	return ClassifyVariable(name) == ActionsRuntime
}

// NeverAllowed reports whether name may never reach the agent, whatever the
// operator allows: GitHub credentials and Actions runtime variables.
func NeverAllowed(name string) bool {
	c := ClassifyVariable(name)
	return c == GitHubCredential || c == ActionsRuntime
}

// ContainerEngineSockets returns where container engines put their API
// sockets: absolute paths and, for per-user (rootless) engines, filepath
// glob patterns under /run/user. Whoever can open one of them is root on
// the host or can start a container that mounts anything, so an engine
// socket is a credential too: the agent's view covers every one that
// exists, and verify reports every one that accepts a connection. A
// configured socket and DOCKER_HOST (unix://) come on top of these.
func ContainerEngineSockets() []string {
	return []string{
		"/var/run/docker.sock", "/run/docker.sock",
		"/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock",
		"/run/podman/podman.sock", "/run/crio/crio.sock", "/var/run/crio/crio.sock",
		"/run/buildkit/buildkitd.sock",
		"/run/user/*/docker.sock", "/run/user/*/podman/podman.sock",
		"/run/user/*/containerd-rootless/api.sock", "/run/user/*/buildkit/buildkitd.sock",
	}
}
