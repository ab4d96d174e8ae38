package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// The reference's in-container entry point (its run-query): a second full
// copy of the seed into the /query tmpfs, then the script.
const referenceRunQuery = `import os, runpy, shutil
shutil.copytree('/awf/seed', '/query/repo', symlinks=True)
os.chdir('/query')
runpy.run_path('/awf/query-script.py', run_name='__main__')
`

// dockerBin prefers the Engine package's own client.
func dockerBin() string {
	for _, p := range []string{"/usr/bin/docker", "/usr/local/bin/docker"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "docker"
}

// dockerCmd runs the docker CLI against the private Engine.
func (s *suite) dockerCmd(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, dockerBin(), append([]string{"-H", "unix://" + s.dockerS}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + s.work, "DOCKER_CONFIG=" + filepath.Join(s.work, "docker-cli")}
	cmd.Stdin = stdin
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("docker %s: %v: %s", args[0], err, tail(out.String()))
	}
	return out.Bytes(), nil
}

// importReference imports the rootfs into the private Engine as the
// reference's query image (no registry: docker import of a tarball).
func (s *suite) importReference() {
	if s.blocked["docker"] != "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tar := exec.CommandContext(ctx, "tar", "-C", s.env.RootFS, "--numeric-owner", "-cf", "-", ".")
	pipe, err := tar.StdoutPipe()
	if err == nil {
		err = tar.Start()
	}
	if err != nil {
		s.note("reference image: tar: %v", err)
		return
	}
	img := "awf-bench-reference:" + randomID()[:12]
	_, err = s.dockerCmd(ctx, pipe, "import", "-", img)
	if werr := tar.Wait(); err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		s.note("reference image: %v", err)
		return
	}
	s.refImg = img
}

// refRunner is the reference's per-query path.
type refRunner struct {
	s    *suite
	repo string
	w    Workload
	base string
}

func (s *suite) referenceRow(r *benchRepo, w Workload) (runner, error) {
	base, err := os.MkdirTemp(s.work, "ref-")
	if err != nil {
		return nil, err
	}
	return &refRunner{s: s, repo: r.dir, w: w, base: base}, nil
}

func (c *refRunner) once(ctx context.Context) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	inv := c.s.nextID("ref")
	work := filepath.Join(c.base, inv)
	name := "awf-bench-query-" + inv
	t0 := time.Now()
	err := c.query(ctx, work, name)
	// Cleanup is inside the measured window, as in the reference.
	if _, rerr := c.s.dockerCmd(ctx, nil, "rm", "-f", name); err == nil && rerr != nil {
		err = rerr
	}
	if rerr := os.RemoveAll(work); err == nil && rerr != nil {
		err = rerr
	}
	d := time.Since(t0)
	if err != nil {
		return sample{}, err
	}
	return sample{proc: d, wall: d}, nil
}

func (c *refRunner) query(ctx context.Context, work, name string) error {
	if err := os.Mkdir(work, 0o700); err != nil {
		return err
	}
	// The broker's full host copy of the seed (cpSync in the reference).
	if out, err := exec.CommandContext(ctx, "cp", "-a", c.repo, filepath.Join(work, "repo")).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a: %v: %s", err, tail(string(out)))
	}
	script := filepath.Join(work, "script.py")
	if err := os.WriteFile(script, []byte(c.w.Script), 0o444); err != nil {
		return err
	}
	out := filepath.Join(work, "out")
	if err := os.WriteFile(out, nil, 0o600); err != nil {
		return err
	}
	if err := os.Chown(out, 65534, 65534); err != nil {
		return err
	}
	// The reference's argv (containers/.../query-runner-spec.js), with
	// Docker's default seccomp profile in place of its own.
	_, err := c.s.dockerCmd(ctx, nil, "run", "--pull", "never", "--name", name,
		"--label", "awf.bounded-query.run=bench", "--label", "awf.bounded-query.invocation="+name,
		"--network", "none", "--read-only", "--user", "65534:65534", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges:true",
		"--memory", "512m", "--memory-swap", "512m", "--cpus", "1", "--pids-limit", "128",
		"--ulimit", "fsize=536870912", "--ulimit", "nofile=1024:1024",
		"--tmpfs", "/tmp:rw,noexec,nosuid,nodev,size=16m",
		"--tmpfs", "/query:rw,nosuid,nodev,size=1073741824,uid=65534,gid=65534,mode=0700",
		"--hostname", "query", "--workdir", "/query",
		"--env", "HOME=/tmp", "--env", "PYTHONDONTWRITEBYTECODE=1", "--env", "PYTHONUNBUFFERED=1",
		"-v", filepath.Join(work, "repo")+":/awf/seed:ro",
		"-v", out+":/query/out:rw",
		"-v", script+":/awf/query-script.py:ro",
		"--entrypoint", "/usr/bin/python3", c.s.refImg, "-c", referenceRunQuery)
	if err != nil {
		return err
	}
	return checkAnswer(out, c.w.Want)
}

func (c *refRunner) close() { _ = os.RemoveAll(c.base) }
