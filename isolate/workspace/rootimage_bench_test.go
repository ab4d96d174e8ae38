package workspace

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// startScript is what the interpreter runs in the start-up comparison: the
// modules most bounded queries import.
const startScript = "import os, json, re, collections"

// BenchmarkRootImage compares the shapes of a per-invocation root, one
// iteration each, interleaved: a fresh erofs mount of the ramfs image
// (file-backed, and through a loop device), and a private copy of the tree
// into a tmpfs (cp -a). For each it reports the median time to make and
// remove the root, the interpreter's start-up on it (chroot, cold: the
// root's own page cache is empty), and the page cache the start-up leaves
// in the root's superblock. shared-start-ms is the same start-up on the
// shared, warm tree, the shape before. image-build-ms and image-MB are the
// one-off cost per rootfs digest.
func BenchmarkRootImage(b *testing.B) {
	root := buildTestRootTB(b)
	dir := b.TempDir()
	ctx := context.Background()
	images := map[string]*RootImage{}
	var buildT time.Duration
	var imageMB float64
	for _, loop := range []bool{false, true} {
		s := NewRootImages(filepath.Join(dir, map[bool]string{false: "fs", true: "loopfs"}[loop]))
		s.TestOnlyLoop = loop
		b.Cleanup(func() { _ = s.Close(context.Background()) })
		t0 := time.Now()
		im, err := s.Image(ctx, root)
		require.NoError(b, err)
		if !loop {
			buildT, imageMB = time.Since(t0), float64(im.Info.Size)/(1<<20)
		}
		images[map[bool]string{false: "erofs", true: "loop"}[loop]] = im
	}

	type shape struct {
		name  string
		make  func(target string) error
		clean func(target string) error
	}
	copyTree := func(target string) error {
		// Not MountTmpfs: the copy is chrooted into and run, so exec.
		if err := os.Mkdir(target, 0o700); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=128m,mode=0700"); err != nil {
			return err
		}
		return exec.Command("cp", "-a", root+"/.", target).Run()
	}
	shapes := []shape{
		{"erofs", func(t string) error { return images["erofs"].Mount(ctx, t) }, UnmountRoot},
		{"loop", func(t string) error { return images["loop"].Mount(ctx, t) }, UnmountRoot},
		{"copy", copyTree, func(t string) error { return Remove(ctx, t) }},
	}
	setup := map[string][]time.Duration{}
	teardown := map[string][]time.Duration{}
	start := map[string][]time.Duration{}
	cache := map[string][]int64{}
	var shared []time.Duration
	n := 0
	for b.Loop() {
		for _, s := range shapes {
			target := filepath.Join(dir, s.name)
			t0 := time.Now()
			require.NoError(b, s.make(target))
			setup[s.name] = append(setup[s.name], time.Since(t0))
			start[s.name] = append(start[s.name], chrootStart(b, target))
			if s.name != "copy" {
				cache[s.name] = append(cache[s.name], residentKB(b, target))
			}
			t0 = time.Now()
			require.NoError(b, s.clean(target))
			teardown[s.name] = append(teardown[s.name], time.Since(t0))
		}
		shared = append(shared, chrootStart(b, root))
		n++
	}
	for _, s := range shapes {
		b.ReportMetric(medianMs(setup[s.name]), s.name+"-setup-ms")
		b.ReportMetric(medianMs(teardown[s.name]), s.name+"-teardown-ms")
		b.ReportMetric(medianMs(start[s.name]), s.name+"-start-ms")
		if c := cache[s.name]; len(c) > 0 {
			slices.Sort(c)
			b.ReportMetric(float64(c[len(c)/2]), s.name+"-pagecache-kB")
		}
	}
	b.ReportMetric(medianMs(shared), "shared-start-ms")
	// After the loop: b.Loop resets the metrics reported before it.
	b.ReportMetric(float64(buildT.Microseconds())/1000, "image-build-ms")
	b.ReportMetric(imageMB, "image-MB")
}

// chrootStart times the interpreter's start-up with target as its root.
func chrootStart(b *testing.B, target string) time.Duration {
	t0 := time.Now()
	out, err := exec.Command("chroot", target, "/usr/bin/python3", "-I", "-S", "-B", "-c", startScript).CombinedOutput()
	require.NoError(b, err, "%s", out)
	return time.Since(t0)
}

// residentKB is the page cache held by the files below target (mincore).
func residentKB(b *testing.B, target string) int64 {
	var pages int64
	err := filepath.WalkDir(target, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil || info.Size() == 0 {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		m, err := unix.Mmap(int(f.Fd()), 0, int(info.Size()), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return err
		}
		defer unix.Munmap(m)
		vec := make([]byte, (len(m)+4095)/4096)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			return e
		}
		for _, v := range vec {
			pages += int64(v & 1)
		}
		return nil
	})
	require.NoError(b, err)
	return pages * 4
}

func medianMs(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}
