#!/usr/bin/env bash
# Runs inside the cgroup v2 VM (see run.sh). The project directory is shared
# over 9p, which cannot hold sockets or FIFOs, so all state lives on /tmp.
set -uo pipefail
export TMPDIR=/tmp
fails=0
# The VM tool's boot line sets the console's log level; a step that stalls
# must say why, so the kernel's own reports of a stuck guest (hung tasks,
# RCU stalls, the OOM killer: KERN_ERR) reach the console whatever it says.
dmesg -n 4 2>/dev/null || true
echo 1 2>/dev/null > /proc/sys/kernel/sysrq || true
# The watchdog below uses shell builtins only, and naps on a FIFO of the
# guest's /tmp: every program of this root is read over 9p, so a guest
# whose 9p is stuck could run none of them, and then it must still speak.
nap_fifo=/tmp/.test-cgroup2-nap
rm -f "$nap_fifo"; mkfifo "$nap_fifo"
nap() { read -rt "$1" <> "$nap_fifo" || true; }
# meminfo prints the guest's memory lines named in $@ on one line.
meminfo() {
  local k v u out=
  while read -r k v u; do
    for n in "$@"; do [ "$k" = "$n:" ] && out+=" $n $((v / 1024)) MiB"; done
  done < /proc/meminfo
  echo "${out# }"
}
# tasks prints one line per user task: pid, parent, state, kernel wait
# channel and (comm). Kernel threads (children of kthreadd, pid 2) are left
# out: sysrq w shows the blocked ones.
tasks() {
  local f st w comm
  for f in /proc/[0-9]*/stat; do
    read -r st < "$f" 2>/dev/null || continue
    w=; read -r w < "${f%stat}wchan" 2>/dev/null
    comm=${st#*(}; comm=${comm%)*}
    set -- ${st##*) }
    [ "$2" = 2 ] || [ "$2" = 0 ] || echo "${st%% (*} $2 $1 ${w:--} ($comm)"
  done
}
# stuck reports what a step that outran its bound is waiting on: the
# guest's memory (a guest short of it thrashes without a word), every task
# with its state and kernel wait channel, and the kernel stacks of the
# blocked ones (sysrq w, which prints to the console itself).
stuck() {
  echo "test-cgroup2: memory at ${SECONDS}s: $(meminfo MemTotal MemAvailable Shmem Unevictable)"
  echo "test-cgroup2: user tasks at ${SECONDS}s (pid ppid state wchan (comm)):"
  tasks
  echo w 2>/dev/null > /proc/sysrq-trigger
}
# step NAME BOUND CMD...: runs CMD; past BOUND seconds it reports what it
# waits on, sends SIGQUIT (a Go binary prints every goroutine and exits),
# then SIGKILL to it and its children after 30 s more, and the step fails.
# One stuck step then fails alone instead of consuming the VM's whole time
# with no trace, and a heartbeat tells a stuck step from a stuck guest.
step() {
  local name=$1 bound=$2; shift 2
  echo "=== test-cgroup2: $name (bound ${bound}s)"
  local t0=$SECONDS
  # A script's background command starts with SIGINT and SIGQUIT ignored;
  # env restores them, so the step runs as it would in the foreground.
  env --default-signal=INT,QUIT "$@" &
  local pid=$!
  (
    nap "$bound"
    kill -0 "$pid" 2>/dev/null || exit 0
    echo "test-cgroup2: $name outran its bound of ${bound}s"; stuck
    kill -QUIT "$pid" 2>/dev/null
    nap 30
    kill -0 "$pid" 2>/dev/null || exit 0
    kill -KILL $(tasks | while read -r p pp _; do [ "$pp" = "$pid" ] && echo "$p"; done) "$pid" 2>/dev/null
  ) &
  local dog=$!
  (
    while nap 120; do
      echo "test-cgroup2: $name still running at $((SECONDS - t0))s ($(meminfo MemAvailable))"
    done
  ) &
  local beat=$!
  local rc=0
  wait "$pid" || rc=$?
  kill "$dog" "$beat" 2>/dev/null; wait "$dog" "$beat" 2>/dev/null
  if [ "$rc" -eq 0 ]; then
    echo "--- PASS: $name ($((SECONDS - t0))s)"
  else
    echo "--- FAIL: $name ($((SECONDS - t0))s, exit $rc)"; fails=$((fails + 1))
  fi
}
# The VM's minimal init loads no modules. gvisor mounts each sandbox's root
# from an erofs image, through a loop device on this kernel, and so does the
# positive control of the direct runtime's page-cache test.
modprobe -a loop erofs || echo "test-cgroup2: modprobe loop erofs failed; the direct runtime will say why"
# A bounded-agent enclave's only link is a veth pair with a clsact BPF filter
# on its proxy end.
modprobe -a veth sch_ingress cls_bpf || echo "test-cgroup2: modprobe veth sch_ingress cls_bpf failed; verify --enclave will say why"
mode=$(stat -f -c %T /sys/fs/cgroup)
echo "test-cgroup2: kernel $(uname -r), /sys/fs/cgroup is $mode, controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
[ "$mode" = cgroup2fs ] || { echo "test-cgroup2: FAIL: not a pure cgroup v2 host"; exit 1; }
# runsc puts its sandbox in a new user namespace (run.sh starts this script
# through unchroot.sh so that the kernel allows one).
unshare -U true || { echo "test-cgroup2: FAIL: no user namespace here; run this script through tests/cgroup2/unchroot.sh"; exit 1; }
# The VM's root is this machine's, live: /var/lib/awf/private holds the runs
# in progress on the host, whose locks the VM cannot see, so awf run here
# would sweep them as orphans. A fresh host has none.
mkdir -p /var/lib/awf/private && mount -t tmpfs -o mode=0700 awf-private /var/lib/awf/private \
  || { echo "test-cgroup2: FAIL: cannot give awf an empty /var/lib/awf/private"; exit 1; }

# Every binary runs from the guest's own memory, not from the 9p share: a
# direct sandbox starts from a sealed copy of /proc/self/exe (an overlayfs
# over the binary's directory, or a memfd copy of it), so from the share
# each sandbox would read its runtime's binary over 9p again. A real host
# runs them from a local disk. bin's layout is kept: awf finds its sibling
# binaries next to itself.
bin=/tmp/awf-cgroup2-bin
rm -rf "$bin" && cp -a bin "$bin" || { echo "test-cgroup2: FAIL: cannot copy bin to $bin"; exit 1; }
export AWF_CGROUP2_BIN=$bin

step "cgroup v2 behaviour" 420 "$bin"/cgroup2/cgroup2.test -test.v -test.count=1 -test.timeout 6m
# The 200-cycle start/destroy stress test proves a thread race of the host
# side, not cgroup v2 behaviour, and its 4-minute bound does not fit an
# emulated VM; make test runs it on the host. So do the two inode-counter
# channel tests: each runs some 200 sandboxes, and since every interpreter
# imports the bootstrap's modules (seconds each under emulation) they alone
# outran the 30 minutes this step then had; they measure host-wide counters, not the
# cgroup hierarchy, and tests/channels/README.md gives the VM command for
# the channel suite.
step "direct runtime root tests" 1260 "$bin"/cgroup2/direct.test -test.count=1 -test.timeout 20m -test.run "${DIRECT_TESTS:-.}" -test.skip "${DIRECT_SKIP:-^(TestStressPrepareDestroy|TestProcInodeCounterChannel|TestShmInodeCounterChannel)$}"
step "awf isolate verify --runtime direct" 600 "$bin"/awf isolate verify --runtime direct --require direct
step "awf isolate verify --agent" 600 "$bin"/awf isolate verify --agent
# gVisor under the ptrace platform in an emulated VM takes 15-50 s a sandbox,
# so the VM runs the tests and probes that depend on the cgroup hierarchy:
# the probe, the typed limit outcomes (TestSuite/limits: memory.events, pids.events, the wall
# clock), the cpuset split, the sweep of a crashed run's cgroups, and the
# verify limit probes with its leftover checks. The rest of the backend does
# not depend on the cgroup version; make test runs all of it on the host.
step "gvisor runtime cgroup tests" 780 "$bin"/cgroup2/gvisor.test -test.count=1 -test.timeout 12m -test.run "${GVISOR_TESTS:-^(TestProbeChoosesAWorkingPlatform|TestRunTrivialQuery|TestSuite|TestSandboxCPUs|TestSweepRemovesWhatACrashLeft)$/^limits$}"
step "awf isolate verify --runtime gvisor (limits)" 600 "$bin"/awf isolate verify --runtime gvisor --require gvisor --probe limit/ --probe priv/cgroupns
step "awf isolate verify --enclave (direct, gvisor)" 300 "$bin"/awf isolate verify --enclave --runtime direct --runtime gvisor
# The fault suite's kill cases that depend on the cgroup hierarchy: kill -9
# of awf run mid-query on direct and gvisor (the watchdog kills the sandbox
# and the frozen agent with cgroup.kill and sweeps every cgroup of the run),
# of the broker mid-query (the survivor kills the sandbox cgroups but the
# agent's) and of the agent shim. make test runs the whole suite on the
# host, where a kill leaves nothing within 2 s; here code runs many times
# slower (one runsc call of the watchdog's reclaim takes seconds), so the
# bound is 30 s: this proves that everything is reclaimed, not how fast.
step "fault kill cases (direct, gvisor)" 780 "$bin"/cgroup2/faults.test -test.count=1 -test.timeout 12m -faults.bin "$bin" -faults.bound 30s \
  -test.run "${FAULTS_TESTS:-^TestKill(AwfRun|Broker|AgentShim)$/^(direct|gvisor)$/^mid-query$}" -test.skip "${FAULTS_SKIP:-^TestKillBroker$/^gvisor$}"
step "awf run end to end" 600 tests/cgroup2/e2e.sh

if [ "$fails" -ne 0 ]; then
  echo "test-cgroup2: $fails step(s) failed"; exit 1
fi
echo "test-cgroup2: all steps passed on a pure cgroup v2 kernel"
