// Package cgroupfs reads the limit events a sandbox's cgroup records: it
// is the one place that knows which file and key of a cgroup say that the
// OOM killer fired or that the pids limit refused a fork, on cgroup v1 and
// v2. It creates, configures and removes nothing: each backend places its
// cgroups its own way (direct through libcontainer, gvisor by itself).
package cgroupfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Events are the limit events of one cgroup.
type Events struct {
	OOMKills int64 // processes the kernel OOM-killed
	PidsMax  int64 // forks refused by the pids limit
}

// ReadEvents reads the events of the cgroup whose memory controller
// directory is memDir and whose pids controller directory is pidsDir (the
// same directory on v2). A counter it cannot read is zero and its error is
// joined into the result, so a caller that must not miss a limit fails on
// any error, and one that cannot do better still gets the other counter.
func ReadEvents(v2 bool, memDir, pidsDir string) (Events, error) {
	memFile := "memory.oom_control"
	if v2 {
		memFile = "memory.events"
	}
	var e Events
	var memErr, pidsErr error
	e.OOMKills, memErr = Counter(filepath.Join(memDir, memFile), "oom_kill")
	e.PidsMax, pidsErr = Counter(filepath.Join(pidsDir, "pids.events"), "max")
	return e, errors.Join(memErr, pidsErr)
}

// Counter reads the value of key from the flat-keyed cgroup file at path
// (lines "key value"); 0 and an error when the file, the key or a number
// is missing.
func Counter(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("cgroup counter: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cgroup counter %s in %s: %w", key, path, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("cgroup counter: no %s in %s", key, path)
}
