package agentloop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Tool limits (the reference's, from the day it shipped the loop).
const (
	// MaxListEntries caps the entries list_files returns.
	MaxListEntries = 200
	// MaxReadBytes is how much of a file read_file and search look at.
	MaxReadBytes = 8192
	// MaxPatternChars caps a search pattern, in characters.
	MaxPatternChars = 200
	// MaxSearchHits caps the files search reports.
	MaxSearchHits = 40
	// MaxToolResultBytes cuts every tool result.
	MaxToolResultBytes = 12000
	// MaxPathBytes caps a path argument.
	MaxPathBytes = 4096

	// maxSearchFiles and maxSearchDirEntries bound the work of one search,
	// so a huge tree costs bounded time and memory.
	maxSearchFiles      = 20000
	maxSearchDirEntries = 10000
	maxSearchDepth      = 64
	// maxHitLineBytes clips the matching line a search hit shows.
	maxHitLineBytes = 200
)

// resolveFlags confine every open to the seed: no component may leave the
// directory (RESOLVE_BENEATH, which also refuses absolute paths and ".."
// above the root), be a symbolic link (RESOLVE_NO_SYMLINKS) or a /proc
// magic link (RESOLVE_NO_MAGICLINKS). The kernel checks this atomically
// with the lookup, so a seed that changed under the loop could not race it.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Repo is the read-only seed the tools read, held as a directory
// descriptor; every access is relative to it.
type Repo struct {
	root *os.File
	// walk is set when the kernel reports a release older than openat2
	// (see hasOpenat2), or once openat2 has answered ENOSYS: opens then go
	// one component at a time, each with O_NOFOLLOW relative to the
	// previous directory's descriptor.
	walk atomic.Bool
}

// OpenRepo opens dir as the tools' root. The directory itself may be
// reached through symbolic links (it is the broker's mount point); nothing
// below it may.
func OpenRepo(dir string) (*Repo, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the repository %s: %w", dir, err)
	}
	r := &Repo{root: os.NewFile(uintptr(fd), dir)}
	var u unix.Utsname
	if unix.Uname(&u) == nil && !hasOpenat2(unix.ByteSliceToString(u.Release[:])) {
		r.walk.Store(true)
	}
	return r, nil
}

// hasOpenat2 reports whether a kernel of this release can have openat2
// (Linux 5.6). A release it cannot parse counts as having it: the ENOSYS
// fallback in open still applies. The loop must not even try openat2 on
// an older kernel: gVisor reports 4.4.0 and its syscall table has no
// openat2, so runsc's OCI seccomp drops the policy's rule for it ("OCI
// seccomp: ignoring syscall") and the call meets the policy's default
// kill, which the Sentry applies to the calling thread alone; the loop
// then hangs until the wall limit instead of falling back.
func hasOpenat2(release string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err != nil {
		return true
	}
	return major > 5 || major == 5 && minor >= 6
}

// Close releases the root descriptor.
func (r *Repo) Close() error { return r.root.Close() }

// toolError is an error the model sees as a tool result; its text never
// names anything outside the seed.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func toolErr(format string, args ...any) error {
	return &toolError{msg: fmt.Sprintf(format, args...)}
}

// cleanPath turns a model-supplied path into one relative to the seed. A
// leading "/" names the seed's root (models often write paths that way);
// ".." is left for the kernel to refuse if it would climb out.
func cleanPath(p string) (string, error) {
	if len(p) > MaxPathBytes {
		return "", toolErr("path is longer than %d bytes", MaxPathBytes)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", toolErr("path contains a NUL byte")
	}
	p = strings.TrimLeft(p, "/")
	if p == "" {
		p = "."
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			// Refused even where it would stay inside, so both ways of
			// opening (openat2 and the component walk) agree.
			return "", toolErr("%s: the path leaves the repository (\"..\" is not allowed)", strconv.Quote(clipString(p, 256)))
		}
	}
	return p, nil
}

