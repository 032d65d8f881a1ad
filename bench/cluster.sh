#!/bin/sh
# cluster.sh — an emulated cluster on this machine: flat vs hierarchical
# allreduce across "hosts" joined by links with a real rate limit.
#
#   bench/cluster.sh [ROUNDS]        (as root, from the repository root, after `make`)
#
# Builds HOSTS network namespaces (ddpc-cl<i>, default 2), each with one
# veth to a bridge (ddpc-clbr) at 198.18.0.<i+1>/24 (the range reserved for
# network benchmarking). Every link is shaped in both directions with tc tbf
# to RATE (default 1gbit): egress of the host on its own end, ingress on the
# bridge's end. (Rate only: this kernel has no netem, so no added delay.)
# RANKS ranks per host (default 2) run build/bin/ddpc-bench COLL (default
# allreduce; also reduce-scatter, allgather, broadcast), float32 sum, at
# 8 B, 1 MiB and 64 MiB, under DDPC_ALGO=flat and
# DDPC_ALGO=hier, interleaved, ROUNDS times (default 3). Each namespace is a
# host to ddpc (its host id includes the network namespace), so ranks of one
# host share memory and ranks of two talk TCP over the shaped links.
# Prints per size the median over rounds of each one's time and bus
# bandwidth and hier/flat. Raw tables go to $OUT (default
# build/bench/cluster/). Everything is torn down on exit, whatever happens;
# without root it says so and exits 0.
set -eu

ROUNDS=${1:-3}
HOSTS=${HOSTS:-2}
RANKS=${RANKS:-2}
RATE=${RATE:-1gbit}
COLL=${COLL:-allreduce}
ITERS=${ITERS:-10}
BIN=${DDPC_BIN:-build/bin}
OUT=${OUT:-build/bench/cluster}
TIMEOUT=${TIMEOUT:-600}
PORT=${PORT:-29731}
BR=ddpc-clbr

if [ "$(id -u)" != 0 ]; then
    echo "cluster.sh: skipped: needs root (network namespaces, a bridge, tc)"
    exit 0
fi
[ -x "$BIN/ddpc-bench" ] || { echo "cluster.sh: $BIN/ddpc-bench is not built (run make)" >&2; exit 1; }
mkdir -p "$OUT"

teardown() {
    i=0
    while [ $i -lt "$HOSTS" ]; do
        ip netns pids "ddpc-cl$i" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "ddpc-cl$i" 2>/dev/null || true
        ip link del "ddpc-clv$i" 2>/dev/null || true
        i=$((i + 1))
    done
    ip link del "$BR" 2>/dev/null || true
}
trap teardown EXIT
trap 'exit 130' INT TERM HUP
teardown

# tbf on dev (in namespace ns, or the root one when ns is empty): RATE, a
# burst of 1 ms at that rate (at least 64 KiB) and room for 20 ms of queue.
shape() {
    ns=$1 dev=$2
    cmd="tc qdisc add dev $dev root tbf rate $RATE burst 256kb latency 20ms"
    if [ -n "$ns" ]; then ip netns exec "$ns" $cmd; else $cmd; fi
}

ip link add "$BR" type bridge
ip link set "$BR" up
i=0
while [ $i -lt "$HOSTS" ]; do
    ns=ddpc-cl$i
    ip netns add "$ns"
    ip link add "ddpc-clv$i" type veth peer name eth0 netns "$ns"
    ip link set "ddpc-clv$i" master "$BR" up
    ip netns exec "$ns" ip addr add "198.18.0.$((i + 1))/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
    shape "$ns" eth0
    shape "" "ddpc-clv$i"
    i=$((i + 1))
done
echo "cluster.sh: $HOSTS hosts x $RANKS ranks, links $RATE each way (tbf)" >&2

# run ALGO SIZE FILE: one ddpc-bench job on every host; rank 0's table to FILE.
run() {
    algo=$1 size=$2 file=$3
    world=$((HOSTS * RANKS))
    PORT=$((PORT + 1))
    pids=
    h=0
    while [ $h -lt "$HOSTS" ]; do
        l=0
        while [ $l -lt "$RANKS" ]; do
            r=$((h * RANKS + l))
            if [ $r = 0 ]; then dst=$file; else dst=$file.rank$r; fi
            ip netns exec "ddpc-cl$h" env RANK=$r WORLD_SIZE=$world LOCAL_RANK=$l \
                LOCAL_WORLD_SIZE=$RANKS GROUP_RANK=$h MASTER_ADDR=198.18.0.1 MASTER_PORT=$PORT \
                DDPC_ALGO="$algo" timeout "$TIMEOUT" "$BIN/ddpc-bench" "$COLL" -b "$size" \
                -e "$size" -n "$ITERS" -w 2 -d float32 -o sum > "$dst" 2>&1 &
            pids="$pids $!"
            l=$((l + 1))
        done
        h=$((h + 1))
    done
    fail=0
    for pid in $pids; do wait "$pid" || fail=1; done
    if [ $fail != 0 ]; then
        echo "cluster.sh: $algo at $size B failed:" >&2
        cat "$file"* >&2
        exit 1
    fi
    rm -f "$file".rank*
}

i=1
while [ $i -le "$ROUNDS" ]; do
    for size in 8 1M 64M; do
        for algo in flat hier; do
            echo "round $i/$ROUNDS: $algo $size" >&2
            run "$algo" "$size" "$OUT/$algo.$size.$i.txt"
        done
    done
    i=$((i + 1))
done

python3 - "$OUT" "$ROUNDS" "$HOSTS" "$RANKS" "$RATE" "$COLL" <<'EOF'
import statistics, sys
out, rounds, hosts, ranks, rate, coll = sys.argv[1:3] + sys.argv[3:7]
rounds = int(rounds)
med = {}
for algo in ("flat", "hier"):
    for size in ("8", "1M", "64M"):
        rows = []
        for i in range(1, rounds + 1):
            for line in open(f"{out}/{algo}.{size}.{i}.txt"):
                f = line.split()
                if len(f) == 9 and f[0].isdigit():
                    if f[8] != "0":
                        sys.exit(f"{algo} {size} round {i}: {f[8]} wrong values")
                    rows.append((float(f[5]), float(f[7])))
        med[algo, size] = (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows))
print(f"{hosts} hosts x {ranks} ranks, links {rate} (tbf, each way), float32 sum {coll}, "
      f"medians of {rounds} interleaved rounds")
print("| size | flat us | flat busbw GB/s | hier us | hier busbw GB/s | time hier/flat | busbw hier/flat |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for size, name in (("8", "8 B"), ("1M", "1 MiB"), ("64M", "64 MiB")):
    (ft, fb), (ht, hb) = med["flat", size], med["hier", size]
    print(f"| {name} | {ft:.1f} | {fb:.3f} | {ht:.1f} | {hb:.3f} | {ht / ft:.2f} | "
          f"{hb / fb if fb else 0:.2f} |")
EOF
