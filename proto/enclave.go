package proto

// EnclaveStartEnv names the variable a backend sets in an enclave's
// environment when it starts the enclave's program ahead of its invocation
// and hands it the start on a descriptor (direct: descriptor 3, the
// query bootstrap's pipe); its value is that descriptor's number. A
// program started at its invocation (gvisor) gets no such variable and
// runs at once. The variable, not the descriptor's presence, is the
// signal: a Go program's runtime can itself hold descriptor 3 before main
// (Go 1.25 keeps a cgroup CPU file open to follow the quota).
const EnclaveStartEnv = "AWF_ENCLAVE_START_FD"