// open opens rel below dir with flags, confined to the seed: by openat2
// with resolveFlags where the kernel has it, else by walk.
func (r *Repo) open(dir *os.File, rel string, flags uint64) (*os.File, error) {
	if !r.walk.Load() {
		how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC | unix.O_NOCTTY, Resolve: resolveFlags}
		for {
			fd, err := unix.Openat2(int(dir.Fd()), rel, &how)
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				// EAGAIN: a concurrent rename raced the lookup; retry.
				continue
			}
			if errors.Is(err, unix.ENOSYS) {
				r.walk.Store(true)
				break
			}
			if err != nil {
				return nil, pathError(rel, err)
			}
			return os.NewFile(uintptr(fd), rel), nil
		}
	}
	return walkOpen(dir, rel, flags)
}

// sameObject checks that fd is the object name denotes in dir without
// following a link: name is not a symbolic link and fd has its device and
// inode. O_NOFOLLOW alone is not enough everywhere: gVisor follows a
// final symbolic link for O_RDONLY|O_DIRECTORY|O_NOFOLLOW. If a link had
// been followed (or the name changed between the two calls), the inodes
// differ.
func sameObject(dir int, name string, fd int) error {
	var got, named unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		return err
	}
	if err := unix.Fstatat(dir, name, &named, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if named.Mode&unix.S_IFMT == unix.S_IFLNK || got.Dev != named.Dev || got.Ino != named.Ino {
		return unix.ELOOP
	}
	return nil
}

// walkOpen is the same confinement without openat2: every component is
// one name (never "..", which cleanPath refuses, and never containing a
// "/"), opened relative to the descriptor of the directory before it with
// O_NOFOLLOW and then checked by sameObject, so no component can be a
// symbolic link (magic links are symbolic links too) and nothing is ever
// resolved from a path string.
func walkOpen(dir *os.File, rel string, flags uint64) (*os.File, error) {
	var comps []string
	for _, c := range strings.Split(rel, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return nil, pathError(rel, unix.EXDEV)
		}
		comps = append(comps, c)
	}
	cur := int(dir.Fd())
	owned := -1 // the descriptor walkOpen opened and must close
	defer func() {
		if owned >= 0 {
			unix.Close(owned)
		}
	}()
	if len(comps) == 0 {
		comps = []string{"."}
	}
	for i, c := range comps {
		// O_PATH: passing through a directory needs only search
		// permission, as it does for openat2.
		f := int(unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC)
		last := i == len(comps)-1
		if last {
			f = int(flags) | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NOCTTY
		}
		var fd int
		var err error
		for {
			fd, err = unix.Openat(cur, c, f, 0)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if err != nil {
			if errors.Is(err, unix.ENOTDIR) {
				// A symbolic link opened with O_DIRECTORY|O_NOFOLLOW
				// reports ENOTDIR; say which it is.
				var st unix.Stat_t
				if unix.Fstatat(cur, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					err = unix.ELOOP
				}
			}
			return nil, pathError(rel, err)
		}
		if err := sameObject(cur, c, fd); err != nil {
			unix.Close(fd)
			return nil, pathError(rel, err)
		}
		if owned >= 0 {
			unix.Close(owned)
		}
		cur, owned = fd, fd
	}
	owned = -1
	return os.NewFile(uintptr(cur), rel), nil
}

