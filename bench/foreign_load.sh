#!/bin/sh
# foreign_load.sh — ddpc's allreduce while another program keeps every CPU
# busy (a `yes` bound to each CPU), beside the same run on a quiet machine:
# a rank that yields its CPU to wait hands it to that program for a time
# slice, one that sleeps is woken when its peer rings (progress.c, spin).
#
#   sh bench/foreign_load.sh [ROUNDS]        (from the repository root, after `make`)
#
# 2 ranks under ddpc-run (shared memory, each bound to a CPU), float32 sum,
# 8 B .. 32 KiB (x8), ITERS timed calls (default 1000). BASE_BIN names
# another build's bin/ to run interleaved with this one (before and after).
set -eu
ROUNDS=${1:-3}
ITERS=${ITERS:-1000}
BIN=${DDPC_BIN:-build/bin}
run() { # BIN LABEL
    printf '%-28s' "$2"
    MASTER_ADDR=127.0.0.1 timeout 600 "$1/ddpc-run" --standalone --nproc-per-node=2 \
        "$1/ddpc-bench" allreduce -b 8 -e 32K -f 8 -n "$ITERS" -w 5 -d float32 -o sum 2>&1 |
        awk '/^\[0\]: +[0-9]/ { printf " %s B %s us;", $2, $7 } END { print "" }'
}
i=1
while [ "$i" -le "$ROUNDS" ]; do
    for load in quiet busy; do
        pids=
        if [ $load = busy ]; then
            for cpu in $(seq 0 $(($(nproc) - 1))); do
                taskset -c "$cpu" yes > /dev/null &
                pids="$pids $!"
            done
        fi
        run "$BIN" "round $i $load"
        [ -z "${BASE_BIN:-}" ] || run "$BASE_BIN" "round $i $load (base)"
        [ -z "$pids" ] || kill $pids
    done
    i=$((i + 1))
done
