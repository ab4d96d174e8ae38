package bench

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// repoSpec names a repository size.
type repoSpec struct {
	id    string
	files int
}

// benchRepo is one generated repository: a real git repository with one
// commit, made read-only as a staged seed is.
type benchRepo struct {
	id    string
	dir   string
	files int
	dirs  int
	made  time.Duration
}

// perDir is how many files each directory holds.
const perDir = 100

// makeRepos generates each repository under root.
func makeRepos(root string, specs []repoSpec) ([]*benchRepo, error) {
	var out []*benchRepo
	for _, sp := range specs {
		t0 := time.Now()
		r := &benchRepo{id: sp.id, dir: filepath.Join(root, sp.id), files: sp.files}
		if err := os.MkdirAll(r.dir, 0o755); err != nil {
			return nil, err
		}
		dirs := map[string]bool{}
		for i := range sp.files {
			d := filepath.Join(r.dir, "src", fmt.Sprintf("d%04d", i/perDir))
			if !dirs[d] {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return nil, err
				}
				dirs[d] = true
			}
			body := fmt.Sprintf("# file %d\nVALUE_%d = %q\n", i, i, strings.Repeat("x", 64))
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d.py", i%perDir)), []byte(body), 0o644); err != nil {
				return nil, err
			}
		}
		r.dirs = len(dirs)
		for _, args := range [][]string{
			{"init", "-q", "-b", "main"},
			{"add", "."},
			{"-c", "user.email=bench@example.com", "-c", "user.name=bench", "commit", "-q", "-m", "initial"},
			{"repack", "-adq"},
			{"prune-packed"},
		} {
			cmd := exec.Command("git", args...)
			cmd.Dir = r.dir
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
			if b, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("git %s in %s: %v: %s", strings.Join(args, " "), r.dir, err, b)
			}
		}
		// Read-only, as staging leaves a seed.
		err := filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			return os.Chmod(p, 0o444)
		})
		if err == nil {
			err = filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return err
				}
				return os.Chmod(p, 0o555)
			})
		}
		if err != nil {
			return nil, err
		}
		r.made = time.Since(t0)
		logf("bench: %s-file repository made in %.1f s", r.id, r.made.Seconds())
		out = append(out, r)
	}
	return out, nil
}
