// Package residency is the page-cache channel probe shared by the backends'
// tests: a sender script that loads chosen pages of rarely read stdlib
// files into the page cache it reads through, and a receiver script that
// tests, file by file, whether that page is resident (with mincore where
// the seccomp policy still allows it, and by timing the first read
// everywhere). Run in two invocations, the receiver must decode the
// sender's secret at chance; run as one invocation (Both), it must decode
// it, which proves the receiver works on this host (see ControlPassed).
//
// It runs nothing itself and is imported only by tests.
package residency

import (
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// Alpha is the chance level of both checks: a receiver that guesses each
// bit fairly reaches the bound a check uses with probability below Alpha.
const Alpha = 0.001

// ChanceMax is the most bits a receiver may decode correctly and still be
// at chance: AboveChance(Bits, Alpha)-1 (the number correct of 64 fair
// guesses exceeds 44 with probability below 0.001).
const ChanceMax = 44

// AboveChance returns the fewest correct bits out of n that fair guesses
// reach with probability below alpha: a receiver that decodes at least
// that many sees the bits, at level alpha.
func AboveChance(n int, alpha float64) int {
	// Sum the tail P(X >= k) of Binomial(n, 1/2) from k = n down, each
	// term in logs: C(n, k) alone overflows a float64 for large n.
	tail := 0.0
	for k := n; k >= 0; k-- {
		lc, _ := math.Lgamma(float64(n + 1))
		lk, _ := math.Lgamma(float64(k + 1))
		lnk, _ := math.Lgamma(float64(n - k + 1))
		tail += math.Exp(lc - lk - lnk - float64(n)*math.Ln2)
		if tail >= alpha {
			return k + 1
		}
	}
	return 0
}

// ControlPassed reports whether the positive control has shown, at level
// Alpha, that the receiver sees residency, after the looks-th of at most
// tries one-invocation runs whose correct bits add up to correct. The runs
// pool: on a jittery host one run of 64 bits may land anywhere around the
// receiver's accuracy, and more bits at the same level tell it from chance
// far more surely than the best of several runs. Each look is tested at
// Alpha/tries, so that stopping at the first look that passes keeps the
// chance of passing by luck below Alpha overall.
func ControlPassed(correct, looks, tries int) bool {
	return correct >= AboveChance(looks*Bits, Alpha/float64(tries))
}

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
		if err := Evict(p); err != nil {
			return err
		}
	}
	return nil
}

// Evict drops every page of the file p from the page cache it is read
// through. Dirty pages (a freshly built root) are not dropped, so they are
// written back first, where the file system writes at all: a read-only
// one (an erofs mount) has nothing to write back and refuses the sync.
func Evict(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("residency: %w", err)
	}
	defer f.Close()
	err = unix.Fdatasync(int(f.Fd()))
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EROFS) {
		err = nil
	}
	if err == nil {
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	}
	if err != nil {
		return fmt.Errorf("residency: evict %s: %w", p, err)
	}
	return nil
}

// Result is what a receiver decoded.
type Result struct {
	Timing  uint64  // bits decoded by timing
	Mincore *uint64 // bits decoded by mincore; nil when the sandbox refused it
	// Ns is, for each carrier, the time of its first read less that of
	// the reference read just before it, in nanoseconds.
	Ns []int64
}

// Parse decodes a receiver's /query/out.
func Parse(out []byte) (Result, error) {
	var raw struct {
		Timing  string  `json:"timing"`
		Mincore *string `json:"mincore"`
		Ns      []int64 `json:"ns"`
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
