#!/usr/bin/env bash
# bench/plots.sh — the README's two pictures, regenerated from fresh runs:
#
#   $OUT/train.png      ddpc-train under ddpc-run with 1, 2 and 4 processes
#                       (the MLP, EPOCHS epochs, the same seed): loss, train
#                       and test accuracy, samples/s per epoch, one series
#                       per process count (from --metrics)
#   $OUT/allreduce.png  float32 sum allreduce on 2 ranks, 8 B .. 64 MiB:
#                       ddpc-bench beside OpenMPI's MPI_Allreduce
#                       (bench/mpi_allreduce.c, the same table; skipped
#                       without mpicc/mpirun): bus bandwidth and time
#
#   bench/plots.sh                      # from the repository root, after make
#   EPOCHS=3 MODEL=linear OUT=/tmp/p bench/plots.sh
#
# Needs gnuplot (apt-get install gnuplot-nox) and Fashion-MNIST. Everything
# talks over 127.0.0.1 only. The raw files (.jsonl, .txt) stay beside the
# pictures, so `ddpc-plot` can redraw them.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${DDPC_BIN:-build/bin}
OUT=${OUT:-build/plots}
EPOCHS=${EPOCHS:-5}
MODEL=${MODEL:-mlp}
PROCS=${PROCS:-"1 2 4"}
SIZES=${SIZES:-"-b 8 -e 64M -f 2"}
for t in ddpc-run ddpc-train ddpc-bench ddpc-plot; do
    [ -x "$BIN/$t" ] || { echo "plots: $BIN/$t is not built (run make)" >&2; exit 1; }
done
command -v gnuplot >/dev/null || { echo "plots: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
mkdir -p "$OUT"

# 1. training: one metrics file per process count
train=()
for n in $PROCS; do
    m="$OUT/train_${n}proc.jsonl"
    rm -f "$m"
    echo "plots: ddpc-train, $n process(es), $EPOCHS epochs of $MODEL" >&2
    "$BIN/ddpc-run" --standalone --nproc-per-node="$n" "$BIN/ddpc-train" --model "$MODEL" \
        --epochs "$EPOCHS" --log-every 0 --metrics "$m" > "$OUT/train_${n}proc.log" 2>&1 \
        || { echo "plots: ddpc-train x $n failed:" >&2; cat "$OUT/train_${n}proc.log" >&2; exit 1; }
    label="$n process"; [ "$n" = 1 ] || label="${label}es"
    train+=(--label "$label" "$m")
done
"$BIN/ddpc-plot" -o "$OUT/train.png" --title "ddpc-train ($MODEL, Fashion-MNIST), per epoch" "${train[@]}"

# 2. allreduce: ddpc's table and a peer's of the same columns
# shellcheck disable=SC2086
"$BIN/ddpc-run" --standalone --nproc-per-node=2 "$BIN/ddpc-bench" allreduce $SIZES \
    > "$OUT/allreduce_ddpc.txt" 2>&1
tables=(--label "ddpc (2 ranks)" "$OUT/allreduce_ddpc.txt")
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    mpicc -O2 -o "$OUT/mpi_allreduce" bench/mpi_allreduce.c
    # shellcheck disable=SC2086
    mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 --mca btl vader,self \
        "$OUT/mpi_allreduce" $SIZES > "$OUT/allreduce_mpi.txt" 2>&1
    tables+=(--label "OpenMPI, shared memory (2 ranks)" "$OUT/allreduce_mpi.txt")
else
    echo "plots: no mpicc/mpirun: the allreduce picture has ddpc alone" >&2
fi
"$BIN/ddpc-plot" -o "$OUT/allreduce.png" --title "allreduce, float32 sum, 2 ranks on one host" \
    "${tables[@]}"
