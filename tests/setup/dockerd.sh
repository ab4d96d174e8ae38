#!/usr/bin/env bash
# tests/setup/dockerd.sh start|stop|status
#
# Runs Debian's dockerd for the docker backend's tests on a private Unix socket
# with a private data root and exec root. It touches no host networking: no
# bridge, no iptables rules, no masquerading, no IPv6, no userland proxy, and it
# listens on no TCP port. start is idempotent and waits until the Engine answers;
# stop kills the daemon (and the containerd it started) and removes its state.
# AWF_DOCKERD_RUN_DIR, AWF_DOCKERD_DATA_ROOT and AWF_DOCKERD_CGROUP_PARENT give
# a second, independent Engine (the fault tests kill theirs).
set -euo pipefail

RUN_DIR=${AWF_DOCKERD_RUN_DIR:-/run/awf-test-docker}
SOCK=$RUN_DIR/docker.sock
PIDFILE=$RUN_DIR/dockerd.pid
EXEC_ROOT=$RUN_DIR/exec
DATA_ROOT=${AWF_DOCKERD_DATA_ROOT:-/var/lib/awf-test-docker}
CGROUP_PARENT=${AWF_DOCKERD_CGROUP_PARENT:-awf-test-docker}
LOG=$RUN_DIR/dockerd.log
CONFIG=$RUN_DIR/daemon.json
READY_TIMEOUT=${AWF_DOCKERD_READY_TIMEOUT:-60}

die() { echo "dockerd.sh: $*" >&2; exit 1; }

ping_engine() {
  [[ -S $SOCK ]] || return 1
  [[ "$(curl -fsS --max-time 2 --unix-socket "$SOCK" http://docker/_ping 2>/dev/null)" == OK ]]
}

daemon_pid() {
  [[ -f $PIDFILE ]] || return 1
  local pid
  pid=$(<"$PIDFILE")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ "$(cat /proc/"$pid"/comm 2>/dev/null)" == dockerd ]] || return 1
  echo "$pid"
}

# cgroup driver: systemd is not managing this host's cgroups, so use cgroupfs
# on v1 and hybrid hosts, and on v2 hosts without systemd as init.
cgroup_driver() {
  if [[ "$(stat -fc %T /sys/fs/cgroup)" == cgroup2fs && "$(cat /proc/1/comm)" == systemd ]]; then
    echo systemd
  else
    echo cgroupfs
  fi
}

start() {
  [[ $EUID -eq 0 ]] || die "must run as root"
  command -v dockerd >/dev/null || die "dockerd is not installed (Debian package docker.io)"
  command -v curl >/dev/null || die "curl is not installed"
  if daemon_pid >/dev/null && ping_engine; then
    echo "dockerd.sh: already running on $SOCK"
    return 0
  fi
  if pid=$(daemon_pid); then
    # Running but not answering: restart it cleanly.
    stop
  fi
  mkdir -p "$RUN_DIR" "$EXEC_ROOT" "$DATA_ROOT"
  chmod 0700 "$RUN_DIR" "$DATA_ROOT"
  # An explicit, empty-ish config so that no host /etc/docker/daemon.json applies.
  printf '{}\n' >"$CONFIG"
  rm -f "$SOCK"
  setsid dockerd \
    --config-file "$CONFIG" \
    --host "unix://$SOCK" \
    --data-root "$DATA_ROOT" \
    --exec-root "$EXEC_ROOT" \
    --pidfile "$PIDFILE" \
    --bridge=none \
    --iptables=false \
    --ip6tables=false \
    --ip-forward=false \
    --ip-masq=false \
    --ipv6=false \
    --userland-proxy=false \
    --exec-opt "native.cgroupdriver=$(cgroup_driver)" \
    --cgroup-parent "$CGROUP_PARENT" \
    --storage-driver overlay2 \
    --log-level warn \
    </dev/null >>"$LOG" 2>&1 &
  local i
  for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
    if ping_engine; then
      echo "dockerd.sh: dockerd ready on $SOCK (log $LOG)"
      return 0
    fi
    sleep 0.1
  done
  echo "dockerd.sh: dockerd did not answer within ${READY_TIMEOUT}s; last log lines:" >&2
  tail -n 20 "$LOG" >&2 || true
  stop || true
  exit 1
}

stop() {
  local pid i
  if pid=$(daemon_pid); then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
      [[ -d /proc/$pid ]] || break
      sleep 0.1
    done
    if [[ -d /proc/$pid ]]; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  # The managed containerd runs below the exec root; end it by its pid file.
  local cpid
  for f in "$EXEC_ROOT"/containerd/containerd.pid; do
    [[ -f $f ]] || continue
    cpid=$(<"$f")
    if [[ $cpid =~ ^[0-9]+$ && "$(cat /proc/"$cpid"/comm 2>/dev/null)" == containerd ]]; then
      kill -KILL "$cpid" 2>/dev/null || true
    fi
  done
  # Unmount anything the daemon left below its roots, deepest first.
  local m
  while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done < <(awk -v a="$DATA_ROOT" -v b="$RUN_DIR" '$5 ~ "^"a || $5 ~ "^"b {print $5}' /proc/self/mountinfo | sort -r)
  rm -rf "$RUN_DIR" "$DATA_ROOT"
  # The daemon's parent cgroup (--cgroup-parent), once empty.
  rmdir /sys/fs/cgroup/*/"$CGROUP_PARENT" /sys/fs/cgroup/"$CGROUP_PARENT" 2>/dev/null || true
  echo "dockerd.sh: stopped"
}

status() {
  if daemon_pid >/dev/null && ping_engine; then
    echo "dockerd.sh: running on $SOCK"
  else
    echo "dockerd.sh: not running"
    return 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: $0 start|stop|status" ;;
esac
