package rootfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Manifest returns the canonical manifest of dir: one line per entry, sorted
// by path, "<type> <perm> <uid>:<gid> <path> <sha256|link target|->". It fails
// on devices, sockets, fifos, set-id bits and names with control characters,
// none of which a root filesystem may contain.
func Manifest(ctx context.Context, dir string) ([]byte, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("rootfs: %s is not a directory", dir)
	}
	var lines []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := "/" + filepath.ToSlash(rel)
		if rel == "." {
			name = "/"
		}
		if strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ' ' }) {
			return fmt.Errorf("%q: name has a space or control character", name)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat", name)
		}
		mode := info.Mode()
		if mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
			return fmt.Errorf("%s: set-id or sticky bit", name)
		}
		var kind, what string
		switch {
		case mode.IsDir():
			kind, what = "d", "-"
		case mode&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if strings.ContainsFunc(t, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				return fmt.Errorf("%s: link target has a control character", name)
			}
			kind, what = "l", t
		case mode.IsRegular():
			h, err := hashFile(p)
			if err != nil {
				return err
			}
			kind, what = "f", h
		default:
			return fmt.Errorf("%s: unsupported file type %v", name, mode.Type())
		}
		perm := mode.Perm()
		if kind == "l" {
			perm = 0o777
		}
		lines = append(lines, fmt.Sprintf("%s %04o %d:%d %s %s", kind, perm, st.Uid, st.Gid, name, what))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rootfs: manifest of %s: %w", dir, err)
	}
	sort.Slice(lines, func(i, j int) bool { return manifestPath(lines[i]) < manifestPath(lines[j]) })
	var buf bytes.Buffer
	for _, l := range lines {
		buf.WriteString(l)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// manifestPath is the path field of a manifest line.
func manifestPath(line string) string {
	f := strings.SplitN(line, " ", 5)
	return f[3]
}

// DigestOf is the digest of a manifest: "sha256:<hex>".
func DigestOf(manifest []byte) string {
	sum := sha256.Sum256(manifest)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
