#!/usr/bin/env bash
# Runs inside the cgroup v2 VM (see run.sh). The project directory is shared
# over 9p, which cannot hold sockets or FIFOs, so all state lives on /tmp.
set -uo pipefail
export TMPDIR=/tmp
fails=0
step() {
  local name=$1; shift
  echo "=== test-cgroup2: $name"
  local t0=$SECONDS
  if "$@"; then
    echo "--- PASS: $name ($((SECONDS - t0))s)"
  else
    echo "--- FAIL: $name ($((SECONDS - t0))s)"; fails=$((fails + 1))
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

step "cgroup v2 behaviour" bin/cgroup2/cgroup2.test -test.v -test.count=1 -test.timeout 20m
# The 200-cycle start/destroy stress test proves a thread race of the host
# side, not cgroup v2 behaviour, and its 4-minute bound does not fit an
# emulated VM; make test runs it on the host. So do the two inode-counter
# channel tests: each runs some 200 sandboxes, and since every interpreter
# imports the bootstrap's modules (seconds each under emulation) they alone
# outran the step's 30 minutes; they measure host-wide counters, not the
# cgroup hierarchy, and tests/channels/README.md gives the VM command for
# the channel suite.
step "direct runtime root tests" bin/cgroup2/direct.test -test.count=1 -test.timeout 30m -test.run "${DIRECT_TESTS:-.}" -test.skip "${DIRECT_SKIP:-^(TestStressPrepareDestroy|TestProcInodeCounterChannel|TestShmInodeCounterChannel)$}"
step "awf isolate verify --runtime direct" bin/awf isolate verify --runtime direct --require direct
step "awf isolate verify --agent" bin/awf isolate verify --agent
# gVisor under the ptrace platform in an emulated VM takes 15-50 s a sandbox,
# so the VM runs the tests and probes that depend on the cgroup hierarchy:
# the probe, the typed limit outcomes (TestSuite/limits: memory.events, pids.events, the wall
# clock), the cpuset split, the sweep of a crashed run's cgroups, and the
# verify limit probes with its leftover checks. The rest of the backend does
# not depend on the cgroup version; make test runs all of it on the host.
step "gvisor runtime cgroup tests" bin/cgroup2/gvisor.test -test.count=1 -test.timeout 30m -test.run "${GVISOR_TESTS:-^(TestProbeChoosesAWorkingPlatform|TestRunTrivialQuery|TestSuite|TestSandboxCPUs|TestSweepRemovesWhatACrashLeft)$/^limits$}"
step "awf isolate verify --runtime gvisor (limits)" bin/awf isolate verify --runtime gvisor --require gvisor --probe limit/ --probe priv/cgroupns
step "awf isolate verify --enclave (direct, gvisor)" bin/awf isolate verify --enclave --runtime direct --runtime gvisor
# The fault suite's kill cases that depend on the cgroup hierarchy: kill -9
# of awf run mid-query on direct and gvisor (the watchdog kills the sandbox
# and the frozen agent with cgroup.kill and sweeps every cgroup of the run),
# of the broker mid-query (the survivor kills the sandbox cgroups but the
# agent's) and of the agent shim. make test runs the whole suite on the
# host, where a kill leaves nothing within 2 s; here code runs many times
# slower (one runsc call of the watchdog's reclaim takes seconds), so the
# bound is 30 s: this proves that everything is reclaimed, not how fast.
step "fault kill cases (direct, gvisor)" bin/cgroup2/faults.test -test.count=1 -test.timeout 20m -faults.bin bin -faults.bound 30s \
  -test.run "${FAULTS_TESTS:-^TestKill(AwfRun|Broker|AgentShim)$/^(direct|gvisor)$/^mid-query$}" -test.skip "${FAULTS_SKIP:-^TestKillBroker$/^gvisor$}"
step "awf run end to end" tests/cgroup2/e2e.sh

if [ "$fails" -ne 0 ]; then
  echo "test-cgroup2: $fails step(s) failed"; exit 1
fi
echo "test-cgroup2: all steps passed on a pure cgroup v2 kernel"
