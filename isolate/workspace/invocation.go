package workspace

// RecordInvocation checks the invocation id of a job and records it in the
// journal, which it writes. An empty id becomes "sandbox-" and the sandbox
// id, so that every container and journal names one. It is the one
// invocation rule of the workspace backends: gvisor annotates its
// bundle with the id, docker (whose container is created in Prepare,
// before the id is known) keeps it in the journal only, and both must
// agree on what a job without an id is called.
func (w *Workspace) RecordInvocation(id string) (string, error) {
	if id == "" {
		id = "sandbox-" + w.Journal.SandboxID
	}
	if err := ValidID("invocation", id); err != nil {
		return "", err
	}
	w.Journal.InvocationID = id
	return id, w.WriteJournal()
}
