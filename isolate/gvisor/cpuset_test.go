package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/cgroupfs"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestSandboxCPUs runs a sandbox pinned to the host's last CPU (as awf run
// pins it, away from the agent's CPUs): every host task of the sandbox (the
// Sentry, the gofer) may run only there, and the Sentry shows the script
// that many CPUs.
func TestSandboxCPUs(t *testing.T) {
	cpus := isolatetest.LastCPU(t)
	r := newTestRuntime(t)
	r.cpus = cpus

	// While the script sleeps, read the affinity of every host task in the
	// sandbox's cgroup.
	seen := make(chan []string, 1)
	go func() {
		var out []string
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) && len(out) == 0 {
			leaves, _ := filepath.Glob(filepath.Join(cpusetLeafGlob(r), "cgroup.procs"))
			for _, l := range leaves {
				b, _ := os.ReadFile(l)
				for _, pid := range strings.Fields(string(b)) {
					st, err := os.ReadFile("/proc/" + pid + "/status")
					if err != nil {
						continue
					}
					for _, line := range strings.Split(string(st), "\n") {
						if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
							out = append(out, strings.TrimSpace(v))
						}
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		seen <- out
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := r.Run(ctx, isolate.Spec{Template: template(t, r, ""), Job: isolate.Job{InvocationID: "cpus", Script: []byte(
		"import os, time\ntime.sleep(3)\nopen('/query/out', 'w').write(str(len(os.sched_getaffinity(0))))\n")}})
	require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
	assert.Equal(t, "1", string(o.Output), "the Sentry's CPU count")
	got := <-seen
	require.NotEmpty(t, got, "no sandbox task seen in the cgroup")
	for _, v := range got {
		assert.Equal(t, cpus, v, "a sandbox host task may run elsewhere")
	}
}

// cpusetLeafGlob matches the sandbox cgroups of r in the hierarchy that
// holds the cpuset.
func cpusetLeafGlob(r *Runtime) string {
	if v2, _ := cgroupfs.Unified(); v2 {
		return filepath.Join(cgroupRoot, r.parent, Name+"-"+r.runID+"-*")
	}
	return filepath.Join(cgroupRoot, "cpuset", r.parent, Name+"-"+r.runID+"-*")
}
