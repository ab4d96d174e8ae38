package staging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CopyLimits bound the safe copier. A zero field takes its default
// (DefaultCopyLimits); a negative one is an error.
type CopyLimits struct {
	MaxBytes int64 // total bytes of regular-file content
	MaxFiles int64 // entries of any type (directories, files, symlinks)
	MaxDepth int   // directory nesting below the source root

	// Owner, when set, owns every created entry (for example the sandbox
	// user); otherwise entries belong to the caller.
	Owner *Ownership
	// Writable adds owner write permission to every created directory and
	// file, to make a private writable view from a read-only seed.
	Writable bool
}

// Ownership is a numeric owner for copied entries.
type Ownership struct {
	UID, GID int
}

// DefaultCopyLimits returns the limits used for zero fields: 4 GiB, 1,000,000
// entries and 256 directory levels.
func DefaultCopyLimits() CopyLimits {
	return CopyLimits{MaxBytes: 4 << 30, MaxFiles: 1_000_000, MaxDepth: 256}
}

// withDefaults fills zero fields and rejects negative ones.
func (l CopyLimits) withDefaults() (CopyLimits, error) {
	if l.MaxBytes < 0 || l.MaxFiles < 0 || l.MaxDepth < 0 {
		return l, errors.New("copy limits must not be negative")
	}
	if l.Owner != nil && (l.Owner.UID < 0 || l.Owner.GID < 0) {
		return l, errors.New("copy owner must not be negative")
	}
	d := DefaultCopyLimits()
	if l.MaxBytes == 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxFiles == 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = d.MaxDepth
	}
	return l, nil
}

// ErrCopyLimit is wrapped by every CopyTree error caused by a limit.
var ErrCopyLimit = errors.New("copy limit exceeded")

// CopyTree copies the directory tree at src into dst, which must not exist;
// CopyTree creates it. Every source lookup is descriptor-relative under
// openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
// RESOLVE_NO_XDEV, so nothing outside src is ever reached. Symlinks are
// recreated verbatim and never followed; devices, FIFOs and sockets are
// rejected; every file gets a fresh inode (hard links are broken); set-id and
// sticky bits are dropped; modification times are kept. On any error dst is
// removed.
func CopyTree(ctx context.Context, src, dst string, l CopyLimits) (err error) {
	l, err = l.withDefaults()
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	srcFd, srcSt, err := openRoot(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer unix.Close(srcFd)
	if srcSt.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("copy %s: not a directory", src)
	}
	parent, base := filepath.Dir(dst), filepath.Base(dst)
	if base == "." || base == "/" || base == ".." {
		return fmt.Errorf("copy to %q: not a new directory name", dst)
	}
	parentFd, _, err := openRoot(parent)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer unix.Close(parentFd)
	if err := unix.Mkdirat(parentFd, base, 0o700); err != nil {
		return fmt.Errorf("copy: create %s: %w", dst, err)
	}
	defer func() {
		if err != nil {
			if rerr := os.RemoveAll(dst); rerr != nil {
				err = errors.Join(err, fmt.Errorf("remove partial copy: %w", rerr))
			}
		}
	}()
	dstFd, err := openBeneath(parentFd, base, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("copy: open %s: %w", dst, err)
	}
	defer unix.Close(dstFd)
	c := &copier{l: l}
	if err := c.dir(ctx, srcFd, dstFd, "", 0); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := c.finish(dstFd, "", &srcSt); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}

// copier carries the running totals of one CopyTree.
type copier struct {
	l     CopyLimits
	bytes int64
	files int64
}

