#!/usr/bin/env bash
# Installs the Debian packages ddpc builds, tests and benchmarks with.
# Idempotent: does nothing when they are all present.
set -euo pipefail
need=(build-essential pkg-config libopenblas-dev zlib1g-dev libcjson-dev dataset-fashion-mnist iproute2)
[ "${DDPC_SETUP_PEERS:-0}" = 1 ] && need+=(openmpi-bin libopenmpi-dev python3-torch libtorch-dev pybind11-dev python3-dev libopenblas0 hyperfine time gnuplot-nox)
# the tools of `make check-valgrind`, `make fuzz` and `make format` (a new
# machine has gcc, valgrind and gdb, not clang or clang-format)
[ "${DDPC_SETUP_TOOLS:-0}" = 1 ] && need+=(valgrind clang clang-format)
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# pip's torch 2.x beside Debian's 1.13: a venv of the Python on PATH with
# torch==2.13.0 (a CPU build; pinned: an open range downloads several GB)
# and numpy, where make torch2 pip-installs ddpc_torch and the tests find it
if [ "${DDPC_SETUP_PEERS:-0}" = 1 ]; then
  venv=${TORCH2_VENV:-build/venv-torch2}
  if ! "$venv/bin/python" -c 'import torch, numpy' 2>/dev/null; then
    echo "setup: making $venv with torch==2.13.0"
    py=$(command -v python3)
    "$py" -m venv "$venv" 2>/dev/null || {
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
      "$py" -m venv "$venv"
    }
    "$venv/bin/pip" install -q --disable-pip-version-check torch==2.13.0 numpy setuptools wheel 2>&1 |
      grep -v "^WARNING: Location" || true
    "$venv/bin/python" -c 'import torch; print("setup: torch", torch.__version__, "in", "'"$venv"'")'
  fi
  # torch==2.14.1 with torchvision==0.29.1 (pinned: about 5.5 GB, a CUDA
  # build that runs on the CPU) for the seed's program as written for
  # Ascend, where make torch-npu installs ddpc_torch and ddpc_torch_npu
  venv=${TORCH_NPU_VENV:-build/venv-torch214}
  if ! "$venv/bin/python" -c 'import torch, torchvision' 2>/dev/null; then
    echo "setup: making $venv with torch==2.14.1 torchvision==0.29.1"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check torch==2.14.1 torchvision==0.29.1 numpy \
      setuptools wheel 2>&1 | grep -v "^WARNING: Location" || true
    "$venv/bin/python" -c 'import torch; print("setup: torch", torch.__version__, "in", "'"$venv"'")'
  fi
fi
