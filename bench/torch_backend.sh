#!/usr/bin/env bash
# bench/torch_backend.sh — torch.distributed's 'gloo' and 'ddpc' side by side,
# 2 processes (bench/torch_backend.py: all_reduce at 8 B / 1 MiB / 64 MiB, the
# seed's program examples/ddp_mnist.py for one epoch, the MLP under DDP),
# after building what it needs: ddpc-run, and ddpc_torch (make torch) when
# BACKENDS names ddpc. Arguments go to bench/torch_backend.py.
#
#   bench/torch_backend.sh                          # BACKENDS=gloo,ddpc, 3 repetitions
#   BACKENDS=gloo bench/torch_backend.sh --reps 5
#   bench/torch_backend.sh --parts allreduce
set -euo pipefail
cd "$(dirname "$0")/.."
BACKENDS=${BACKENDS:-gloo,ddpc}
make -s build/bin/ddpc-run >/dev/null
case ",$BACKENDS," in *,ddpc,*) make -s torch >/dev/null ;; esac
exec /usr/bin/python3 bench/torch_backend.py --backends "$BACKENDS" "$@"
