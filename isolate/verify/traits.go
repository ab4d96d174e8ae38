package verify

import (
	"context"
	"strings"

	"github.com/awf-project/awf/isolate/sbx"
)

// traits say how a runtime differs in what verify can observe from the host.
// A difference is reported as N/A with its reason, never as a PASS.
type traits struct {
	// filterNA, when set, is why the seccomp filter on the job's host pid is
	// not the sandbox policy, so the loaded-filter comparison does not apply.
	filterNA string
	// missing lists the controls a runtime cannot enforce; a runtime with
	// any is always BLOCKED.
	missing []string
	// controls, when set, is the runtime's capability probe in the seed's
	// structured form (sbx.Check). Its unsupported required controls are
	// what the BLOCKED reason names, so the reason and the structured list
	// are one list.
	controls func(context.Context) []sbx.ControlStatus
	// procLacksNNP is set when the runtime's /proc has no NoNewPrivs line.
	procLacksNNP bool
	// sentryDevices are device nodes the runtime implements in user space;
	// their presence is a WARN, not a FAIL.
	sentryDevices []string
	// sentryProc is set when the runtime's /proc and /sys are its own
	// user-space kernel's, per sandbox: host-counter files readable there
	// are a WARN, not a FAIL.
	sentryProc bool
	// procInodeResidual, when set, names a declared residual: the runtime
	// cannot start a sandbox without /proc, so the host's inode counter
	// stays readable there. docs/security.md lists it with its capacity;
	// the probe reports it as a WARN carrying this text, never as a PASS.
	procInodeResidual string
	// rootDiskResidual, when set, names a declared residual: the runtime's
	// root (and its /etc files) lie on a host filesystem, so statvfs there
	// shows that filesystem's live free counts. fs/host-disk reports it as
	// a WARN carrying this text, never as a PASS.
	rootDiskResidual string
}

// SbxMissingControls returns the query-isolation controls the audited sbx CLI
// does not expose, so the sbx runtime is always BLOCKED. They come from the
// sbx package's one list of controls; a fresh slice each call.
func SbxMissingControls() []string { return sbx.AuditedMissing() }

// traitsFor returns the traits of a runtime by name.
func traitsFor(name string) traits {
	switch name {
	case "gvisor":
		return traits{
			filterNA:      "gVisor implements system calls in its Sentry: the filter on the host pid is the Sentry's own, and the policy is enforced inside the Sentry (see priv/seccomp-mode and the privilege probes)",
			procLacksNNP:  true,
			sentryDevices: []string{"/dev/fuse", "/dev/net/tun"},
			sentryProc:    true,
		}
	case "docker":
		return traits{
			procInodeResidual: "a declared residual of the docker backend (docs/security.md, cross-invocation channels): the Engine's runc 1.1 needs /proc to start a container, so procfs inode numbers come from the host's counter, several bits per query pair",
			rootDiskResidual:  "a declared residual of the docker backend (docs/security.md, cross-invocation channels): the Engine builds every container's root, /etc/hosts, /etc/hostname and /etc/resolv.conf on its data root's filesystem, whose free counts move with every container",
		}
	case "sbx":
		return traits{missing: SbxMissingControls(), controls: sbx.Check}
	}
	return traits{}
}

// blocking runs the runtime's capability probe, when it has one, and returns
// its structured controls with the reason the runtime is BLOCKED: "missing
// controls: " and the required controls the probe finds unsupported. A
// runtime without a probe gets the static list; one whose probe finds
// nothing missing stays BLOCKED on that list (sbx is never launched).
func (tr traits) blocking(ctx context.Context) (string, []sbx.ControlStatus) {
	var cs []sbx.ControlStatus
	names := tr.missing
	if tr.controls != nil {
		cs = tr.controls(ctx)
		var unsupported []string
		for _, c := range cs {
			if c.Required && !c.Supported {
				unsupported = append(unsupported, c.Control)
			}
		}
		if len(unsupported) > 0 {
			names = unsupported
		}
	}
	return "missing controls: " + strings.Join(names, ", "), cs
}
