#!/usr/bin/env bash
# Builds the Debian package of clairfs (debian/) from this checkout: installs the build
# dependencies debian/control names when some are missing (Debian's packages, apt), copies the
# source tree to OUT/clairfs and runs dpkg-buildpackage there, so that the checkout gets no
# build products. Prints the path of the .deb (OUT/clairfs_VERSION_ARCH.deb). Run as root on
# Debian 12 (or as a user when the build dependencies are installed already).
#
#   tools/build_deb.sh [--out DIR]   DIR: where the .deb goes (default: build-deb in the checkout)
#
# Compiles through ccache (meson uses it when installed): dpkg-buildflags maps the source
# directory to '.' in the debug information, and CCACHE_NOHASHDIR and CCACHE_BASEDIR keep the
# directory out of the hashes, so a second build, of this or another checkout, hits the cache.
# CCACHE_DIR is the user's cache: debhelper points HOME into the build tree, where ccache
# would otherwise keep a cache that every build starts without.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build-deb
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { echo "build_deb: --out needs a directory" >&2; exit 2; }
      out=$2; shift 2 ;;
    -h | --help) sed -n '2,8s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "build_deb: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# dpkg-dev: dpkg-buildpackage and dpkg-checkbuilddeps; the rest from debian/control.
if ! command -v dpkg-checkbuilddeps >/dev/null || ! (cd "$root" && dpkg-checkbuilddeps) 2>/dev/null; then
  echo "build_deb: installing the build dependencies of debian/control"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends dpkg-dev
  # apt reads the Build-Depends of the source tree's debian/control itself.
  (cd "$root" && DEBIAN_FRONTEND=noninteractive $SUDO apt-get build-dep -y -qq ./)
fi

start=$SECONDS
src=$out/clairfs
rm -rf "$src"
mkdir -p "$src"
# The working tree as it is (uncommitted changes included), without build directories (nor
# OUT, when it lies inside the tree).
excludes=(--exclude=./.git --exclude='./build*' --exclude='./obj-*' --exclude=./debian/clairfs
  --exclude=__pycache__ --exclude='*.egg-info' --exclude=./python/build)
case "$out/" in "$root/"*) excludes+=("--exclude=./${out#"$root/"}") ;; esac
tar -C "$root" "${excludes[@]}" -cf - . | tar -C "$src" -xf -
version=$(cd "$src" && dpkg-parsechangelog -S Version)
arch=$(dpkg-architecture -q DEB_HOST_ARCH)
deb=$out/clairfs_${version}_${arch}.deb
rm -f "$deb"
# nocheck: the package build runs no tests (tests/package/test_deb.py tests the package);
# noautodbgsym: no separate debug-symbols package.
ccache_dir=""
command -v ccache >/dev/null && ccache_dir=$(ccache -k cache_dir)
(cd "$src" && CCACHE_DIR=${CCACHE_DIR:-$ccache_dir} CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1 \
  DEB_BUILD_OPTIONS="nocheck noautodbgsym parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
  dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log" >&2
  echo "build_deb: dpkg-buildpackage failed; the log: $out/build.log" >&2
  exit 1
}
[ -f "$deb" ] || { echo "build_deb: no $deb after the build (log: $out/build.log)" >&2; exit 1; }
echo "build_deb: built in $((SECONDS - start)) s (log: $out/build.log)" >&2
echo "$deb"
