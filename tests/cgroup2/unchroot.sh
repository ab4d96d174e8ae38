#!/bin/bash
# unchroot.sh CMD [ARGS...]: runs CMD, in the cgroup v2 VM, with a root that
# is the root of its mount namespace.
#
# The VM tool starts its command with chroot(2) from the initramfs, and Linux
# refuses to create a user namespace from a chrooted process (EPERM; see
# user_namespaces(7)). runsc, started as root, puts its sandbox in a new user
# namespace, so in that chroot it fails with `fork/exec /proc/self/exe:
# operation not permitted`. A real host's root is its namespace's root, so
# this is the test environment, not the product: in a new mount namespace we
# move the VM's root filesystem (with every mount under it) over the
# initramfs root, as switch_root does, and chroot into it there. The busybox
# of the initramfs (pid 1's root) does the move, since nothing else can
# reach that root.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: unchroot.sh CMD [ARGS...]" >&2; exit 2; }
if unshare -U true 2>/dev/null; then
  exec "$@"
fi
bb=/proc/1/root/bin/busybox
if [ -n "${AWF_UNCHROOT:-}" ] || [ ! -x "$bb" ] || [ ! -d /proc/1/root/newroot ]; then
  echo "unchroot: FAIL: cannot create a user namespace here (unshare -U), and this is not the cgroup v2 VM's chroot" >&2
  exit 1
fi
export AWF_UNCHROOT=1
# shellcheck disable=SC2016 # expanded by the inner shells
exec "$bb" nsenter -t 1 -r -- /bin/busybox unshare -m -- /bin/busybox sh -euc '
  mount --make-rprivate /
  cd /newroot
  mount --move . /
  exec chroot . /bin/bash -euc "cd \"\$0\"; unshare -U true || { echo \"unchroot: FAIL: still no user namespace\" >&2; exit 1; }; exec \"\$@\"" "$@"
' unchroot "$(pwd -P)" "$@"
