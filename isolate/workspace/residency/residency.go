// Package residency is the page-cache channel probe shared by the backends'
// tests: a sender script that loads chosen pages of rarely read stdlib
// files into the page cache it reads through, and a receiver script that
// tests, file by file, whether that page is resident (with mincore where
// the seccomp policy still allows it, and by timing the first read
// everywhere). Run in two invocations, the receiver must decode the
// sender's secret at chance; run as one invocation (Both), it must decode
// it, which proves the receiver works on this host.
//
// It runs nothing itself and is imported only by tests.
package residency

import (
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/big"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

//go:embed residency.py
var body string

// Mode says which half of the probe a script runs.
type Mode string

// The modes.
const (
	Send Mode = "send"
	Recv Mode = "recv"
	Both Mode = "both" // send, then receive in the same invocation: the positive control
)

// Bits is the number of bits one sender carries.
const Bits = 64

// ChanceMax is the most bits a receiver may decode correctly and still be
// at chance: the number correct of 64 fair guesses exceeds 44 with
// probability below 0.001.
const ChanceMax = 44

// ControlMin is the fewest bits the positive control must decode: a
// receiver that cannot tell a page it just loaded from a cold one proves
// nothing about separation. The control must beat the same chance band the
// separation check uses (fair guesses exceed ChanceMax with probability
// below 0.001), so a receiver that passes it is known to see residency on
// this host; timing through gVisor's gofer on a loaded host lands the
// control anywhere from there to 64.
const ControlMin = ChanceMax + 1

// Script returns the probe script for mode, carrying secret.
func Script(mode Mode, secret uint64) []byte {
	return []byte(fmt.Sprintf("MODE = %q\nSECRET = %d\n", mode, secret) + body)
}

// Secret returns a random 64-bit secret with exactly 32 bits set, so that
// the receiver's split at the median time matches its weight.
func Secret() (uint64, error) {
	var s uint64
	for bits.OnesCount64(s) < Bits/2 {
		n, err := rand.Int(rand.Reader, big.NewInt(Bits))
		if err != nil {
			return 0, fmt.Errorf("residency: secret: %w", err)
		}
		s |= 1 << n.Uint64()
	}
	return s, nil
}

// carrierDirs and carrierMin are the script's DIRS and size rule.
var carrierDirs = []string{"email", "multiprocessing", "asyncio", "unittest", "lib2to3", "lib2to3/pgen2", "lib2to3/fixes",
	"xml/dom", "xml/sax", "xml/etree", "http", "urllib", "wsgiref"}

const carrierMin = 8192

// Carriers lists, below the rootfs directory root, the 64 files the script
// uses, in bit order.
func Carriers(root string) ([]string, error) {
	var out []string
	for _, d := range carrierDirs {
		dir := filepath.Join(root, "usr/lib/python3.11", d)
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("residency: %w", err)
		}
		names := make([]string, 0, len(ents))
		for _, e := range ents {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		for _, n := range names {
			p := filepath.Join(dir, n)
			if fi, err := os.Stat(p); err == nil && filepath.Ext(n) == ".py" && fi.Size() >= carrierMin {
				out = append(out, p)
			}
		}
	}
	if len(out) < Bits {
		return nil, fmt.Errorf("residency: %d carrier files below %s, want %d", len(out), root, Bits)
	}
	return out[:Bits], nil
}

// EvictCarriers drops the carrier files of the rootfs directory root from
// the host page cache, as memory pressure eventually does to rarely read
// files. A sandbox that reads through the host's pages of root would then
// find them cold unless an earlier sandbox loaded them: tests call it
// before the sender, so that a shared page cache shows.
func EvictCarriers(root string) error {
	paths, err := Carriers(root)
	if err != nil {
		return err
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("residency: %w", err)
		}
		// Dirty pages (a freshly built root) are not dropped: write them
		// back first.
		err = unix.Fdatasync(int(f.Fd()))
		if err == nil {
			err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("residency: evict %s: %w", p, err)
		}
	}
	return nil
}

// Result is what a receiver decoded.
type Result struct {
	Timing  uint64   // bits decoded by timing
	Mincore *uint64  // bits decoded by mincore; nil when the sandbox refused it
	Ns      []uint64 // time of each first read, in nanoseconds
}

// Parse decodes a receiver's /query/out.
func Parse(out []byte) (Result, error) {
	var raw struct {
		Timing  string   `json:"timing"`
		Mincore *string  `json:"mincore"`
		Ns      []uint64 `json:"ns"`
	}
	var r Result
	if err := json.Unmarshal(out, &raw); err != nil {
		return r, fmt.Errorf("residency: receiver output %q: %w", out, err)
	}
	t, err := strconv.ParseUint(raw.Timing, 16, 64)
	if err != nil {
		return r, fmt.Errorf("residency: receiver timing %q: %w", raw.Timing, err)
	}
	r.Timing, r.Ns = t, raw.Ns
	if raw.Mincore != nil {
		m, err := strconv.ParseUint(*raw.Mincore, 16, 64)
		if err != nil {
			return r, fmt.Errorf("residency: receiver mincore %q: %w", *raw.Mincore, err)
		}
		r.Mincore = &m
	}
	return r, nil
}

// Correct is how many of the 64 bits got agrees with want.
func Correct(got, want uint64) int {
	return Bits - bits.OnesCount64(got^want)
}
