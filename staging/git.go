package staging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultGitTimeout bounds each git command when Options.GitTimeout is zero.
const DefaultGitTimeout = 10 * time.Minute

// gitPath is the fixed search path of the staging git and its helpers.
const gitPath = "/usr/local/bin:/usr/bin:/bin"

// gitConfig is forced on every staging git command through GIT_CONFIG_COUNT,
// above any repository configuration. It empties the credential helper list,
// pins protocol v2, allows only https, loopback http (validated before use) and
// local transports, refuses redirects (which could carry the credential to
// another host), and disables hooks, submodules, fsmonitor and background
// maintenance (so no git process outlives its command).
var gitConfig = [][2]string{
	{"credential.helper", ""},
	{"protocol.version", "2"},
	{"protocol.allow", "never"},
	{"protocol.https.allow", "always"},
	{"protocol.http.allow", "always"},
	{"protocol.file.allow", "always"},
	{"http.followRedirects", "false"},
	{"core.hooksPath", "/dev/null"},
	{"core.fsmonitor", "false"},
	{"core.symlinks", "true"},
	{"core.autocrlf", "false"},
	{"submodule.recurse", "false"},
	{"fetch.recurseSubmodules", "false"},
	{"gc.auto", "0"},
	{"maintenance.auto", "false"},
	{"advice.detachedHead", "false"},
	{"init.defaultBranch", "main"},
}

// gitRunner runs git with a complete, minimal environment. The only route of
// the credential is GIT_ASKPASS, which reads the 0600 token file.
type gitRunner struct {
	bin     string
	env     []string
	timeout time.Duration
	secret  string // redacted from every message
}

func newGitRunner(c *credentials, timeout time.Duration, secret string) (*gitRunner, error) {
	bin, err := lookGit()
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = DefaultGitTimeout
	}
	askpass := "/bin/false"
	if c.askpass != "" {
		askpass = c.askpass
	}
	env := []string{
		"PATH=" + gitPath,
		"HOME=" + c.home,
		"XDG_CONFIG_HOME=" + c.home + "/.config",
		"LC_ALL=C",
		"LANG=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=" + askpass,
		"GIT_TEMPLATE_DIR=" + c.templates,
		"GIT_CONFIG_COUNT=" + strconv.Itoa(len(gitConfig)),
	}
	for i, kv := range gitConfig {
		env = append(env,
			"GIT_CONFIG_KEY_"+strconv.Itoa(i)+"="+kv[0],
			"GIT_CONFIG_VALUE_"+strconv.Itoa(i)+"="+kv[1])
	}
	return &gitRunner{bin: bin, env: env, timeout: timeout, secret: secret}, nil
}

// anonymous returns a runner that never offers the credential: its askpass
// helper is /bin/false.
func (g *gitRunner) anonymous() *gitRunner {
	c := *g
	c.env = make([]string, 0, len(g.env))
	for _, kv := range g.env {
		if strings.HasPrefix(kv, "GIT_ASKPASS=") {
			kv = "GIT_ASKPASS=/bin/false"
		}
		c.env = append(c.env, kv)
	}
	return &c
}

// lookGit finds git on the fixed search path only.
func lookGit() (string, error) {
	for _, dir := range strings.Split(gitPath, ":") {
		p := dir + "/git"
		if _, err := exec.LookPath(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("git not found in " + gitPath)
}

// maxGitStdout and maxGitStderr cap what is kept of a git command's output.
const (
	maxGitStdout = 1 << 20
	maxGitStderr = 4 << 10
)

// run runs git in dir (which may be "") and returns its stdout. The command
// and every process it starts are killed at the per-command deadline.
func (g *gitRunner) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return g.runInput(ctx, dir, "", args...)
}

// runInput is run with input on git's standard input.
func (g *gitRunner) runInput(ctx context.Context, dir, input string, args ...string) ([]byte, error) {
	var out, errb capBuffer
	out.max, errb.max = maxGitStdout, maxGitStderr
	var in io.Reader
	if input != "" {
		in = strings.NewReader(input)
	}
	if err := g.start(ctx, dir, in, &out, &errb, args...); err != nil {
		return nil, err
	}
	if out.over {
		return nil, fmt.Errorf("git %s: output over %d bytes", args[0], maxGitStdout)
	}
	return out.Bytes(), nil
}

// start runs git with stdin from in and stdout going to w.
func (g *gitRunner) start(ctx context.Context, dir string, in io.Reader, w io.Writer, errb *capBuffer, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.bin, args...)
	cmd.Dir = dir
	cmd.Env = g.env
	cmd.Stdin = in
	cmd.Stdout = w
	cmd.Stderr = errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(g.redact(errb.String()))
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("git %s: %w: %s", args[0], err, msg)
	}
	return nil
}

// redact removes the credential from a message, should git ever echo it.
func (g *gitRunner) redact(s string) string {
	if g.secret == "" {
		return s
	}
	return strings.ReplaceAll(s, g.secret, "[redacted]")
}

// capBuffer keeps at most max bytes and remembers whether more arrived.
type capBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *capBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
