package staging

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// procScanner reads every process's cmdline and environ over and over and
// records any that holds the needle.
type procScanner struct {
	needle   []byte
	stop     chan struct{}
	done     sync.WaitGroup
	mu       sync.Mutex
	leaks    []string
	scans    atomic.Int64
	gitProcs atomic.Int64 // git processes seen, to prove the scan was live
}

func startProcScanner(needle string) *procScanner {
	s := &procScanner{needle: []byte(needle), stop: make(chan struct{})}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			s.scanOnce()
		}
	}()
	return s
}

func (s *procScanner) scanOnce() {
	s.scans.Add(1)
	pids, _ := filepath.Glob("/proc/[0-9]*")
	self := fmt.Sprintf("/proc/%d", os.Getpid())
	for _, p := range pids {
		cmdline, _ := os.ReadFile(p + "/cmdline")
		if bytes.HasPrefix(cmdline, []byte("/usr/bin/git\x00")) || bytes.HasPrefix(cmdline, []byte("git\x00")) ||
			bytes.HasPrefix(cmdline, []byte("git-remote-http")) || bytes.HasPrefix(cmdline, []byte("/bin/sh\x00")) {
			s.gitProcs.Add(1)
		}
		for _, f := range []string{"cmdline", "environ"} {
			b := cmdline
			if f == "environ" {
				b, _ = os.ReadFile(p + "/environ")
			}
			if bytes.Contains(b, s.needle) {
				s.mu.Lock()
				s.leaks = append(s.leaks, fmt.Sprintf("%s/%s (self=%v): %q", p, f, p == self, cmdline))
				s.mu.Unlock()
			}
		}
	}
}

func (s *procScanner) finish() []string {
	close(s.stop)
	s.done.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaks
}

// TestTokenNeverVisibleInProc scans every process's argv and environment
// while several repositories are staged over authenticated HTTP, then scans
// the seeds and the private root.
func TestTokenNeverVisibleInProc(t *testing.T) {
	t.Parallel()
	token := "tok_" + randHex(t, 24)
	srv := newGitServer(t, token)
	var repos []Repo
	for i := range 6 {
		work, _ := makeWorkRepo(t, defaultSpec(fmt.Sprint(i)))
		slug := fmt.Sprintf("acme/r%d", i)
		srv.add(t, slug, work)
		repos = append(repos, Repo{Slug: slug, Sensitivity: "internal"})
	}
	root := newPrivateRoot(t)

	// Control: the scanner does see a token planted in a process environment.
	planted := exec.Command("/bin/sleep", "5")
	planted.Env = []string{"PLANTED=" + token + "x"}
	require.NoError(t, planted.Start())
	probe := startProcScanner(token)
	require.Eventually(t, func() bool { probe.mu.Lock(); defer probe.mu.Unlock(); return len(probe.leaks) > 0 },
		10*time.Second, time.Millisecond)
	probe.finish()
	require.NoError(t, planted.Process.Kill())
	_ = planted.Wait()

	scan := startProcScanner(token)
	seeds, err := Stage(context.Background(), Options{PrivateRoot: root, RunID: randHex(t, 16), Token: token, ServerURL: srv.URL}, repos)
	leaks := scan.finish()
	require.NoError(t, err)
	require.Len(t, seeds, 6)
	assert.Empty(t, leaks, "token visible in /proc")
	assert.Greater(t, scan.scans.Load(), int64(1))
	assert.Greater(t, scan.gitProcs.Load(), int64(0), "the scanner must have seen staging's git processes")
	assert.Empty(t, findBytes(t, root, []byte(token)), "token in the private root or a seed")
	for _, n := range []string{tokenFileName, askpassName, stagingHomeName} {
		_, err := os.Lstat(filepath.Join(root, n))
		assert.ErrorIs(t, err, os.ErrNotExist, n)
	}
}

// TestStageTwentyReposReportsProgress stages 20 repositories and checks one
// progress line per repository with its commit and duration.
func TestStageTwentyReposReportsProgress(t *testing.T) {
	t.Parallel()
	token := "tok_" + randHex(t, 16)
	srv := newGitServer(t, token)
	var repos []Repo
	want := map[string]string{}
	for i := range 20 {
		work, commit := makeWorkRepo(t, repoSpec{files: map[string]string{"f.txt": fmt.Sprintf("repo %d\n", i)}})
		slug := fmt.Sprintf("org%d/repo-%d", i%3, i)
		srv.add(t, slug, work)
		repos = append(repos, Repo{Slug: slug, Sensitivity: []string{"public", "internal", "confidential", "sealed"}[i%4]})
		want[slug] = commit
	}
	root := newPrivateRoot(t)
	var progress bytes.Buffer
	seeds, err := Stage(context.Background(), Options{PrivateRoot: root, RunID: randHex(t, 16), Token: token,
		ServerURL: srv.URL, Progress: &progress}, repos)
	require.NoError(t, err)
	require.Len(t, seeds, 20)
	lines := strings.Split(strings.TrimSuffix(progress.String(), "\n"), "\n")
	require.Len(t, lines, 20)
	re := regexp.MustCompile(`^staged (\S+) commit ([0-9a-f]{40}) in (\S+)$`)
	for i, l := range lines {
		m := re.FindStringSubmatch(l)
		require.NotNil(t, m, "progress line %q", l)
		assert.Equal(t, repos[i].Slug, m[1])
		assert.Equal(t, want[m[1]], m[2])
		d, err := time.ParseDuration(m[3])
		require.NoError(t, err)
		assert.Positive(t, d)
		t.Log(l)
	}
	m, err := ReadSeedMap(filepath.Join(root, SeedMapName))
	require.NoError(t, err)
	require.Len(t, m.Seeds, 20)
	for i, s := range m.Seeds {
		assert.Equal(t, want[s.Repo], s.Commit)
		assert.Equal(t, repos[i].Sensitivity, s.Sensitivity)
	}
}