// pathError explains a refused or failed open without naming anything
// outside the seed.
func pathError(rel string, err error) error {
	q := strconv.Quote(clipString(rel, 256))
	switch {
	case errors.Is(err, unix.EXDEV):
		return toolErr("%s: the path leaves the repository", q)
	case errors.Is(err, unix.ELOOP):
		return toolErr("%s: the path is or passes through a symbolic link, which the tools do not follow", q)
	case errors.Is(err, unix.ENOENT):
		return toolErr("%s: no such file or directory", q)
	case errors.Is(err, unix.ENOTDIR):
		return toolErr("%s: not a directory", q)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return toolErr("%s: permission denied", q)
	case errors.Is(err, unix.ENAMETOOLONG):
		return toolErr("%s: name too long", q)
	}
	return toolErr("%s: cannot open (%s)", q, unix.ErrnoName(errnoOf(err)))
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// openDir opens the seed directory that the tool argument path names and
// returns it with the path's cleaned form, as ListFiles and Search start.
func (r *Repo) openDir(path string) (*os.File, string, error) {
	rel, err := cleanPath(path)
	if err != nil {
		return nil, "", err
	}
	d, err := r.open(r.root, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, "", err
	}
	return d, rel, nil
}

// ListFiles lists a directory of the seed: at most MaxListEntries entries,
// sorted by name, one per line as "dir PATH", "file PATH" or "other PATH"
// (symbolic links and special files), PATH relative to the seed.
func (r *Repo) ListFiles(ctx context.Context, path string) (string, error) {
	d, rel, err := r.openDir(path)
	if err != nil {
		return "", err
	}
	defer d.Close()
	// Keep the MaxListEntries smallest names while streaming the directory,
	// so a directory of a million entries costs bounded memory.
	var keep []os.DirEntry
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		batch, err := d.ReadDir(512)
		for _, e := range batch {
			total++
			name := e.Name()
			i := sort.Search(len(keep), func(i int) bool { return keep[i].Name() > name })
			if i >= MaxListEntries {
				continue
			}
			if len(keep) < MaxListEntries {
				keep = append(keep, nil)
			}
			copy(keep[i+1:], keep[i:])
			keep[i] = e
		}
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return "", toolErr("%s: cannot read the directory", strconv.Quote(clipString(rel, 256)))
		}
	}
	var b strings.Builder
	for _, e := range keep {
		kind := "other"
		switch {
		case e.Type().IsDir():
			kind = "dir"
		case e.Type().IsRegular():
			kind = "file"
		}
		b.WriteString(kind)
		b.WriteByte(' ')
		b.WriteString(joinRel(rel, e.Name()))
		b.WriteByte('\n')
	}
	if total == 0 {
		b.WriteString("(empty directory)\n")
	}
	if total > len(keep) {
		fmt.Fprintf(&b, "(%d more entries not shown)\n", total-len(keep))
	}
	return b.String(), nil
}

func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return strings.TrimRight(dir, "/") + "/" + name
}

// ReadFile returns the first MaxReadBytes of a regular file of the seed,
// as UTF-8 (invalid sequences replaced).
func (r *Repo) ReadFile(_ context.Context, path string) (string, error) {
	rel, err := cleanPath(path)
	if err != nil {
		return "", err
	}
	f, err := r.openRegular(r.root, rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head, size, err := readHead(f)
	if err != nil {
		return "", toolErr("%s: cannot read", strconv.Quote(clipString(rel, 256)))
	}
	s := strings.ToValidUTF8(string(head), "\uFFFD")
	if size > int64(len(head)) {
		s += fmt.Sprintf("\n(only the first %d of %d bytes are shown)\n", len(head), size)
	}
	return s, nil
}

// openRegular opens rel read-only and refuses anything but a regular file.
// O_NONBLOCK keeps a FIFO in the seed from blocking the open.
func (r *Repo) openRegular(dir *os.File, rel string) (*os.File, error) {
	f, err := r.open(dir, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, toolErr("%s: not a regular file", strconv.Quote(clipString(rel, 256)))
	}
	return f, nil
}

// readHead reads at most MaxReadBytes from the start of f and reports the
// file's size.
func readHead(f *os.File) ([]byte, int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, 0, err
	}
	buf := make([]byte, MaxReadBytes)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, 0, err
	}
	return buf[:n], st.Size, nil
}

