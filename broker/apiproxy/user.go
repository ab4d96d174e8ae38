package apiproxy

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker/sysuser"
)

// UserName is the system user the proxy process runs as once it listens.
// The proxy parses what the agent and the enclaves send it; run as root,
// a flaw there would own the host (every repository, the broker, the
// sandboxes). It needs a uid of its own: not root, not the agent's (the
// agent could then signal or trace it and take the provider keys), and not
// the sandboxes' 65534 (a confidential sandbox could then be traced from
// the proxy, and they would share the per-uid process limit).
const UserName = "awf-proxy"

// Others are the ids that the proxy must not share: the agent user's uid,
// and the uid and gid the sandboxes run as. The caller names them, so that
// this package (which fakes and the agent loop's tests import) does not
// pull in the sandbox packages; -1 names none.
type Others struct {
	AgentUID, SandboxUID, SandboxGID int
}

// ProxyUser returns the ids of UserName, creating it as a system user the
// first time, as a package's install step would. Ids that the proxy would
// share with root or with others are refused.
func ProxyUser(ctx context.Context, others Others) (sysuser.IDs, error) {
	ids, err := sysuser.Ensure(ctx, UserName)
	if err != nil {
		return ids, fmt.Errorf("api proxy: the proxy's user: %w", err)
	}
	if err := checkUser(ids, others); err != nil {
		return ids, fmt.Errorf("api proxy: user %s: %w", UserName, err)
	}
	return ids, nil
}

// checkUser refuses ids that the proxy would share with root or others.
func checkUser(ids sysuser.IDs, others Others) error {
	switch {
	case ids.UID == 0 || ids.GID == 0:
		return fmt.Errorf("uid %d gid %d: the proxy must not run as root or group root", ids.UID, ids.GID)
	case ids.UID < 0 || ids.GID < 0:
		return fmt.Errorf("uid %d gid %d are not ids", ids.UID, ids.GID)
	case ids.UID == others.AgentUID:
		return fmt.Errorf("uid %d is the agent user's", ids.UID)
	case ids.UID == others.SandboxUID || ids.GID == others.SandboxGID:
		return fmt.Errorf("uid %d gid %d: the sandboxes run as %d:%d", ids.UID, ids.GID, others.SandboxUID, others.SandboxGID)
	}
	return nil
}

// dropRoot is Serve's drop to u. A proxy that is not root has nothing to
// drop (and could not change its uid).
func dropRoot(u *sysuser.IDs) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if u == nil {
		return errors.New("api proxy: runs as root and its spec names no user to drop to")
	}
	// Root is refused here again; ProxyUser, in awf, checked the others.
	if err := checkUser(*u, Others{AgentUID: -1, SandboxUID: -1, SandboxGID: -1}); err != nil {
		return fmt.Errorf("api proxy: %w", err)
	}
	// Upstream TLS verifies against the system roots, which Go loads on
	// first use: load them now, in case only root may read them.
	_, _ = x509.SystemCertPool()
	return dropPrivileges(*u)
}

// dropPrivileges makes every thread of the process ids.UID:ids.GID with no
// supplementary group and no capability. Serve calls it once it holds all
// it opens as root (keys, audit log, listeners, TLS roots). Changing the
// uid clears the parent-death signal, so it is set again, from a thread
// that stays locked and so lives as long as the process; if awf died in
// between, the proxy ends here.
func dropPrivileges(ids sysuser.IDs) error {
	ppid := os.Getppid()
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("api proxy: drop groups: %w", err)
	}
	if err := syscall.Setresgid(ids.GID, ids.GID, ids.GID); err != nil {
		return fmt.Errorf("api proxy: set gid %d: %w", ids.GID, err)
	}
	if err := syscall.Setresuid(ids.UID, ids.UID, ids.UID); err != nil {
		return fmt.Errorf("api proxy: set uid %d: %w", ids.UID, err)
	}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("api proxy: parent-death signal: %w", err)
	}
	if os.Getppid() != ppid {
		return errors.New("api proxy: awf exited while the proxy started")
	}
	return checkDropped(ids)
}

// checkDropped reads back, for every thread, what dropPrivileges set: a
// thread that kept root or a capability would be the whole process's.
func checkDropped(ids sysuser.IDs) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("api proxy: check the drop: %w", err)
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		if err := checkStatus(string(b), ids); err != nil {
			return fmt.Errorf("api proxy: thread %s: %w", t.Name(), err)
		}
	}
	return nil
}

// checkStatus checks one /proc status file: all four uids and gids are
// ids', no supplementary group, no capability in any set.
func checkStatus(status string, ids sysuser.IDs) error {
	const none = "0000000000000000"
	uid, gid := strconv.Itoa(ids.UID), strconv.Itoa(ids.GID)
	want := map[string]string{
		"Uid": strings.Repeat(uid+" ", 3) + uid, "Gid": strings.Repeat(gid+" ", 3) + gid, "Groups": "",
		"CapInh": none, "CapPrm": none, "CapEff": none, "CapAmb": none,
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(status, "\n") {
		k, v, _ := strings.Cut(line, ":")
		w, ok := want[k]
		if !ok {
			continue
		}
		seen[k] = true
		if got := strings.Join(strings.Fields(v), " "); got != w {
			return fmt.Errorf("%s: %q, want %q", k, got, w)
		}
	}
	if len(seen) != len(want) {
		return fmt.Errorf("status has %d of the %d lines checked", len(seen), len(want))
	}
	return nil
}
