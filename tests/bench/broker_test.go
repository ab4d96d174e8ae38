package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/tests/fixture"
)

// measureStartup times the bounded-query client to a local refusal (no
// arguments: it prints the error line without reading stdin or dialling),
// interleaved with /bin/true and with gofloor, a Go program that only
// prints the same line (built here as the fixture builds the client).
func (s *suite) measureStartup() Startup {
	st := Startup{Argument: "no arguments"}
	bin := filepath.Join(s.env.BinDir, "bounded-query")
	floor := filepath.Join(s.work, "gofloor")
	if out, err := exec.Command("go", "build", "-tags", "seccomp", "-o", floor, "github.com/awf-project/awf/tests/bench/gofloor").CombinedOutput(); err != nil {
		st.Blocked = fmt.Sprintf("build gofloor: %v: %s", err, out)
		return st
	}
	const line = `{"status":"error"}`
	var client, tru, gof []time.Duration
	for i := 0; i < s.p.startN+1; i++ {
		for _, argv := range [][]string{{bin}, {"/bin/true"}, {floor}} {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = hostEnv
			var out bytes.Buffer
			cmd.Stdout = &out
			t0 := time.Now()
			err := cmd.Run()
			d := time.Since(t0)
			if err != nil {
				st.Blocked = fmt.Sprintf("%s: %v", argv[0], err)
				return st
			}
			if i == 0 {
				continue // warm-up
			}
			switch argv[0] {
			case bin, floor:
				if strings.TrimSpace(out.String()) != line {
					st.Blocked = fmt.Sprintf("%s printed %q", filepath.Base(argv[0]), out.String())
					return st
				}
				if argv[0] == bin {
					client = append(client, d)
				} else {
					gof = append(gof, d)
				}
			default:
				tru = append(tru, d)
			}
		}
	}
	st.Client, st.BinTrue, st.GoFloor = Summarise(client), Summarise(tru), Summarise(gof)
	logf("bench: bounded-query start-up median %.2f ms (/bin/true %.2f ms, gofloor %.2f ms)", st.Client.MedianMS, st.BinTrue.MedianMS, st.GoFloor.MedianMS)
	return st
}

// The gaps between the broker row's queries: one long enough for the
// pool's refill and its bucket, and one an eager agent might leave.
const (
	thinkTime  = 1500 * time.Millisecond
	backToBack = 50 * time.Millisecond
)

// brokerSeeds is how many seeds the broker serves.
const brokerSeeds = 10

