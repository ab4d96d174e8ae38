package staging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"

	"golang.org/x/sys/unix"
)

// beneath is the resolution policy of every lookup below a tree root: stay
// under the directory descriptor, never follow a symlink or a magic link, and
// never cross into another mount.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS |
	unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// defaultMaxDepth bounds directory nesting for walks that have no caller limit.
const defaultMaxDepth = 256

// openBeneath opens the single component name below dirfd under the beneath
// policy. A trailing symlink opened with O_PATH yields a descriptor of the link
// itself; any other use of a symlink fails.
func openBeneath(dirfd int, name string, flags int) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW),
		Resolve: beneath,
	}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(dirfd, name, &how)
		if (err == unix.EINTR || err == unix.EAGAIN) && tries < 8 {
			continue
		}
		return fd, err
	}
}

// openRoot opens a tree root directory; its last component may not be a symlink.
func openRoot(dir string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, st, fmt.Errorf("open %s: %w", dir, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, fmt.Errorf("stat %s: %w", dir, err)
	}
	return fd, st, nil
}

// entry is one name met by walk. Fd is an O_PATH descriptor of the entry
// itself (never of a symlink's target), valid only during the visit.
type entry struct {
	Parent int    // descriptor of the containing directory
	Name   string // single path component
	Rel    string // slash path relative to the walk root, for messages
	Depth  int    // 1 for children of the root
	Fd     int
	Stat   unix.Stat_t
}

// openEntry opens name below dirfd as an O_PATH descriptor, following no
// link, and stats it: the one way the walker and the copier inspect an
// entry before they decide anything about it. The caller closes e.Fd.
func openEntry(dirfd int, name, rel string, depth int) (*entry, error) {
	fd, err := openBeneath(dirfd, name, unix.O_PATH)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", rel, err)
	}
	e := &entry{Parent: dirfd, Name: name, Rel: rel, Depth: depth, Fd: fd}
	if err := unix.Fstat(fd, &e.Stat); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	return e, nil
}

// typ returns the file type bits of the entry.
func (e *entry) typ() uint32 { return e.Stat.Mode & unix.S_IFMT }

// reopen opens the entry again for I/O with flags, checking that the name
// still refers to the same inode that was inspected.
func (e *entry) reopen(flags int) (int, error) {
	fd, err := openBeneath(e.Parent, e.Name, flags)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", e.Rel, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("stat %s: %w", e.Rel, err)
	}
	if st.Dev != e.Stat.Dev || st.Ino != e.Stat.Ino {
		unix.Close(fd)
		return -1, fmt.Errorf("%s changed while it was inspected", e.Rel)
	}
	return fd, nil
}

// errSkipDir, returned by a pre-visit of a directory, skips its contents.
var errSkipDir = errors.New("skip directory")

// walker visits a tree below an open directory descriptor without following
// any link. Pre is called for every entry; for a directory, Post is called
// after its contents with a readable descriptor of it (so it can be changed).
type walker struct {
	MaxDepth int
	Pre      func(e *entry) error
	Post     func(e *entry, dirfd int) error
}

// walk visits the children of the directory open at dirfd, in name order.
func (w *walker) walk(ctx context.Context, dirfd int, rel string, depth int) error {
	names, err := readNames(dirfd, rel)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.visit(ctx, dirfd, name, path.Join(rel, name), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) visit(ctx context.Context, dirfd int, name, rel string, depth int) error {
	e, err := openEntry(dirfd, name, rel, depth)
	if err != nil {
		return err
	}
	defer unix.Close(e.Fd)
	if w.Pre != nil {
		err := w.Pre(e)
		if errors.Is(err, errSkipDir) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	if e.typ() != unix.S_IFDIR {
		return nil
	}
	maxDepth := w.MaxDepth
	if maxDepth <= 0 {
		maxDepth = defaultMaxDepth
	}
	if depth > maxDepth {
		return fmt.Errorf("%s: deeper than %d directories", rel, maxDepth)
	}
	sub, err := e.reopen(unix.O_RDONLY | unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(sub)
	if err := w.walk(ctx, sub, rel, depth); err != nil {
		return err
	}
	if w.Post != nil {
		return w.Post(e, sub)
	}
	return nil
}

// readNames lists a directory through a duplicate of its descriptor, sorted.
func readNames(dirfd int, rel string) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(dirfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", rel, err)
	}
	f := os.NewFile(uintptr(dup), rel)
	defer f.Close()
	// The duplicate shares the offset: rewind so a descriptor can be listed twice.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("list %s: %w", rel, err)
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", rel, err)
	}
	sort.Strings(names)
	return names, nil
}

// typeName names a file type for error messages.
func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	}
	return "unknown file type"
}