// dir copies the contents of the open source directory into the open
// destination directory.
func (c *copier) dir(ctx context.Context, srcFd, dstFd int, rel string, depth int) error {
	names, err := readNames(srcFd, rel)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.entry(ctx, srcFd, dstFd, name, filepath.Join(rel, name), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (c *copier) entry(ctx context.Context, srcFd, dstFd int, name, rel string, depth int) error {
	c.files++
	if c.files > c.l.MaxFiles {
		return fmt.Errorf("%w: more than %d entries", ErrCopyLimit, c.l.MaxFiles)
	}
	e, err := openEntry(srcFd, name, rel, depth)
	if err != nil {
		return err
	}
	defer unix.Close(e.Fd)
	switch e.typ() {
	case unix.S_IFDIR:
		if depth > c.l.MaxDepth {
			return fmt.Errorf("%w: %s is deeper than %d directories", ErrCopyLimit, rel, c.l.MaxDepth)
		}
		sfd, err := e.reopen(unix.O_RDONLY | unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		defer unix.Close(sfd)
		if err := unix.Mkdirat(dstFd, name, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", rel, err)
		}
		dfd, err := openBeneath(dstFd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return fmt.Errorf("open copy of %s: %w", rel, err)
		}
		defer unix.Close(dfd)
		if err := c.dir(ctx, sfd, dfd, rel, depth); err != nil {
			return err
		}
		return c.finish(dfd, rel, &e.Stat)
	case unix.S_IFREG:
		return c.file(e, dstFd)
	case unix.S_IFLNK:
		return c.symlink(e, dstFd)
	default:
		return reject(RuleSpecialFile, "%s is a %s", rel, typeName(e.Stat.Mode))
	}
}

// file copies one regular file into a new inode, within the byte budget.
func (c *copier) file(e *entry, dstFd int) (err error) {
	sfd, err := e.reopen(unix.O_RDONLY | unix.O_NONBLOCK)
	if err != nil {
		return err
	}
	in := os.NewFile(uintptr(sfd), e.Rel)
	defer in.Close()
	dfd, err := unix.Openat(dstFd, e.Name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create copy of %s: %w", e.Rel, err)
	}
	out := os.NewFile(uintptr(dfd), e.Rel)
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close copy of %s: %w", e.Rel, cerr)
		}
	}()
	room := c.l.MaxBytes - c.bytes
	n, err := io.Copy(out, &io.LimitedReader{R: in, N: room + 1})
	c.bytes += n
	if err != nil {
		return fmt.Errorf("copy %s: %w", e.Rel, err)
	}
	if n > room {
		return fmt.Errorf("%w: more than %d bytes", ErrCopyLimit, c.l.MaxBytes)
	}
	return c.finish(dfd, e.Rel, &e.Stat)
}

// symlink recreates a link with the same target text; the target is never
// resolved.
func (c *copier) symlink(e *entry, dstFd int) error {
	buf := make([]byte, unix.PathMax+1)
	n, err := unix.Readlinkat(e.Parent, e.Name, buf)
	if err != nil {
		return fmt.Errorf("readlink %s: %w", e.Rel, err)
	}
	if n > unix.PathMax {
		return fmt.Errorf("readlink %s: target too long", e.Rel)
	}
	if err := unix.Symlinkat(string(buf[:n]), dstFd, e.Name); err != nil {
		return fmt.Errorf("create link %s: %w", e.Rel, err)
	}
	if c.l.Owner != nil {
		if err := unix.Fchownat(dstFd, e.Name, c.l.Owner.UID, c.l.Owner.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown link %s: %w", e.Rel, err)
		}
	}
	ts := []unix.Timespec{e.Stat.Atim, e.Stat.Mtim}
	if err := unix.UtimesNanoAt(dstFd, e.Name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("times of link %s: %w", e.Rel, err)
	}
	return nil
}

// finish sets owner, mode and times of a created file or directory from its
// source's status. Ownership goes first: chown clears set-id bits.
func (c *copier) finish(fd int, rel string, st *unix.Stat_t) error {
	if c.l.Owner != nil {
		if err := unix.Fchown(fd, c.l.Owner.UID, c.l.Owner.GID); err != nil {
			return fmt.Errorf("chown %s: %w", rel, err)
		}
	}
	mode := st.Mode & 0o777
	if c.l.Writable {
		mode |= 0o200
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", rel, err)
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	if err := futimens(fd, ts); err != nil {
		return fmt.Errorf("times of %s: %w", rel, err)
	}
	return nil
}

// futimens sets the access and modification times of an open file.
func futimens(fd int, ts []unix.Timespec) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
