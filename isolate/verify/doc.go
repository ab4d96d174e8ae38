// Package verify proves, on the host it runs on, that every sandbox control
// holds: it checks the host (kernel, cgroup mode, overlayfs, seccomp, openat2,
// user namespaces, runsc, Docker and CI hazards), runs a battery of escape and
// limit probes inside each requested runtime through the same code path as a
// real query (a sandbox isolate/pool prepared ahead, then handed the script,
// as the broker's warm pool serves it), reads the seccomp filter that is actually loaded in a live
// sandbox and compares it with the golden decision table of the policy in use,
// and checks that nothing is left behind after each probe.
//
// Each probe is a small standard-library Python script with a finite schema.
// Its answer is checked and canonicalised by proto exactly as a query result
// is, and the expected answer decides PASS or FAIL. A runtime whose host
// component is absent is BLOCKED, never skipped silently.
//
// The report is for operators and CI; nothing in it ever reaches an agent.
package verify
