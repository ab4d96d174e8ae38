// Command enclaveobserve runs in an enclave in place of the loop and
// records what a program there can observe without the network: its
// process, its mounts, its files, its network namespace's view and its
// environment. It writes the observations to the transcript file and true
// to the result file. It makes only the system calls the loop's policy
// allows (no readlink, getcwd or getppid: the policy kills them).
//
// ages are how long ago (in ms) the process and each tmpfs began: what
// differs between an enclave prepared ahead and a cold one.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/awf-project/awf/broker/agentloop"
)

func main() {
	// As the loop: started ahead on direct, it observes nothing before
	// its start.
	if err := agentloop.AwaitHandedStart(); err != nil {
		os.Exit(agentloop.ExitNoStart)
	}
	obs := map[string]any{}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(b)
	}
	obs["args"] = os.Args
	obs["env"] = os.Environ()
	obs["pid"] = os.Getpid()
	obs["uid"] = os.Getuid()
	host, err := os.Hostname()
	obs["hostname"] = fmt.Sprint(host, err)
	var dot, tmp syscall.Stat_t
	obs["cwdIsTmp"] = syscall.Stat(".", &dot) == nil && syscall.Stat("/tmp", &tmp) == nil && dot.Dev == tmp.Dev && dot.Ino == tmp.Ino
	keep := map[string]bool{"Name": true, "Umask": true, "Uid": true, "Gid": true, "Groups": true, "NStgid": true, "NSpid": true,
		"NSpgid": true, "NSsid": true, "CapInh": true, "CapPrm": true, "CapEff": true, "CapBnd": true, "CapAmb": true,
		"NoNewPrivs": true, "Seccomp": true, "Seccomp_filters": true, "SigIgn": true, "SigCgt": true,
		"Cpus_allowed_list": true, "Mems_allowed_list": true, "Speculation_Store_Bypass": true}
	var status []string
	for _, l := range strings.Split(read("/proc/self/status"), "\n") {
		if k, _, ok := strings.Cut(l, ":"); ok && keep[k] {
			status = append(status, l)
		}
	}
	obs["status"] = status
	for _, p := range []string{"/proc/self/limits", "/proc/self/cgroup", "/proc/self/oom_score_adj", "/proc/net/dev",
		"/proc/net/snmp", "/proc/net/netstat", "/proc/net/route", "/proc/net/arp", "/proc/net/tcp", "/proc/net/tcp6",
		"/proc/net/udp", "/proc/net/unix", "/proc/net/if_inet6", "/proc/sys/net/ipv4/ip_forward",
		"/proc/sys/net/ipv6/conf/all/disable_ipv6", "/proc/sys/kernel/hostname", "/proc/self/mounts"} {
		obs[p] = read(p)
	}
	// mountinfo without mount and peer-group ids, device numbers and the
	// host-side root of each bind: those differ between any two sandboxes.
	var mounts []string
	for _, l := range strings.Split(strings.TrimSpace(read("/proc/self/mountinfo")), "\n") {
		f := strings.Fields(l)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 6 {
			mounts = append(mounts, "unparsed: "+l)
			continue
		}
		mounts = append(mounts, strings.Join(append([]string{f[4], f[5]}, f[sep+1:]...), " "))
	}
	obs["mountinfo"] = mounts
	var fds []string
	if es, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range es {
			fds = append(fds, e.Name())
		}
	}
	obs["fds"] = fds
	var nets []string
	if es, err := os.ReadDir("/sys/class/net"); err != nil {
		nets = append(nets, "error: "+err.Error())
	} else {
		for _, e := range es {
			p := "/sys/class/net/" + e.Name()
			nets = append(nets, e.Name()+" ifindex="+strings.TrimSpace(read(p+"/ifindex"))+" mtu="+strings.TrimSpace(read(p+"/mtu"))+
				" operstate="+strings.TrimSpace(read(p+"/operstate"))+" rx="+strings.TrimSpace(read(p+"/statistics/rx_packets"))+
				" tx="+strings.TrimSpace(read(p+"/statistics/tx_packets")))
		}
	}
	obs["net"] = nets
	// The network as a program sees it without /proc: the interfaces (a
	// netlink socket, which the policy refuses), the proxy's answer and
	// what another port or address gives.
	ifs, err := net.Interfaces()
	obs["interfaces"] = fmt.Sprint(ifs, err)
	dial := func(addr string, timeout time.Duration) string {
		c, err := net.DialTimeout("tcp4", addr, timeout)
		if err != nil {
			return "error: " + err.Error()
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(timeout))
		b := make([]byte, 64)
		n, err := c.Read(b)
		return fmt.Sprintf("read %q %v", b[:n], err)
	}
	obs["proxy"] = dial("169.254.77.1:8080", 5*time.Second)
	obs["proxyOtherPort"] = dial("169.254.77.1:8081", 300*time.Millisecond)
	obs["otherAddress"] = dial("10.0.0.1:80", 300*time.Millisecond)
	var tree []string
	for _, root := range []string{"/", "/enclave", "/tmp", "/dev", "/etc"} {
		es, err := os.ReadDir(root)
		if err != nil {
			tree = append(tree, root+": "+err.Error())
			continue
		}
		for _, e := range es {
			p := filepath.Join(root, e.Name())
			fi, err := os.Lstat(p)
			if err != nil {
				tree = append(tree, p+": "+err.Error())
				continue
			}
			st := fi.Sys().(*syscall.Stat_t)
			line := fmt.Sprintf("%s %v %d %d:%d nlink=%d", p, fi.Mode(), fi.Size(), st.Uid, st.Gid, st.Nlink)
			if fi.Mode().IsRegular() && fi.Size() < 1<<20 {
				if b, err := os.ReadFile(p); err == nil {
					s := sha256.Sum256(b)
					line += " sha256=" + hex.EncodeToString(s[:8])
				}
			}
			tree = append(tree, line)
		}
	}
	_ = filepath.WalkDir("/enclave/repo", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			tree = append(tree, p+": "+err.Error())
			return nil
		}
		fi, _ := d.Info()
		tree = append(tree, fmt.Sprintf("%s %v %d", p, fi.Mode(), fi.Size()))
		return nil
	})
	sort.Strings(tree)
	obs["tree"] = tree
	// The ages: the process's start (from /proc/self/stat and /proc/uptime)
	// and each tmpfs root's change time.
	ages := map[string]int64{}
	stat, uptime := read("/proc/self/stat"), read("/proc/uptime")
	if f, u := strings.Fields(stat), strings.Fields(uptime); len(f) > 21 && len(u) > 0 {
		start, err1 := strconv.ParseFloat(f[21], 64)
		up, err2 := strconv.ParseFloat(u[0], 64)
		if err1 == nil && err2 == nil {
			ages["process"] = int64((up - start/100) * 1000)
		}
	}
	if _, ok := ages["process"]; !ok {
		obs["clock"] = "no process age: stat " + stat + "; uptime " + uptime
	}
	for _, p := range []string{"/enclave/out", "/tmp", "/enclave", "/dev/shm", "/sys", "/dev"} {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			ages[p] = time.Since(time.Unix(st.Ctim.Sec, st.Ctim.Nsec)).Milliseconds()
		}
	}
	b, err := json.Marshal(map[string]any{"observed": obs, "ages": ages})
	if err != nil {
		os.Exit(2)
	}
	if err := os.WriteFile("/enclave/out/transcript.jsonl", append(b, '\n'), 0o600); err != nil {
		os.Exit(3)
	}
	if err := os.WriteFile("/enclave/out/result.json", []byte("true"), 0o600); err != nil {
		os.Exit(4)
	}
}
