package staging

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/policy"
)

// SeedMapName is the seed map's file name in the private root.
const SeedMapName = "seed-map.json"

// SeedMapVersion is the seed map format version (compatible with the v2
// protocol's map, plus a commit per seed).
const SeedMapVersion = 2

// MaxSeedMapBytes caps the seed map file that ReadSeedMap accepts.
const MaxSeedMapBytes = 1 << 20

// maxSeeds caps the number of seeds in one map.
const maxSeeds = 4096

// SeedMap is the trusted repository → seed table the broker loads.
type SeedMap struct {
	Version int            `json:"version"`
	RunID   string         `json:"runId"`
	Seeds   []SeedMapEntry `json:"seeds"`
}

// SeedMapEntry is one repository of the seed map.
type SeedMapEntry struct {
	Repo        string `json:"repo"`        // normalized slug
	SeedID      string `json:"seedId"`      // SeedID(runId, repo)
	Sensitivity string `json:"sensitivity"` // policy sensitivity name
	Commit      string `json:"commit"`      // resolved commit of the seed
}

// NewSeedMap builds the seed map of staged seeds.
func NewSeedMap(runID string, seeds []Seed) SeedMap {
	m := SeedMap{Version: SeedMapVersion, RunID: runID, Seeds: make([]SeedMapEntry, 0, len(seeds))}
	for _, s := range seeds {
		m.Seeds = append(m.Seeds, SeedMapEntry{Repo: s.Repo, SeedID: s.SeedID, Sensitivity: s.Sensitivity, Commit: s.Commit})
	}
	return m
}

// Validate checks every field: version 2, a 32-hex run id, at least one seed,
// valid and unique normalized slugs, each seed id equal to SeedID(runId,
// repo), a known sensitivity and a full commit id.
func (m SeedMap) Validate() error {
	if m.Version != SeedMapVersion {
		return fmt.Errorf("seed map: version %d, want %d", m.Version, SeedMapVersion)
	}
	if !validRunID(m.RunID) {
		return errors.New("seed map: runId must be 32 lower-case hex digits")
	}
	if len(m.Seeds) == 0 || len(m.Seeds) > maxSeeds {
		return fmt.Errorf("seed map: %d seeds, want 1..%d", len(m.Seeds), maxSeeds)
	}
	seen := make(map[string]bool, len(m.Seeds))
	for i, s := range m.Seeds {
		switch {
		case ValidateSlug(s.Repo) != nil || NormalizeSlug(s.Repo) != s.Repo:
			return fmt.Errorf("seed map: seed %d: invalid repo %q", i, s.Repo)
		case seen[s.Repo]:
			return fmt.Errorf("seed map: duplicate repo %q", s.Repo)
		case s.SeedID != SeedID(m.RunID, s.Repo):
			return fmt.Errorf("seed map: seed %d: seedId does not match repo and runId", i)
		case !validSensitivity(s.Sensitivity):
			return fmt.Errorf("seed map: seed %d: unknown sensitivity %q", i, s.Sensitivity)
		case !validCommit(s.Commit):
			return fmt.Errorf("seed map: seed %d: invalid commit %q", i, s.Commit)
		}
		seen[s.Repo] = true
	}
	return nil
}

// WriteSeedMap validates and writes the seed map of seeds to path: a new
// file (O_EXCL, never through a symlink) with mode 0600.
func WriteSeedMap(path, runID string, seeds []Seed) error {
	m := NewSeedMap(runID, seeds)
	if err := m.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("seed map: %w", err)
	}
	return writeExclusive(path, append(b, '\n'), 0o600)
}

// ReadSeedMap reads and validates the seed map at path. The file must be a
// regular file (not a symlink) owned by the caller, not accessible to group
// or others, and at most MaxSeedMapBytes long.
func ReadSeedMap(path string) (SeedMap, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return SeedMap{}, fmt.Errorf("seed map: open: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return SeedMap{}, fmt.Errorf("seed map: stat: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return SeedMap{}, errors.New("seed map: not a regular file")
	case st.Uid != uint32(unix.Geteuid()):
		return SeedMap{}, fmt.Errorf("seed map: owned by uid %d", st.Uid)
	case st.Mode&0o077 != 0:
		return SeedMap{}, fmt.Errorf("seed map: mode %04o is open to group or others", st.Mode&0o7777)
	case st.Size > MaxSeedMapBytes:
		return SeedMap{}, fmt.Errorf("seed map: larger than %d bytes", MaxSeedMapBytes)
	}
	b := make([]byte, MaxSeedMapBytes+1)
	n, err := io.ReadFull(fdReader(fd), b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return SeedMap{}, fmt.Errorf("seed map: read: %w", err)
	}
	if n > MaxSeedMapBytes {
		return SeedMap{}, fmt.Errorf("seed map: larger than %d bytes", MaxSeedMapBytes)
	}
	return ParseSeedMap(b[:n])
}

// fdReader reads from a raw descriptor.
type fdReader int

func (r fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(p) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// ParseSeedMap strictly decodes and validates a seed map: one JSON object,
// no unknown or duplicate keys, no trailing data, then Validate.
func ParseSeedMap(b []byte) (SeedMap, error) {
	if len(b) > MaxSeedMapBytes {
		return SeedMap{}, fmt.Errorf("seed map: larger than %d bytes", MaxSeedMapBytes)
	}
	var m SeedMap
	if err := policy.DecodeStrict(b, &m); err != nil {
		return SeedMap{}, fmt.Errorf("seed map: %w", err)
	}
	if err := m.Validate(); err != nil {
		return SeedMap{}, err
	}
	return m, nil
}
