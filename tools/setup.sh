#!/usr/bin/env bash
# Installs what clairfs needs on Debian 12 from Debian's packages, builds it and installs
# `clairfs`, `clairfs-cache` and `clairfs-bench` on PATH (/usr/local/bin) and the Python package `clairfs`
# where /usr/bin/python3 imports it from. Run as root. Idempotent.
#
#   tools/setup.sh               what clairfs and its demo need
#   tools/setup.sh --with-tests  also what only the tests need (PyTorch, LMDB, NumPy: tests/python)
set -euo pipefail
cd "$(dirname "$0")/.."

with_tests=0
for arg in "$@"; do
  case "$arg" in
    --with-tests) with_tests=1 ;;
    -h | --help) sed -n '2,7s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "setup: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

PACKAGES=(
  meson ninja-build pkg-config g++ python3
  ccache  # meson compiles through it when installed: a second build of the same sources is fast
  # pip-installing python/ into a venv or another Python offline (docs/pytorch.md,
  # "Installing"): venv and pip, and the setuptools and wheel that --no-build-isolation uses
  python3-venv python3-pip python3-setuptools python3-wheel
  libfuse3-dev fuse3 libmount-dev libyaml-cpp-dev libxxhash-dev librocksdb-dev libgtest-dev libgmock-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libmpich-dev mpich  # the peer tier (cluster/) and mpiexec
  libssl-dev  # libcrypto's HMAC-SHA256: the seal on every message between a cluster's daemons
  mergerfs bindfs  # the FUSE peers the benchmarks compare against
  python3-matplotlib  # the benchmark figures (tools/bench/plot_scenarios.py)
  util-linux-extra  # fincore: what the page cache holds of the SSD tier (tools/bench/lib.sh)
  # clairfs-ctl serve-metrics: the Prometheus export (python/clairfs/ctl/metrics.py), and
  # the parser the metrics tests read .clairfs/metrics with
  python3-prometheus-client
  # the Slurm SPANK plugin (slurm/) builds against slurm/spank.h; without it the plugin is
  # left out and the rest builds
  libslurm-dev
)
# Test-only: the Python package's tests read an ImageFolder through DataLoaders (several
# hundred MB, so not part of the plain set-up); lmdb and numpy: the record-range tests check
# the parsers against real LMDB environments and .npy files; h5py: test_hdf5 checks
# clairfs.hdf5 against h5py and reads HDF5 datasets through mounts; acl: setfacl for the
# permission tests and the fault matrix; mypy: test_packaging type-checks a script against the
# package's annotations; clang-format: the format check of the C++ sources (tools/check_format.sh);
# iproute2 (ip, tc) and util-linux (nsenter): the emulated cluster of tests/mpi/test_netns_cluster.py;
# slurmctld, slurmd, slurm-client and munge: tests/slurm starts a real one-node Slurm on localhost
# and runs jobs through the SPANK plugin (setpriv, from util-linux, submits them as nobody);
# dpkg-dev, debhelper and dh-python: the Debian package's build (tools/build_deb.sh, debian/),
# which tests/package/test_deb.py builds, installs and purges.
TEST_PACKAGES=(python3-torch python3-torchvision python3-pil python3-lmdb python3-numpy acl mypy
  clang-format iproute2 util-linux python3-h5py slurmctld slurmd slurm-client munge dpkg-dev
  debhelper dh-python
  strace)  # tests/python/test_loaders.py: which ioctls a Python open() makes
if [ "$with_tests" -eq 1 ]; then
  PACKAGES+=("${TEST_PACKAGES[@]}")
fi
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
# The default configuration (the built-in values, commented), read when neither -c nor
# -o config= names a file. An existing one is the admin's: never overwritten.
if [ ! -e /etc/clairfs/clairfs.yaml ]; then
  $SUDO install -D -m 0644 conf/clairfs.yaml /etc/clairfs/clairfs.yaml
  echo "setup: installed /etc/clairfs/clairfs.yaml"
fi
echo "setup: installed $(command -v clairfs) ($(clairfs --version))"
echo "setup: installed the Python package: $(cd / && /usr/bin/python3 -c 'import clairfs; print(clairfs.__file__)')"
echo "setup: took $SECONDS s (packages, release build, install)"
