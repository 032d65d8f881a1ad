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

# Runs "$@" as 2 ranks with torchrun's variables, rank 0's stdout to $1.
two_ranks() {
    out=$1; shift
    port=$(free_port)
    pids=
    for r in 1 0; do
        if [ $r = 0 ]; then dst=$out; else dst=$out.rank1; fi
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$port GLOO_SOCKET_IFNAME=lo \
            timeout "$TIMEOUT" "$@" > "$dst" 2>&1 &
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
    for tool in ddpc mpi gloo; do
        echo "round $i/$ROUNDS: $tool" >&2
        run_$tool "$OUT/$tool.$i.txt"
    done
    i=$((i + 1))
done

$PY - "$OUT" "$ROUNDS" <<'EOF'
import statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
tools = ["ddpc", "mpi", "gloo"]
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
print(f"2 ranks, float32 sum allreduce, medians of {rounds} interleaved rounds")
print("| size (B) | ddpc us | ddpc GB/s | MPI-TCP us | MPI-TCP GB/s | gloo us | gloo GB/s "
      "| time ddpc/MPI | busbw ddpc/MPI | time ddpc/gloo | busbw ddpc/gloo |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for s in sizes:
    d, m, g = med["ddpc"][s], med["mpi"].get(s), med["gloo"].get(s)
    if not m or not g:
        continue
    def r(a, b):
        return f"{a / b:.2f}" if b else "-"
    print(f"| {s} | {d[0]:.1f} | {d[1]:.3f} | {m[0]:.1f} | {m[1]:.3f} | {g[0]:.1f} | {g[1]:.3f} "
          f"| {r(d[0], m[0])} | {r(d[1], m[1])} | {r(d[0], g[0])} | {r(d[1], g[1])} |")
print()
for s, name in ((8, "8 B"), (1 << 20, "1 MiB"), (64 << 20, "64 MiB")):
    if s in med["ddpc"] and s in med["mpi"] and s in med["gloo"]:
        d, m, g = med["ddpc"][s], med["mpi"][s], med["gloo"][s]
        print(f"{name:>6}: ddpc {d[0]:9.1f} us {d[1]:7.3f} GB/s | MPI-TCP {m[0]:9.1f} us {m[1]:7.3f} GB/s"
              f" | gloo {g[0]:9.1f} us {g[1]:7.3f} GB/s | time ddpc/MPI {d[0] / m[0]:.2f}"
              f" busbw ddpc/MPI {d[1] / m[1] if m[1] else 0:.2f} busbw ddpc/gloo {d[1] / g[1] if g[1] else 0:.2f}")
EOF
