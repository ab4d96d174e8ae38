package rootfs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// builder copies host files into out, mirroring their absolute paths.
type builder struct {
	ctx  context.Context
	out  string
	seen map[string]bool // host paths already mirrored
}

// pyInfo is what the host interpreter reports about itself.
type pyInfo struct {
	Version string `json:"version"` // "3.11"
	Stdlib  string `json:"stdlib"`  // directory of os.py
	Dynload string `json:"dynload"` // directory of the extension modules
}

const pyInfoScript = `import json, os, sys, _json
print(json.dumps({"version": "%d.%d" % sys.version_info[:2],
 "stdlib": os.path.dirname(os.__file__),
 "dynload": os.path.dirname(_json.__file__)}))`

// skipDirs are stdlib directories left out: tests, GUI, installer and build data.
var skipDirs = map[string]bool{
	"test": true, "tests": true, "idlelib": true, "tkinter": true, "turtledemo": true,
	"ensurepip": true, "__pycache__": true, "site-packages": true, "dist-packages": true,
}

// skipModulePrefixes are extension modules left out: test helpers, terminal
// UI, NIS, OSS audio and dbm bindings.
var skipModulePrefixes = []string{
	"_test", "_ctypes_test", "_xxtestfuzz", "xxlimited", "_curses", "readline", "nis.",
	"ossaudiodev", "_dbm", "_tkinter", "_xxsubinterpreters",
}

func (b *builder) build(python string) error {
	b.seen = map[string]bool{}
	info, err := b.pythonInfo(python)
	if err != nil {
		return err
	}
	if err := b.mirror(python); err != nil {
		return fmt.Errorf("interpreter: %w", err)
	}
	if python != DefaultPython {
		if err := b.ensureDefaultPython(python); err != nil {
			return err
		}
	}
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		return fmt.Errorf("interpreter: %w", err)
	}
	elfs := []string{real}
	mods, err := b.copyStdlib(info)
	if err != nil {
		return err
	}
	elfs = append(elfs, mods...)
	libs, err := sharedClosure(elfs)
	if err != nil {
		return err
	}
	for _, l := range libs {
		if err := b.mirror(l); err != nil {
			return fmt.Errorf("shared library: %w", err)
		}
	}
	if err := b.writeEtc(); err != nil {
		return err
	}
	for _, m := range MountPoints() {
		if err := os.MkdirAll(filepath.Join(b.out, m), 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", m, err)
		}
	}
	if err := os.Chmod(filepath.Join(b.out, "tmp"), 0o755); err != nil {
		return err
	}
	for name, target := range Aliases() {
		if err := os.Symlink(target, filepath.Join(b.out, name)); err != nil {
			return fmt.Errorf("alias /%s: %w", name, err)
		}
	}
	if err := b.compile(python, info); err != nil {
		return err
	}
	return b.normalise()
}

// pythonInfo runs the host interpreter once to learn its layout.
func (b *builder) pythonInfo(python string) (pyInfo, error) {
	var info pyInfo
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-S", "-c", pyInfoScript)
	cmd.Env = []string{"LANG=C.UTF-8"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return info, fmt.Errorf("query %s: %w: %s", python, err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(outb, &info); err != nil {
		return info, fmt.Errorf("query %s: %w", python, err)
	}
	if !filepath.IsAbs(info.Stdlib) || !filepath.IsAbs(info.Dynload) {
		return info, fmt.Errorf("query %s: odd layout %+v", python, info)
	}
	return info, nil
}

// ensureDefaultPython makes /usr/bin/python3 in the root point at python.
func (b *builder) ensureDefaultPython(python string) error {
	dst := filepath.Join(b.out, DefaultPython)
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	if err := b.mirrorDir(path.Dir(DefaultPython)); err != nil {
		return err
	}
	return os.Symlink(python, dst)
}

// copyStdlib copies the standard library and returns the host paths of the
// extension modules it kept.
func (b *builder) copyStdlib(info pyInfo) ([]string, error) {
	var mods []string
	roots := []string{info.Stdlib}
	if !strings.HasPrefix(info.Dynload+"/", info.Stdlib+"/") {
		roots = append(roots, info.Dynload)
	}
	for _, root := range roots {
		if err := b.mirrorDir(root); err != nil {
			return nil, err
		}
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if err := b.ctx.Err(); err != nil {
				return err
			}
			name := d.Name()
			if p == root {
				return nil
			}
			if d.IsDir() {
				if skipDirs[name] || strings.HasPrefix(name, "config-") {
					return filepath.SkipDir
				}
				return os.MkdirAll(filepath.Join(b.out, p), 0o755)
			}
			if keep, isMod := keepStdlibFile(p, name, info); !keep {
				return nil
			} else if isMod {
				mods = append(mods, p)
			}
			return b.copyEntry(p, root)
		})
		if err != nil {
			return nil, fmt.Errorf("stdlib %s: %w", root, err)
		}
	}
	return mods, nil
}

