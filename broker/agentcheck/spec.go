package agentcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// specVersion changes whenever Spec changes meaning; the probe mode refuses
// any other version, so a stale binary cannot pass a battery it does not know.
const specVersion = 1

// maxSpecBytes bounds the spec file the probe mode reads.
const maxSpecBytes = 1 << 20

// Spec is what the orchestrator tells the probe mode: where the fixture's
// private things are, and what the agent must and must not find. It holds
// paths and names only, never a secret value.
type Spec struct {
	Version int `json:"version"`
	// Hidden are the files the agent must not find, one per hiding probe.
	Hidden []HiddenFile `json:"hidden"`
	// EngineSocket is a listening container-engine socket (mode 0666).
	EngineSocket string `json:"engineSocket"`
	// BrokerSocket is the run's broker socket; BrokerGreeting is what it
	// writes to every connection.
	BrokerSocket   string `json:"brokerSocket"`
	BrokerGreeting string `json:"brokerGreeting"`
	// Credentials are the credential variables planted in the caller's
	// environment.
	Credentials []string `json:"credentials"`
	// AgentUID is the uid the probes run as.
	AgentUID int `json:"agentUID"`
	// Broker identifies the process standing for the broker (the
	// orchestrator), by what stays the same across pid namespaces.
	Broker ProcessMark `json:"broker"`
	// CgroupNames are directory names of awf's that must not appear below
	// /sys/fs/cgroup (the cgroup parent and the fixture's leaf).
	CgroupNames []string `json:"cgroupNames"`
	// Network is the agent.network mode the shim was started with.
	Network string `json:"network"`
}

// HiddenFile is a file that exists on the host and must not exist in the
// agent's view, whatever its permissions.
type HiddenFile struct {
	ID   string `json:"id"`
	Path string `json:"path"`
}

// ProcessMark identifies a host process: its host pid, its command name and
// its start time in clock ticks after boot (/proc/PID/stat fields 2 and 22).
type ProcessMark struct {
	HostPID   int    `json:"hostPID"`
	Comm      string `json:"comm"`
	StartTime uint64 `json:"startTime"`
}

// readSpec reads and checks the spec file.
func readSpec(path string) (Spec, error) {
	var s Spec
	f, err := os.Open(path)
	if err != nil {
		return s, fmt.Errorf("agentcheck: spec: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSpecBytes+1))
	if err != nil {
		return s, fmt.Errorf("agentcheck: spec: %w", err)
	}
	if len(b) > maxSpecBytes {
		return s, errors.New("agentcheck: spec is too large")
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("agentcheck: spec: %w", err)
	}
	if s.Version != specVersion {
		return s, fmt.Errorf("agentcheck: spec version %d, want %d", s.Version, specVersion)
	}
	return s, nil
}
