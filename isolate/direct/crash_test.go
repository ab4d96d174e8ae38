package direct_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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
// start-up sweep of the next runtime reclaims everything it left, with its
// journal intact and with the journal lost.
func TestSweepAfterBrokerCrash(t *testing.T) {
	t.Run("journal intact", func(t *testing.T) { crashAndSweep(t, false) })
	t.Run("journal lost", func(t *testing.T) { crashAndSweep(t, true) })
}

func crashAndSweep(t *testing.T, loseJournal bool) {
	state := t.TempDir()
	crashed := newRunID()
	cfg, err := json.Marshal(brokerConfig{RunID: crashed, StateDir: state, RootFS: testRootFS, Repo: seedRepo(t)})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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
		// Even if the test fails half-way, leave nothing behind.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if rt, err := direct.Open(isolate.HostConfig{RunID: newRunID(), StateDir: state}); err == nil {
			_ = rt.Sweep(context.Background())
			_ = rt.Close()
		}
	})

	line, err := bufio.NewReader(stdout).ReadString('\n')
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
	if loseJournal {
		ents, err := os.ReadDir(filepath.Join(state, "journal"))
		require.NoError(t, err)
		for _, e := range ents {
			require.NoError(t, os.Remove(filepath.Join(state, "journal", e.Name())))
		}
	}

	rt, err := direct.Open(isolate.HostConfig{RunID: newRunID(), StateDir: state})
	require.NoError(t, err)
	require.NoError(t, rt.Sweep(ctx))
	require.NoError(t, rt.Usable())
	require.NoError(t, rt.Close())
	require.True(t, isZombie(pid), "the sweep must have killed the job")
	_, err = unix.Wait4(pid, nil, 0, nil)
	require.NoError(t, err)
	assertNoLeftovers(t, crashed, state)
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
