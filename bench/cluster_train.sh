#!/bin/sh
# cluster_train.sh — data-parallel training across emulated hosts: ddpc-train
# on 2 hosts x 2 ranks joined by RATE links (default 10gbit), beside
# ddpc-train on 1 host x 4 ranks (no link in the way) and beside PyTorch +
# gloo (bench/ddp_torch.py) on the same 2 x 2 hosts, in one run.
#
#   bench/cluster_train.sh [RUNS]     (as root, from the repository root, after `make`)
#
# The hosts are bench/cluster_lib.sh's (network namespaces on a bridge,
# every link shaped with tc tbf; rate only, no netem here). The model is
# the MLP (784-512-512-10, ReLU) on Fashion-MNIST (DATA, default
# /usr/share/datasets/fashion-mnist), batch 128 per rank, plain SGD lr
# 0.01, EPOCHS epochs (default 2), one BLAS thread per rank on both sides;
# ddpc-train's DDP buckets at their defaults (25 MB, the first 1 MB), as
# PyTorch's. samples/s over all ranks is each run's median over its
# epochs (ddpc-train's --metrics lines; ddp_torch.py's JSON), and each
# configuration's figure the median over RUNS (default 3) interleaved runs.
# Prints every run, then the medians and the ratios. Without root it says
# so and exits 0.
set -eu

RUNS=${1:-3}
EPOCHS=${EPOCHS:-2}
RATE=${RATE:-10gbit}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
OUT=${OUT:-build/bench/cluster_train}
PY=/usr/bin/python3
HOSTS=2
. bench/cluster_lib.sh

[ -x "$BIN/ddpc-train" ] || { echo "cluster_train.sh: $BIN/ddpc-train is not built (run make)" >&2; exit 1; }
$PY -c 'import torch' 2> /dev/null || { echo "cluster_train.sh: $PY has no torch (DDPC_SETUP_PEERS=1 bash scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$OUT"
rm -f "$OUT"/*.txt "$OUT"/*.jsonl "$OUT/ddpc22" "$OUT/ddpc14" "$OUT/torch22"
cl_up
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2> /dev/null || echo '?'), links $RATE"

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# ddpc H R RUN: ddpc-train on H hosts x R ranks; its samples/s to $OUT/val
# (not printed: cl_run must not run in a subshell, which would lose PORT)
ddpc() {
    m="$PWD/$OUT/ddpc.$1x$2.$3.jsonl"
    cl_run "$OUT/ddpc.$1x$2.$3.txt" "$1" "$2" env OPENBLAS_NUM_THREADS=1 "$BIN/ddpc-train" \
        --data "$DATA" --model mlp --batch-size 128 --epochs "$EPOCHS" --lr 0.01 --threads 1 \
        --log-every 0 --no-progress --metrics "$m"
    sed -n 's/.*"samples_per_s": \([0-9.e+-]*\).*/\1/p' "$m" | median > "$OUT/val"
}

# torch RUN: bench/ddp_torch.py on gloo, 2 hosts x 2 ranks; samples/s to $OUT/val
torch_() {
    f=$OUT/torch.2x2.$1.txt
    cl_run "$f" 2 2 env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $PY bench/ddp_torch.py \
        --data "$DATA" --model mlp --batch-size 128 --epochs "$EPOCHS" --lr 0.01 --backend gloo
    sed -n 's/.*"samples_per_s": \([0-9.e+-]*\).*/\1/p' "$f" | tail -n 1 > "$OUT/val"
}

r=1
while [ $r -le "$RUNS" ]; do
    ddpc 2 2 $r
    a=$(cat "$OUT/val")
    echo "$a" >> "$OUT/ddpc22"
    ddpc 1 4 $r
    b=$(cat "$OUT/val")
    echo "$b" >> "$OUT/ddpc14"
    torch_ $r
    t=$(cat "$OUT/val")
    echo "$t" >> "$OUT/torch22"
    printf "run %d: ddpc 2 hosts x 2: %.0f samples/s | ddpc 1 host x 4: %.0f | pytorch+gloo 2 hosts x 2: %.0f\n" \
        $r "$a" "$b" "$t"
    r=$((r + 1))
done
a=$(median < "$OUT/ddpc22")
b=$(median < "$OUT/ddpc14")
t=$(median < "$OUT/torch22")
rm -f "$OUT/ddpc22" "$OUT/ddpc14" "$OUT/torch22" "$OUT/val"
printf "# medians of %d runs, MLP batch 128/rank, %d epochs: ddpc 2x2 %.0f samples/s, ddpc 1x4 %.0f, pytorch+gloo 2x2 %.0f\n" \
    "$RUNS" "$EPOCHS" "$a" "$b" "$t"
echo "$a $b $t" | awk '{printf "# ddpc 2x2 / ddpc 1x4: %.2fx; ddpc 2x2 / pytorch+gloo 2x2: %.2fx\n", $1/$2, $1/$3}'
