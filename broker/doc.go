// Package broker is the trusted broker: it serves the v2 framing over one
// Unix socket, counts invocations, debits the per-repository bit ledger,
// runs each accepted job in a fresh sandbox on a serialized lane, rounds
// every launched job's response time up to a fixed timing bucket, and
// answers with exactly one of the two canonical bodies. Typed reasons go only
// to the protected audit log.
//
// The pipeline is generic over the kind of job (JobKind): a bounded query is
// one kind; a bounded agent is another with its own framing header and job
// builder, sharing the lane, ledger, buckets and audit log.
package broker
