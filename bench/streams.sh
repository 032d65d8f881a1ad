#!/bin/sh
# streams.sh — TCP connections per pair of ranks (DDPC_SOCKETS_PER_PEER)
# side by side, in one run:
#
#   flock /tmp/ddpc-cluster.lock bench/streams.sh [ROUNDS]   (from the repository root, after make)
#
# 1. loopback: two ranks on this machine, each a host of its own
#    (DDPC_HOST_ID), so their one link is TCP over loopback: float32 sum
#    allreduce of each of SIZES (default "1M 64M"), ITERS timed calls
#    (default 5) after 2 warm-ups, for each N of NS (default "1 2 4"),
#    interleaved, ROUNDS rounds (default 3); prints the median over rounds
#    of each N's time (each round: the median over iterations).
# 2. as root, the emulated cluster (bench/cluster.sh: network namespaces,
#    links shaped with tc tbf, rate only: this kernel has no netem, so no
#    added latency) at each of RATES (default "1gbit 10gbit"), layouts
#    LAYOUTS (default "2x2 4x2"), tools s<N> (ddpc-bench with
#    DDPC_SOCKETS_PER_PEER=N, algorithm auto), the same sizes and rounds.
#    Without root it says so. CLUSTER=0 skips it, LOOPBACK=0 the first.
# The cluster's namespaces have fixed names: run it under the lock above.
set -eu

ROUNDS=${1:-3}
SIZES=${SIZES:-"1M 64M"}
NS=${NS:-"1 2 4"}
ITERS=${ITERS:-5}
RATES=${RATES:-"1gbit 10gbit"}
BIN=${DDPC_BIN:-build/bin}
OUT=${OUT:-build/bench/streams}
PY=/usr/bin/python3
mkdir -p "$OUT"
[ -x "$BIN/ddpc-bench" ] || { echo "streams.sh: $BIN/ddpc-bench is not built (run make)" >&2; exit 1; }

if [ "${LOOPBACK:-1}" = 1 ]; then
    rm -f "$OUT"/lo.*.txt
    port=$((29900 + $$ % 50))
    i=1
    while [ $i -le "$ROUNDS" ]; do
        for size in $SIZES; do
            for n in $NS; do
                port=$((port + 1))
                f=$OUT/lo.s$n.$size.$i.txt
                echo "loopback round $i/$ROUNDS: $size, $n per peer" >&2
                for r in 1 0; do
                    RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
                        MASTER_PORT=$port DDPC_HOST_ID=streams-lo-$r DDPC_SOCKETS_PER_PEER=$n \
                        timeout 600 "$BIN/ddpc-bench" allreduce -b "$size" -e "$size" -n "$ITERS" -w 2 \
                        -d float32 -o sum > "$f.rank$r" 2>&1 &
                done
                wait
                mv "$f.rank0" "$f"
                rm -f "$f.rank1"
            done
        done
        i=$((i + 1))
    done
    $PY - "$OUT" "$ROUNDS" "$SIZES" "$NS" <<'EOF'
import statistics, sys
out, rounds, sizes, ns = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
def med(size, n):
    t = []
    for i in range(1, rounds + 1):
        for line in open(f"{out}/lo.s{n}.{size}.{i}.txt"):
            f = line.split()
            if len(f) == 9 and f[0].isdigit():
                if f[8] != "0":
                    sys.exit(f"loopback {size} N={n} round {i}: {f[8]} wrong values")
                t.append(float(f[5]))
    return statistics.median(t) if t else None
print(f"2 ranks over loopback TCP, float32 sum allreduce, median of {rounds} interleaved rounds")
print("| size | " + " | ".join(f"{n} per peer" for n in ns) + " |")
print("|---:|" + "---:|" * len(ns))
for size in sizes:
    r = [med(size, n) for n in ns]
    print(f"| {size[:-1]} {size[-1]}iB | " +
          " | ".join(f"{t / 1000:.1f} ms" if t and t >= 1000 else f"{t:.0f} us" if t else "-"
                     for t in r) + " |")
EOF
fi

if [ "${CLUSTER:-1}" = 1 ]; then
    tools=
    for n in $NS; do tools="$tools s$n"; done
    for rate in $RATES; do
        RATE=$rate TOOLS="${tools# }" SIZES="$SIZES" ITERS=$ITERS OUT=$OUT/cluster-$rate \
            sh bench/cluster.sh "$ROUNDS"
    done
fi
