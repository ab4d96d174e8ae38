package rootfs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/rootfs"
)

// TestBuildImageIsReproducible builds the image of the shared root twice:
// the same tree gives the same bytes, and the info names the tree's digest.
func TestBuildImageIsReproducible(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var infos []rootfs.ImageInfo
	for _, name := range []string{"a.erofs", "b.erofs"} {
		info, err := rootfs.BuildImage(ctx, built.dir, built.digest, filepath.Join(dir, name))
		require.NoError(t, err, "the image tool comes from the Debian package erofs-utils (tests/setup/deps.sh)")
		infos = append(infos, info)
	}
	assert.Equal(t, built.digest, infos[0].RootDigest)
	assert.True(t, strings.HasPrefix(infos[0].FileDigest, "sha256:"))
	assert.Equal(t, infos[0], infos[1], "two images of one tree differ")
	fi, err := os.Stat(filepath.Join(dir, "a.erofs"))
	require.NoError(t, err)
	assert.Equal(t, fi.Size(), infos[0].Size)
	assert.Equal(t, os.FileMode(0o400), fi.Mode().Perm())
}

// TestBuildImageRefuses covers the refusals: a tree that no longer has its
// pinned digest, and an output that already exists.
func TestBuildImageRefuses(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "x.erofs")
	_, err := rootfs.BuildImage(ctx, built.dir, "sha256:"+strings.Repeat("0", 64), out)
	require.Error(t, err)
	_, serr := os.Lstat(out)
	require.ErrorIs(t, serr, os.ErrNotExist, "a refused build leaves no image")

	require.NoError(t, os.WriteFile(out, nil, 0o600))
	_, err = rootfs.BuildImage(ctx, built.dir, built.digest, out)
	require.ErrorContains(t, err, "already exists")
}

func TestImageNameCarriesDigest(t *testing.T) {
	assert.Equal(t, "root-0123456789abcdef01234567.erofs", rootfs.ImageName("sha256:0123456789abcdef0123456789abcdef"))
}
