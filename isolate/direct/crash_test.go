package direct_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/policy"
)

// helperEnv makes the test binary act as a mini broker (see miniBroker).
const helperEnv = "AWF_DIRECT_TEST_MINI_BROKER"

// brokerConfig is what the test hands the mini broker.
type brokerConfig struct {
	RunID    string `json:"run_id"`
	StateDir string `json:"state_dir"`
	RootFS   string `json:"rootfs"`
	Repo     string `json:"repo"`
	// WarmOnly makes the broker copy Repo into its view (WarmView) and
	// run no job: it prints "warming" first and "warmed" once the copy is
	// done, and then waits to be killed.
	WarmOnly bool `json:"warm_only"`
}

// miniBroker opens a runtime, starts one long-running job, prints the host
// pid of the job and then waits to be killed, as a broker would die mid-run.
func miniBroker() int {
	var c brokerConfig
	if err := json.Unmarshal([]byte(os.Getenv(helperEnv)), &c); err != nil {
		fmt.Fprintln(os.Stderr, "mini broker:", err)
		return 2
	}
	rt, err := direct.New(isolate.HostConfig{RunID: c.RunID, StateDir: c.StateDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mini broker:", err)
		return 2
	}
	if c.WarmOnly {
		fmt.Println("warming")
		if err := rt.(*direct.Runtime).WarmView(context.Background(), c.Repo); err != nil {
			fmt.Fprintln(os.Stderr, "mini broker:", err)
			return 2
		}
		fmt.Println("warmed")
		time.Sleep(10 * time.Minute)
		return 1
	}
	pol, err := policy.Default()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mini broker:", err)
		return 2
	}
	tpl := isolate.Template{RunID: c.RunID, RootFS: c.RootFS, Repo: c.Repo, Limits: isolate.DefaultLimits(), Policy: pol}
	script := "import threading, time\nfor _ in range(4):\n    threading.Thread(target=time.sleep, args=(600,)).start()\ntime.sleep(600)\n"
	out := rt.Run(context.Background(), isolate.Spec{Template: tpl, Job: isolate.Job{
		InvocationID: "crash",
		Script:       []byte(script),
		OnStart:      func(pid int) { fmt.Printf("pid %d\n", pid) },
	}})
	fmt.Fprintln(os.Stderr, "mini broker: run ended:", out.Kind, out.Detail)
	return 1
}

// TestSweepAfterBrokerCrash kills a broker mid-run and checks that the
// start-up sweep of the next runtime reclaims everything it left: with its
// journal intact, with the journal lost, and with the sandbox's job dead
// and its cgroup leaves left frozen (a killer that froze them and died
// before its thaw), which libcontainer reads as a stopped container in
// the paused state.
func TestSweepAfterBrokerCrash(t *testing.T) {
	for _, c := range []struct {
		name         string
		lose, frozen bool
	}{
		{"journal intact", false, false},
		{"journal lost", true, false},
		{"left frozen", false, true},
	} {
		t.Run(c.name, func(t *testing.T) { crashAndSweep(t, c.lose, c.frozen) })
	}
}

// startMiniBroker starts the mini broker on c under ctx; cleanup kills it
// and sweeps c.StateDir, so that even a test that fails half-way leaves
// nothing behind. It returns the broker and its standard output.
func startMiniBroker(ctx context.Context, t *testing.T, c brokerConfig) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cfg, err := json.Marshal(c)
	require.NoError(t, err)
	// Orphans of the killed broker come to this process, which reaps them,
	// whatever pid 1 of the host does with zombies.
	require.NoError(t, unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(cfg))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if rt, err := direct.Open(isolate.HostConfig{RunID: newRunID(), StateDir: c.StateDir}); err == nil {
			_ = rt.Sweep(context.Background())
			_ = rt.Close()
		}
	})
	return cmd, bufio.NewReader(stdout)
}

// loseJournal removes every journal entry in state.
func loseJournal(t *testing.T, state string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(state, "journal"))
	require.NoError(t, err)
	for _, e := range ents {
		require.NoError(t, os.Remove(filepath.Join(state, "journal", e.Name())))
	}
}

func crashAndSweep(t *testing.T, lose, frozen bool) {
	state := t.TempDir()
	crashed := newRunID()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, stdout := startMiniBroker(ctx, t, brokerConfig{RunID: crashed, StateDir: state, RootFS: testRootFS, Repo: seedRepo(t)})

	line, err := stdout.ReadString('\n')
	require.NoError(t, err, "the mini broker never started its job")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	require.NoError(t, err, "bad line %q", line)

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.NoError(t, syscall.Kill(pid, 0), "the job should outlive its broker (libcontainer gives no death signal)")
	require.NotEmpty(t, leftoverProcs(t, crashed), "a crash mid-run leaves the sandbox running")
	require.NotEmpty(t, leftoverCgroups(t, crashed))
	for _, d := range []string{"journal", "sb", "libct", "views"} {
		ents, err := os.ReadDir(filepath.Join(state, d))
		require.NoError(t, err)
		require.NotEmpty(t, ents, "a crash mid-run leaves %s behind", d)
	}
	if lose {
		loseJournal(t, state)
	}
	if frozen {
		killAndFreeze(t, crashed, pid)
	}

	sweepAsNextRuntime(ctx, t, state)
	if !frozen {
		require.True(t, isZombie(pid), "the sweep must have killed the job")
		_, err = unix.Wait4(pid, nil, 0, nil)
		require.NoError(t, err)
	}
	assertNoLeftovers(t, crashed, state)
}

