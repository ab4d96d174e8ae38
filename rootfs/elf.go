package rootfs

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// libDirs are searched, in order, for a DT_NEEDED soname.
var libDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// sharedClosure returns the host paths of the program interpreter and every
// shared library that the given ELF files need, transitively.
func sharedClosure(files []string) ([]string, error) {
	need := map[string]bool{}
	queue := append([]string(nil), files...)
	done := map[string]bool{}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		if done[f] {
			continue
		}
		done[f] = true
		interp, libs, err := elfDeps(f)
		if err != nil {
			return nil, err
		}
		if interp != "" && !need[interp] {
			need[interp] = true
		}
		for _, so := range libs {
			p, err := findLib(so)
			if err != nil {
				return nil, fmt.Errorf("%s needs %s: %w", f, so, err)
			}
			if !need[p] {
				need[p] = true
				queue = append(queue, p)
			}
		}
	}
	out := make([]string, 0, len(need))
	for p := range need {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// elfDeps reads the program interpreter and DT_NEEDED entries of one file.
func elfDeps(path string) (string, []string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", nil, fmt.Errorf("read ELF %s: %w", path, err)
	}
	defer f.Close()
	var interp string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return "", nil, fmt.Errorf("read interpreter of %s: %w", path, err)
			}
			for len(b) > 0 && b[len(b)-1] == 0 {
				b = b[:len(b)-1]
			}
			interp = string(b)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return "", nil, fmt.Errorf("read DT_NEEDED of %s: %w", path, err)
	}
	return interp, libs, nil
}

// findLib resolves a soname in libDirs.
func findLib(so string) (string, error) {
	if filepath.IsAbs(so) {
		return so, nil
	}
	for _, d := range libDirs {
		p := filepath.Join(d, so)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %v", libDirs)
}
