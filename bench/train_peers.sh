#!/usr/bin/env bash
# bench/train_peers.sh — samples/s of one training epoch, ddpc-train beside
# PyTorch 1.13 (bench/train_torch.py) in the same run, runs interleaved:
# the Linear model at batch 32 and the MLP (784-512-512-10) at batch 128,
# both plain SGD lr 0.01, THREADS threads each (default 1; ddpc: --threads;
# torch: set_num_threads and OPENBLAS_NUM_THREADS, without which PyTorch's
# OpenBLAS uses every core). Prints each run, then per model the medians and
# the ratio ddpc / PyTorch, and which BLAS PyTorch mapped.
#
#   bench/train_peers.sh            # RUNS=3 runs of each, one thread
#   RUNS=5 MODELS="linear" THREADS=2 bench/train_peers.sh
#   DDPC_TRAIN_THREADS=2 TORCH_BLAS_THREADS=2 bench/train_peers.sh
#       # torch as run by a plain set_num_threads(1) script (its OpenBLAS on
#       # every core) beside ddpc-train's default on this 2-CPU machine
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
MODELS=${MODELS:-"linear mlp"}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
PY=${PY:-/usr/bin/python3}
THREADS=${THREADS:-1}
DDPC_TRAIN_THREADS=${DDPC_TRAIN_THREADS:-$THREADS}
TORCH_BLAS_THREADS=${TORCH_BLAS_THREADS:-$THREADS}
make -s build/bin/ddpc-train >/dev/null
$PY -c 'import torch' 2>/dev/null || { echo "train_peers: $PY has no torch (apt-get install python3-torch)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

batch_of() { case $1 in linear) echo 32 ;; mlp) echo 128 ;; *) echo "unknown model $1" >&2; exit 2 ;; esac; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -n "s/.*\"$1\": \\([0-9.e+-]*\\).*/\\1/p"; }

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), ddpc $DDPC_TRAIN_THREADS thread(s), torch $THREADS thread(s) + $TORCH_BLAS_THREADS BLAS thread(s)"
for model in $MODELS; do
  b=$(batch_of "$model")
  : >"$tmp/$model.ddpc"
  : >"$tmp/$model.torch"
  for r in $(seq 1 "$RUNS"); do
    rm -f "$tmp/m.jsonl"
    build/bin/ddpc-train --data "$DATA" --model "$model" --batch-size "$b" --epochs 1 --lr 0.01 \
      --threads "$DDPC_TRAIN_THREADS" --log-every 0 --no-progress --metrics "$tmp/m.jsonl" >/dev/null
    d=$(field samples_per_s <"$tmp/m.jsonl")
    acc=$(field test_accuracy <"$tmp/m.jsonl")
    echo "$d" >>"$tmp/$model.ddpc"
    $PY bench/train_torch.py --data "$DATA" --model "$model" --batch-size "$b" --epochs 1 --lr 0.01 --threads "$THREADS" \
      --blas-threads "$TORCH_BLAS_THREADS" >"$tmp/t.json"
    t=$(field samples_per_s <"$tmp/t.json")
    tacc=$(field test_accuracy <"$tmp/t.json")
    echo "$t" >>"$tmp/$model.torch"
    printf "%-6s b%-4s run %d: ddpc %9.0f samples/s (test acc %.4f) | pytorch %8.0f samples/s (test acc %.4f)\n" \
      "$model" "$b" "$r" "$d" "$acc" "$t" "$tacc"
  done
  md=$(median <"$tmp/$model.ddpc")
  mt=$(median <"$tmp/$model.torch")
  printf "%-6s b%-4s median of %d: ddpc %9.0f samples/s | pytorch %8.0f samples/s | ratio %.1fx\n" \
    "$model" "$b" "$RUNS" "$md" "$mt" "$(echo "$md $mt" | awk '{print $1/$2}')"
done
echo "# pytorch BLAS: $(sed -n 's/.*"blas": \(\[.*\]\).*/\1/p' "$tmp/t.json")"
