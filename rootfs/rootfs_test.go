package rootfs_test

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/rootfs"
)

// built is one root filesystem shared by the read-only checks.
var built struct {
	dir, digest string
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "awf-rootfs-test-")
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	built.dir = filepath.Join(dir, "root")
	built.digest, err = rootfs.Build(ctx, rootfs.Options{Out: built.dir})
	cancel()
	if err != nil {
		os.RemoveAll(dir)
		panic("build rootfs: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestDigestIsStableAndVerifies(t *testing.T) {
	require.True(t, strings.HasPrefix(built.digest, "sha256:"))
	got, err := rootfs.Verify(context.Background(), built.dir, built.digest)
	require.NoError(t, err)
	assert.Equal(t, built.digest, got)

	// A second build from the same interpreter has the same digest.
	other := filepath.Join(t.TempDir(), "root")
	d, err := rootfs.Build(context.Background(), rootfs.Options{Out: other})
	require.NoError(t, err)
	assert.Equal(t, built.digest, d)
}

func TestVerifyDetectsTampering(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "root")
	d, err := rootfs.Build(context.Background(), rootfs.Options{Out: dir})
	require.NoError(t, err)
	tamper := []struct {
		name string
		do   func() error
		undo func() error
	}{
		{"content", func() error { return os.WriteFile(filepath.Join(dir, "etc/hosts"), []byte("1.2.3.4 x\n"), 0o644) },
			func() error {
				return os.WriteFile(filepath.Join(dir, "etc/hosts"), []byte("127.0.0.1 localhost\n::1 localhost\n"), 0o644)
			}},
		{"mode", func() error { return os.Chmod(filepath.Join(dir, "etc/passwd"), 0o666) },
			func() error { return os.Chmod(filepath.Join(dir, "etc/passwd"), 0o644) }},
		{"owner", func() error { return os.Lchown(filepath.Join(dir, "etc/group"), 65534, 65534) },
			func() error { return os.Lchown(filepath.Join(dir, "etc/group"), 0, 0) }},
		{"new file", func() error { return os.WriteFile(filepath.Join(dir, "tmp/x"), nil, 0o644) },
			func() error { return os.Remove(filepath.Join(dir, "tmp/x")) }},
		{"link target", func() error {
			p := filepath.Join(dir, "usr/bin/python3")
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Symlink("/bin/sh", p)
		}, func() error {
			p := filepath.Join(dir, "usr/bin/python3")
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Symlink("python3.11", p)
		}},
	}
	for _, c := range tamper {
		require.NoError(t, c.do(), c.name)
		_, err := rootfs.Verify(context.Background(), dir, d)
		assert.Error(t, err, c.name)
		require.NoError(t, c.undo(), c.name)
		_, err = rootfs.Verify(context.Background(), dir, d)
		require.NoError(t, err, "undo %s", c.name)
	}
	// Special files are refused outright.
	require.NoError(t, exec.Command("mkfifo", filepath.Join(dir, "tmp/fifo")).Run())
	_, err = rootfs.Verify(context.Background(), dir, "")
	assert.ErrorContains(t, err, "unsupported file type")
}

func TestContents(t *testing.T) {
	has := func(p string) bool { _, err := os.Lstat(filepath.Join(built.dir, p)); return err == nil }
	for _, p := range append(rootfs.MountPoints(), "usr/bin/python3", "etc/passwd", "etc/group",
		"usr/lib/python3.11/os.py", "usr/lib/python3.11/json/__pycache__/__init__.cpython-311.pyc",
		"lib64/ld-linux-x86-64.so.2", "usr/lib/x86_64-linux-gnu/libc.so.6") {
		assert.True(t, has(p), "missing %s", p)
	}
	for _, p := range []string{"bin/sh", "usr/bin/sh", "usr/bin/bash", "usr/bin/apt", "usr/bin/dpkg", "usr/bin/pip",
		"usr/lib/python3.11/test", "usr/lib/python3.11/idlelib", "usr/lib/python3.11/tkinter",
		"usr/lib/python3.11/ensurepip", "usr/lib/python3.11/turtledemo", "usr/lib/python3.11/sitecustomize.py",
		"usr/lib/python3/dist-packages", "usr/local"} {
		assert.False(t, has(p), "%s must not be in the root", p)
	}
	passwd, err := os.ReadFile(filepath.Join(built.dir, "etc/passwd"))
	require.NoError(t, err)
	assert.Contains(t, string(passwd), "nobody:x:65534:65534:")
	group, err := os.ReadFile(filepath.Join(built.dir, "etc/group"))
	require.NoError(t, err)
	assert.Contains(t, string(group), ":65534:")
	ents, err := os.ReadDir(filepath.Join(built.dir, "query/repo"))
	require.NoError(t, err)
	assert.Empty(t, ents)

	// Every .pyc is an unchecked-hash pyc (PEP 552 flags = 0b01), so a
	// read-only root never triggers recompilation or mtime checks.
	n := 0
	err = filepath.WalkDir(filepath.Join(built.dir, "usr/lib/python3.11"), func(p string, d os.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(p, ".pyc") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		require.GreaterOrEqual(t, len(b), 16, p)
		assert.Equal(t, uint32(1), binary.LittleEndian.Uint32(b[4:8]), "%s is not an unchecked-hash pyc", p)
		n++
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, n, 500, "stdlib precompiled")
}

// TestInterpreterRuns imports a spread of the stdlib inside the root as the
// sandbox user, with the root mounted read-only through a chroot.
func TestInterpreterRuns(t *testing.T) {
	cmd := exec.Command("chroot", "--userspec=65534:65534", built.dir, "/usr/bin/python3", "-I", "-S", "-B", "-c",
		"import json, hashlib, ssl, sqlite3, subprocess, ctypes, decimal, lzma, bz2, zlib, multiprocessing, asyncio, re, pathlib, csv, zipfile, tarfile; print(json.__cached__)")
	cmd.Env = []string{"PATH=/usr/bin", "LANG=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "/usr/lib/python3.11/json/__pycache__/__init__.cpython-311.pyc\n", string(out))
	_, err = rootfs.Verify(context.Background(), built.dir, built.digest)
	require.NoError(t, err, "running the interpreter must not change the root")
}

func TestBuildRefusesNonEmptyOut(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x"), nil, 0o644))
	_, err := rootfs.Build(context.Background(), rootfs.Options{Out: dir})
	require.ErrorContains(t, err, "not empty")
	_, err = os.Stat(filepath.Join(dir, "x"))
	require.NoError(t, err, "a refused build leaves the directory alone")
}

func TestBuildFailsCleanlyOnBadPython(t *testing.T) {
	out := filepath.Join(t.TempDir(), "root")
	_, err := rootfs.Build(context.Background(), rootfs.Options{Python: "/nonexistent/python3", Out: out})
	require.Error(t, err)
	_, err = os.Stat(out)
	require.ErrorIs(t, err, os.ErrNotExist, "a failed build leaves nothing")
}
