package agentcheck

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/isolate/cgroupfs"
	"github.com/opencontainers/cgroups"
)

// fixture is the host side of one battery: a run laid out as awf run lays
// one out, with something private in every place the agent must not see,
// and the two sockets whose reachability is checked. Everything lives below
// dir, except the cgroup leaf.
type fixture struct {
	dir    string      // 0755 work directory (the agent must traverse it)
	layout host.Layout // the run's private base, ingress and audit archive

	secret      string // a file in the private root
	auditBase   string // the audit archive (all runs' logs)
	auditFile   string // an earlier run's audit log in it
	rootfsCache string // a directory standing for /var/lib/awf/rootfs
	rootfsFile  string
	source      string // a configured local source, 0755
	sourceFile  string
	cgroupLeaf  string // an awf-owned cgroup leaf, as the broker's sandboxes have
	cgroupFile  string
	cgroupNames []string

	engineSocket string
	engine       net.Listener
	broker       net.Listener
	greeting     string

	probeBin string // the awf binary, where the agent user can run it
	specPath string

	closeOnce sync.Once
	wg        sync.WaitGroup
}

// randHex returns n random bytes as hex.
func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("agentcheck: no randomness: %v", err))
	}
	return hex.EncodeToString(b)
}

// newFixture builds the fixture below parent ("" = the system temporary
// directory) for the agent user a, with exe copied where a can run it and
// a cgroup leaf beside the sandboxes' below cgroupParent.
func newFixture(parent, exe, cgroupParent string, a host.Agent) (fx *fixture, err error) {
	dir, err := os.MkdirTemp(parent, "awf-agentcheck-")
	if err != nil {
		return nil, fmt.Errorf("agentcheck: %w", err)
	}
	fx = &fixture{dir: dir, greeting: "awf-broker-" + randHex(8) + "\n"}
	defer func() {
		if err != nil {
			fx.close()
			fx = nil
		}
	}()
	// The work directory is open to the agent, as /var/lib, /var/log and
	// a checkout's parents are: what the agent may not see, it may not see
	// because the shim covers it, never because a parent is closed.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fx, fmt.Errorf("agentcheck: %w", err)
	}
	run := host.NewRunID()
	fx.layout = host.NewLayout(run, filepath.Join(dir, "private"), filepath.Join(dir, "ingress"), filepath.Join(dir, "audit"))
	l := fx.layout
	mk := func(p string, mode os.FileMode) error {
		if err := os.MkdirAll(p, mode); err != nil {
			return fmt.Errorf("agentcheck: %w", err)
		}
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("agentcheck: %w", err)
		}
		return nil
	}
	put := func(p, body string, mode os.FileMode) error {
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			return fmt.Errorf("agentcheck: %w", err)
		}
		return nil
	}
	fx.secret = filepath.Join(l.PrivateRoot, "seedmap.json")
	fx.auditBase = filepath.Dir(l.AuditArchive)
	fx.auditFile = filepath.Join(fx.auditBase, host.NewRunID(), "bounded-query.jsonl")
	fx.rootfsCache = filepath.Join(dir, "rootfs-cache")
	fx.rootfsFile = filepath.Join(fx.rootfsCache, "usr", "lib", "python3.11", "os.py")
	fx.source = filepath.Join(dir, "source")
	fx.sourceFile = filepath.Join(fx.source, "SECRET.md")
	steps := []func() error{
		func() error { return mk(l.PrivateBase, 0o700) },
		func() error { return mk(l.PrivateRoot, 0o700) },
		func() error { return put(fx.secret, `{"secret":"`+randHex(8)+`"}`, 0o600) },
		func() error { return mk(fx.auditBase, 0o755) },
		func() error { return mk(filepath.Dir(fx.auditFile), 0o700) },
		func() error { return put(fx.auditFile, `{"event":"seed-staged"}`+"\n", 0o600) },
		func() error { return mk(filepath.Dir(fx.rootfsFile), 0o755) },
		func() error { return put(fx.rootfsFile, "# a shared rootfs file\n", 0o644) },
		func() error { return mk(fx.source, 0o755) },
		func() error { return put(fx.sourceFile, "private: "+randHex(8)+"\n", 0o644) },
		func() error { return mk(filepath.Join(dir, "probe"), 0o755) },
		func() error { return mk(filepath.Join(dir, "engine"), 0o755) },
		func() error { return mk(l.IngressBase, 0o755) },
		func() error { return mk(l.IngressRoot, 0o755) },
		func() error { return mk(l.SocketDir, 0o700) },
		func() error { return os.Chown(l.SocketDir, a.UID, a.GID) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return fx, err
		}
	}
	fx.probeBin = filepath.Join(dir, "probe", "awf")
	if err := copyFile(exe, fx.probeBin, 0o755); err != nil {
		return fx, err
	}
	fx.specPath = filepath.Join(dir, "probe", "spec.json")

	// A real listening engine socket that the agent user could open: the
	// usual docker.sock is 0660 root:docker, and an agent user in the
	// docker group is a common CI set-up.
	fx.engineSocket = filepath.Join(dir, "engine", "docker.sock")
	if fx.engine, err = listenUnix(fx.engineSocket, 0o666, -1, -1); err != nil {
		return fx, err
	}
	fx.serve(fx.engine, "")
	// The broker stand-in, where and as awf run puts the real one.
	if fx.broker, err = listenUnix(l.Socket, 0o600, a.UID, a.GID); err != nil {
		return fx, err
	}
	fx.serve(fx.broker, fx.greeting)

	if err := fx.makeCgroupLeaf(cgroupParent, run); err != nil {
		return fx, err
	}
	return fx, nil
}

