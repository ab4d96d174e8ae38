package policy

import (
	"fmt"
	"runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
)

// archInfo describes one architecture a policy can be compiled for.
type archInfo struct {
	name      string // canonical policy name: x86_64, aarch64
	goarch    string
	scmp      libseccomp.ScmpArch
	audit     uint32 // AUDIT_ARCH_* as seen in seccomp_data.arch
	oci       specs.Arch
	container string // libcontainer's (libseccomp's) spelling
	// compat is the 32-bit ABI the same CPU can run; the filter must refuse
	// it as a bad architecture.
	compatName  string
	compatAudit uint32
	// x32Bit is set where syscall numbers with this bit belong to another ABI.
	x32Bit uint32
}

const (
	auditArchX86_64  = 0xC000003E
	auditArchAarch64 = 0xC00000B7
	auditArchI386    = 0x40000003
	auditArchARM     = 0x40000028
)

var arches = []archInfo{
	{name: "x86_64", goarch: "amd64", scmp: libseccomp.ArchAMD64, audit: auditArchX86_64,
		oci: specs.ArchX86_64, container: "amd64", compatName: "i386", compatAudit: auditArchI386, x32Bit: 1 << 30},
	{name: "aarch64", goarch: "arm64", scmp: libseccomp.ArchARM64, audit: auditArchAarch64,
		oci: specs.ArchAARCH64, container: "arm64", compatName: "arm", compatAudit: auditArchARM},
}

// lookupArch accepts the canonical name or an alias (amd64, arm64).
func lookupArch(name string) (archInfo, error) {
	for _, a := range arches {
		if name == a.name || name == a.goarch || name == a.container {
			return a, nil
		}
	}
	return archInfo{}, fmt.Errorf("unknown architecture %q (known: x86_64, aarch64)", name)
}

// NativeArch is the canonical name of the architecture this binary runs on.
func NativeArch() (string, error) {
	for _, a := range arches {
		if a.goarch == runtime.GOARCH {
			return a.name, nil
		}
	}
	return "", fmt.Errorf("policy: unsupported host architecture %s", runtime.GOARCH)
}

// CanonicalArch maps an alias (amd64, arm64) to the policy's name for it.
func CanonicalArch(name string) (string, error) {
	a, err := lookupArch(name)
	if err != nil {
		return "", err
	}
	return a.name, nil
}

// syscallNumber resolves name on arch; ok is false when arch has no such call.
func syscallNumber(name string, arch archInfo) (int, bool) {
	nr, err := libseccomp.GetSyscallFromNameByArch(name, arch.scmp)
	if err != nil || nr < 0 {
		return 0, false
	}
	return int(nr), true
}

// syscallName names number nr on arch; ok is false for unassigned numbers.
func syscallName(nr int, arch archInfo) (string, bool) {
	name, err := libseccomp.ScmpSyscall(nr).GetNameByArch(arch.scmp)
	if err != nil || name == "" {
		return "", false
	}
	return name, true
}
