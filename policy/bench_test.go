package policy

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func BenchmarkParseDefault(b *testing.B) {
	src := DefaultSource()
	for i := 0; i < b.N; i++ {
		if _, err := Parse(DefaultName, src); err != nil {
			b.Fatal(err)
		}
	}
}

// defaultNative returns the default policy and the host arch, the input of
// every benchmark below that compiles or decodes the filter.
func defaultNative(b *testing.B) (*Policy, string) {
	b.Helper()
	p, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	a, err := NativeArch()
	if err != nil {
		b.Fatal(err)
	}
	return p, a
}

func BenchmarkCompileBPF(b *testing.B) {
	p, a := defaultNative(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.BPF(a); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecisionTable(b *testing.B) {
	p, a := defaultNative(b)
	prog, err := p.BPF(a)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeFilter(a, prog); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyscallUnderFilter times a system call in a child with no filter,
// with the default policy as runc loads it (binary tree plus ENOSYS stub), and
// with the same rules compiled linearly. getppid is allowed unconditionally,
// so the kernel's per-syscall verdict cache skips the BPF; fcntl(F_GETFD) has
// an argument condition, so the BPF runs on every call. It reports ns per
// system call.
func BenchmarkSyscallUnderFilter(b *testing.B) {
	for _, call := range []string{"getppid", "fcntl"} {
		for _, kind := range []string{"none", "runc", "linear"} {
			b.Run(call+"/"+kind, func(b *testing.B) {
				benchSyscall(b, call, kind)
			})
		}
	}
}

func benchSyscall(b *testing.B, call, kind string) {
	n := b.N * 1000
	res := runChild(b, "bench", benchKindEnv+"="+kind, benchCallEnv+"="+call, fmt.Sprintf("%s=%d", benchNEnv, n))
	v, err := strconv.ParseFloat(strings.TrimSpace(res.stdout), 64)
	if err != nil {
		b.Fatalf("bench child: %s", res)
	}
	b.ReportMetric(v, "ns/syscall")
}
