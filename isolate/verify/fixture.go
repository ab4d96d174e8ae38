package verify

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// fixture is the host side of a battery: a scratch seed repository, a
// second seed and a sibling directory that the sandbox must not see, and
// loopback listeners that count every connection a probe makes to the host.
type fixture struct {
	dir       string // 0700 work directory that holds everything below
	seed      string // the seed a probe's sandbox views as /query/repo
	otherSeed string // a second seed, never mounted
	sibling   string // a directory beside the seeds, never mounted
	hostOnly  string // a host file outside every seed

	seedMarker    string // name of a file in the seed
	seedValue     string // its content
	seedEntries   int    // top-level entries of the seed
	otherMarker   string // name of a file in the other seed
	siblingMarker string // name of a file in the sibling directory
	plantToken    string // name the plant probe leaves behind
	seedDigest    string // digest of the seed tree before any probe ran

	hostname string
	tcp4     *listener
	tcp6     *listener // nil when the host has no IPv6 loopback
	udp      *listener
	dns      *listener
	abstract *listener

	hostOnlyList []string

	closeOnce sync.Once
}

// randHex returns n random bytes as hex.
func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("verify: no randomness: %v", err))
	}
	return hex.EncodeToString(b)
}

// newFixture creates the scratch trees under parent (or the system temp dir)
// and starts the listeners.
func newFixture(parent string) (fx *fixture, err error) {
	dir, err := os.MkdirTemp(parent, "awf-verify-")
	if err != nil {
		return nil, fmt.Errorf("verify: work dir: %w", err)
	}
	fx = &fixture{dir: dir}
	defer func() {
		if err != nil {
			fx.close()
			fx = nil
		}
	}()
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("verify: work dir: %w", err)
	}
	tag := randHex(6)
	fx.seedMarker = "seed-marker-" + tag + ".txt"
	fx.seedValue = "awf-verify-seed-" + randHex(8)
	fx.otherMarker = "other-seed-" + randHex(6) + ".txt"
	fx.siblingMarker = "sibling-" + randHex(6) + ".txt"
	fx.plantToken = "awf-plant-" + randHex(6)
	seeds := filepath.Join(dir, "seeds")
	fx.seed = filepath.Join(seeds, randHex(16))
	fx.otherSeed = filepath.Join(seeds, randHex(16))
	fx.sibling = filepath.Join(seeds, "sibling-"+randHex(4))
	fx.hostOnly = filepath.Join(dir, "host-only-"+randHex(4))

	files := map[string]string{
		filepath.Join(fx.seed, fx.seedMarker):         fx.seedValue,
		filepath.Join(fx.seed, "README.md"):           "# verify seed\n",
		filepath.Join(fx.seed, "src", "main.py"):      "print('hello')\n",
		filepath.Join(fx.seed, "src", "data.json"):    "{\"n\": 1}\n",
		filepath.Join(fx.otherSeed, fx.otherMarker):   "other seed\n",
		filepath.Join(fx.otherSeed, "README.md"):      "# other seed\n",
		filepath.Join(fx.sibling, fx.siblingMarker):   "sibling secret\n",
		filepath.Join(seeds, "seed-map-"+randHex(4)):  "not for the sandbox\n",
		filepath.Join(fx.hostOnly, "host-secret.txt"): "host secret\n",
	}
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("verify: fixture: %w", err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return nil, fmt.Errorf("verify: fixture: %w", err)
		}
	}
	fx.seedEntries = 3 // marker, README.md, src
	// Seeds are read-only, as staging leaves them.
	for _, d := range []string{fx.seed, fx.otherSeed} {
		if err := setTreeWritable(d, false); err != nil {
			return nil, fmt.Errorf("verify: fixture: %w", err)
		}
	}
	if fx.seedDigest, err = treeDigest(fx.seed); err != nil {
		return nil, fmt.Errorf("verify: fixture: %w", err)
	}
	fx.hostname, _ = os.Hostname()
	if err := fx.listen(); err != nil {
		return nil, err
	}
	return fx, nil
}

// close stops the listeners and removes the work directory.
func (fx *fixture) close() error {
	var err error
	fx.closeOnce.Do(func() {
		for _, l := range []*listener{fx.tcp4, fx.tcp6, fx.udp, fx.dns, fx.abstract} {
			l.close()
		}
		for _, d := range []string{fx.seed, fx.otherSeed} {
			if d != "" {
				_ = setTreeWritable(d, true)
			}
		}
		err = os.RemoveAll(fx.dir)
	})
	return err
}

// setTreeWritable adds or removes the owner write bit on every directory and
// file of a tree, and removes group and other write bits either way.
func setTreeWritable(root string, writable bool) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		mode := fs.FileMode(0o444)
		if d.IsDir() {
			mode = 0o555
		}
		if writable {
			mode |= 0o200
		}
		return os.Chmod(p, mode)
	})
}

