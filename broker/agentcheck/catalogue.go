package agentcheck

import "github.com/awf-project/awf/isolate/verify"

// Probe describes one check of the agent's view. The checks themselves run
// inside the shim (see ProbeMain); this catalogue is what the report, the
// documentation and the tests agree on.
type Probe struct {
	// ID names the probe, "agent/name".
	ID string
	// Title says in one sentence what the probe tries, as the agent.
	Title string
	// OnFail says what a FAIL means for the operator.
	OnFail string
}

// The probe IDs.
const (
	IDPrivateBase  = "agent/private-base"
	IDAuditArchive = "agent/audit-archive"
	IDRootFSCache  = "agent/rootfs-cache"
	IDSource       = "agent/source"
	IDCgroupFile   = "agent/cgroup-file"
	IDEngineSocket = "agent/engine-socket"
	IDCredentials  = "agent/credentials"
	IDBrokerSocket = "agent/broker-socket"
	IDProc         = "agent/proc"
	IDProcKernel   = "agent/proc-kernel"
	IDSysCgroup    = "agent/sys-cgroup"
	IDCounters     = "agent/counters"
	IDNetwork      = "agent/network"
	// IDCleanup is not a probe: it reports a fixture, runtime or cgroup
	// that could not be removed after the battery.
	IDCleanup = "agent/cleanup"
)

// catalogue is the battery in report order.
var catalogue = []Probe{
	{IDPrivateBase, "Looks up a secret file in the private base (a 0700 root directory).",
		"the private base is not covered in the agent's view: only its mode protects the seeds, seed map and audit log"},
	{IDAuditArchive, "Looks up a file in the audit archive directory.",
		"the audit archive is visible to the agent: earlier runs' audit logs name repositories, outcomes and timings"},
	{IDRootFSCache, "Looks up a file in the rootfs cache (mode 0755).",
		"the agent can read the sandboxes' shared root filesystem and time its page cache residency, a channel from any sandbox"},
	{IDSource, "Looks up a file in a configured local source (mode 0755, default umask).",
		"a configured local source is readable by the agent: it reads the private repository with no query at all"},
	{IDCgroupFile, "Looks up a file of an awf-owned sandbox cgroup leaf.",
		"awf's cgroup files are visible: a sandbox can signal to the agent through pids.current or memory usage"},
	{IDEngineSocket, "Connects to a listening container-engine socket (mode 0666).",
		"an engine socket is reachable from the agent: it can start a container that mounts the private base"},
	{IDCredentials, "Looks for every credential variable in its environment (the GitHub, Actions and generic rules).",
		"a credential reaches the agent: with it the agent can clone a private repository directly"},
	{IDBrokerSocket, "Connects to the run's broker socket and reads its greeting.",
		"the agent cannot reach its own broker: bounded queries would not work"},
	{IDProc, "Lists /proc: only the agent user's own processes may appear (not the shim, the broker or any host process).",
		"the agent's /proc shows other processes: their command lines, environments and counters"},
	{IDProcKernel, "Reads /proc/kcore, kallsyms, keys, timer_list, sched_debug and the masked host-wide entries.",
		"a kernel-wide /proc file is readable: it shows host state that a sandbox can move, or kernel addresses"},
	{IDSysCgroup, "Walks /sys/fs/cgroup looking for awf's cgroups.",
		"the agent sees awf's cgroup tree: every sandbox's live counters are a channel to it"},
	{IDCounters, "Reads /proc/stat, /proc/loadavg, /proc/meminfo, /proc/vmstat, /proc/sys, every other snapshotted entry and sysinfo(2) before and after a sandbox starts 1,000 threads.",
		"a host-wide counter moves with a sandbox's activity: a confidential query can signal its answer to the agent"},
	{IDNetwork, "Lists its network interfaces (agent.network none: only lo may exist).",
		"the agent has a network with agent.network none: it can reach the forge or any other host"},
}

// agentResult is one line of the battery's report: every result, a probe's or
// agent/cleanup, is in the report's one group, "agent".
func agentResult(id string, s verify.Status, evidence string) verify.Result {
	return verify.Result{ID: id, Group: "agent", Status: s, Evidence: evidence}
}

// Catalogue returns the probes in report order. The slice is a copy.
func Catalogue() []Probe {
	return append([]Probe(nil), catalogue...)
}
