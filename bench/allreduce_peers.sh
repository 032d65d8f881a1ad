#!/bin/sh
# allreduce_peers.sh — ddpc's allreduce beside its peers, in one run.
#
#   bench/allreduce_peers.sh [ROUNDS]        (from the repository root, after `make`)
#
# 2 ranks on this machine, float32 sum allreduce, sizes 8 B .. 64 MiB (x2),
# each transport beside its like:
#   ddpc     build/bin/ddpc-bench allreduce, started by ddpc-run --standalone
#            --nproc-per-node=2 (or as 2 processes with torchrun's variables
#            when ddpc-run is not built): shared memory between the two ranks
#   mpi_sm   OpenMPI's MPI_Allreduce over its shared-memory transport:
#            mpirun --mca pml ob1 --mca btl vader,self, running bench/mpi_allreduce.c
#   ddpc_tcp the same as ddpc with DDPC_SHM=0: TCP over loopback
#   mpi_tcp  OpenMPI forced onto TCP: mpirun --mca pml ob1 --mca btl tcp,self
#   gloo     PyTorch's gloo backend (bench/gloo_allreduce.py, /usr/bin/python3),
#            TCP over loopback
# mpirun binds rank r to core r by default; so does ddpc-run (--bind-to=auto).
# Each tool runs ROUNDS times (default 3), interleaved (ddpc, mpi_sm,
# ddpc_tcp, mpi_tcp, gloo, ddpc, ...). TOOLS picks some of them, SIZES the
# sizes; the small-message sweep of issue 30 (every power of 4 from 8 B to
# 32 KiB, shared memory against OpenMPI's, plus each size's worst ratio):
#   TOOLS="ddpc mpi_sm" SIZES="-b 8 -e 32K -f 4" ITERS=2000 sh bench/allreduce_peers.sh 3
# ddpc_base runs ddpc from another build (BASE_BIN, e.g. a checkout of the
# commit before a change, built), interleaved with the others: before and
# after in one run. line (bench/shm_line.c) is the floor at 8 B: one cache
# line each way per round between CPUs 0 and 1, nothing else. All three time alike: warm-up, barrier, then each call timed
# on its own; a row's time is the median over iterations of the maximum over
# ranks, and every size's result is checked. The summary gives, per size,
# the median over rounds of each tool's time and busbw and the ratios
# ddpc/peer over the same kind of transport (time ratio: lower is better;
# busbw ratio: higher is better).
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
TOOLS=${TOOLS:-"ddpc mpi_sm ddpc_tcp mpi_tcp gloo"}

mkdir -p "$OUT"
[ -x "$BIN/ddpc-bench" ] || { echo "allreduce_peers: $BIN/ddpc-bench is not built (run make)" >&2; exit 1; }
case " $TOOLS " in *" mpi_"*) mpicc -O2 -o "$OUT/mpi_allreduce" bench/mpi_allreduce.c ;; esac
case " $TOOLS " in *" line "*) cc -O2 -o "$OUT/shm_line" bench/shm_line.c ;; esac

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
run_ddpc_tcp() { DDPC_SHM=0 run_ddpc "$1"; }
run_ddpc_base() { (BIN=${BASE_BIN:?ddpc_base needs BASE_BIN, a build of ddpc}; run_ddpc "$1"); }
mpi() {
    out=$1; shift
    timeout "$TIMEOUT" mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 "$@" \
        --mca oob_tcp_if_include lo "$OUT/mpi_allreduce" $SIZES -n "$ITERS" -w 5 > "$out" 2>&1 ||
        { echo "allreduce_peers: mpirun failed:" >&2; cat "$out" >&2; exit 1; }
}
run_mpi_sm() { mpi "$1" --mca btl vader,self; }
run_mpi_tcp() { mpi "$1" --mca btl tcp,self --mca btl_tcp_if_include lo; }
run_line() {
    timeout "$TIMEOUT" "$OUT/shm_line" -n "$((ITERS * 10))" > "$1" 2>&1 ||
        { echo "allreduce_peers: shm_line failed:" >&2; cat "$1" >&2; exit 1; }
}
run_gloo() {
    two_ranks "$1" $PY bench/gloo_allreduce.py $SIZES -n "$ITERS" -w 5
}

