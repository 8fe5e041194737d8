#!/usr/bin/env bash
# Installs what clairfs needs on Debian 12 from Debian's packages, builds it and installs
# `clairfs` and `clairfs-bench` on PATH (/usr/local/bin). Run as root. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  meson ninja-build pkg-config g++ python3
  libfuse3-dev fuse3 libyaml-cpp-dev libxxhash-dev librocksdb-dev libgtest-dev libgmock-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev
  libmpich-dev mpich  # the peer tier (cluster/) and mpiexec
  mergerfs bindfs  # the FUSE peers the benchmarks compare against
)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ -f build/build.ninja ]; then
  meson setup --reconfigure build >/dev/null
else
  meson setup build --buildtype=release >/dev/null
fi
ninja -C build
$SUDO meson install -C build --quiet
echo "setup: installed $(command -v clairfs) ($(clairfs --version))"
