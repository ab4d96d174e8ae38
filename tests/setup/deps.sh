#!/usr/bin/env bash
# Installs the Debian packages awf needs to build and test, only when missing.
# Idempotent and quiet. Must run as root (it is the CI and operator setting).
set -euo pipefail
pkgs=(libseccomp-dev gcc git python3 bubblewrap runsc docker.io iproute2 ca-certificates erofs-utils)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