// Search walks the seed below path in sorted order, not following symbolic
// links, and reports for each regular file whose first MaxReadBytes contain
// pattern (a literal substring) the first matching line as
// "PATH:LINE: TEXT"; at most MaxSearchHits files.
func (r *Repo) Search(ctx context.Context, pattern, path string) (string, error) {
	if pattern == "" {
		return "", toolErr("pattern is empty")
	}
	if n := utf8.RuneCountInString(pattern); n > MaxPatternChars {
		return "", toolErr("pattern is %d characters; the maximum is %d", n, MaxPatternChars)
	}
	d, rel, err := r.openDir(path)
	if err != nil {
		return "", err
	}
	s := searcher{r: r, ctx: ctx, pat: []byte(pattern)}
	err = s.dir(d, rel, 0)
	d.Close()
	if err != nil {
		return "", err
	}
	if len(s.hits) == 0 {
		s.out.WriteString("(no matches)\n")
	}
	if s.stopped != "" {
		s.out.WriteString(s.stopped)
	}
	return s.out.String(), nil
}

type searcher struct {
	r       *Repo
	ctx     context.Context
	pat     []byte
	hits    []string
	files   int
	out     strings.Builder
	stopped string // why the walk ended early, if it did
}

// errWalkDone ends a walk that has all it may report.
var errWalkDone = errors.New("walk done")

func (s *searcher) dir(d *os.File, rel string, depth int) error {
	if err := s.walk(d, rel, depth); err != nil && !errors.Is(err, errWalkDone) {
		return err
	}
	return nil
}

func (s *searcher) walk(d *os.File, rel string, depth int) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	entries, err := d.ReadDir(maxSearchDirEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil // an unreadable directory has no hits
	}
	if len(entries) > maxSearchDirEntries {
		entries = entries[:maxSearchDirEntries]
		s.note(fmt.Sprintf("(a directory with more than %d entries was searched only in part)\n", maxSearchDirEntries))
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		name := e.Name()
		path := joinRel(rel, name)
		switch {
		case e.Type().IsDir():
			if depth+1 >= maxSearchDepth {
				s.note(fmt.Sprintf("(directories deeper than %d levels were not searched)\n", maxSearchDepth))
				continue
			}
			sub, err := s.r.open(d, name, unix.O_RDONLY|unix.O_DIRECTORY)
			if err != nil {
				continue
			}
			err = s.walk(sub, path, depth+1)
			sub.Close()
			if err != nil {
				return err
			}
		case e.Type().IsRegular():
			if s.files++; s.files > maxSearchFiles {
				s.note(fmt.Sprintf("(the search stopped after %d files)\n", maxSearchFiles))
				return errWalkDone
			}
			if err := s.file(d, name, path); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *searcher) note(msg string) {
	if s.stopped == "" {
		s.stopped = msg
	}
}

func (s *searcher) file(d *os.File, name, path string) error {
	f, err := s.r.openRegular(d, name)
	if err != nil {
		return nil
	}
	head, _, err := readHead(f)
	f.Close()
	if err != nil {
		return nil
	}
	i := bytes.Index(head, s.pat)
	if i < 0 {
		return nil
	}
	line := 1 + bytes.Count(head[:i], []byte{'\n'})
	start := bytes.LastIndexByte(head[:i], '\n') + 1
	end := len(head)
	if j := bytes.IndexByte(head[i:], '\n'); j >= 0 {
		end = i + j
	}
	text := clipString(strings.ToValidUTF8(string(head[start:end]), "\uFFFD"), maxHitLineBytes)
	hit := fmt.Sprintf("%s:%d: %s\n", path, line, text)
	s.hits = append(s.hits, hit)
	s.out.WriteString(hit)
	if len(s.hits) >= MaxSearchHits {
		s.note(fmt.Sprintf("(the search stopped at %d matching files)\n", MaxSearchHits))
		return errWalkDone
	}
	return nil
}

// cutResult cuts a tool result to MaxToolResultBytes at a rune boundary.
func cutResult(s string) string { return clipString(s, MaxToolResultBytes) }
