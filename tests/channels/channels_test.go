package channels

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/rootfs"
	"github.com/awf-project/awf/tests/fixture"
)

// targetFile and liveFile are rarely read rootfs files whose pages carry the
// page-cache channels: python3's start-up and the stdlib-only scripts of the
// other channels never open them. targetFile holds 2 × 64 pages 8 apart for
// the cross-invocation channel, liveFile 64 pages 4 apart for the live one.
const (
	targetFile = "/usr/lib/x86_64-linux-gnu/libcrypto.so.3"
	liveFile   = "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0"
)

// counterNames are the host-wide counters the counter receiver reads, one
// receiver each: the inode counter behind pipe and procfs inode numbers, the
// fork and context-switch counters, and the /proc and /proc/sys files on the
// shared host-view list.
var counterNames = []string{
	"ino:batch0", "ino:batch1", "ino:proc_self", "ino:proc_thread_self",
	"stat:processes", "stat:ctxt", "stat:intr", "stat:softirq", "stat:procs_running", "stat:procs_blocked",
	"stat:cpu_user", "stat:cpu_system", "stat:cpu_idle", "stat:cpu_iowait",
	"vmstat:pgfault", "vmstat:pgalloc_normal", "vmstat:pgfree", "vmstat:pgpgin", "vmstat:pgmajfault",
	"vmstat:nr_free_pages", "vmstat:nr_slab_reclaimable", "vmstat:nr_slab_unreclaimable", "vmstat:nr_file_pages",
	"vmstat:nr_anon_pages", "vmstat:nr_kernel_stack", "vmstat:nr_page_table_pages", "vmstat:workingset_refault_file",
	"vmstat:thp_fault_alloc", "vmstat:pgactivate", "vmstat:pglazyfree",
	"meminfo:MemFree", "meminfo:MemAvailable", "meminfo:Cached", "meminfo:Slab", "meminfo:SReclaimable",
	"meminfo:SUnreclaim", "meminfo:KernelStack", "meminfo:PageTables", "meminfo:Committed_AS",
	"fs:dentry-state:nr_dentry", "fs:dentry-state:nr_unused", "fs:dentry-state:nr_negative",
	"fs:inode-nr:nr_inodes", "fs:inode-nr:nr_free", "fs:file-nr:allocated",
	"loadavg:0", "loadavg:running", "loadavg:threads", "loadavg:last_pid",
	"disk:reads", "disk:sectors_read", "disk:writes", "disk:sectors_written",
	"pressure:cpu:some", "pressure:memory:some", "pressure:memory:full", "pressure:io:some", "pressure:io:full",
	"kernel:entropy_avail", "kernel:ns_last_pid", "buddyinfo:blocks",
	"sysinfo:procs", "sysinfo:freeram", "sysinfo:load1",
}

// runtimeCase is one runtime and the attacker's per-runtime tuning: how much
// work one counter unit is, sized so that a 15-unit sender still answers in
// the 1 s bucket (gVisor's syscalls are about ten times dearer).
type runtimeCase struct {
	name string
	unit map[string]int
}

var runtimeCases = []runtimeCase{
	{"direct", map[string]int{"pipes": 2048, "threads": 64, "neg": 512, "faults": 64}},
	{"gvisor", map[string]int{"pipes": 128, "threads": 16, "neg": 32, "faults": 64}},
	{"docker", map[string]int{"pipes": 2048, "threads": 64, "neg": 512, "faults": 64}},
}

// TestChannels runs every channel on every available runtime: one awf run
// per runtime whose agent plays all senders and receivers in turn, then one
// subtest per channel that scores each receiver against the secrets.
func TestChannels(t *testing.T) {
	for _, rc := range runtimeCases {
		t.Run(rc.name, func(t *testing.T) {
			dockerSocket := fixture.RequireRuntime(t, rc.name)
			runOne(t, rc, dockerSocket)
		})
	}
}

// received is every bit one receiver decoded, with the secret bit each stands for.
type received struct {
	truth   [][2]any
	decoded []int
}