// makeCgroupLeaf creates a leaf below the sandboxes' cgroup parent, with a
// world-readable file, as every sandbox's leaf has.
func (fx *fixture) makeCgroupLeaf(parent, run string) error {
	var root string
	mode, err := cgroupfs.Mode()
	if err != nil {
		return fmt.Errorf("agentcheck: %w", err)
	}
	if cgroupfs.IsV1(mode) {
		if root, err = cgroups.FindCgroupMountpoint("", "pids"); err != nil {
			return fmt.Errorf("agentcheck: %w", err)
		}
	} else {
		base, err := cgroupfs.V2Base(false)
		if err != nil {
			return fmt.Errorf("agentcheck: %w", err)
		}
		root = filepath.Join(cgroupfs.Root, base)
	}
	p := filepath.Join(root, parent)
	if err := os.MkdirAll(p, 0o700); err != nil {
		return fmt.Errorf("agentcheck: cgroup parent: %w", err)
	}
	leaf := filepath.Join(p, "awf-"+run)
	if err := os.Mkdir(leaf, 0o755); err != nil {
		return fmt.Errorf("agentcheck: cgroup leaf: %w", err)
	}
	fx.cgroupLeaf = leaf
	fx.cgroupFile = filepath.Join(leaf, "cgroup.procs")
	fx.cgroupNames = []string{parent, filepath.Base(leaf)}
	if _, err := os.Stat(fx.cgroupFile); err != nil {
		return fmt.Errorf("agentcheck: cgroup leaf: %w", err)
	}
	return nil
}

// serve accepts connections until the listener closes, writes greeting to
// each and closes it.
func (fx *fixture) serve(l net.Listener, greeting string) {
	fx.wg.Add(1)
	go func() {
		defer fx.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, greeting)
			c.Close()
		}
	}()
}

// listenUnix listens on a Unix socket with the given mode and, when uid is
// not -1, owner.
func listenUnix(path string, mode os.FileMode, uid, gid int) (net.Listener, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("agentcheck: listen %s: %w", path, err)
	}
	err = os.Chmod(path, mode)
	if err == nil && uid != -1 {
		err = os.Chown(path, uid, gid)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("agentcheck: %w", err)
	}
	return l, nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("agentcheck: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("agentcheck: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("agentcheck: copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("agentcheck: %w", err)
	}
	return os.Chmod(dst, mode)
}

// hidden lists the files of the hiding probes.
func (fx *fixture) hidden() []HiddenFile {
	return []HiddenFile{
		{IDPrivateBase, fx.secret},
		{IDAuditArchive, fx.auditFile},
		{IDRootFSCache, fx.rootfsFile},
		{IDSource, fx.sourceFile},
		{IDCgroupFile, fx.cgroupFile},
	}
}

// close removes everything the fixture made. It is safe to call twice.
func (fx *fixture) close() error {
	var errs []error
	fx.closeOnce.Do(func() {
		for _, l := range []net.Listener{fx.engine, fx.broker} {
			if l != nil {
				l.Close()
			}
		}
		fx.wg.Wait()
		if fx.cgroupLeaf != "" {
			if err := os.Remove(fx.cgroupLeaf); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("agentcheck: remove cgroup leaf: %w", err))
			}
		}
		if err := os.RemoveAll(fx.dir); err != nil {
			errs = append(errs, fmt.Errorf("agentcheck: remove %s: %w", fx.dir, err))
		}
	})
	return errors.Join(errs...)
}

// trimTail keeps the last n bytes of s, on a line boundary when it can.
func trimTail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return "…" + s
}
