// Package policy reads, checks and compiles the reviewed seccomp policy files
// (*.policy) that decide which system calls a sandboxed job may make.
//
// STUB: the API below is the contract other packages build against; the
// policy work replaces the bodies.
package policy

import (
	"errors"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

var errStub = errors.New("policy: not implemented yet")

// Policy is one parsed, validated policy file.
type Policy struct {
	Name string
}

// Default returns the embedded default policy (python3.policy).
func Default() (*Policy, error) { return nil, errStub }

// Load reads and parses a policy file.
func Load(path string) (*Policy, error) { return nil, errStub }

// Parse parses policy text; name is used in error messages.
func Parse(name string, src []byte) (*Policy, error) { return nil, errStub }

// Digest is the sha256 of the canonical policy text.
func (p *Policy) Digest() string { return "" }

// Libcontainer compiles the policy to libcontainer's seccomp configuration.
func (p *Policy) Libcontainer() (*configs.Seccomp, error) { return nil, errStub }

// OCI compiles the policy to the OCI runtime-spec seccomp section.
func (p *Policy) OCI() (*specs.LinuxSeccomp, error) { return nil, errStub }

// DockerJSON renders the policy as a Docker seccomp profile.
func (p *Policy) DockerJSON() ([]byte, error) { return nil, errStub }

// Table is a decision table: what a filter does for each arch, syscall and argument case.
type Table struct {
	Rows []Row
}

// Row is one line of a decision table.
type Row struct {
	Arch    string
	Syscall string
	Case    string // argument condition, "" for any
	Action  string // allow, kill, errno NAME, ...
}

// Table computes the decision table for arch from the BPF that the policy compiles to.
func (p *Policy) Table(arch string) (Table, error) { return Table{}, errStub }

// DecodeFilter computes the decision table of a loaded classic-BPF filter.
func DecodeFilter(arch string, prog []unix.SockFilter) (Table, error) { return Table{}, errStub }

// CompareLoaded lists every difference between the golden table and a loaded
// filter's table, other than the documented additions runc makes.
func CompareLoaded(golden, loaded Table) []string { return []string{"policy: not implemented"} }
