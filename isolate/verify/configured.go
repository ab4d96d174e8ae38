package verify

import (
	"fmt"
	"time"

	"github.com/awf-project/awf/isolate"
)

// ConfiguredProbes are the limit probes under the operator's configured
// limits (awf isolate verify --config), rather than the battery's own small
// ones: each drives one limit past its configured value and expects its
// typed outcome, and config/cpu measures the CPU quota. Their scripts are
// probes/config/*.py, sized from the limits they run under.
func ConfiguredProbes(l isolate.Limits) []Probe {
	set := func(wall time.Duration) func(*isolate.Limits) {
		return func(x *isolate.Limits) {
			*x = l
			if wall > 0 && wall < x.Wall {
				x.Wall = wall
			}
		}
	}
	return inGroup("config", []Probe{
		kindProbe("config/memory", fmt.Sprintf("Allocates 8 MiB blocks up to twice the configured memory limit (%d MiB).", l.MemoryBytes>>20),
			"The configured memory limit does not hold or is not reported as oom.", isolate.KindOOM, "configured memory limit",
			set(0), sObj("allocated_mib", sInt(0, 1<<20))),
		kindProbe("config/pids", fmt.Sprintf("Starts threads up to twice the configured pids limit (%d).", l.Pids),
			"The configured pids limit does not hold or is not reported as pids-limit.", isolate.KindPidsLimit, "configured pids limit",
			set(0), sObj("threads", sInt(0, 1<<20))),
		kindProbe("config/fsize", fmt.Sprintf("Writes 1 MiB past the configured file-size limit (%d MiB) to one file in /query/repo.", l.FileSizeBytes>>20),
			"The configured RLIMIT_FSIZE does not hold or is not reported as file-size-limit.", isolate.KindFileSizeLimit, "configured file-size limit",
			set(0), sObj("written", sBool)),
		withLimits(wantProbe("config/nofile", fmt.Sprintf("Opens /dev/null past the configured RLIMIT_NOFILE (%d).", l.NoFile),
			"The configured descriptor limit does not hold.", sObj("err", sErrno, "within_limit", sBool), `{"err":"EMFILE","within_limit":true}`),
			set(0)),
		kindProbe("config/output", fmt.Sprintf("Writes one byte more than the configured output cap (%d bytes) to /query/out.", l.OutputBytes),
			"An answer above the configured cap is accepted.", isolate.KindOutputTooLarge, "configured output cap", set(0), sBool),
		kindProbe("config/timeout", fmt.Sprintf("Spins forever under the configured wall-clock deadline (%v).", l.Wall),
			"The configured deadline does not stop a runaway script, or is not reported as timeout.", isolate.KindTimeout, "configured wall-clock deadline",
			set(0), sObj("done", sBool)),
		{
			ID:      "config/cpu",
			Title:   fmt.Sprintf("Hashes in %d threads (hashlib releases the GIL) for 2 s under the configured CPU quota (%d milli-CPUs) and reads its own CPU clock.", l.CPUMilli/1000+1, l.CPUMilli),
			OnFail:  "The job used more CPU than its quota: the cgroup CPU limit does not hold.",
			limits:  set(0),
			schema:  sObj("milli", sInt(0, 100000), "cpus", sInt(0, 4096), "threads", sInt(0, 4096)),
			check:   checkCPUQuota,
			example: `{"milli":480,"cpus":1,"threads":1}`,
		},
	})
}

// cpuAllowed is the measurement allowance of config/cpu: 10 % of the quota
// plus 20 milli-CPUs (CFS enforces per 100 ms period, and the script's 2 s
// window does not start on a period boundary).
func cpuAllowed(quota int64) int64 { return quota + quota/10 + 20 }

// checkCPUQuota judges config/cpu.
//
// The script's clock is the kernel's accounting of its thread on direct and
// docker, so there it measures the quota. gVisor's is not: the Sentry
// charges a task with the wall time between handing it to the platform and
// getting it back, so host preemption and CFS throttling count as the
// application's CPU time. Measured on a loaded 2-CPU host under a 500
// milli quota: the script's clock said 619 to 833 milli while the sandbox's
// host cgroup (Sentry, gofer and stubs together) used 306 to 347 milli and
// was throttled (the earlier 779 is the same effect). So on gVisor the in-sandbox number
// cannot prove or disprove the quota, and the probe WARNs with it instead:
// the quota is the backend's cpu.cfs_quota_us (or cpu.max), written and
// read back on the host by the gvisor package.
func checkCPUQuota(c *probeCtx) (Status, string) {
	if c.out.Kind != isolate.KindOK {
		return Fail, fmt.Sprintf("the spinner did not answer: outcome %s (%s)", c.out.Kind, c.out.Detail)
	}
	q, m := c.limits.CPUMilli, c.num("milli")
	if c.runtime == "gvisor" {
		return Warn, fmt.Sprintf("the Sentry's CPU clock says %d milli-CPUs under a %d quota; it counts host preemption and throttling as application time, so it neither proves nor disproves the host cgroup quota (docs/verify.md)", m, q)
	}
	if cpus := c.num("cpus"); cpus > 0 && q >= 1000*cpus {
		if m > cpuAllowed(1000*cpus) {
			return Fail, fmt.Sprintf("%d threads used %d milli-CPUs on %d CPUs", c.num("threads"), m, cpus)
		}
		return NotApplicable, fmt.Sprintf("the quota is %d milli-CPUs and the sandbox's cpuset has %d CPU(s), so the cpuset binds first; %d threads used %d milli-CPUs", q, cpus, c.num("threads"), m)
	}
	if m > cpuAllowed(q) {
		return Fail, fmt.Sprintf("%d threads used %d milli-CPUs under a %d quota (allowed %d)", c.num("threads"), m, q, cpuAllowed(q))
	}
	return Pass, fmt.Sprintf("%d threads used %d milli-CPUs under a %d quota on %d CPU(s) (allowed %d; less on a busy host)", c.num("threads"), m, q, c.num("cpus"), cpuAllowed(q))
}
