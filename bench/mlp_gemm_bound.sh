#!/usr/bin/env bash
# bench/mlp_gemm_bound.sh — how fast any trainer on this BLAS can run the MLP
# (784-512-512-10, batch 128, one thread): the five matrix products of a
# step timed alone through cblas_sgemm (bench/mlp_gemm.c, as src/nn/layers.c
# calls them) and through torch.mm (bench/mlp_gemm_torch.py), beside one
# epoch of ddpc-train and of bench/train_torch.py, runs interleaved. Prints
# each run, the medians, and the ceiling: 128 samples / (products' time per
# step) is the most samples/s a trainer can reach with these products, so
# ceiling / PyTorch's samples/s bounds the ratio ddpc can show against it.
#
#   bench/mlp_gemm_bound.sh                    # RUNS=3, the environment's BLAS settings
#   OPENBLAS_CORETYPE=SkylakeX bench/mlp_gemm_bound.sh   # both sides on AVX-512 kernels
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
PY=${PY:-/usr/bin/python3}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
make -s build/bin/ddpc-train >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 bench/mlp_gemm.c -o "$tmp/mlp_gemm" $(pkg-config --cflags --libs openblas 2>/dev/null || echo -lopenblas)
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -n "s/.*\"$1\": \\([0-9.e+-]*\\).*/\\1/p" | tail -n 1; }
echo "# $(date -u +%FT%TZ) $(nproc --all) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
for r in $(seq 1 "$RUNS"); do
  c=$("$tmp/mlp_gemm" 128 | field step_us)
  p=$($PY bench/mlp_gemm_torch.py 128 | field step_us)
  rm -f "$tmp/m.jsonl"
  build/bin/ddpc-train --data "$DATA" --model mlp --batch-size 128 --epochs 1 --lr 0.01 --threads 1 \
    --log-every 0 --no-progress --metrics "$tmp/m.jsonl" >/dev/null
  d=$(field samples_per_s <"$tmp/m.jsonl")
  t=$($PY bench/train_torch.py --data "$DATA" --model mlp --batch-size 128 --epochs 1 --lr 0.01 --threads 1 | field samples_per_s)
  echo "$c $p $d $t" >>"$tmp/runs"
  printf "run %d: products per step: cblas %6.0f us, torch.mm %6.0f us | epoch: ddpc %6.0f samples/s, pytorch %6.0f samples/s\n" \
    "$r" "$c" "$p" "$d" "$t"
done
col() { awk -v k="$1" '{print $k}' "$tmp/runs" | median; }
c=$(col 1); p=$(col 2); d=$(col 3); t=$(col 4)
awk -v c="$c" -v p="$p" -v d="$d" -v t="$t" 'BEGIN {
  printf "# medians: products per step cblas %.0f us, torch.mm %.0f us; ddpc %.0f, pytorch %.0f samples/s (%.2fx)\n", c, p, d, t, d / t
  printf "# ceiling: %.0f samples/s from the products alone = %.2fx pytorch; ddpc reaches %.0f%% of it, pytorch %.0f%%\n", 128e6 / c, 128e6 / c / t, 100 * d / (128e6 / c), 100 * t / (128e6 / c)
}'
