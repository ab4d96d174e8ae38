package channels

import (
	"bufio"
	"context"
	"crypto/rand"
	"embed"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/tests/fixture"
)

//go:embed testdata/*.py
var scripts embed.FS

// suiteAlpha is the probability that the whole suite fails although every
// channel is closed. Each receiver gets an equal share of it (Bonferroni
// over maxReceivers, an upper bound on receivers × runtimes), and a receiver
// fails when its count of correct bits falls in either tail of
// Binomial(n, 1/2) with that much mass: a decoder that is reliably wrong is
// as good as one that is reliably right.
const (
	suiteAlpha   = 1e-3
	maxReceivers = 512
)

// chanceBounds returns lo and hi such that, for n fair coin flips,
// P(X <= lo) + P(X >= hi) <= alpha: a closed channel lands strictly inside.
func chanceBounds(n int, alpha float64) (lo, hi int) {
	tail := 0.0 // P(X >= k), accumulated from k = n down
	hi = n + 1
	for k := n; k > n/2; k-- {
		tail += math.Exp(lchoose(n, k) - float64(n)*math.Ln2)
		if tail > alpha/2 {
			break
		}
		hi = k
	}
	return n - hi, hi
}

func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// secretRepo is one confidential repository holding a random 64-bit secret.
type secretRepo struct {
	slug   string
	secret uint64
	dir    string
}

func randUint64(t *testing.T) uint64 {
	var b [8]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return binary.LittleEndian.Uint64(b[:])
}

// makeRepo creates a one-commit git repository with the given files.
func makeRepo(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	require.NoError(t, fixture.MakeRepo(dir, "ch", files))
}

// newSecretRepo makes confidential repository secret/<name> with a fresh secret.
func newSecretRepo(t *testing.T, base, name string) secretRepo {
	r := secretRepo{slug: "secret/" + name, secret: randUint64(t), dir: filepath.Join(base, name)}
	makeRepo(t, r.dir, map[string]string{"secret": fmt.Sprintf("%016x\n", r.secret)})
	return r
}

// writeConfig writes an awf config with the suite's rootfs and agent user.
func writeConfig(t *testing.T, dir, runtime, dockerSocket string, repos []secretRepo, publicDir string) string {
	t.Helper()
	priv := []map[string]any{{"repo": "open/pub", "sensitivity": "public", "source": publicDir}}
	for _, r := range repos {
		priv = append(priv, map[string]any{"repo": r.slug, "sensitivity": "confidential", "source": r.dir})
	}
	b := map[string]any{
		// 60 s per script by default: the long run's live sender needs
		// about 30 s.
		"enabled": true, "runtime": runtime, "privateRepos": priv, "maxInvocations": 1000, "timeout": int(scriptTimeout.Seconds()),
		"rootfs": map[string]any{"path": rootfsDir, "digest": rootfsHash},
	}
	if dockerSocket != "" {
		b["dockerSocket"] = dockerSocket
	}
	if *warmPool >= 0 {
		b["warmPool"] = *warmPool
	}
	return fixture.WriteConfig(t, dir, b, agentUser)
}

// report is one line the agent printed for one channel run.
type report struct {
	Channel   string           `json:"channel"`
	Truth     [][2]any         `json:"truth"`
	Receivers map[string][]int `json:"receivers"`
	Info      map[string]any   `json:"info"`
}

// evictMarker is the line the agent prints when it wants the target file
// evicted from the page cache; it then waits for a line on its stdin.
const evictMarker = "AWF-CHANNELS-EVICT"

// runLimit and queryLimit bound one `awf run` and one bounded query of its
// agent. They stop a hung run and are not assertions: the defaults fit this
// host, and a slow host raises them. In the emulated cgroup v2 VM a gvisor
// query takes 15-60 s, a counter sender can pass 60 s and is then answered
// at the 600 s bucket (so queryLimit must exceed 600 s there), and the
// counters run makes 37 queries.
var (
	runLimit   = flag.Duration("channels.runlimit", 0, "limit on one `awf run` (0: 8m, 25m with -channels.long)")
	queryLimit = flag.Duration("channels.querylimit", 120*time.Second, "limit on one bounded query of the agent")
)

