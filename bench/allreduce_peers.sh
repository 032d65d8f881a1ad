#!/bin/sh
# allreduce_peers.sh — ddpc's allreduce beside its peers, in one run.
#
#   bench/allreduce_peers.sh [ROUNDS]        (from the repository root, after `make`)
#
# 2 ranks on this machine, float32 sum allreduce, sizes 8 B .. 64 MiB (x2):
#   ddpc     build/bin/ddpc-bench allreduce, started by ddpc-run --standalone
#            --nproc-per-node=2 (or as 2 processes with torchrun's variables
#            when ddpc-run is not built)
#   mpi      OpenMPI's MPI_Allreduce forced onto TCP: mpirun --mca pml ob1
#            --mca btl tcp,self, running bench/mpi_allreduce.c
#   ddpc pinned  the same as 2 processes with torchrun's variables, rank r
#            pinned to core r (taskset), the binding mpirun applies by default
#   gloo     PyTorch's gloo backend (bench/gloo_allreduce.py, /usr/bin/python3)
# Each tool runs ROUNDS times (default 3), interleaved (ddpc, mpi, gloo,
# ddpc, ...). All three time alike: warm-up, barrier, then each call timed
# on its own; a row's time is the median over iterations of the maximum over
# ranks, and every size's result is checked. The summary gives, per size,
# the median over rounds of each tool's time and busbw and the ratios
# ddpc/peer (time ratio: lower is better; busbw ratio: higher is better).
# Everything talks over 127.0.0.1 only. Raw tables go to $OUT (default
# build/bench/peers/).
set -eu

ROUNDS=${1:-3}
ITERS=${ITERS:-30}
SIZES=${SIZES:-"-b 8 -e 64M -f 2"}
BIN=${DDPC_BIN:-build/bin}
OUT=${OUT:-build/bench/peers}
PY=/usr/bin/python3
TIMEOUT=${TIMEOUT:-300}

mkdir -p "$OUT"
[ -x "$BIN/ddpc-bench" ] || { echo "allreduce_peers: $BIN/ddpc-bench is not built (run make)" >&2; exit 1; }
mpicc -O2 -o "$OUT/mpi_allreduce" bench/mpi_allreduce.c

# A TCP port free on 127.0.0.1 now.
free_port() {
    $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Runs "$@" as 2 ranks with torchrun's variables, rank 0's stdout to $1;
# with PIN=1, rank r runs on core r (taskset), as mpirun binds by default.
two_ranks() {
    out=$1; shift
    port=$(free_port)
    pids=
    for r in 1 0; do
        if [ $r = 0 ]; then dst=$out; else dst=$out.rank1; fi
        pin=
        [ "${PIN:-0}" = 1 ] && pin="taskset -c $r"
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$port GLOO_SOCKET_IFNAME=lo \
            timeout "$TIMEOUT" $pin "$@" > "$dst" 2>&1 &
        pids="$pids $!"
    done
    fail=0
    for pid in $pids; do wait "$pid" || fail=1; done
    if [ $fail != 0 ]; then echo "allreduce_peers: $* failed:" >&2; cat "$out" "$out.rank1" >&2; exit 1; fi
}

run_ddpc() {
    if [ -x "$BIN/ddpc-run" ]; then
        MASTER_ADDR=127.0.0.1 timeout "$TIMEOUT" "$BIN/ddpc-run" --standalone --nproc-per-node=2 \
            "$BIN/ddpc-bench" allreduce $SIZES -n "$ITERS" -w 5 -d float32 -o sum > "$1" 2>&1 ||
            { echo "allreduce_peers: ddpc-run ddpc-bench failed:" >&2; cat "$1" >&2; exit 1; }
    else
        two_ranks "$1" "$BIN/ddpc-bench" allreduce $SIZES -n "$ITERS" -w 5 -d float32 -o sum
    fi
}
run_ddpc_pinned() {
    PIN=1 two_ranks "$1" "$BIN/ddpc-bench" allreduce $SIZES -n "$ITERS" -w 5 -d float32 -o sum
}
run_mpi() {
    timeout "$TIMEOUT" mpirun --allow-run-as-root --oversubscribe -np 2 \
        --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
        "$OUT/mpi_allreduce" $SIZES -n "$ITERS" -w 5 > "$1" 2>&1
}
run_gloo() {
    two_ranks "$1" $PY bench/gloo_allreduce.py $SIZES -n "$ITERS" -w 5
}

i=1
while [ $i -le "$ROUNDS" ]; do
    for tool in ddpc ddpc_pinned mpi gloo; do
        echo "round $i/$ROUNDS: $tool" >&2
        run_$tool "$OUT/$tool.$i.txt"
    done
    i=$((i + 1))
done

$PY - "$OUT" "$ROUNDS" <<'EOF'
import statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
tools = ["ddpc", "ddpc_pinned", "mpi", "gloo"]
data = {}  # tool -> size -> [(time_us, busbw)]
for t in tools:
    for i in range(1, rounds + 1):
        for line in open(f"{out}/{t}.{i}.txt"):
            f = line.split()
            if f and f[0].startswith("[") and f[0].endswith("]:"):  # ddpc-run's "[rank]: "
                f = f[1:]
            if len(f) == 9 and f[0].isdigit():
                if f[8] != "0":
                    sys.exit(f"{t} round {i}: {f[8]} wrong values at size {f[0]}")
                data.setdefault(t, {}).setdefault(int(f[0]), []).append((float(f[5]), float(f[7])))
med = {t: {s: (statistics.median(v[0] for v in vs), statistics.median(v[1] for v in vs))
           for s, vs in data[t].items()} for t in tools}
sizes = sorted(med["ddpc"])
names = {"ddpc": "ddpc", "ddpc_pinned": "ddpc pinned", "mpi": "MPI-TCP", "gloo": "gloo"}
print(f"2 ranks, float32 sum allreduce, medians of {rounds} interleaved rounds "
      "(time us / busbw GB/s; ratios ddpc/peer: time lower is better, busbw higher is better)")
print("| size (B) | " + " | ".join(f"{names[t]} us | {names[t]} GB/s" for t in tools) +
      " | time ddpc/MPI | busbw ddpc/MPI | busbw ddpc/gloo | time pinned/MPI | busbw pinned/MPI |")
print("|---:" * (1 + 2 * len(tools) + 5) + "|")
def r(a, b):
    return f"{a / b:.2f}" if b else "-"
for s in sizes:
    if not all(s in med[t] for t in tools):
        continue
    d, p, m, g = (med[t][s] for t in tools)
    print(f"| {s} | " + " | ".join(f"{med[t][s][0]:.1f} | {med[t][s][1]:.3f}" for t in tools) +
          f" | {r(d[0], m[0])} | {r(d[1], m[1])} | {r(d[1], g[1])} | {r(p[0], m[0])} | {r(p[1], m[1])} |")
print()
for s, name in ((8, "8 B"), (1 << 20, "1 MiB"), (64 << 20, "64 MiB")):
    if all(s in med[t] for t in tools):
        d, p, m, g = (med[t][s] for t in tools)
        print(f"{name:>6}: " + " | ".join(f"{names[t]} {med[t][s][0]:.1f} us {med[t][s][1]:.3f} GB/s" for t in tools))
        print(f"{'':>6}  time ddpc/MPI {r(d[0], m[0])}, pinned/MPI {r(p[0], m[0])}; busbw ddpc/MPI {r(d[1], m[1])}, "
              f"pinned/MPI {r(p[1], m[1])}, ddpc/gloo {r(d[1], g[1])}, pinned/gloo {r(p[1], g[1])}")
EOF
