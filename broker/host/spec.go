package host

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"
)

// Spec is what the broker process needs to start. awf writes it (0600) into
// the private root; it holds no credential.
type Spec struct {
	Layout         Layout
	Runtime        string
	RunscPath      string
	DockerSocket   string
	CgroupParent   string
	RootFS         string
	RootFSDigest   string
	MemoryBytes    int64
	TimeoutSeconds int
	MaxInvocations int
	// WarmPool is how many sandboxes the query broker keeps prepared per
	// seed (boundedQueries.warmPool); 0 keeps none.
	WarmPool  int `json:",omitempty"`
	SocketUID int
	SocketGID int
	// AgentCgroup is the agent's cgroup, which the broker freezes during
	// metered queries, and the run's CPU split (the broker and the sandboxes
	// take CPUs.Sandbox).
	AgentCgroup AgentCgroup
	// PrimaryBackend is where the agent runs, for telemetry: PrimaryHost
	// under awf run, PrimaryExternal under awf broker ("" = PrimaryHost).
	PrimaryBackend string `json:",omitempty"`
	// Kind is "" for a bounded-query run, KindProbe for a probe-only one.
	Kind string `json:",omitempty"`
	// Probe is the sealed-probe broker's part (probe.go); nil when
	// sealedProbes is absent or disabled.
	Probe *ProbeSpec `json:",omitempty"`
	// Agents is the bounded-agent broker's part (boundedagents_run.go);
	// nil when boundedAgents is absent or disabled.
	Agents *AgentSpec `json:",omitempty"`
}

// WriteSpec writes s to its layout's spec path, exclusively.
func WriteSpec(s Spec) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("broker spec: %w", err)
	}
	f, err := os.OpenFile(s.Layout.SpecPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("broker spec: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("broker spec: %w", err)
	}
	return f.Close()
}

// ReadSpec reads a spec written by WriteSpec. The file must be a regular
// file owned by root and closed to others.
func ReadSpec(path string) (Spec, error) {
	var s Spec
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return s, fmt.Errorf("broker spec: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return s, fmt.Errorf("broker spec: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o077 != 0 {
		return s, fmt.Errorf("broker spec %s: must be a regular root-owned file closed to others", path)
	}
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("broker spec %s: %w", path, err)
	}
	return s, nil
}