// measureBroker runs "awf broker" in the foreground with ten seeds (mid
// and nine 10-file ones) on the direct runtime, twice: with a warm pool of
// one sandbox per seed, where it asks n queries through the bounded-query
// CLI as the agent user and reads the broker's RSS, and without a pool,
// where every query builds its sandbox cold. The cold pass is the cold
// path as awf runs it: each sandbox's init is the awf binary itself, with
// all of awf's initializers, where the suite's own direct-cold row starts
// the bench's test binary. Both read the broker's audit log's timings.
func (s *suite) measureBroker(mid *benchRepo, w Workload) Broker {
	b := Broker{Workload: w.ID}
	if mid == nil {
		b.Blocked = "no 10k-file repository in this run"
		return b
	}
	b.Repo = mid.id
	if _, ok := s.rts["direct"]; !ok {
		b.Blocked = "the direct runtime is unusable: " + s.blocked["direct"]
		return b
	}
	logf("bench: broker: %d seeds, %d queries", brokerSeeds, s.p.brokerN)
	var specs []repoSpec
	for i := 1; i < brokerSeeds; i++ {
		specs = append(specs, repoSpec{fmt.Sprintf("s%d", i), 10})
	}
	small, err := makeRepos(filepath.Join(s.work, "broker-seeds"), specs)
	if err != nil {
		b.Blocked = err.Error()
		return b
	}
	repos := []brokerRepo{{"bench/r" + mid.id, "public", mid.dir}}
	for _, r := range small {
		repos = append(repos, brokerRepo{"bench/" + r.id, "public", r.dir})
	}
	u, err := user.Lookup(s.env.AgentUser)
	if err != nil {
		b.Blocked = err.Error()
		return b
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	plan := brokerPlan{repos: repos, repo: "bench/r" + mid.id, script: w.Script, uid: uid, gid: gid}

	b.Config = fmt.Sprintf("direct runtime, %d seeds, warmPool 1 each", brokerSeeds)
	plan.warmPool, plan.think, plan.backToBack = 1, s.p.brokerN, s.p.brokerN/2
	warm, blocked := s.runBroker(plan)
	if blocked != "" {
		b.Blocked = blocked
		return b
	}
	b.RSSReadyMiB, b.RSSEndMiB, b.RSSPeakMiB = warm.rssReady, warm.rssEnd, warm.rssPeak
	b.Processing, b.Wall, b.WallBackToBack, b.Buckets = Summarise(warm.procs), Summarise(warm.walls), Summarise(warm.b2b), warm.buckets
	b.ThinkMS, b.BackToBackMS = thinkTime.Milliseconds(), backToBack.Milliseconds()
	logf("bench: broker: processing median %.0f ms, wall at the agent %.1f ms, RSS peak %.1f MiB", b.Processing.MedianMS, b.Wall.MedianMS, b.RSSPeakMiB)

	b.ColdConfig = fmt.Sprintf("direct runtime, %d seeds, warmPool 0", brokerSeeds)
	plan.warmPool, plan.think, plan.backToBack = 0, 0, max(s.p.brokerN/2, 2)
	cold, blocked := s.runBroker(plan)
	if blocked != "" {
		b.ColdBlocked = blocked
		return b
	}
	b.ProcessingCold, b.WallCold, b.BucketsCold = Summarise(cold.procs), Summarise(cold.b2b), cold.buckets
	logf("bench: broker without a pool: processing median %.0f ms, wall at the agent %.1f ms", b.ProcessingCold.MedianMS, b.WallCold.MedianMS)
	return b
}

// brokerRepo is one privateRepos entry of the broker's config.
type brokerRepo struct {
	Repo        string `json:"repo"`
	Sensitivity string `json:"sensitivity"`
	Source      string `json:"source"`
}

// brokerPlan is one broker pass: its seeds and pool, and how many queries
// it asks thinkTime after the previous answer, then backToBack after it.
type brokerPlan struct {
	repos             []brokerRepo
	warmPool          int
	repo, script      string
	uid, gid          int
	think, backToBack int
}

// brokerResult is what one pass measured.
type brokerResult struct {
	rssReady, rssEnd, rssPeak float64
	walls, b2b, procs         []time.Duration
	buckets                   map[string]int
}

// runBroker runs one pass of plan against a foreground "awf broker" and
// stops it. It returns a sentence instead when the pass could not run.
func (s *suite) runBroker(plan brokerPlan) (brokerResult, string) {
	var res brokerResult
	bq := map[string]any{
		"enabled": true, "privateRepos": plan.repos, "runtime": "direct", "maxInvocations": 1000, "warmPool": plan.warmPool,
		"rootfs": map[string]any{"path": s.env.RootFS, "digest": s.env.RootFSHash},
	}
	raw, err := json.Marshal(map[string]any{"boundedQueries": bq, "agent": map[string]any{"user": s.env.AgentUser}})
	if err != nil {
		return res, err.Error()
	}
	cfg := filepath.Join(s.work, fmt.Sprintf("broker-pool%d.json", plan.warmPool))
	if err := os.WriteFile(cfg, raw, 0o600); err != nil {
		return res, err.Error()
	}

	cmd := exec.Command(s.env.AwfBin, "broker", "--config", cfg)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err.Error()
	}
	var errb fixture.SyncBuffer
	cmd.Stderr = &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return res, err.Error()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			s.note("the foreground broker did not stop on SIGTERM within 2 min and was killed")
		}
	}
	defer stop()
	sockc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "socket: "); ok {
				sockc <- v
			}
		}
	}()
	var socket string
	select {
	case socket = <-sockc:
	case err := <-done:
		stopped = true
		return res, fmt.Sprintf("the broker exited (%v): %s", err, tail(errb.String()))
	case <-time.After(5 * time.Minute):
		return res, "the broker was not ready within 5 min: " + tail(errb.String())
	}
	pid := brokerPID(cmd.Process.Pid)
	if pid == 0 {
		return res, "the broker process (awf broker --serve) was not found"
	}
	time.Sleep(2 * time.Second) // let the pool fill
	res.rssReady, _ = rssMiB(pid)
	schema := `{"type":"boolean"}`
	// The first queries leave the refill time to finish (it holds the
	// lane until its own bucket); the rest come back to back.
	for i := 0; i < plan.think+plan.backToBack; i++ {
		q := exec.Command(filepath.Join(s.env.BinDir, "bounded-query"), "--repo", plan.repo, "--schema", schema)
		q.Dir = "/"
		q.Env = []string{"PATH=/usr/bin:/bin", proto.QuerySocketEnv + "=" + socket}
		q.Stdin = strings.NewReader(plan.script)
		q.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(plan.uid), Gid: uint32(plan.gid)}}
		t0 := time.Now()
		out, err := q.Output()
		d := time.Since(t0)
		if err != nil || strings.TrimSpace(string(out)) != `{"status":"ok","result":true}` {
			return res, fmt.Sprintf("query %d: %v: %q", i, err, out)
		}
		if i < plan.think {
			res.walls = append(res.walls, d)
			time.Sleep(thinkTime)
		} else {
			res.b2b = append(res.b2b, d)
			time.Sleep(backToBack)
		}
	}
	res.rssEnd, res.rssPeak = rssMiB(pid)
	stop()
	archive := ""
	for _, l := range strings.Split(errb.String(), "\n") {
		if _, v, ok := strings.Cut(l, "audit log kept in "); ok {
			archive = strings.TrimSpace(v)
		}
	}
	if archive == "" {
		return res, "no audit archive reported: " + tail(errb.String())
	}
	if strings.HasPrefix(archive, "/var/log/awf/") {
		defer os.RemoveAll(archive)
	}
	res.procs, res.buckets, err = auditTimings(filepath.Join(archive, "bounded-query.jsonl"))
	if err != nil {
		return res, err.Error()
	}
	return res, ""
}

