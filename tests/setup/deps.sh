#!/usr/bin/env bash
# Installs what awf needs to build and test, only what is missing, on Debian 12
# or Ubuntu 22.04/24.04, as root (the CI and operator setting). Idempotent.
#
#   tests/setup/deps.sh              packages, the API proxy's user, then the Go toolchain
#   tests/setup/deps.sh packages     the distribution packages only
#   tests/setup/deps.sh users        the API proxy's system user only
#   tests/setup/deps.sh toolchain    the Go toolchain only
#
# The Go toolchain: when the go on PATH is missing or older than go.mod asks,
# this fetches the exact toolchain go.mod names (its toolchain line, else its go
# line) as the golang.org/toolchain module through the Go module proxy, with a
# bootstrap go (the distribution's, installed if needed) doing the download so
# that the module's hash is checked against the checksum database
# (sum.golang.org, reached through the proxy) exactly as the go command checks
# any module. It unpacks it under $AWF_GO_CACHE/goX.Y.Z (default
# /var/cache/awf/go) and points $AWF_GO_CACHE/bin at it; the Makefile puts
# that directory first on PATH. Nothing outside $AWF_GO_CACHE is changed for
# the toolchain except the bootstrap package.
#
# Docker: any installed Docker Engine (Docker CE, Debian's or Ubuntu's
# docker.io) is accepted; docker.io is installed only when there is no dockerd.
set -Eeuo pipefail
# Setup never fails silently: the failing command is named.
trap 'echo "deps: error: line $LINENO: $BASH_COMMAND exited $?" >&2' ERR

here=$(cd "$(dirname "$0")/../.." && pwd)
GO_CACHE=${AWF_GO_CACHE:-/var/cache/awf/go}
# The same PATH as the Makefile's recipes: the private toolchain first.
export PATH="$GO_CACHE/bin:$PATH"

say() { echo "deps: $*"; }
die() { echo "deps: error: $*" >&2; exit 1; }

# os_id prints ID:VERSION_ID from /etc/os-release (debian:12, ubuntu:24.04).
os_id() {
  local ID= VERSION_ID=
  # shellcheck disable=SC1091
  [ -r /etc/os-release ] && . /etc/os-release
  echo "${ID:-unknown}:${VERSION_ID:-unknown}"
}


apt_updated=
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$apt_updated" ]; then apt-get update -qq; apt_updated=1; fi
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# has_candidate reports whether apt can install package $1 at all.
has_candidate() {
  local c
  c=$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
  [ -n "$c" ] && [ "$c" != "(none)" ]
}