func runOne(t *testing.T, rc runtimeCase, dockerSocket string) {
	dir, err := os.MkdirTemp(workDir, rc.name+"-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	repoDir := filepath.Join(dir, "repos")
	pubDir := filepath.Join(repoDir, "pub")
	makeRepo(t, pubDir, map[string]string{"README.md": "# public\n"})

	trials := 1
	if *long {
		trials = 4
	}
	var repos []secretRepo
	var runs []map[string]any
	add := func(name string) string {
		r := newSecretRepo(t, repoDir, name)
		repos = append(repos, r)
		return r.slug
	}
	tag := fmt.Sprintf("%08x", uint32(randUint64(t)))
	ipcBase := 0x41570000 | int(randUint64(t)%255)<<8
	t.Cleanup(func() { cleanMisc(tag, ipcBase) })
	for i := 0; i < trials; i++ {
		runs = append(runs, map[string]any{"kind": "pagecache", "repo": add(fmt.Sprintf("page%d", i)),
			"file": targetFile, "first": 4, "stride": 16})
	}
	for i := 0; i < trials; i++ {
		runs = append(runs, map[string]any{"kind": "misc", "repo": add(fmt.Sprintf("misc%d", i)),
			"tag": fmt.Sprintf("%s%d", tag, i), "base": ipcBase})
	}
	for i := 0; i < (trials+1)/2; i++ {
		var cr []string
		for j := 0; j < 8; j++ {
			cr = append(cr, add(fmt.Sprintf("count%d-%d", i, j)))
		}
		runs = append(runs, map[string]any{"kind": "counters", "repos": cr, "names": counterNames, "unit": rc.unit})
	}
	// The live sender fits the 10 s bucket with 90 ms slots; the long run
	// uses 400 ms slots (the 60 s bucket), which a busy host's noise blurs less.
	slot := 0.09
	if *long {
		slot = 0.4
	}
	for i := 0; i < (trials+1)/2; i++ {
		runs = append(runs, map[string]any{"kind": "live", "repo": add(fmt.Sprintf("live%d", i)),
			"file": liveFile, "first": 4, "stride": 4,
			"pre_hi": 0.5, "pre_lo": 0.3, "slot": slot, "threads": 40, "mem_mb": 32})
	}
	if *only != "" {
		keep := runs[:0]
		for _, r := range runs {
			if strings.Contains(","+*only+",", ","+r["kind"].(string)+",") {
				keep = append(keep, r)
			}
		}
		runs = keep
	}
	// The scripts go where the agent user can read them.
	require.NoError(t, fs.WalkDir(scripts, "testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := scripts.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, filepath.Base(p)), raw, 0o644)
	}))
	rootfsPaths := []string{rootfsDir}
	cached := filepath.Join("/var/lib/awf/rootfs", rootfs.CacheName)
	if _, err := os.Stat(cached); err == nil {
		rootfsPaths = append(rootfsPaths, cached)
	}
	plan := map[string]any{"scripts": dir, "public": "open/pub", "runs": runs, "rootfs_paths": rootfsPaths, "killed": killed,
		"query_timeout": queryLimit.Seconds()}
	raw, err := json.Marshal(plan)
	require.NoError(t, err)
	planPath := filepath.Join(dir, "plan.json")
	require.NoError(t, os.WriteFile(planPath, raw, 0o644))
	cfg := writeConfig(t, dir, rc.name, dockerSocket, repos, pubDir)

	start := time.Now()
	reps := runAgent(t, cfg, planPath, func() error {
		for _, p := range rootfsPaths {
			for _, f := range []string{targetFile, liveFile} {
				if err := evictFile(filepath.Join(p, f)); err != nil && !os.IsNotExist(err) {
					return err
				}
			}
		}
		return nil
	})
	t.Logf("runtime=%s awf run took %s for %d channel runs", rc.name, time.Since(start).Round(time.Millisecond), len(reps))
	require.Len(t, reps, len(runs), "the agent did not report every channel run")

	byRepo := map[string]secretRepo{}
	for _, r := range repos {
		byRepo[r.slug] = r
	}
	merged := map[string]map[string]*received{}
	infos := map[string][]map[string]any{}
	for _, rep := range reps {
		if merged[rep.Channel] == nil {
			merged[rep.Channel] = map[string]*received{}
		}
		for name, bits := range rep.Receivers {
			m := merged[rep.Channel][name]
			if m == nil {
				m = &received{}
				merged[rep.Channel][name] = m
			}
			m.truth = append(m.truth, rep.Truth...)
			m.decoded = append(m.decoded, bits...)
		}
		infos[rep.Channel] = append(infos[rep.Channel], rep.Info)
	}
	for _, ch := range []string{"pagecache", "misc", "counters", "live"} {
		if *only != "" && !strings.Contains(","+*only+",", ","+ch+",") {
			continue
		}
		t.Run(ch, func(t *testing.T) {
			for _, info := range infos[ch] {
				js, _ := json.Marshal(info)
				t.Logf("channel=%s runtime=%s info %s", ch, rc.name, abbreviate(string(js), 4000))
				// A failed sender or receiver query proves nothing either way.
				for _, k := range []string{"sender_ok", "receiver_ok", "receivers_ok"} {
					if v, ok := info[k]; ok && v != true {
						t.Errorf("channel=%s runtime=%s: %s is %v: a query failed, so the channel was not measured", ch, rc.name, k, v)
					}
				}
				if _, ok := info["sender_ok"]; !ok {
					t.Errorf("channel=%s runtime=%s: the agent did not say whether its sender answered", ch, rc.name)
				}
			}
			names := make([]string, 0, len(merged[ch]))
			for n := range merged[ch] {
				names = append(names, n)
			}
			sort.Strings(names)
			require.NotEmpty(t, names, "no receiver reported for channel %s", ch)
			for _, name := range names {
				m := merged[ch][name]
				correct, n := score(t, byRepo, m.truth, m.decoded)
				lo, hi := chanceBounds(n, suiteAlpha/maxReceivers)
				verdict := "chance"
				if correct >= hi || correct <= lo {
					verdict = "OPEN"
					t.Errorf("channel=%s runtime=%s receiver=%s decoded %d/%d bits (%.1f%%), outside the chance band (%d, %d): the channel is open",
						ch, rc.name, name, correct, n, 100*float64(correct)/float64(n), lo, hi)
				}
				t.Logf("channel=%s runtime=%s receiver=%s bits/trial=64 bits=%d correct=%d accuracy=%.1f%% band=(%d,%d) %s",
					ch, rc.name, name, n, correct, 100*float64(correct)/float64(n), lo, hi, verdict)
			}
		})
	}
}

func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// cleanMisc removes whatever misc_send.py managed to leave on the host.
func cleanMisc(tag string, base int) {
	for i := 0; i < 64; i++ {
		k := "0x" + strconv.FormatInt(int64(base+i), 16)
		_ = exec.Command("ipcrm", "-M", k, "-S", k, "-Q", k).Run()
	}
	for _, d := range []string{"/dev/shm", "/tmp", "/var/tmp"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "awf-ch-"+tag) {
				_ = os.Remove(filepath.Join(d, e.Name()))
			}
		}
	}
}
