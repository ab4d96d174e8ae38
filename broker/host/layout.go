// Package host is the trusted host side of one awf run: preflight, staging,
// the broker process in its own empty network namespace, the agent command
// in its own mount and pid namespaces as an unprivileged user, and the
// teardown that removes everything again.
package host

import (
	"path/filepath"

	"github.com/awf-project/awf/proto"
)

// Default base directories. Every run gets one directory below each.
const (
	// DefaultPrivateBase holds the broker-private roots (0700, root only):
	// seeds, seed map, runtime state, audit log. The agent never sees it.
	DefaultPrivateBase = "/var/lib/awf/private"
	// DefaultIngressBase holds the per-run socket and skill directories.
	// The agent sees only its own run's directory.
	DefaultIngressBase = "/run/awf-ingress"
	// DefaultAuditArchive is where teardown keeps each run's audit log.
	DefaultAuditArchive = "/var/log/awf"
)

// Layout is where one run keeps its files.
type Layout struct {
	RunID        string
	PrivateBase  string
	PrivateRoot  string // PrivateBase/<run>
	StateDir     string // runtime state, in the private root
	AuditDir     string // protected audit log and telemetry
	SpecPath     string // the broker's start-up spec
	LockPath     string // held for the run's lifetime
	IngressBase  string
	IngressRoot  string // IngressBase/<run>
	SocketDir    string // 0700, owned by the agent user
	Socket       string
	SkillDir     string // read-only for the agent: SKILL.md and the CLI
	SkillPath    string
	CLIPath      string
	AuditArchive string // where teardown copies the audit directory
}

// NewRunID returns a fresh run id (proto.NewRunID).
func NewRunID() string { return proto.NewRunID() }

// NewLayout returns the layout of a run under the given bases ("" = default).
func NewLayout(runID, privateBase, ingressBase, auditArchive string) Layout {
	if privateBase == "" {
		privateBase = DefaultPrivateBase
	}
	if ingressBase == "" {
		ingressBase = DefaultIngressBase
	}
	if auditArchive == "" {
		auditArchive = DefaultAuditArchive
	}
	priv := filepath.Join(privateBase, runID)
	ing := filepath.Join(ingressBase, runID)
	return Layout{
		RunID:        runID,
		PrivateBase:  privateBase,
		PrivateRoot:  priv,
		StateDir:     filepath.Join(priv, "state"),
		AuditDir:     filepath.Join(priv, "audit"),
		SpecPath:     filepath.Join(priv, "broker.json"),
		LockPath:     filepath.Join(priv, "run.lock"),
		IngressBase:  ingressBase,
		IngressRoot:  ing,
		SocketDir:    filepath.Join(ing, "run"),
		Socket:       filepath.Join(ing, "run", "broker.sock"),
		SkillDir:     SkillDirOf(ing),
		SkillPath:    filepath.Join(ing, "skill", "SKILL.md"),
		CLIPath:      filepath.Join(SkillDirOf(ing), "bounded-query"),
		AuditArchive: filepath.Join(auditArchive, runID),
	}
}

// SkillDirOf is a run's skill directory (SKILL.md and the agent CLIs)
// below its ingress root; "" for no ingress root. The shim finds the CLIs
// there.
func SkillDirOf(ingressRoot string) string {
	if ingressRoot == "" {
		return ""
	}
	return filepath.Join(ingressRoot, "skill")
}
