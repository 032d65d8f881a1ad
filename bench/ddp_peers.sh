#!/usr/bin/env bash
# bench/ddp_peers.sh — data-parallel training, ddpc beside PyTorch 1.13 + gloo,
# in one run, runs interleaved, both started by ddpc-run with torchrun's
# environment (Debian 12's torchrun fails under Python 3.11):
#   - the seed's program: Linear(784, 10), SGD lr 0.01, batch 32, EPOCHS_LINEAR
#     (10) epochs, with 1 and 2 processes: seconds per epoch (median over the
#     epochs), test accuracy after the last epoch, peak RSS per process;
#   - the MLP (784-512-512-10, ReLU), batch 128, EPOCHS_MLP (3) epochs, with 1
#     and 2 processes: samples/s over all processes; and, beside them, two
#     independent 1-process runs side by side (no communication): their
#     summed samples/s is what this host gave 2 processes just then, about
#     the most the 2-process run can reach whatever its communication costs
#     (not a strict bound: it runs after, and the host drifts).
# ddpc's side is ddpc-train (the example's loop, plus an evaluation after each
# epoch that is not timed); PyTorch's is bench/ddp_torch.py. One BLAS thread
# per process on both sides. Prints each run (for the MLP, also the 2-process
# run's ratio to the 1-process run beside it), then medians over RUNS runs and
# the ratios.
#
#   bench/ddp_peers.sh                 # RUNS=3
#   RUNS=1 EPOCHS_LINEAR=3 bench/ddp_peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
EPOCHS_LINEAR=${EPOCHS_LINEAR:-10}
EPOCHS_MLP=${EPOCHS_MLP:-3}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
PY=${PY:-/usr/bin/python3}
make -s build/bin/ddpc-train build/bin/ddpc-run >/dev/null
$PY -c 'import torch' 2>/dev/null || { echo "ddp_peers: $PY has no torch (apt-get install python3-torch)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
port=$((29800 + RANDOM % 100 * 2))

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -n "s/.*\"$1\": \\([0-9.e+-]*\\).*/\\1/p" | tail -n 1; }
# the largest maxrss (KiB) that /usr/bin/time printed for any worker, in MiB
peak_rss() { sed -n 's/.*maxrss_kib=\([0-9]*\).*/\1/p' "$1" | sort -n | tail -n 1 | awk '{printf "%.1f", $1/1024}'; }

# ddpc MODEL BATCH EPOCHS NPROC -> "epoch_seconds samples_per_s test_acc peak_mib"
ddpc() {
  rm -f "$tmp/m.jsonl"
  build/bin/ddpc-run --nproc-per-node="$4" --master-port=$port /usr/bin/time -f "maxrss_kib=%M" \
    build/bin/ddpc-train --data "$DATA" --model "$1" --batch-size "$2" --epochs "$3" --lr 0.01 \
    --threads 1 --log-every 0 --no-progress --metrics "$tmp/m.jsonl" >"$tmp/d.out" 2>&1
  local secs; secs=$(sed -n 's/.*"seconds": \([0-9.e+-]*\).*/\1/p' "$tmp/m.jsonl" | median)
  local sps; sps=$(sed -n 's/.*"samples_per_s": \([0-9.e+-]*\).*/\1/p' "$tmp/m.jsonl" | median)
  echo "$secs $sps $(field test_accuracy <"$tmp/m.jsonl") $(peak_rss "$tmp/d.out")"
}
# pair MODEL BATCH EPOCHS -> samples/s of two 1-process runs side by side, summed
pair() {
  local i
  for i in 0 1; do
    rm -f "$tmp/pair$i.jsonl"
    build/bin/ddpc-run --nproc-per-node=1 --master-port=$((port + 1 + 50 * i)) \
      build/bin/ddpc-train --data "$DATA" --model "$1" --batch-size "$2" --epochs "$3" --lr 0.01 \
      --threads 1 --log-every 0 --no-progress --metrics "$tmp/pair$i.jsonl" >"$tmp/pair$i.out" 2>&1 &
  done
  wait
  for i in 0 1; do
    sed -n 's/.*"samples_per_s": \([0-9.e+-]*\).*/\1/p' "$tmp/pair$i.jsonl" | median
  done | awk '{s += $1} END {print s}'
}
# torch MODEL BATCH EPOCHS NPROC -> the same four figures
torch_() {
  build/bin/ddpc-run --nproc-per-node="$4" --master-port=$port /usr/bin/time -f "maxrss_kib=%M" \
    $PY bench/ddp_torch.py --data "$DATA" --model "$1" --batch-size "$2" --epochs "$3" --lr 0.01 \
    >"$tmp/t.out" 2>&1
  echo "$(field epoch_seconds <"$tmp/t.out") $(field samples_per_s <"$tmp/t.out") $(field test_accuracy <"$tmp/t.out") $(peak_rss "$tmp/t.out")"
}

