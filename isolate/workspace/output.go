package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
)

// beneath confines a lookup to one directory: no symlinks, no magic links,
// no other mount.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// ReadOutput reads /query/out from the host side. It opens it relative to a
// descriptor of the /query tmpfs, following no link and crossing no mount,
// refuses anything but a regular file, and reads at most limit bytes. The
// kind is KindOK, KindOutputMissing, KindOutputInvalid or KindOutputTooLarge;
// err explains any kind other than KindOK.
func (w *Workspace) ReadOutput(limit int64) ([]byte, isolate.Kind, error) {
	return ReadOutputFrom(w.QueryDir(), limit)
}

// ReadOutputFrom is ReadOutput for an explicit /query host directory.
func ReadOutputFrom(queryDir string, limit int64) ([]byte, isolate.Kind, error) {
	return ReadFileFrom(queryDir, isolate.OutputPath, limit)
}

// ReadFileFrom is ReadOutputFrom for any file of a sandbox's writable
// tmpfs: dir is its host directory, path the file's path in the sandbox
// (an enclave's result or transcript), of which only the last element is
// looked up in dir.
func ReadFileFrom(dir, path string, limit int64) ([]byte, isolate.Kind, error) {
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, isolate.KindOutputInvalid, fmt.Errorf("open %s: %w", filepath.Dir(path), err)
	}
	defer unix.Close(dfd)
	return ReadFileAt(dfd, path, limit)
}

// ReadFileAt is ReadFileFrom through dfd, a descriptor of the file's
// directory that the caller holds (direct keeps one of its /query tmpfs
// from before the job starts, so no path is resolved after the script ran).
// It opens the last element of path beneath dfd, following no link,
// crossing no mount and never blocking on a FIFO, and reads it only if it
// is a regular file of at most limit bytes.
func ReadFileAt(dfd int, path string, limit int64) ([]byte, isolate.Kind, error) {
	name := filepath.Base(path)
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: beneath,
	}
	fd, err := unix.Openat2(dfd, name, &how)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, isolate.KindOutputMissing, fmt.Errorf("%s does not exist", path)
	case err != nil:
		return nil, isolate.KindOutputInvalid, fmt.Errorf("open %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, isolate.KindOutputInvalid, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, isolate.KindOutputInvalid, fmt.Errorf("%s is not a regular file (mode %o)", path, st.Mode)
	}
	if st.Size > limit {
		return nil, isolate.KindOutputTooLarge, fmt.Errorf("%s is %d bytes, cap %d", path, st.Size, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, isolate.KindOutputInvalid, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, isolate.KindOutputTooLarge, fmt.Errorf("%s grew past the cap %d", path, limit)
	}
	return b, isolate.KindOK, nil
}

// FileAtLimit returns the host path of a regular file under the /query or
// repository tmpfs whose size reached limit, or "". The walk is bounded and
// follows no link.
func (w *Workspace) FileAtLimit(limit int64) string {
	return FindFileAtLimit(limit, w.QueryDir(), filepath.Join(w.Dir, repoFSName))
}

// FindFileAtLimit returns the path of a regular file under one of dirs (the
// host-side /query and repository view of a sandbox) whose size reached
// limit, or "". The walk is bounded over all dirs and follows no link; a
// dir that is a descriptor's magic link must end in "/".
func FindFileAtLimit(limit int64, dirs ...string) string {
	const maxEntries = 4096
	seen := 0
	found := ""
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if seen++; seen > maxEntries {
				return filepath.SkipAll
			}
			if d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil && fi.Size() >= limit {
					found = p
					return filepath.SkipAll
				}
			}
			return nil
		})
		if found != "" {
			return found
		}
	}
	return ""
}