packages() {
  local os pkgs missing=() p
  os=$(os_id)
  case "$os" in
    debian:12 | ubuntu:22.04 | ubuntu:24.04) ;;
    *) say "warning: $os is not a supported host (Debian 12, Ubuntu 22.04, Ubuntu 24.04); trying Debian's package names" ;;
  esac
  # The same names on Debian 12 and Ubuntu (erofs-utils and runsc are in
  # Ubuntu's universe component). libc6-dev: gcc only recommends it, and cgo
  # needs its headers; pkg-config: cgo finds libseccomp with it. curl: tests/setup/dockerd.sh pings the Engine with it.
  pkgs=(libseccomp-dev pkg-config gcc libc6-dev make git python3 bubblewrap iproute2 ca-certificates curl erofs-utils)
  # A Docker Engine of any packaging is accepted: installing docker.io over
  # Docker CE (GitHub's runners) would remove or break it.
  if command -v dockerd >/dev/null 2>&1; then
    :
  else
    pkgs+=(docker.io)
  fi
  local want_runsc=
  if ! command -v runsc >/dev/null 2>&1; then want_runsc=1; fi
  [ -z "$want_runsc" ] || pkgs+=(runsc)
  # One dpkg-query for every package (one call each costs a second or two).
  # It exits 1 when it knows some package not at all: that is "missing".
  local have
  have=" $({ dpkg-query -W -f='${Package}:${Status}\n' "${pkgs[@]}" 2>/dev/null || true; } | sed -n 's/^\([^:]*\):install ok installed$/\1/p' | tr '\n' ' ')"
  for p in "${pkgs[@]}"; do
    case "$have" in *" $p "*) ;; *) missing+=("$p") ;; esac
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt_updated=1
  # runsc is the gvisor runtime's only component: a host whose archive has no
  # runsc package (Ubuntu 22.04) still builds and runs the direct and docker
  # runtimes, so its absence is reported, never a setup failure.
  local install=()
  for p in "${missing[@]}"; do
    if [ "$p" = runsc ] && ! has_candidate runsc; then
      say "BLOCKED: gvisor: this host's package archive ($os) has no runsc package."
      say "BLOCKED: gvisor: the gvisor runtime's tests and verify cells report BLOCKED; install runsc"
      say "BLOCKED: gvisor: from gVisor's own releases onto PATH, or run make test with VERIFY_REQUIRE='direct docker'."
      continue
    fi
    has_candidate "$p" || die "apt has no package $p on $os (on Ubuntu, enable the universe component)"
    install+=("$p")
  done
  [ ${#install[@]} -gt 0 ] || return 0
  say "installing ${install[*]}"
  apt-get install -y -qq --no-install-recommends "${install[@]}" >/dev/null
}

# want_toolchain prints the toolchain go.mod names: goX.Y.Z.
want_toolchain() {
  local t v
  t=$(sed -n 's/^toolchain[[:space:]]\{1,\}\(go[0-9][^[:space:]]*\).*/\1/p' "$here/go.mod" | head -n1)
  if [ -z "$t" ]; then
    v=$(sed -n 's/^go[[:space:]]\{1,\}\([0-9][^[:space:]]*\).*/\1/p' "$here/go.mod" | head -n1)
    [ -n "$v" ] || die "go.mod has no go line"
    # "go 1.26" is the language version; its first release is go1.26.0.
    [[ $v =~ ^[0-9]+\.[0-9]+$ ]] && v=$v.0
    t=go$v
  fi
  [[ $t =~ ^go[0-9]+\.[0-9]+(\.[0-9]+)?((rc|beta)[0-9]+)?$ ]] || die "go.mod names an unexpected toolchain: $t"
  echo "$t"
}

# go_version prints the version of the go binary $1 (goX.Y.Z) without letting
# a go >= 1.21 switch to another toolchain, or nothing if it does not run.
go_version() {
  local out
  out=$(cd / && GOTOOLCHAIN=local GOFLAGS= "$1" version 2>/dev/null) || return 0
  # "go version go1.26.8 linux/amd64"
  set -- $out
  [ "${1:-}" = go ] && [ "${2:-}" = version ] && echo "${3:-}"
}

# version_ge reports whether goA >= goB (release versions; a pre-release sorts
# before its release, as Go orders them).
version_ge() {
  local a=${1#go} b=${2#go}
  a=${a/rc/.-1.}; a=${a/beta/.-2.}
  b=${b/rc/.-1.}; b=${b/beta/.-2.}
  # Pad to three numeric parts so that 1.26 sorts with 1.26.0.
  [ "$(printf '%s\n%s\n' "$a" "$b" | sort -t. -k1,1n -k2,2n -k3,3n -k4,4n -k5,5n | head -n1)" = "$b" ]
}

go_arch() {
  case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64 | arm64) echo arm64 ;;
    *) die "no Go toolchain for machine $(uname -m)" ;;
  esac
}

# bootstrap_go prints a go binary of any version that can download modules:
# $AWF_BOOTSTRAP_GO, the go on PATH, a distribution go, else the
# distribution's golang-go.
bootstrap_go() {
  local g
  for g in "${AWF_BOOTSTRAP_GO:-}" "$(command -v go 2>/dev/null || true)" /usr/lib/go/bin/go /usr/lib/go-*/bin/go; do
    if [ -n "$g" ] && [ -x "$g" ] && [ -n "$(go_version "$g")" ]; then echo "$g"; return; fi
  done
  say "no go on this host: installing the distribution's golang-go to bootstrap the download" >&2
  apt_install golang-go >&2
  g=$(command -v go 2>/dev/null || true)
  [ -n "$g" ] && [ -n "$(go_version "$g")" ] || die "golang-go installed no working go"
  echo "$g"
}

