package host

import "github.com/awf-project/awf/broker/jsonfile"

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
func WriteSpec(s Spec) error { return jsonfile.WriteSpec(s.Layout.SpecPath, "broker spec", s) }

// ReadSpec reads a spec written by WriteSpec. The file must be a regular
// file owned by root and closed to others, of at most jsonfile.MaxSpecBytes
// (a spec is paths and limits, a few KiB).
func ReadSpec(path string) (Spec, error) {
	var s Spec
	err := jsonfile.ReadSpec(path, "broker spec", &s)
	return s, err
}
