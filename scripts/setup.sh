#!/usr/bin/env bash
# Installs the Debian packages ddpc builds, tests and benchmarks with.
# Idempotent: does nothing when they are all present.
set -euo pipefail
need=(build-essential pkg-config libopenblas-dev zlib1g-dev libcjson-dev dataset-fashion-mnist iproute2)
[ "${DDPC_SETUP_PEERS:-0}" = 1 ] && need+=(openmpi-bin libopenmpi-dev python3-torch libtorch-dev pybind11-dev python3-dev libopenblas0 hyperfine time gnuplot-nox)
# the tools of `make check-valgrind`, `make fuzz` and `make format` (a new
# machine has gcc, valgrind and gdb, not clang or clang-format)
[ "${DDPC_SETUP_TOOLS:-0}" = 1 ] && need+=(valgrind clang clang-format)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
