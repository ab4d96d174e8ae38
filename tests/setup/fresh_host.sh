#!/usr/bin/env bash
# tests/setup/fresh_host.sh TREE [TARGET...]
#
# Proves that a fresh host gets everything it needs by itself: TREE is a
# freshly bootstrapped root filesystem (debootstrap --variant=minbase of
# Debian 12 or Ubuntu 22.04/24.04, with working apt sources and resolv.conf),
# with no go, no docker and none of awf's packages. This clones the committed
# HEAD of this checkout into TREE/root/awf, installs make (the one package an
# operator installs by hand, with git, before the first make) and this host's
# local CA certificates (below), and runs "make TARGET..." (default: demo)
# there, as root, chrooted into TREE. The chroot's mounts (TREE itself, proc,
# sys with the cgroup hierarchies, dev, run, tmp) live in a private mount
# namespace, so they go away with it however the run ends. TREE is changed
# (packages, the go cache): use a throwaway copy.
#
# Example (Ubuntu's archive keys are not in Debian's keyring, hence
# --no-check-gpg for that tree; apt inside it then checks against the tree's
# own ubuntu-keyring. Debian 12's debootstrap has no noble script: noble
# bootstraps like every Ubuntu since gutsy. Ubuntu needs universe for
# erofs-utils and runsc):
#   debootstrap --variant=minbase bookworm /var/tmp/debian12 http://deb.debian.org/debian
#   cp /etc/resolv.conf /var/tmp/debian12/etc/
#   tests/setup/fresh_host.sh /var/tmp/debian12 demo
#   debootstrap --variant=minbase --no-check-gpg --components=main,universe \
#     noble /var/tmp/ubuntu24 http://archive.ubuntu.com/ubuntu /usr/share/debootstrap/scripts/gutsy
#   cp /etc/resolv.conf /var/tmp/ubuntu24/etc/
#   tests/setup/fresh_host.sh /var/tmp/ubuntu24 demo
# Both pass, with the -updates and -security suites added to sources.list as
# an installed host has them (about 5 and 7 minutes on a loaded 2-core machine).
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: fresh_host.sh TREE [TARGET...]" >&2; exit 2; }
tree=$(cd "$1" && pwd)
shift
targets=("${@:-demo}")
here=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "fresh_host.sh: run as root" >&2; exit 1; }
[ -x "$tree/bin/bash" ] && [ -r "$tree/etc/os-release" ] || { echo "fresh_host.sh: $tree is not a root filesystem" >&2; exit 1; }
if chroot "$tree" sh -c 'command -v go' >/dev/null 2>&1; then
  echo "fresh_host.sh: $tree already has a go on PATH: not a fresh host" >&2
  exit 1
fi

# A host behind a TLS-intercepting egress proxy (this project's CI machine)
# trusts the proxy's CA through /usr/local/share/ca-certificates; the fresh
# tree gets the same local CAs, as any host on that network would have.
local_cas=()
for c in /usr/local/share/ca-certificates/*.crt; do [ -f "$c" ] && local_cas+=("$c"); done
if [ ${#local_cas[@]} -gt 0 ]; then
  mkdir -p "$tree/usr/local/share/ca-certificates"
  cp "${local_cas[@]}" "$tree/usr/local/share/ca-certificates/"
fi

rm -rf "$tree/root/awf"
git clone -q --no-hardlinks "$here" "$tree/root/awf"
echo "fresh_host.sh: $(. "$tree/etc/os-release" && echo "$PRETTY_NAME"), awf $(git -C "$tree/root/awf" rev-parse --short HEAD), make ${targets[*]}"

unshare --mount --propagation private -- bash -euo pipefail -c '
  tree=$1; shift
  # The tree is its own mount, as / is on a real host: awf makes the agent
  # view'"'"'s mounts private starting at /, which needs / to be a mount point.
  mount --bind "$tree" "$tree"
  mount -t proc proc "$tree/proc"
  mount --rbind /sys "$tree/sys"
  mount --rbind /dev "$tree/dev"
  mount -t tmpfs -o mode=755 tmpfs "$tree/run"
  mount -t tmpfs -o mode=1777 tmpfs "$tree/tmp"
  exec chroot "$tree" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "set -e; export DEBIAN_FRONTEND=noninteractive; command -v make >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends make >/dev/null; }; if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then apt-get install -y -qq --no-install-recommends ca-certificates >/dev/null; update-ca-certificates >/dev/null; fi; cd /root/awf && make \"\$@\"" make "$@"
' fresh "$tree" "${targets[@]}"
