#!/usr/bin/env bash
# make test-cgroup2: build on the host, then prove the direct and gvisor
# sandboxes inside a throwaway VM whose kernel has a pure cgroup v2 hierarchy.
#
# Runs, in the VM: the direct runtime's root tests (compiled test binary), the
# cgroup v2 behaviour tests (tests/cgroup2, build tag cgroup2; they include the
# placement of direct and gvisor inside a delegated subtree),
# `awf isolate verify --runtime direct` and `--agent`, the gvisor runtime's
# cgroup tests and `awf isolate verify --runtime gvisor` (a subset of each:
# see inside.sh), the fault suite's kill cases, and one end-to-end `awf run`.
# unchroot.sh gives the VM's command a root that user namespaces accept,
# which runsc needs.
set -euo pipefail
cd "$(dirname "$0")/../.."
vm=${CGROUP2_VM:-../shared/tools/cgroup2-vm}
if [ ! -x "$vm" ]; then
  echo "test-cgroup2: FAIL: the VM tool $vm is missing; set CGROUP2_VM to its path" >&2
  exit 1
fi
out=bin/cgroup2
rm -rf "$out"; mkdir -p "$out"
export CGO_ENABLED=1
go test -c -tags seccomp -o "$out/direct.test" ./isolate/direct
go test -c -tags seccomp -o "$out/gvisor.test" ./isolate/gvisor
go test -c -tags 'seccomp cgroup2' -o "$out/cgroup2.test" ./tests/cgroup2
go test -c -tags seccomp -o "$out/faults.test" ./tests/faults
echo "test-cgroup2: booting the cgroup v2 VM (emulated; this is slow)"
"$vm" --mem "${CGROUP2_VM_MEM:-4096}" --smp 2 --timeout "${CGROUP2_VM_TIMEOUT:-2700}" -- tests/cgroup2/unchroot.sh tests/cgroup2/inside.sh
