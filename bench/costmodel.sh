#!/bin/sh
# costmodel.sh — fits an alpha-beta-gamma cost model to ddpc-bench runs on
# an emulated cluster and regenerates docs/COSTMODEL.md (the formulas per
# algorithm, the fitted parameters, the model beside measured times, and a
# projection of allreduce to 8 .. 1,024 hosts).
#
#   bench/costmodel.sh [ROUNDS]     (as root, from the repository root, after `make`)
#   /usr/bin/python3 bench/costmodel.py build/bench/costmodel > docs/COSTMODEL.md
#                                   (the document again from the last runs, no root)
#
# The hosts are bench/cluster_lib.sh's (network namespaces on a bridge,
# links shaped with tc tbf to RATE, default 1gbit; no netem here, so the
# latency is what the veths and TCP give). Runs, float32, ROUNDS times
# (default 2) interleaved, ITERS timed calls each (default 5):
#   fit, DDPC_ALGO=flat (the ring): allgather and reduce-scatter at 4 KiB,
#     256 KiB, 4 MiB and 32 MiB on 1 host x 2 ranks (shared memory: the
#     intra-host alpha_l, beta_l and the reduction's gamma) and on 2 and 4
#     hosts x 1 rank (the link's alpha and beta);
#   check: allreduce sum at 1 MiB and 64 MiB on 2 x 2 and 4 x 2, under
#     DDPC_ALGO=flat and hier: the model's prediction beside the median.
# Raw tables go to $OUT (default build/bench/costmodel/); the document to
# $DOC (default docs/COSTMODEL.md). Without root it says so and exits 0.
set -eu

ROUNDS=${1:-2}
ITERS=${ITERS:-5}
OUT=${OUT:-build/bench/costmodel}
DOC=${DOC:-docs/COSTMODEL.md}
PY=/usr/bin/python3
HOSTS=4
. bench/cluster_lib.sh

[ -x "$BIN/ddpc-bench" ] || { echo "costmodel.sh: $BIN/ddpc-bench is not built (run make)" >&2; exit 1; }
mkdir -p "$OUT"
rm -f "$OUT"/*.txt
cl_up
{
    echo "date $(date -u +%FT%TZ)"
    echo "cpus $(nproc)"
    echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "commit $(git rev-parse --short HEAD 2> /dev/null || echo '?')"
    echo "rate $RATE"
    echo "rounds $ROUNDS"
    echo "iters $ITERS"
} > "$OUT/info"

# bench LAYOUT COLL ALGO SIZE ROUND
bench() {
    lay=$1 coll=$2 algo=$3 size=$4 round=$5
    cl_run "$OUT/$lay.$coll.$algo.$size.$round.txt" "${lay%x*}" "${lay#*x}" env DDPC_ALGO="$algo" \
        "$BIN/ddpc-bench" "$coll" -b "$size" -e "$size" -n "$ITERS" -w 2 -d float32 -o sum
}

i=1
while [ $i -le "$ROUNDS" ]; do
    for lay in 1x2 2x1 4x1; do
        for coll in allgather reduce-scatter; do
            for size in 4K 256K 4M 32M; do
                echo "round $i/$ROUNDS: fit $lay $coll $size" >&2
                bench "$lay" "$coll" flat "$size" "$i"
            done
        done
    done
    for lay in 2x2 4x2; do
        for size in 1M 64M; do
            for algo in flat hier; do
                echo "round $i/$ROUNDS: check $lay allreduce $algo $size" >&2
                bench "$lay" allreduce "$algo" "$size" "$i"
            done
        done
    done
    i=$((i + 1))
done
echo "load_end $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/info"
$PY bench/costmodel.py "$OUT" > "$DOC.tmp"
mv "$DOC.tmp" "$DOC"
echo "costmodel.sh: wrote $DOC" >&2
