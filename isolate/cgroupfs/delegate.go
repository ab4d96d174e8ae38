package cgroupfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/mountinfo"
)

// Where awf's cgroups go on a cgroup v2 host.
//
// On a plain v2 host every backend places its cgroups below the root. When
// a service manager delegated a subtree to the broker (systemd's
// Delegate=yes marks the unit's cgroup with the trusted.delegate or
// user.delegate xattr), the broker may manage only that subtree: every
// backend then places its cgroups below it, and the broker moves itself
// into a leaf of it, because cgroup v2 lets an inner node with processes
// hand no controller to its children.

// SupervisorLeaf is the leaf the broker moves itself into inside a
// delegated cgroup.
const SupervisorLeaf = "supervisor"

// OwnV2 returns this process's cgroup v2 path, relative to Root with a
// leading slash.
func OwnV2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("cgroup: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("cgroup: no v2 entry in /proc/self/cgroup")
}

// DelegatedBase returns the delegated cgroup (relative to Root, with a
// leading slash) that own is, or whose supervisor leaf own is; "" if none.
func DelegatedBase(own string) string {
	if own == "/" || own == "" {
		return ""
	}
	if Delegated(filepath.Join(Root, own)) {
		return own
	}
	if filepath.Base(own) == SupervisorLeaf && Delegated(filepath.Join(Root, filepath.Dir(own))) {
		return filepath.Dir(own)
	}
	return ""
}

// Delegated reports whether the cgroup directory dir carries a service
// manager's delegation mark (trusted.delegate or user.delegate set to 1).
func Delegated(dir string) bool {
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		buf := make([]byte, 8)
		n, err := unix.Getxattr(dir, attr, buf)
		if err == nil && strings.TrimSpace(string(buf[:n])) == "1" {
			return true
		}
	}
	return false
}

// V2Base returns the cgroup v2 directory, relative to Root and without a
// leading slash, below which awf places its own cgroups: "" on a plain v2
// host, the delegated cgroup on a delegated one. With claim, every process
// of the delegated cgroup is first moved into its supervisor leaf, so that
// the caller may enable controllers for the delegated cgroup's children.
// It is the one place that finds the delegated base: the direct and gvisor
// sandbox parents and the agent's cgroup (broker/host) use it; docker's
// cgroups are the Engine's.
func V2Base(claim bool) (string, error) {
	own, err := OwnV2()
	if err != nil {
		return "", err
	}
	base := DelegatedBase(own)
	if base == "" {
		return "", nil
	}
	if claim && own == base {
		if err := moveSelfToLeaf(base); err != nil {
			return "", err
		}
	}
	return strings.TrimPrefix(base, "/"), nil
}

// moveSelfToLeaf moves every process of the delegated cgroup (the broker
// and anything else its unit started there) into the supervisor leaf.
func moveSelfToLeaf(own string) error {
	base := filepath.Join(Root, own)
	leaf := filepath.Join(base, SupervisorLeaf)
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		return fmt.Errorf("cgroup: supervisor leaf: %w", err)
	}
	if err := writeProc(leaf, os.Getpid()); err != nil {
		return fmt.Errorf("cgroup: move broker to %s: %w", leaf, err)
	}
	for range 10 {
		pids, err := Procs(base)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = writeProc(leaf, pid) // a process may exit meanwhile
		}
	}
	return fmt.Errorf("cgroup: processes keep appearing in %s", base)
}

// writeProc moves the process pid (all its threads) into the cgroup dir.
func writeProc(dir string, pid int) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// Cgroup modes: how awf places its cgroups on this host. Mode reports one,
// and every part of awf that speaks of the host's cgroups uses these names:
// direct, gvisor, the agent's cgroup, agentcheck and verify's host report.
const (
	// ModeV2Delegated: cgroup v2, inside a subtree a service manager
	// delegated to the broker (V2Base).
	ModeV2Delegated = "v2-delegated"
	// ModeV2: cgroup v2, below the root.
	ModeV2 = "v2"
	// ModeHybrid: the controllers are on cgroup v1 hierarchies, with a
	// controller-less v2 one beside them.
	ModeHybrid = "hybrid"
	// ModeV1: cgroup v1 hierarchies only.
	ModeV1 = "v1"
)

// IsV1 reports whether mode places cgroups on the v1 hierarchies (hybrid
// or v1): the backends take the same path for both.
func IsV1(mode string) bool { return mode == ModeHybrid || mode == ModeV1 }

// Mode reports the host's cgroup mode. A host with neither a cgroup v2
// root nor a cgroup v1 memory hierarchy is an error: no sandbox could be
// limited there.
func Mode() (string, error) {
	v2, err := Unified()
	if err != nil {
		return "", err
	}
	if v2 {
		own, err := OwnV2()
		if err != nil {
			return "", err
		}
		if DelegatedBase(own) != "" {
			return ModeV2Delegated, nil
		}
		return ModeV2, nil
	}
	ms, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return "", fmt.Errorf("cgroupfs: %w", err)
	}
	return v1Mode(ms)
}

// v1Mode tells a hybrid host from a v1-only one by its mount table.
func v1Mode(ms []mountinfo.Mount) (string, error) {
	if !hasV1Controller(ms, "memory") {
		return "", errors.New("cgroup: no v1 memory controller and no cgroup v2")
	}
	for _, m := range ms {
		if m.FSType == "cgroup2" {
			return ModeHybrid, nil
		}
	}
	return ModeV1, nil
}

// hasV1Controller reports whether the table lists a cgroup v1 hierarchy
// with controller ctrl among its superblock options.
func hasV1Controller(ms []mountinfo.Mount, ctrl string) bool {
	for _, m := range ms {
		if m.FSType == "cgroup" && slices.Contains(m.Super, ctrl) {
			return true
		}
	}
	return false
}
