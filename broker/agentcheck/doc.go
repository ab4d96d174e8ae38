// Package agentcheck proves, on the host it runs on, that the agent's view
// is contained: it builds a throwaway run (a private base with a secret, an
// audit archive, a rootfs cache, a configured local source, an engine socket,
// an awf cgroup leaf, credential variables and a broker socket), starts the
// real agent shim around it exactly as awf run would, and runs a battery of
// probes inside the shim as an unprivileged agent user. While the probes
// hold their first reading of the host-wide counters, a real direct sandbox
// starts 1,000 threads; the probes then read the counters again.
//
// The probes are a hidden mode of the awf binary (ProbeMain). They run
// without privileges, so anything they can see, an agent can see. The
// battery does not judge the sandboxes themselves (that is isolate/verify)
// and it never runs a query: the broker socket is a stand-in that only
// answers a greeting.
//
// The report is for operators and CI; nothing in it ever reaches an agent.
package agentcheck