i=1
while [ $i -le "$ROUNDS" ]; do
    for tool in $TOOLS; do
        echo "round $i/$ROUNDS: $tool" >&2
        run_$tool "$OUT/$tool.$i.txt"
    done
    i=$((i + 1))
done

$PY - "$OUT" "$ROUNDS" $TOOLS <<'EOF'
import statistics, sys
out, rounds, tools = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
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
sizes = sorted(med[tools[0]])
names = {"ddpc": "ddpc shm", "mpi_sm": "MPI shm", "ddpc_tcp": "ddpc TCP", "mpi_tcp": "MPI TCP",
         "gloo": "gloo", "ddpc_base": "base shm", "line": "line floor"}
pairs = [(a, b) for a, b in (("ddpc", "mpi_sm"), ("ddpc_base", "mpi_sm"), ("ddpc", "ddpc_base"),
                             ("ddpc", "line"), ("mpi_sm", "line"),
                             ("ddpc_tcp", "mpi_tcp"), ("ddpc_tcp", "gloo"))
         if a in tools and b in tools]
def us(t):
    return f"{t:.2f}" if t < 10 else f"{t:.1f}"
def r(a, b):
    return f"{a / b:.2f}" if b else "-"
print(f"2 ranks, float32 sum allreduce, medians of {rounds} interleaved rounds "
      "(time us / busbw GB/s; ratios ddpc/peer: time lower is better, busbw higher is better)")
print("| size (B) | " + " | ".join(f"{names[t]} us | {names[t]} GB/s" for t in tools) + " | " +
      " | ".join(f"time {names[a]}/{names[b]} | busbw {names[a]}/{names[b]}" for a, b in pairs) + " |")
print("|---:" * (1 + 2 * len(tools) + 2 * len(pairs)) + "|")
def cell(t, s):
    return f"{us(med[t][s][0])} | {med[t][s][1]:.3f}" if s in med[t] else "- | -"
def ratios(a, b, s):
    if s not in med[a] or s not in med[b]:
        return "- | -"
    return f"{r(med[a][s][0], med[b][s][0])} | {r(med[a][s][1], med[b][s][1])}"
for s in sizes:
    print(f"| {s} | " + " | ".join(cell(t, s) for t in tools) + " | " +
          " | ".join(ratios(a, b, s) for a, b in pairs) + " |")
print()
for a, b in pairs:  # each round's ratio, so one slow round shows
    both = [s for s in sizes if s in med[a] and s in med[b]]
    worst = max((max(x[0] for x in data[a][s]) / min(x[0] for x in data[b][s]), s) for s in both)
    over = [s for s in both if med[a][s][0] > med[b][s][0]]
    print(f"time {names[a]}/{names[b]}: sizes where the median is above the peer's: "
          f"{', '.join(map(str, over)) or 'none'}; the widest spread (slowest {names[a]} round "
          f"over fastest {names[b]} round) {worst[0]:.2f} at {worst[1]} B")
for s, name in ((8, "8 B"), (1 << 20, "1 MiB"), (64 << 20, "64 MiB")):
    if all(s in med[t] for t in tools):
        print(f"{name:>6}: " + " | ".join(f"{names[t]} {us(med[t][s][0])} us {med[t][s][1]:.3f} GB/s" for t in tools))
        print(f"{'':>6}  " + ", ".join(f"{names[a]}/{names[b]}: time {r(med[a][s][0], med[b][s][0])}, "
                                      f"busbw {r(med[a][s][1], med[b][s][1])}" for a, b in pairs))
EOF
