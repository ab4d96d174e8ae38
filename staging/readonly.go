package staging

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"
)

// Read-only modes of a seed: directories and executables r-x for everyone,
// other files r-- for everyone, so an unprivileged sandbox user can read them.
const (
	seedDirMode  = 0o555
	seedExecMode = 0o555
	seedFileMode = 0o444
)

// readOnlyMode returns the seed mode of a directory or regular file.
func readOnlyMode(st *unix.Stat_t) uint32 {
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return seedDirMode
	}
	if st.Mode&0o111 != 0 {
		return seedExecMode
	}
	return seedFileMode
}

// makeReadOnly gives every entry of the seed at dir its read-only mode. The
// work tree goes first, then the index is refreshed (so that git status in a
// query does not rehash the tree), then .git and the seed root itself.
func makeReadOnly(ctx context.Context, g *gitRunner, dir string) error {
	fd, _, err := openRoot(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	chmodTree := func(gitDirOnly bool) error {
		w := walker{
			Pre: func(e *entry) error {
				if e.Depth == 1 && (e.Name == ".git") != gitDirOnly {
					return errSkipDir
				}
				if e.typ() != unix.S_IFREG {
					return nil // directories are done after their contents; links have no mode
				}
				f, err := e.reopen(unix.O_RDONLY | unix.O_NONBLOCK)
				if err != nil {
					return err
				}
				defer unix.Close(f)
				if err := unix.Fchmod(f, readOnlyMode(&e.Stat)); err != nil {
					return fmt.Errorf("chmod %s: %w", e.Rel, err)
				}
				return nil
			},
			Post: func(e *entry, dirfd int) error {
				if err := unix.Fchmod(dirfd, seedDirMode); err != nil {
					return fmt.Errorf("chmod %s: %w", e.Rel, err)
				}
				return nil
			},
		}
		return w.walk(ctx, fd, "", 0)
	}
	if err := chmodTree(false); err != nil {
		return err
	}
	if _, err := g.run(ctx, dir, "update-index", "-q", "--refresh"); err != nil {
		return err
	}
	if err := chmodTree(true); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, seedDirMode); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return nil
}

// VerifyReadOnly walks the seed at dir through descriptors only (openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|RESOLVE_NO_XDEV),
// never following a symlink, and fails unless every entry is a directory,
// regular file or symlink owned by the caller; no directory or file has a
// write, set-id or sticky bit; everyone can read every file and search every
// directory; and no regular file has a second hard link.
func VerifyReadOnly(ctx context.Context, dir string) error {
	fd, st, err := openRoot(dir)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer unix.Close(fd)
	uid := uint32(unix.Geteuid())
	if err := checkReadOnly(".", &st, uid); err != nil {
		return fmt.Errorf("verify %s: %w", dir, err)
	}
	w := walker{Pre: func(e *entry) error { return checkReadOnly(e.Rel, &e.Stat, uid) }}
	if err := w.walk(ctx, fd, "", 0); err != nil {
		return fmt.Errorf("verify %s: %w", dir, err)
	}
	return nil
}

// checkReadOnly applies the read-only rules to one entry.
func checkReadOnly(rel string, st *unix.Stat_t, uid uint32) error {
	typ := st.Mode & unix.S_IFMT
	switch typ {
	case unix.S_IFLNK:
		return nil // kept verbatim, never followed; a link has no mode of its own
	case unix.S_IFDIR, unix.S_IFREG:
	default:
		return reject(RuleSpecialFile, "%s is a %s", rel, typeName(st.Mode))
	}
	perm := st.Mode & 0o7777
	switch {
	case st.Uid != uid:
		return fmt.Errorf("%s: owned by uid %d, not %d", rel, st.Uid, uid)
	case perm&0o7000 != 0:
		return fmt.Errorf("%s: set-id or sticky bit (mode %04o)", rel, perm)
	case perm&0o222 != 0:
		return fmt.Errorf("%s: writable (mode %04o)", rel, perm)
	case typ == unix.S_IFDIR && perm&0o555 != 0o555:
		return fmt.Errorf("%s: directory not readable by everyone (mode %04o)", rel, perm)
	case typ == unix.S_IFREG && perm&0o444 != 0o444:
		return fmt.Errorf("%s: file not readable by everyone (mode %04o)", rel, perm)
	case typ == unix.S_IFREG && st.Nlink != 1:
		return fmt.Errorf("%s: %d hard links", rel, st.Nlink)
	}
	return nil
}

// restoreWritable gives the owner write permission on every directory under
// dir (and dir itself), so that the tree can be removed without privileges.
func restoreWritable(ctx context.Context, dir string) error {
	fd, st, err := openRoot(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, st.Mode&0o777|0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	w := walker{Post: func(e *entry, dirfd int) error {
		if err := unix.Fchmod(dirfd, e.Stat.Mode&0o777|0o700); err != nil {
			return fmt.Errorf("chmod %s: %w", e.Rel, err)
		}
		return nil
	}}
	return w.walk(ctx, fd, "", 0)
}