echo "# $(date -u +%FT%TZ) $(nproc --all) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
configs=("linear 32 $EPOCHS_LINEAR 1" "linear 32 $EPOCHS_LINEAR 2" "mlp 128 $EPOCHS_MLP 1" "mlp 128 $EPOCHS_MLP 2")
for r in $(seq 1 "$RUNS"); do
  for c in "${configs[@]}"; do
    set -- $c
    key="$1-$4"
    d=$(ddpc "$@"); echo "$d" >>"$tmp/$key.ddpc"
    t=$(torch_ "$@"); echo "$t" >>"$tmp/$key.torch"
    printf "run %d %-6s b%-3s x%d: ddpc %7.3f s/epoch %9.0f samples/s acc %.4f %6.1f MiB | pytorch %7.3f s/epoch %8.0f samples/s acc %.4f %6.1f MiB\n" \
      "$r" "$1" "$2" "$4" $d $t
    if [ "$1" = mlp ] && [ "$4" = 2 ] && [ -s "$tmp/$1-1.ddpc" ]; then
      p=$(pair "$1" "$2" "$3"); echo "$p" >>"$tmp/$1.pair"
      echo "$d $(tail -n 1 "$tmp/$1-1.ddpc") $p" | awk -v r="$r" -v m="$1" \
        '{printf "run %d %-6s ddpc 2 processes / 1 process beside it: %.2fx samples/s; two 1-process runs side by side %.0f samples/s (%.2fx the 1-process run: about this host'"'"'s ceiling); 2 processes reach %.0f%% of it\n", r, m, $2/$6, $9, $9/$6, 100*$2/$9}'
    fi
  done
done
col() { awk -v k="$1" '{print $k}' "$2" | median; }
echo "# medians over $RUNS runs (s/epoch, samples/s, test accuracy, peak RSS MiB per process)"
for c in "${configs[@]}"; do
  set -- $c
  key="$1-$4"
  for side in ddpc torch; do
    printf "%-6s x%d %-7s %7.3f s/epoch %9.0f samples/s acc %.4f %6.1f MiB\n" "$1" "$4" "$side" \
      "$(col 1 "$tmp/$key.$side")" "$(col 2 "$tmp/$key.$side")" "$(col 3 "$tmp/$key.$side")" "$(col 4 "$tmp/$key.$side")"
  done
done
ratio() { echo "$1 $2" | awk '{printf "%.2f", $1/$2}'; }
l2d=$(col 1 "$tmp/linear-2.ddpc"); l2t=$(col 1 "$tmp/linear-2.torch")
m2d=$(col 2 "$tmp/mlp-2.ddpc"); m2t=$(col 2 "$tmp/mlp-2.torch"); m1d=$(col 2 "$tmp/mlp-1.ddpc")
echo "# example, 2 processes: ddpc epoch $(ratio "$l2t" "$l2d")x faster than pytorch+gloo"
echo "# mlp, 2 processes: ddpc $(ratio "$m2d" "$m2t")x pytorch's samples/s; $(ratio "$m2d" "$m1d")x ddpc's own with 1 process"
mp=$(median <"$tmp/mlp.pair")
echo "# mlp, two 1-process runs side by side (no communication): $mp samples/s, $(ratio "$mp" "$m1d")x the 1-process run; 2 processes with DDP reach $(echo "$m2d $mp" | awk '{printf "%.0f", 100*$1/$2}')% of that"
echo "# peak RSS per process, example x2: ddpc $(col 4 "$tmp/linear-2.ddpc") MiB, pytorch $(col 4 "$tmp/linear-2.torch") MiB"
