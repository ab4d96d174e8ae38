#!/usr/bin/env bash
# tests/setup/dockerd.sh start|stop|status
#
# Runs Debian's dockerd for the docker backend's tests on a private Unix socket
# with a private data root and exec root. It touches no host networking: no
# bridge, no iptables rules, no masquerading, no IPv6, no userland proxy, and it
# listens on no TCP port. start is idempotent and waits until the Engine answers;
# stop kills the daemon, the containerd it started, the shims that containerd
# started and every process of the Engine's containers, and removes its mounts,
# its state and its cgroups in every hierarchy; it fails, naming them, if any of
# them is left.
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
# The daemons' temporary directory. dockerd signals a containerd it gives up
# on with SIGUSR1 before it kills it, and containerd then writes its stacks to
# containerd.<pid>.stacks.log in its TMPDIR: in /tmp that file outlived the
# Engine. Here it goes with the run directory, and stop names it first.
TMP=$RUN_DIR/tmp
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
  mkdir -p "$RUN_DIR" "$EXEC_ROOT" "$DATA_ROOT" "$TMP"
  chmod 0700 "$RUN_DIR" "$DATA_ROOT" "$TMP"
  # An explicit, empty-ish config so that no host /etc/docker/daemon.json applies.
  printf '{}\n' >"$CONFIG"
  rm -f "$SOCK"
  TMPDIR=$TMP setsid dockerd \
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

# engine_procs prints the pid and command line of every process of this Engine
# that outlives its daemons: each containerd shim its containerd started (its
# -address lies below the exec root) and each process in a cgroup below the
# cgroup parent (a container's, a "runc init" of one created, never started).
# Nothing of another Engine matches: both names are this Engine's own.
engine_procs() {
  local d p cl cg st args
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [[ $p == "$$" || $p == "$BASHPID" ]] && continue
    mapfile -d '' -t args 2>/dev/null <"$d/cmdline" || continue
    cl="${args[*]}"
    cg= st=
    read -r -d '' cg 2>/dev/null <"$d/cgroup" || true
    if [[ $cl == *containerd-shim*" -address $EXEC_ROOT/"* || $'\n'$cg == *"/$CGROUP_PARENT/"* || $'\n'$cg$'\n' == *"/$CGROUP_PARENT"$'\n'* ]]; then
      # A zombie holds nothing but its pid; its reaper (init) collects it.
      read -r st 2>/dev/null <"$d/stat" || true
      st=${st##*) }
      [[ ${st%% *} == Z ]] && continue
      echo "$p ${cl:0:160}"
    fi
  done
}

# engine_cgroups prints every cgroup directory named after the cgroup parent,
# in every mounted hierarchy (v1 controllers, the v2 tree, at any depth: on a
# nested host a controller's parent sits below this process's own cgroup), and
# every directory below one, deepest first: the order rmdir needs.
engine_cgroups() {
  # Command substitutions, not process substitutions: bash waits for the
  # former, and a find still exiting after this returns is a process bearing
  # the Engine's name that the caller's leftover check would count.
  local mounts parents m d
  mounts=$(awk '{for (i = 7; i < NF; i++) if ($i == "-") break; t = $(i + 1)} t == "cgroup" || t == "cgroup2" {print $5}' /proc/self/mountinfo)
  while read -r m; do
    [[ -n $m ]] || continue
    parents=$(find "$m" -maxdepth 6 -type d -name "$CGROUP_PARENT" -prune 2>/dev/null)
    while read -r d; do
      [[ -n $d ]] || continue
      find "$d" -depth -type d 2>/dev/null
    done <<<"$parents"
  done <<<"$mounts"
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
  # What outlives the daemons: shims (they detach from containerd by design,
  # and one whose containerd was killed waits for it forever) and container
  # processes. Thaw a frozen container first: a frozen task's SIGKILL stays
  # pending until it is thawed.
  local d cgs
  cgs=$(engine_cgroups)
  while read -r d; do
    [[ -n $d ]] || continue
    if [[ -f $d/freezer.state ]]; then echo THAWED 2>/dev/null >"$d/freezer.state" || true; fi
    if [[ -f $d/cgroup.freeze ]]; then echo 0 2>/dev/null >"$d/cgroup.freeze" || true; fi
  done <<<"$cgs"
  local left
  for ((i = 0; i < 50; i++)); do
    left=$(engine_procs)
    [[ -n $left ]] || break
    if ((i == 0)); then
      echo "dockerd.sh: killing what outlived the Engine:" >&2
      sed 's/^/  /' <<<"$left" >&2
    fi
    kill -KILL $(cut -d' ' -f1 <<<"$left") 2>/dev/null || true
    sleep 0.1
  done
  [[ -z $left ]] || { echo "dockerd.sh: still alive after SIGKILL:" >&2; sed 's/^/  /' <<<"$left" >&2; }
  # Unmount anything the daemon left below its roots, deepest first.
  local m mounts
  mounts=$(awk -v a="$DATA_ROOT" -v b="$RUN_DIR" 'index($5 "/", a "/") == 1 || index($5 "/", b "/") == 1 {print $5}' /proc/self/mountinfo | sort -r)
  while read -r m; do
    [[ -n $m ]] || continue
    umount -l "$m" 2>/dev/null || true
  done <<<"$mounts"
  local dumps
  dumps=$(find "$TMP" -maxdepth 1 -name 'containerd.*.stacks.log' 2>/dev/null || true)
  [[ -z $dumps ]] || echo "dockerd.sh: the Engine gave up on its containerd and had it dump its stacks (removed with the run directory): $(tr '\n' ' ' <<<"$dumps")" >&2
  rm -rf "$RUN_DIR" "$DATA_ROOT"
  # The cgroup parent and the containers' cgroups below it, deepest first,
  # in every hierarchy; a cgroup a dying process still holds is busy for a
  # moment.
  for ((i = 0; i < 50; i++)); do
    cgs=$(engine_cgroups)
    [[ -n $cgs ]] || break
    while read -r d; do
      rmdir "$d" 2>/dev/null || true
    done <<<"$cgs"
    [[ -n $(engine_cgroups) ]] || { cgs=; break; }
    sleep 0.1
  done
  [[ -z $cgs ]] || { echo "dockerd.sh: cgroups not removed:" >&2; sed 's/^/  /' <<<"$cgs" >&2; }
  echo "dockerd.sh: stopped"
  [[ -z $left && -z $cgs ]]
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