// warmPool sets boundedQueries.warmPool for every run (-1: the config's
// default, so the suite's receivers run pooled as a default install does).
// In the emulated cgroup v2 VM a gvisor refill passes 60 s and is held to
// the 600 s bucket on the lane, so a pooled counters run there takes about
// twice as long as a cold one; 0 measures the cold path there.
var warmPool = flag.Int("channels.warmpool", -1, "boundedQueries.warmPool for every run (-1: the default)")

// scriptTimeout is boundedQueries.timeout for every run. In the emulated
// cgroup v2 VM on a loaded host, gvisor's cold live sender (about 30 s on
// the host) passes 60 s and would be measured as a failed sender.
var scriptTimeout = flag.Duration("channels.scripttimeout", 60*time.Second, "boundedQueries.timeout for every run")

// runAgent runs `awf run --config cfg -- python3 agent.py plan.json` and
// returns the agent's reports. evict is called each time the agent asks.
func runAgent(t *testing.T, cfg, plan string, evict func() error) []report {
	t.Helper()
	limit := *runLimit
	if limit <= 0 {
		limit = 8 * time.Minute
		if *long {
			limit = 25 * time.Minute
		}
	}
	env := []string{"PATH=" + binDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	var reps []report
	runUnderAwf(t, limit, "/", env, cfg, filepath.Join(filepath.Dir(plan), "agent.py"), plan, true, func(line string, stdin io.Writer) bool {
		switch {
		case line == evictMarker:
			if err := evict(); err != nil {
				t.Errorf("evict: %v", err)
			}
			_, _ = io.WriteString(stdin, "\n")
		case strings.HasPrefix(line, "{"):
			var r report
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Errorf("agent report %q: %v", line, err)
				return true
			}
			reps = append(reps, r)
		default:
			return false
		}
		return true
	})
	return reps
}

// runUnderAwf runs `awf run --config cfg -- python3 agent plan` in dir
// with env, within limit, and hands each line the agent prints to line,
// with the agent's stdin when withStdin (else nil, and the agent's stdin
// is /dev/null). line returns false for a line that is none of its: those
// are shown if the run fails. The run must succeed; its archive is
// removed, and awf's stderr returned.
func runUnderAwf(t *testing.T, limit time.Duration, dir string, env []string, cfg, agent, plan string, withStdin bool, line func(line string, stdin io.Writer) bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, awfBin, "run", "--config", cfg, "--", "/usr/bin/python3", agent, plan)
	cmd.Dir = dir
	cmd.Env = env
	var stdin io.WriteCloser
	if withStdin {
		var err error
		stdin, err = cmd.StdinPipe()
		require.NoError(t, err)
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	fixture.KillGroupOnCancel(cmd)
	require.NoError(t, cmd.Start())
	var other []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if !line(sc.Text(), stdin) {
			other = append(other, sc.Text())
		}
	}
	if stdin != nil {
		_ = stdin.Close()
	}
	err = cmd.Wait()
	fixture.RemoveArchive(t, stderr.String())
	require.NoError(t, err, "awf run: %s\nagent output: %s", stderr.String(), strings.Join(other, "\n"))
	return stderr.String()
}

// evictFile drops every page of path from the host page cache, as memory
// pressure would: the attacker's sender can then set each page at will even
// when fadvise is refused to it.
func evictFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	// Dirty pages survive DONTNEED, and the suite's rootfs was just written.
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("fdatasync %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("fadvise %s: %w", path, err)
	}
	return nil
}

// score counts the positions where decoded equals the secret bit that truth names.
func score(t *testing.T, repos map[string]secretRepo, truth [][2]any, decoded []int) (correct, n int) {
	t.Helper()
	require.Len(t, decoded, len(truth))
	for i, tr := range truth {
		r, ok := repos[tr[0].(string)]
		require.True(t, ok, "unknown repository %v", tr[0])
		bit := int(tr[1].(float64))
		if int((r.secret>>bit)&1) == decoded[i] {
			correct++
		}
	}
	return correct, len(truth)
}