toolchain() {
  local want have cur dir
  want=$(want_toolchain)
  cur=$(command -v go 2>/dev/null || true)
  if [ -n "$cur" ]; then
    have=$(go_version "$cur")
    if [ -n "$have" ] && version_ge "$have" "$want"; then return 0; fi
    say "go on PATH is ${have:-unusable} ($cur); go.mod asks for $want"
  else
    say "no go on PATH; go.mod asks for $want"
  fi
  dir=$GO_CACHE/$want
  if [ "$(go_version "$dir/bin/go")" = "$want" ]; then
    ln -sfn "$want/bin" "$GO_CACHE/bin"
    say "using $want from $dir"
    return 0
  fi
  fetch_toolchain "$want" "$dir"
  ln -sfn "$want/bin" "$GO_CACHE/bin"
  [ "$(go_version "$GO_CACHE/bin/go")" = "$want" ] || die "$GO_CACHE/bin/go is not $want after install"
  say "installed $want in $dir ($GO_CACHE/bin is first on the Makefile's PATH)"
}

# fetch_toolchain downloads golang.org/toolchain@v0.0.1-$1.linux-ARCH with a
# bootstrap go and installs its tree at $2.
fetch_toolchain() {
  local want=$1 dest=$2 boot mod work json zipdir sum proxy
  mod=golang.org/toolchain@v0.0.1-$want.linux-$(go_arch)
  boot=$(bootstrap_go)
  mkdir -p "$GO_CACHE"
  work=$(mktemp -d "$GO_CACHE/.fetch.XXXXXX")
  fetch_work=$work
  proxy=${GOPROXY:-https://proxy.golang.org}
  case "$proxy" in off | direct) proxy=https://proxy.golang.org ;; esac
  say "fetching $mod through $proxy with $boot ($(go_version "$boot")); checksum database sum.golang.org"
  # Every setting that could skip or weaken the checksum database check is
  # pinned: GOSUMDB on, no GONOSUMDB/GOPRIVATE/GOINSECURE exemption, no
  # GOFLAGS (-insecure). A fresh GOPATH means a fresh sumdb cache, so the
  # tree head is checked against the key built into the bootstrap go. GOENV
  # off: no user go env file can set any of these.
  mkdir -p "$work/gopath" "$work/mod" "$work/cwd"
  if ! json=$(cd "$work/cwd" && env GOPATH="$work/gopath" GOMODCACHE="$work/mod" GOPROXY="$proxy" \
    GOSUMDB=sum.golang.org GONOSUMDB= GOPRIVATE= GONOPROXY= GOINSECURE= GOFLAGS= GOENV=off \
    GO111MODULE=on GOTOOLCHAIN=local HOME="$work" "$boot" mod download -json "$mod" 2>&1); then
    echo "$json" >&2
    die "could not download and verify $mod (the proxy and the checksum database must be reachable: $proxy/sumdb/sum.golang.org/supported)"
  fi
  zipdir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  sum=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p')
  [ -n "$zipdir" ] && [ -x "$zipdir/bin" ] || { echo "$json" >&2; die "go mod download gave no module directory"; }
  [ -n "$sum" ] || { echo "$json" >&2; die "go mod download gave no verified hash"; }
  # The sumdb record for the module, as the bootstrap go accepted it.
  [ -s "$work/gopath/pkg/sumdb/sum.golang.org/latest" ] || die "the checksum database was not consulted for $mod"
  say "verified $mod $sum"
  rm -rf "$dest.new"
  cp -a "$zipdir" "$dest.new"
  # Module zips carry no modes: the go command itself makes bin/ and
  # pkg/tool/ executable when it switches toolchains; so does this.
  chmod -R u+w,a+rX "$dest.new"
  find "$dest.new/bin" "$dest.new/pkg/tool" -type f -exec chmod a+x {} +
  rm -rf "$dest"
  mv "$dest.new" "$dest"
}

# The download's scratch directory, removed however the script exits. The
# module cache is read-only by design: it is made writable to remove it.
fetch_work=
cleanup() { if [ -n "$fetch_work" ]; then chmod -R u+w "$fetch_work" 2>/dev/null || true; rm -rf "$fetch_work"; fi; }
trap cleanup EXIT

# The system user awf's API proxy process drops to once it listens
# (apiproxy.UserName; awf run creates it the same way when it is missing).
# Made here, as a package's install step would, so that no test run makes it.
users() {
  local u=awf-proxy
  id -u "$u" >/dev/null 2>&1 && return 0
  say "creating the system user $u"
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$u"
}

case "${1:-all}" in
  all) packages; users; toolchain ;;
  packages) packages ;;
  users) users ;;
  toolchain) toolchain ;;
  *) die "usage: deps.sh [all|packages|users|toolchain]" ;;
esac
