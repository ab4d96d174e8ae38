// Package policy reads, checks and compiles the reviewed seccomp policy files
// (*.policy) that decide which system calls a sandboxed job may make.
//
// A policy is plain text, one rule per line, each with a mandatory reason
// (docs/policy.md). The compiler turns it into libcontainer's seccomp
// configuration and, through libseccomp, into classic BPF. The decision table
// is computed by running that BPF, not by reading the rules, so what a
// reviewer reads is what the kernel enforces.
package policy

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

//go:embed python3.policy
var defaultSource []byte

// DefaultName is the name of the embedded default policy.
const DefaultName = "python3.policy"

// Policy is one parsed, validated policy file.
type Policy struct {
	// Name is the file name the policy was read from (used in messages).
	Name string
	// Version is the policy's own revision number from its header.
	Version int
	// DefaultAction applies to every system call no rule names.
	DefaultAction Action
	// DefaultReason explains the default action.
	DefaultReason string
	// defaultLine is the line of the default directive (for lint).
	defaultLine int
	// Arches are the architectures the policy was reviewed for.
	Arches []string
	// Scope is what kind of job the policy is for: ScopeQuery (no scope
	// line: a script with no network) or ScopeEnclaveLoop (scope.go).
	Scope string
	// ScopeReason explains the scope line.
	ScopeReason string
	// Groups are the rule groups in file order.
	Groups []Group
	// Rules are all rules in file order.
	Rules []Rule
	// imported marks a policy built by Import from a foreign profile: its
	// rules skipped the .policy checks, and its default need not be the
	// most common action (Docker's profile allows most system calls).
	imported bool
}

// Group is a named set of consecutive rules.
type Group struct {
	Name        string
	Description string
	Line        int
}

// Default returns the embedded default policy (python3.policy).
func Default() (*Policy, error) {
	return Parse(DefaultName, defaultSource)
}

// DefaultSource returns the text of the embedded default policy.
func DefaultSource() []byte {
	return append([]byte(nil), defaultSource...)
}

// Load reads and parses a policy file.
func Load(path string) (*Policy, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: read %s: %w", path, err)
	}
	return Parse(path, src)
}

// Parse parses policy text; name is used in error messages. Errors carry the
// line and column (name:line:col: message); every error found is reported.
func Parse(name string, src []byte) (*Policy, error) {
	p, errs := parse(name, src)
	if len(errs) > 0 {
		return nil, errs
	}
	return p, nil
}

// Canonical renders the policy without comments or alignment: header, then
// each group and its rules in file order. Two files that differ only in
// comments or spacing have the same canonical text.
func (p *Policy) Canonical() string {
	var b strings.Builder
	fmt.Fprintf(&b, "version %d\n", p.Version)
	fmt.Fprintf(&b, "default %s : %s\n", p.DefaultAction, p.DefaultReason)
	fmt.Fprintf(&b, "arch %s\n", strings.Join(p.Arches, " "))
	if p.Scope != ScopeQuery {
		fmt.Fprintf(&b, "scope %s : %s\n", p.Scope, p.ScopeReason)
	}
	for _, g := range p.Groups {
		fmt.Fprintf(&b, "group %s : %s\n", g.Name, g.Description)
		for _, r := range p.Rules {
			if r.Group == g.Name {
				b.WriteString(r.String())
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

// Digest is the sha256 of the canonical policy text.
func (p *Policy) Digest() string {
	sum := sha256.Sum256([]byte(p.Canonical()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// GroupRules returns the rules of group name in file order.
func (p *Policy) GroupRules(name string) []Rule {
	var out []Rule
	for _, r := range p.Rules {
		if r.Group == name {
			out = append(out, r)
		}
	}
	return out
}

// HasArch reports whether the policy header lists arch (canonical name).
func (p *Policy) HasArch(arch string) bool {
	for _, a := range p.Arches {
		if a == arch {
			return true
		}
	}
	return false
}