// treeDigest hashes every path, mode and file content under root.
func treeDigest(root string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s\x00%o\x00", rel, info.Mode())
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
		}
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// listener accepts connections or datagrams on a host loopback address and
// counts them. A probe that reaches it has crossed the network namespace.
type listener struct {
	addr  string
	port  int
	hits  atomic.Int64
	close func()
}

func (l *listener) count() int64 {
	if l == nil {
		return 0
	}
	return l.hits.Load()
}

func (fx *fixture) listen() error {
	var err error
	if fx.tcp4, err = streamListener("tcp4", "127.0.0.1:0"); err != nil {
		return err
	}
	if l, err := streamListener("tcp6", "[::1]:0"); err == nil {
		fx.tcp6 = l
	}
	if fx.udp, err = datagramListener("127.0.0.1:0", []byte("awf-verify-pong")); err != nil {
		return err
	}
	if fx.dns, err = datagramListener("127.0.0.1:0", nil); err != nil {
		return err
	}
	if fx.abstract, err = streamListener("unix", "@awf-verify-"+randHex(8)); err != nil {
		return err
	}
	return nil
}

// streamListener counts and closes every accepted connection.
func streamListener(network, addr string) (*listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("verify: listen %s %s: %w", network, addr, err)
	}
	l := &listener{addr: ln.Addr().String()}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		l.port = ta.Port
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			l.hits.Add(1)
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("awf-verify-hello\n"))
			c.Close()
		}
	}()
	l.close = func() { ln.Close(); <-done }
	return l, nil
}

// datagramListener counts every datagram and answers it: with reply when
// set, else with a DNS answer for the question it got.
func datagramListener(addr string, reply []byte) (*listener, error) {
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return nil, fmt.Errorf("verify: listen udp %s: %w", addr, err)
	}
	l := &listener{addr: pc.LocalAddr().String(), port: pc.LocalAddr().(*net.UDPAddr).Port}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			l.hits.Add(1)
			out := reply
			if out == nil {
				out = dnsAnswer(buf[:n])
			}
			if out != nil {
				_, _ = pc.WriteTo(out, from)
			}
		}
	}()
	l.close = func() { pc.Close(); <-done }
	return l, nil
}

// dnsAnswer builds a response to a DNS query with one A record, 127.0.0.1.
// It returns nil for anything that is not a plausible query.
func dnsAnswer(q []byte) []byte {
	if len(q) < 12 {
		return nil
	}
	// Find the end of the question: labels, then type and class.
	i := 12
	for i < len(q) && q[i] != 0 {
		i += int(q[i]) + 1
	}
	i += 5
	if i > len(q) {
		return nil
	}
	r := append([]byte{}, q[:i]...)
	r[2] = 0x81 // QR, RD
	r[3] = 0x80 // RA
	r[6], r[7] = 0, 1
	r = append(r, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1)
	return r
}

// tag is a short random name part shared by the fixture's invocations.
func (fx *fixture) tag() string { return fx.plantToken[len(fx.plantToken)-6:] }

// hits returns the connection counts of every listener.
func (fx *fixture) hits() map[string]int64 {
	return map[string]int64{
		"tcp4": fx.tcp4.count(), "tcp6": fx.tcp6.count(), "udp": fx.udp.count(),
		"dns": fx.dns.count(), "abstract": fx.abstract.count(),
	}
}

// hostOnlyCandidates are host paths that a minimal root filesystem lacks.
var hostOnlyCandidates = []string{
	"/etc/shadow", "/etc/machine-id", "/etc/ssh", "/etc/sudoers", "/root", "/home",
	"/var/lib", "/var/log", "/usr/local", "/usr/sbin", "/boot", "/run/systemd", "/bin/sh",
	"/usr/bin/sh", "/usr/bin/env", "/usr/bin/git",
}

// hostOnlyPaths are the paths fs/host-paths looks for: candidates present on
// the host but absent from the root filesystem, plus verify's own trees.
func (fx *fixture) hostOnlyPaths() []string { return fx.hostOnlyList }

// setHostOnly computes hostOnlyPaths for a root filesystem.
func (fx *fixture) setHostOnly(rootfsDir string, extra ...string) {
	var out []string
	for _, p := range hostOnlyCandidates {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if _, err := os.Lstat(filepath.Join(rootfsDir, p)); err == nil {
			continue
		}
		out = append(out, p)
	}
	out = append(out, fx.dir, fx.seed, fx.hostOnly)
	for _, e := range extra {
		if e != "" {
			out = append(out, e)
		}
	}
	if len(out) > 64 {
		out = out[:64]
	}
	fx.hostOnlyList = out
}