// keepStdlibFile decides whether a stdlib file goes into the root and whether
// it is an extension module.
func keepStdlibFile(p, name string, info pyInfo) (keep, isMod bool) {
	switch {
	case name == "sitecustomize.py" || name == "EXTERNALLY-MANAGED":
		return false, false
	case strings.HasSuffix(name, ".pyc"):
		return false, false // compiled afresh
	case strings.HasSuffix(name, ".so"):
		for _, pre := range skipModulePrefixes {
			if strings.HasPrefix(name, pre) {
				return false, false
			}
		}
		return true, filepath.Dir(p) == info.Dynload
	}
	return true, false
}

// copyEntry copies one stdlib file or an in-tree symlink.
func (b *builder) copyEntry(p, root string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	dst := filepath.Join(b.out, p)
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		resolved := target
		if !filepath.IsAbs(resolved) {
			resolved = filepath.Join(filepath.Dir(p), target)
		}
		if !strings.HasPrefix(resolved, root+"/") {
			return copyFile(resolved, dst, fi.Mode().Perm()) // link out of tree: copy content
		}
		return os.Symlink(target, dst)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	return copyFile(p, dst, fi.Mode().Perm())
}

// mirror copies host path p (following and recreating symlinks) into the root.
func (b *builder) mirror(p string) error {
	for hops := 0; hops < 32; hops++ {
		p = filepath.Clean(p)
		if b.seen[p] {
			return nil
		}
		b.seen[p] = true
		if err := b.mirrorDir(filepath.Dir(p)); err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(b.out, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if _, err := os.Lstat(dst); err != nil {
				if err := os.Symlink(target, dst); err != nil {
					return err
				}
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			p = target
		case fi.Mode().IsRegular():
			return copyFile(p, dst, fi.Mode().Perm())
		default:
			return fmt.Errorf("%s: unsupported file type %v", p, fi.Mode().Type())
		}
	}
	return fmt.Errorf("%s: too many symlinks", p)
}

// mirrorDir recreates directory d, including any symlinked components.
func (b *builder) mirrorDir(d string) error {
	d = filepath.Clean(d)
	if d == "/" {
		return nil
	}
	if err := b.mirrorDir(filepath.Dir(d)); err != nil {
		return err
	}
	dst := filepath.Join(b.out, d)
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(d)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(d), target)
		}
		return b.mirrorDir(target)
	}
	return os.Mkdir(dst, 0o755)
}

// copyFile copies regular file src to dst with mode perm (no special bits).
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm&0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// etcFiles is the whole /etc of the root.
var etcFiles = map[string]string{
	"etc/passwd":        "root:x:0:0:root:/nonexistent:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n",
	"etc/group":         "root:x:0:\nnogroup:x:65534:\n",
	"etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
	"etc/hosts":         "127.0.0.1 localhost\n::1 localhost\n",
}

func (b *builder) writeEtc() error {
	if err := os.MkdirAll(filepath.Join(b.out, "etc"), 0o755); err != nil {
		return err
	}
	for name, body := range etcFiles {
		if err := os.WriteFile(filepath.Join(b.out, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// compileScript precompiles the copied stdlib with unchecked-hash pycs so a
// read-only root never recompiles, and records in-sandbox paths.
const compileScript = `import compileall, sys, py_compile
ok = compileall.compile_dir(sys.argv[1], ddir=sys.argv[2], force=True, quiet=1, workers=int(sys.argv[3]),
    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
sys.exit(0 if ok else 1)`

func (b *builder) compile(python string, info pyInfo) error {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	workers := "2"
	cmd := exec.CommandContext(ctx, python, "-I", "-S", "-c", compileScript,
		filepath.Join(b.out, info.Stdlib), info.Stdlib, workers)
	cmd.Env = []string{"LANG=C.UTF-8", "SOURCE_DATE_EPOCH=0"}
	if outb, err := cmd.CombinedOutput(); err != nil {
		// Some stdlib files are deliberately invalid (lib2to3 data); those
		// failures are reported but only a hard failure stops the build.
		if ctx.Err() != nil || !bytes.Contains(outb, []byte("Error")) {
			return fmt.Errorf("compile stdlib: %w: %s", err, tail(outb))
		}
	}
	return nil
}

// normalise sets canonical permissions: directories 0755, files 0644 or 0755.
func (b *builder) normalise() error {
	return filepath.WalkDir(b.out, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.Lchown(p, 0, 0); err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			return nil
		case fi.IsDir():
			return os.Chmod(p, 0o755)
		case fi.Mode().Perm()&0o111 != 0:
			return os.Chmod(p, 0o755)
		default:
			return os.Chmod(p, 0o644)
		}
	})
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 400 {
		s = "…" + s[len(s)-400:]
	}
	return s
}
