package rootfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ImageTool is the program that writes root filesystem images. It comes
// from the Debian package erofs-utils.
const ImageTool = "mkfs.erofs"

// imageBuildTimeout bounds one image build; a 45 MB tree takes well under a
// second.
const imageBuildTimeout = 2 * time.Minute

// imageArgs make the image a pure function of the tree: uncompressed (every
// read is a copy from memory, never a decompression), every timestamp zero,
// no extended attributes, a fixed UUID, every file owned by root (the tree
// already is: normalise makes it so).
var imageArgs = []string{"--quiet", "-T0", "--all-root", "-x-1", "-U00000000-0000-0000-0000-000000000000"}

// ImageInfo describes a built image.
type ImageInfo struct {
	// RootDigest is the digest of the tree the image was built from, as
	// Verify computes it.
	RootDigest string
	// FileDigest is "sha256:<hex>" of the image file itself.
	FileDigest string
	// Size is the image's size in bytes.
	Size int64
}

// BuildImage writes a read-only erofs image of the root filesystem dir to
// out, which must not exist. It checks dir against want ("" = whatever it
// is now) first, so that a tree that no longer matches its pinned digest is
// never imaged.
//
// The image exists so that every sandbox can mount the root afresh, with a
// superblock, page cache and inode cache of its own: a shared directory or
// a bind of it shares all three, so one sandbox could leave in the page
// cache a trace that a later one reads. BuildImage cannot prove what the
// image holds; the caller mounts it and runs Verify on the mount.
func BuildImage(ctx context.Context, dir, want, out string) (ImageInfo, error) {
	var info ImageInfo
	digest, err := Verify(ctx, dir, want)
	if err != nil {
		return info, err
	}
	tool, err := exec.LookPath(ImageTool)
	if err != nil {
		return info, fmt.Errorf("rootfs: image: %s is not installed (Debian package erofs-utils): %w", ImageTool, err)
	}
	if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
		return info, fmt.Errorf("rootfs: image %s already exists", out)
	}
	ctx, cancel := context.WithTimeout(ctx, imageBuildTimeout)
	defer cancel()
	args := append(append([]string{}, imageArgs...), out, filepath.Clean(dir)+"/")
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Env = []string{"LANG=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	var outb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &outb
	if err := cmd.Run(); err != nil {
		_ = os.Remove(out)
		return info, fmt.Errorf("rootfs: image of %s: %s: %w: %s", dir, ImageTool, err, tail(outb.Bytes()))
	}
	if err := os.Chmod(out, 0o400); err != nil {
		_ = os.Remove(out)
		return info, fmt.Errorf("rootfs: image %s: %w", out, err)
	}
	f, err := os.Open(out)
	if err != nil {
		_ = os.Remove(out)
		return info, fmt.Errorf("rootfs: image %s: %w", out, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		_ = os.Remove(out)
		return info, fmt.Errorf("rootfs: hash image %s: %w", out, err)
	}
	return ImageInfo{RootDigest: digest, FileDigest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// ImageName is the file name of the image of a tree with the given digest.
func ImageName(digest string) string {
	return "root-" + ShortDigest(digest) + ".erofs"
}

// ShortDigest is the start of a digest's hex that names the files and
// mount points of one tree (24 digits, 96 bits).
func ShortDigest(digest string) string {
	hexd := strings.TrimPrefix(digest, "sha256:")
	if len(hexd) > 24 {
		hexd = hexd[:24]
	}
	return hexd
}
