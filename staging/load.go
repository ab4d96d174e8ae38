package staging

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// SeedDir returns where the seed with the given id lives under a private root.
func SeedDir(privateRoot, seedID string) string {
	return filepath.Join(privateRoot, SeedsDirName, seedID)
}

// LoadSeeds reads the seed map of a private root and re-checks every seed it
// lists before use: the seed directory is verified read-only (VerifyReadOnly)
// and its HEAD must still resolve, without running git and without following
// any link, to the commit recorded at staging. Seeds come back in map order.
func LoadSeeds(ctx context.Context, privateRoot string) ([]Seed, error) {
	m, err := ReadSeedMap(filepath.Join(privateRoot, SeedMapName))
	if err != nil {
		return nil, err
	}
	seeds := make([]Seed, 0, len(m.Seeds))
	for _, e := range m.Seeds {
		dir := SeedDir(privateRoot, e.SeedID)
		if err := VerifyReadOnly(ctx, dir); err != nil {
			return nil, fmt.Errorf("load seed of %s: %w", e.Repo, err)
		}
		head, err := ReadHead(dir)
		if err != nil {
			return nil, fmt.Errorf("load seed of %s: %w", e.Repo, err)
		}
		if head != e.Commit {
			return nil, fmt.Errorf("load seed of %s: HEAD is %s, staged %s", e.Repo, head, e.Commit)
		}
		seeds = append(seeds, Seed{Repo: e.Repo, SeedID: e.SeedID, Dir: dir, Commit: e.Commit, Sensitivity: e.Sensitivity})
	}
	return seeds, nil
}

// ReadHead resolves the HEAD of the repository at dir to a commit id by
// reading .git/HEAD and then the loose ref or packed-refs, all below dir with
// no symlink followed. It does not run git.
func ReadHead(dir string) (string, error) {
	fd, _, err := openRoot(dir)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	b, err := readBeneath(fd, ".git/HEAD", 4096)
	if err != nil {
		return "", err
	}
	head := strings.TrimSpace(string(b))
	ref, symbolic := strings.CutPrefix(head, "ref: ")
	if !symbolic {
		if !validCommit(head) {
			return "", fmt.Errorf("HEAD: unexpected content %q", head)
		}
		return head, nil
	}
	name, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok || ValidateRef(name) != nil {
		return "", fmt.Errorf("HEAD: unexpected ref %q", ref)
	}
	b, err = readBeneath(fd, ".git/"+ref, 4096)
	if err == nil {
		c := strings.TrimSpace(string(b))
		if !validCommit(c) {
			return "", fmt.Errorf("%s: unexpected content %q", ref, c)
		}
		return c, nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return "", err
	}
	packed, err := readBeneath(fd, ".git/packed-refs", 64<<20)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", ref, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(packed))
	for sc.Scan() {
		oid, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && validCommit(oid) {
			return oid, nil
		}
	}
	return "", fmt.Errorf("resolve %s: not found", ref)
}

// readBeneath reads the regular file at the relative path rel below the
// directory fd, refusing symlinks, magic links and mount crossings anywhere on
// the way, up to max bytes.
func readBeneath(dirfd int, rel string, max int64) ([]byte, error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK, Resolve: beneath}
	fd, err := unix.Openat2(dirfd, rel, &how)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", rel, err)
	}
	return readOpened(fd, rel, max)
}