// auditTimings reads elapsedMs and bucketMs of every invocation record.
func auditTimings(path string) ([]time.Duration, map[string]int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var procs []time.Duration
	buckets := map[string]int{}
	for _, l := range strings.Split(string(raw), "\n") {
		var rec struct {
			Kind      string `json:"kind"`
			ElapsedMs *int64 `json:"elapsedMs"`
			BucketMs  *int64 `json:"bucketMs"`
		}
		if l == "" || json.Unmarshal([]byte(l), &rec) != nil || rec.Kind != "invocation" || rec.ElapsedMs == nil {
			continue
		}
		procs = append(procs, time.Duration(*rec.ElapsedMs)*time.Millisecond)
		if rec.BucketMs != nil {
			buckets[fmtBucket(time.Duration(*rec.BucketMs)*time.Millisecond)]++
		}
	}
	if len(procs) == 0 {
		return nil, nil, fmt.Errorf("%s: no invocation records with elapsedMs", path)
	}
	return procs, buckets, nil
}

// brokerPID finds the "awf broker --serve" process below the foreground one.
func brokerPID(parent int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(cl, []byte("\x00--serve\x00")) {
			continue
		}
		for p := pid; p > 1; p = ppid(p) {
			if p == parent {
				return pid
			}
		}
	}
	return 0
}

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// rssMiB returns VmRSS and VmHWM of pid in MiB.
func rssMiB(pid int) (rss, peak float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[0], 64)
		switch k {
		case "VmRSS":
			rss = round2(kb / 1024)
		case "VmHWM":
			peak = round2(kb / 1024)
		}
	}
	return rss, peak
}