// killAndFreeze kills the job pid of run runID, reaps it (the test is the
// subreaper of the crashed broker's orphans), waits until no process of
// the run is left, and freezes every cgroup leaf of the run.
func killAndFreeze(t *testing.T, runID string, pid int) {
	t.Helper()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	_, err := unix.Wait4(pid, nil, 0, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(leftoverProcs(t, runID)) == 0 }, 10*time.Second, 10*time.Millisecond,
		"processes of the run outlived its job")
	froze := 0
	for _, d := range leftoverCgroups(t, runID) {
		for _, f := range []struct{ file, value string }{{"freezer.state", "FROZEN"}, {"cgroup.freeze", "1"}} {
			if _, err := os.Stat(filepath.Join(d, f.file)); err == nil {
				require.NoError(t, os.WriteFile(filepath.Join(d, f.file), []byte(f.value), 0))
				froze++
			}
		}
	}
	require.NotZero(t, froze, "no freezer among the run's cgroup leaves")
}

// sweepAsNextRuntime opens a runtime of a new run on state, as the broker
// restarted after a crash does, and checks that its start-up sweep
// succeeds and leaves it usable; then it closes it.
func sweepAsNextRuntime(ctx context.Context, t *testing.T, state string) {
	t.Helper()
	rt, err := direct.Open(isolate.HostConfig{RunID: newRunID(), StateDir: state})
	require.NoError(t, err)
	require.NoError(t, rt.Sweep(ctx))
	require.NoError(t, rt.Usable())
	require.NoError(t, rt.Close())
}

// isZombie reports whether pid is only waiting to be reaped by its new parent.
func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// Size of the seed of TestSweepAfterCrashMidCopy: enough files that its
// copy takes far longer than the test takes to see it begin.
const (
	midCopyDirs  = 20
	midCopyFiles = 50 // per directory
)

// TestSweepAfterCrashMidCopy kills a broker while it copies a seed into its
// view and checks that the start-up sweep of the next runtime removes the
// half-made view store (its noatime bind with it), with its journal intact
// and with the journal lost.
func TestSweepAfterCrashMidCopy(t *testing.T) {
	files := map[string]string{}
	for d := range midCopyDirs {
		for f := range midCopyFiles {
			files[fmt.Sprintf("d%02d/f%03d.txt", d, f)] = "seed\n"
		}
	}
	seed := filepath.Join(t.TempDir(), "seed")
	writeSeed(t, seed, files)
	t.Run("journal intact", func(t *testing.T) { crashMidCopy(t, seed, len(files), false) })
	t.Run("journal lost", func(t *testing.T) { crashMidCopy(t, seed, len(files), true) })
}

func crashMidCopy(t *testing.T, seed string, files int, lose bool) {
	state := t.TempDir()
	crashed := newRunID()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, stdout := startMiniBroker(ctx, t, brokerConfig{RunID: crashed, StateDir: state, Repo: seed, WarmOnly: true})
	line, err := stdout.ReadString('\n')
	require.NoError(t, err, "the mini broker never started its copy")
	require.Equal(t, "warming\n", line)

	// Kill the broker as soon as its copy has begun.
	view := filepath.Join(state, "views", crashed+"-views", "views", "1")
	for {
		if _, err := os.Lstat(view); err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "the mini broker never began its copy")
		time.Sleep(100 * time.Microsecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	rest, _ := io.ReadAll(stdout)
	require.NotContains(t, string(rest), "warmed", "the copy finished before the crash: enlarge the seed for this machine")
	copied := 0
	require.NoError(t, filepath.WalkDir(view, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			copied++
		}
		return err
	}))
	t.Logf("the crash left %d of %d files copied", copied, files)
	require.Less(t, copied, files, "the copy finished before the crash: enlarge the seed for this machine")
	require.NotEmpty(t, mountsUnder(t, state), "a crash leaves the view store's bind")
	require.FileExists(t, filepath.Join(state, "journal", "view-"+crashed+"-views.json"), "the store is journalled before its copy begins")
	if lose {
		loseJournal(t, state)
	}

	sweepAsNextRuntime(ctx, t, state)
	assertNoLeftovers(t, crashed, state)
}
