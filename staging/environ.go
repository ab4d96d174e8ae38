package staging

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// TokenVariables returns the environment variables ResolveToken reads, in
// order: a fresh slice each call, so no caller can change the list.
func TokenVariables() []string { return []string{"GH_TOKEN", "GITHUB_TOKEN"} }

// ScrubEnviron removes the named variables from this process: from its Go
// environment (so no child inherits them) and from the initial environment
// block that /proc/<pid>/environ shows, whose value bytes are overwritten in
// place through /proc/self/mem. Call it once, early, after ResolveToken, and
// before starting anything long-lived. Strings previously returned by
// os.Getenv for these names must not be used afterwards (ResolveToken returns
// a copy).
func ScrubEnviron(names ...string) error {
	for _, n := range names {
		if err := os.Unsetenv(n); err != nil {
			return fmt.Errorf("scrub environment: %w", err)
		}
	}
	start, end, err := environBounds()
	if err != nil {
		return fmt.Errorf("scrub environment: %w", err)
	}
	if end <= start || end-start > 16<<20 {
		return fmt.Errorf("scrub environment: implausible bounds %#x-%#x", start, end)
	}
	fd, err := unix.Open("/proc/self/mem", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("scrub environment: %w", err)
	}
	defer unix.Close(fd)
	block := make([]byte, end-start)
	if _, err := unix.Pread(fd, block, int64(start)); err != nil {
		return fmt.Errorf("scrub environment: read: %w", err)
	}
	off := 0
	for _, kv := range bytes.Split(block, []byte{0}) {
		name, _, ok := bytes.Cut(kv, []byte{'='})
		if ok && contains(names, string(name)) {
			valueAt := off + len(name) + 1
			zero := make([]byte, len(kv)-len(name)-1)
			if _, err := unix.Pwrite(fd, zero, int64(start)+int64(valueAt)); err != nil {
				return fmt.Errorf("scrub environment: write: %w", err)
			}
		}
		off += len(kv) + 1
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// environBounds returns env_start and env_end of this process (fields 50 and
// 51 of /proc/self/stat).
func environBounds() (uint64, uint64, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed /proc/self/stat")
	}
	fields := strings.Fields(string(b[i+1:])) // fields[0] is field 3 (state)
	if len(fields) < 51-2 {
		return 0, 0, errors.New("/proc/self/stat lacks env_start/env_end")
	}
	start, err1 := strconv.ParseUint(fields[50-3], 10, 64)
	end, err2 := strconv.ParseUint(fields[51-3], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, errors.New("malformed env_start/env_end")
	}
	return start, end, nil
}
