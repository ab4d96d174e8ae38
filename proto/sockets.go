package proto

// The variables that tell each agent CLI where its broker listens. awf sets
// them in the agent's environment and each CLI reads exactly one of them, so
// the names are contract facts: proto owns them so that the broker, awf and
// the CLIs cannot drift apart. The names are the reference's, so that its
// clients and wrappers keep working.
const (
	// QuerySocketEnv names the query broker's Unix socket (bounded-query).
	QuerySocketEnv = "AWF_BOUNDED_QUERY_SOCKET"
	// AgentSocketEnv names the bounded-agent broker's Unix socket
	// (bounded-agent).
	AgentSocketEnv = "AWF_BOUNDED_AGENT_SOCKET"
	// ProbeSocketEnv names the probe broker's Unix socket (sealed-probe), as
	// the reference's client reads it.
	ProbeSocketEnv = "AWF_SEALED_PROBE_SOCKET"
)

// AgentMaxTaskBytesEnv names the task cap awf gives bounded-agent
// (boundedAgents.maxTaskBytes); the CLI's own cap can only be lowered by it.
const AgentMaxTaskBytesEnv = "AWF_BOUNDED_AGENT_MAX_TASK_BYTES"
