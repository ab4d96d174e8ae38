package staging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// RejectError reports a repository that breaks a staging rule. Rule is a
// stable label (see the Rule constants); the repository is never staged.
type RejectError struct {
	Rule   string
	Detail string
}

func (e *RejectError) Error() string { return "rejected (" + e.Rule + "): " + e.Detail }

// Rejection rules, one label per rule of docs/staging.md.
const (
	RuleGitDirSymlink = "git-dir-symlink"  // .git is a symlink, or holds one
	RuleGitDirFile    = "git-dir-file"     // .git is a gitdir pointer file
	RuleNotRepository = "not-a-repository" // local source is not a git repository
	RuleSubmodule     = "submodule"        // .gitmodules anywhere, or .git/modules
	RuleGitlink       = "gitlink"          // a tree entry of mode 160000
	RuleAlternates    = "alternates"       // objects/info/(http-)alternates
	RuleWorktree      = "worktree"         // worktrees/, commondir or gitdir in the git dir
	RuleSpecialFile   = "special-file"     // a device, FIFO or socket in the tree
	RuleNestedGitDir  = "nested-git-dir"   // a .git below the top level
	RuleForeignOwner  = "foreign-owner"    // local source or its git dir not owned by the caller
)

func reject(rule, format string, args ...any) error {
	return &RejectError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// linkedState are git-directory entries that tie a repository to state outside
// itself. Any of them rejects the repository.
var linkedState = []struct{ name, rule string }{
	{"objects/info/alternates", RuleAlternates},
	{"objects/info/http-alternates", RuleAlternates},
	{"commondir", RuleWorktree},
	{"gitdir", RuleWorktree},
	{"worktrees", RuleWorktree},
	{"modules", RuleSubmodule},
}

// keptGitState are the only top-level entries a seed's .git keeps: enough for
// git log, git grep and git status. Everything else (hooks, logs, FETCH_HEAD,
// ORIG_HEAD, info, description, remotes' state, ...) is removed.
var keptGitState = map[string]bool{
	"HEAD": true, "config": true, "index": true, "objects": true,
	"refs": true, "packed-refs": true, "shallow": true,
}

// findGitDir returns the git directory of a repository at dir: dir/.git, which
// must be a real directory, or dir itself when allowBare and dir is bare.
func findGitDir(dir string, allowBare bool) (string, error) {
	gd := filepath.Join(dir, ".git")
	fi, err := os.Lstat(gd)
	switch {
	case errors.Is(err, os.ErrNotExist) && allowBare:
		if isBare(dir) {
			return dir, nil
		}
		return "", reject(RuleNotRepository, "%s has no .git and is not a bare repository", dir)
	case errors.Is(err, os.ErrNotExist):
		return "", reject(RuleNotRepository, "%s has no .git directory", dir)
	case err != nil:
		return "", fmt.Errorf("stat %s: %w", gd, err)
	case fi.Mode()&os.ModeSymlink != 0:
		return "", reject(RuleGitDirSymlink, "%s is a symlink", gd)
	case fi.Mode().IsRegular():
		return "", reject(RuleGitDirFile, "%s is a gitdir pointer file (linked worktree or submodule)", gd)
	case !fi.IsDir():
		return "", reject(RuleSpecialFile, "%s is a %s", gd, fi.Mode().Type())
	}
	return gd, nil
}

func isBare(dir string) bool {
	head, err1 := os.Lstat(filepath.Join(dir, "HEAD"))
	objs, err2 := os.Lstat(filepath.Join(dir, "objects"))
	refs, err3 := os.Lstat(filepath.Join(dir, "refs"))
	return err1 == nil && err2 == nil && err3 == nil &&
		head.Mode().IsRegular() && objs.IsDir() && refs.IsDir()
}

// checkLinkedState rejects a git directory with alternates, worktree links or
// submodule state.
func checkLinkedState(gitDir string) error {
	for _, l := range linkedState {
		p := filepath.Join(gitDir, l.name)
		if _, err := os.Lstat(p); err == nil {
			return reject(l.rule, "%s exists", p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("stat %s: %w", p, err)
		}
	}
	return nil
}

// checkLocalSource vets a pre-provisioned clone before it is cloned from:
// a real directory owned by the caller, a real (or bare) git directory owned
// by the caller without linked state, and no device, FIFO or socket anywhere
// below it.
func checkLocalSource(ctx context.Context, src string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return fmt.Errorf("source %s: %w", src, err)
	}
	if !fi.IsDir() {
		return reject(RuleNotRepository, "source %s is a %s, not a directory", src, typeOf(fi))
	}
	gitDir, err := findGitDir(src, true)
	if err != nil {
		return err
	}
	// git refuses a repository owned by someone else ("dubious ownership"),
	// and rightly: its configuration would be read by a root process.
	for _, p := range []string{src, gitDir} {
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("source %s: %w", p, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uint32(os.Geteuid()) {
			return reject(RuleForeignOwner, "%s is not owned by uid %d", p, os.Geteuid())
		}
	}
	if err := checkLinkedState(gitDir); err != nil {
		return err
	}
	return checkTreeFiles(ctx, src, false)
}

func typeOf(fi os.FileInfo) string {
	if fi.Mode()&os.ModeSymlink != 0 {
		return "symlink"
	}
	return fi.Mode().Type().String()
}

// checkTreeFiles walks dir without following links and rejects any device,
// FIFO or socket. For a seed (strict) it also rejects .gitmodules anywhere,
// a .git below the top level, and any symlink inside the git directory (git
// never makes one; HEAD and refs are read without following links).
func checkTreeFiles(ctx context.Context, dir string, strict bool) error {
	fd, _, err := openRoot(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	w := walker{Pre: func(e *entry) error {
		switch e.typ() {
		case unix.S_IFREG, unix.S_IFDIR, unix.S_IFLNK:
		default:
			return reject(RuleSpecialFile, "%s is a %s", e.Rel, typeName(e.Stat.Mode))
		}
		if !strict {
			return nil
		}
		if strings.HasPrefix(e.Rel, ".git/") {
			if e.typ() == unix.S_IFLNK {
				return reject(RuleGitDirSymlink, "%s is a symlink inside the git directory", e.Rel)
			}
			return nil
		}
		if strings.EqualFold(e.Name, ".gitmodules") {
			return reject(RuleSubmodule, "%s exists", e.Rel)
		}
		if e.Depth > 1 && strings.EqualFold(e.Name, ".git") {
			return reject(RuleNestedGitDir, "%s exists", e.Rel)
		}
		return nil
	}}
	return w.walk(ctx, fd, "", 0)
}

// treeChecker parses `git ls-tree -r -z` records as they stream and keeps the
// first gitlink or .gitmodules entry.
type treeChecker struct {
	partial []byte
	err     error
	n       int
}

func (t *treeChecker) Write(p []byte) (int, error) {
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, 0)
		if i < 0 {
			break
		}
		t.record(t.partial[:i])
		t.partial = t.partial[i+1:]
	}
	if len(t.partial) > 1<<16 {
		return 0, errors.New("ls-tree record over 64 KiB")
	}
	return len(p), nil
}

// record checks one "<mode> <type> <object>\t<path>" record.
func (t *treeChecker) record(rec []byte) {
	t.n++
	if t.err != nil {
		return
	}
	meta, name, ok := bytes.Cut(rec, []byte{'\t'})
	if !ok {
		t.err = fmt.Errorf("malformed ls-tree record %q", rec)
		return
	}
	mode, _, _ := bytes.Cut(meta, []byte{' '})
	base := name
	if i := bytes.LastIndexByte(name, '/'); i >= 0 {
		base = name[i+1:]
	}
	switch {
	case string(mode) == "160000":
		t.err = reject(RuleGitlink, "tree entry %q is a gitlink (submodule commit)", name)
	case strings.EqualFold(string(base), ".gitmodules"):
		t.err = reject(RuleSubmodule, "tree entry %q exists", name)
	}
}

// checkCommitTree rejects a commit whose tree holds a gitlink or a .gitmodules
// at any depth, even when .gitmodules is absent.
func checkCommitTree(ctx context.Context, g *gitRunner, dir string) error {
	var t treeChecker
	var errb capBuffer
	errb.max = maxGitStderr
	if err := g.start(ctx, dir, nil, &t, &errb, "ls-tree", "-r", "-z", "--full-tree", "HEAD"); err != nil {
		return err
	}
	if t.err == nil && len(t.partial) != 0 {
		return errors.New("ls-tree: truncated output")
	}
	return t.err
}

// minimalConfig returns the only configuration a seed keeps.
func minimalConfig(objectFormat string) []byte {
	version := "0"
	ext := ""
	if objectFormat == "sha256" {
		version = "1"
		ext = "[extensions]\n\tobjectformat = sha256\n"
	}
	return []byte("[core]\n\trepositoryformatversion = " + version +
		"\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = false\n" + ext)
}

// scrubSeed applies every rejection rule to a fresh clone, then strips it to
// one commit: no remotes, other refs, hooks, reflogs, FETCH_HEAD, ORIG_HEAD or
// configuration beyond the minimal one. It returns the checked-out commit.
func scrubSeed(ctx context.Context, g *gitRunner, dir string) (string, error) {
	gitDir, err := findGitDir(dir, false)
	if err != nil {
		return "", err
	}
	if err := checkLinkedState(gitDir); err != nil {
		return "", err
	}
	if err := checkCommitTree(ctx, g, dir); err != nil {
		return "", err
	}
	if err := checkTreeFiles(ctx, dir, true); err != nil {
		return "", err
	}
	commit, err := headCommit(ctx, g, dir)
	if err != nil {
		return "", err
	}
	format, err := g.run(ctx, dir, "rev-parse", "--show-object-format")
	if err != nil {
		return "", err
	}
	keep, err := headTarget(gitDir)
	if err != nil {
		return "", err
	}
	// The configuration goes first, so later git commands see no remote.
	cfg := filepath.Join(gitDir, "config")
	if err := os.Remove(cfg); err != nil {
		return "", fmt.Errorf("remove %s: %w", cfg, err)
	}
	if err := writeExclusive(cfg, minimalConfig(strings.TrimSpace(string(format))), 0o644); err != nil {
		return "", err
	}
	if err := dropRefs(ctx, g, dir, keep); err != nil {
		return "", err
	}
	if err := pruneGitDir(gitDir); err != nil {
		return "", err
	}
	after, err := headCommit(ctx, g, dir)
	if err != nil {
		return "", err
	}
	if after != commit {
		return "", fmt.Errorf("HEAD moved during scrub: %s then %s", commit, after)
	}
	return commit, nil
}

// headCommit resolves HEAD to a full commit id.
func headCommit(ctx context.Context, g *gitRunner, dir string) (string, error) {
	out, err := g.run(ctx, dir, "rev-parse", "--verify", "--end-of-options", "HEAD^{commit}")
	if err != nil {
		return "", err
	}
	c := strings.TrimSpace(string(out))
	if !validCommit(c) {
		return "", fmt.Errorf("rev-parse HEAD: unexpected output %q", c)
	}
	return c, nil
}

// headTarget returns the ref HEAD points at, or "" when HEAD is detached.
func headTarget(gitDir string) (string, error) {
	b, err := readSmallFile(filepath.Join(gitDir, "HEAD"), 4096)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if t, ok := strings.CutPrefix(s, "ref: "); ok {
		if !strings.HasPrefix(t, "refs/heads/") {
			return "", fmt.Errorf("HEAD points outside refs/heads: %q", t)
		}
		return t, nil
	}
	if !validCommit(s) {
		return "", fmt.Errorf("HEAD: unexpected content %q", s)
	}
	return "", nil
}

// dropRefs deletes every ref except keep (HEAD's branch), in one transaction.
func dropRefs(ctx context.Context, g *gitRunner, dir, keep string) error {
	out, err := g.run(ctx, dir, "for-each-ref", "--format=%(refname)")
	if err != nil {
		return err
	}
	var del strings.Builder
	for _, ref := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if ref != "" && ref != keep {
			del.WriteString("delete " + ref + "\n")
		}
	}
	if del.Len() == 0 {
		return nil
	}
	_, err = g.runInput(ctx, dir, del.String(), "update-ref", "--no-deref", "--stdin")
	return err
}

// pruneGitDir removes every top-level git-directory entry that is not kept,
// and any remote-tracking ref directory left behind.
func pruneGitDir(gitDir string) error {
	ents, err := os.ReadDir(gitDir)
	if err != nil {
		return fmt.Errorf("list %s: %w", gitDir, err)
	}
	for _, e := range ents {
		if keptGitState[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(gitDir, e.Name())); err != nil {
			return fmt.Errorf("scrub %s: %w", e.Name(), err)
		}
	}
	for _, p := range []string{"refs/remotes", "objects/info/alternates", "objects/info/http-alternates"} {
		if err := os.RemoveAll(filepath.Join(gitDir, p)); err != nil {
			return fmt.Errorf("scrub %s: %w", p, err)
		}
	}
	return nil
}

// readSmallFile reads a regular file, never through a symlink, up to max bytes.
func readSmallFile(path string, max int64) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return readOpened(fd, path, max)
}

// readOpened takes ownership of the descriptor fd, opened as name by the
// caller's own resolution rule (readSmallFile, readBeneath), and reads it up
// to max bytes if it is a regular file: one check of type and size for every
// way staging opens a small git file.
func readOpened(fd int, name string, max int64) ([]byte, error) {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, max)
	}
	return b, nil
}
