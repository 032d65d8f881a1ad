#!/bin/sh
# collective_peers.sh — ddpc's allreduce, broadcast, reduce-scatter and
# allgather beside OpenMPI's on one host, and a copy benchmark, in one run.
#
#   bench/collective_peers.sh [ROUNDS]       (from the repository root, after `make`)
#
# For each case COLLECTIVE:RANKS of CASES (default every collective at 2 and
# 4 ranks, and allreduce at 8: on this 2-CPU machine 4 and 8 ranks are
# oversubscribed), float32 (sum where it reduces), at every power of 4 from
# 8 B to 32 MiB (nccl-tests' sizes: the whole send buffer of
# reduce-scatter, the whole receive buffer of allgather; at 4 and 8 ranks
# their 8 B row moves no element):
#   ddpc  build/bin/ddpc-bench COLLECTIVE under ddpc-run --standalone
#         (shared memory between the ranks; ddpc-run binds each rank to a
#         CPU of its own where they do not outnumber the CPUs); broadcast
#         in place (-I 1), since MPI_Bcast has one buffer
#   mpi   bench/mpi_allreduce.c COLLECTIVE under mpirun --mca pml ob1
#         --mca btl vader,self (OpenMPI's shared memory, its default
#         algorithms; mpirun binds rank r to core r at 2 ranks, and does not
#         bind oversubscribed ranks)
#   base  (only where BASE_BIN names another build's bin/, e.g. of the
#         commit before a change) ddpc-bench and ddpc-run from there: before
#         and after in the same rounds
# FRESH=1 has both write every cache line of their input before each
# timed call, untimed (-F 1), as a training step leaves the data it
# wrote; by default a call finds the buffer the previous one left, clean,
# which favours a peer that reads it in place (OpenMPI's single copy).
# Sizes up to 32 KiB run ITERS_SMALL timed calls (default 1000), the larger
# ones ITERS_LARGE (default 20), each after 5 warm-up calls; a row's time is
# the median over calls of the maximum over ranks, every size's result is
# checked. Each round runs every case, ddpc then OpenMPI, then the copy
# benchmark (bench/shm_copy.c at COPY_BYTES, default 32 MiB: two processes
# each copy their own buffer into a shared region at once, then read the
# other's region out), so the copy rate and the collectives share the
# round's load. The summary gives per case and size the median over rounds
# of each one's time and the ratio ddpc/OpenMPI (lower is better), then, from
# 1 MiB up, allreduce's figure of merit: the bytes the traffic model of
# docs/BENCHMARKS.md ("Memory traffic at 32 MiB") says a call must move
# through memory, over its time, against the copy rate (bytes read plus bytes written a second, both
# processes together). Raw tables go to $OUT (default build/bench/coll/).
set -eu

ROUNDS=${1:-3}
CASES=${CASES:-"allreduce:2 broadcast:2 reduce-scatter:2 allgather:2 allreduce:4 broadcast:4 reduce-scatter:4 allgather:4 allreduce:8"}
ITERS_SMALL=${ITERS_SMALL:-1000}
FRESH=${FRESH:-0}
ITERS_LARGE=${ITERS_LARGE:-20}
COPY_BYTES=${COPY_BYTES:-33554432}
BIN=${DDPC_BIN:-build/bin}
OUT=${OUT:-build/bench/coll}
TIMEOUT=${TIMEOUT:-600}
PY=/usr/bin/python3
TOOLS="ddpc${BASE_BIN:+ base} mpi"

mkdir -p "$OUT"
[ -x "$BIN/ddpc-bench" ] && [ -x "$BIN/ddpc-run" ] ||
    { echo "collective_peers: $BIN/ddpc-bench or ddpc-run is not built (run make)" >&2; exit 1; }
mpicc -O2 -o "$OUT/mpi_allreduce" bench/mpi_allreduce.c
cc -O2 -o "$OUT/shm_copy" bench/shm_copy.c

# run_ddpc OUTFILE COLLECTIVE RANKS ITERS SIZES...
run_ddpc() {
    out=$1 coll=$2 np=$3 it=$4; shift 4
    # broadcast in place, as MPI_Bcast's one buffer (a build without -I: out of place)
    if [ "$coll" = broadcast ] && "$BIN/ddpc-bench" --help | grep -q -- '-I 0|1'; then
        set -- "$@" -I 1
    fi
    MASTER_ADDR=127.0.0.1 timeout "$TIMEOUT" "$BIN/ddpc-run" --standalone --nproc-per-node="$np" \
        "$BIN/ddpc-bench" "$coll" "$@" -n "$it" -w 5 -d float32 -o sum -F "$FRESH" > "$out" 2>&1 ||
        { echo "collective_peers: ddpc-bench $coll at $np ranks failed:" >&2; cat "$out" >&2; exit 1; }
}
run_base() { (BIN=$BASE_BIN; run_ddpc "$@"); }
run_mpi() {
    out=$1 coll=$2 np=$3 it=$4; shift 4
    timeout "$TIMEOUT" mpirun --allow-run-as-root --oversubscribe -np "$np" --mca pml ob1 \
        --mca btl vader,self --mca oob_tcp_if_include lo \
        "$OUT/mpi_allreduce" "$coll" "$@" -n "$it" -w 5 -F "$FRESH" > "$out" 2>&1 ||
        { echo "collective_peers: mpirun $coll at $np ranks failed:" >&2; cat "$out" >&2; exit 1; }
}

i=1
while [ "$i" -le "$ROUNDS" ]; do
    echo "round $i/$ROUNDS: $(uptime)" >&2
    uptime > "$OUT/load.$i.txt"
    for case in $CASES; do
        coll=${case%:*} np=${case#*:}
        for tool in $TOOLS; do
            run_$tool "$OUT/$tool.$coll.$np.small.$i.txt" "$coll" "$np" "$ITERS_SMALL" -b 8 -e 32K -f 4
            run_$tool "$OUT/$tool.$coll.$np.large.$i.txt" "$coll" "$np" "$ITERS_LARGE" -b 128K -e 32M -f 4
        done
    done
    timeout "$TIMEOUT" "$OUT/shm_copy" "$COPY_BYTES" 1 0 > "$OUT/copy.$i.txt" 2>&1 ||
        { echo "collective_peers: shm_copy failed:" >&2; cat "$OUT/copy.$i.txt" >&2; exit 1; }
    uptime >> "$OUT/load.$i.txt"
    i=$((i + 1))
done

FRESH=$FRESH $PY - "$OUT" "$ROUNDS" "$COPY_BYTES" "$TOOLS" $CASES <<'EOF'
import os, statistics, sys
out, rounds, copy_bytes, tools, cases = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                        sys.argv[4].split(), sys.argv[5:])
def table(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if f and f[0].startswith("[") and f[0].endswith("]:"):  # ddpc-run's "[rank]: "
            f = f[1:]
        if len(f) == 9 and f[0].isdigit():
            if f[8] not in ("0", "N/A"):
                sys.exit(f"{path}: {f[8]} wrong values at size {f[0]}")
            rows[int(f[0])] = float(f[5])
    return rows
med = {}  # (case, tool) -> size -> median time (us)
spread = {}
for case in cases:
    coll, np = case.split(":")
    for tool in tools:
        per = {}
        for i in range(1, rounds + 1):
            for part in ("small", "large"):
                for s, t in table(f"{out}/{tool}.{coll}.{np}.{part}.{i}.txt").items():
                    per.setdefault(s, []).append(t)
        med[case, tool] = {s: statistics.median(v) for s, v in per.items()}
        spread[case, tool] = per
# The copy rate: rank 0's medians of writing its buffer into the shared region
# (both processes at once) and of reading the other's region out.
copy = []
for i in range(1, rounds + 1):
    for line in open(f"{out}/copy.{i}.txt"):
        if line.startswith("round"):
            f = line.replace("|", " ").split()
            w, r = float(f[4]), float(f[6])  # cached write us, read us
            copy.append(2 * 2 * copy_bytes / ((w + r) / 2) / 1e3)  # GB/s, 2 processes, read+write
loads = [open(f"{out}/load.{i}.txt").read().split("load average:")[1].split(",")[0].strip()
         for i in range(1, rounds + 1)]
fresh = os.environ.get("FRESH", "0") == "1"
print(f"medians of {rounds} interleaved rounds; load average at each round's start: {', '.join(loads)}; "
      + ("inputs written before each call (FRESH=1)" if fresh else "inputs reused, as the last call left them"))
def us(t):
    return f"{t:.2f}" if t < 10 else f"{t:.1f}" if t < 1000 else f"{t:.0f}"
def sz(s):
    return f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB" if s >= 1024 else f"{s} B"
names = {"ddpc": "ddpc", "base": "base", "mpi": "OpenMPI"}
for case in cases:
    d, m = med[case, "ddpc"], med[case, "mpi"]
    sizes = sorted(s for s in set(d) & set(m) if s)  # a row of 0 bytes moves nothing
    coll, np = case.split(":")
    print(f"\n{coll}, {np} ranks: time us, medians; ratios to OpenMPI (lower is better)")
    print("| size | " + " | ".join(sz(s) for s in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    for t in tools:
        print(f"| {names[t]} us | " + " | ".join(us(med[case, t][s]) for s in sizes) + " |")
    for t in tools:
        if t == "mpi":
            continue
        x = med[case, t]
        print(f"| {names[t]}/OpenMPI | " + " | ".join(
            (f"**{x[s] / m[s]:.2f}**" if x[s] > m[s] else f"{x[s] / m[s]:.2f}") if m[s] else "-"
            for s in sizes) + " |")
    over = [sz(s) for s in sizes if d[s] > m[s]]
    print(f"ddpc slower than OpenMPI at: {', '.join(over) or 'none'}")
print(f"\ncopy rate (bench/shm_copy.c, {sz(copy_bytes)} each way, 2 processes at once, bytes read "
      f"+ written a second): {' '.join(f'{c:.1f}' for c in copy)} GB/s, median "
      f"{statistics.median(copy):.1f}")
cr = statistics.median(copy)
# Traffic model (docs/BENCHMARKS.md, "Memory traffic at 32 MiB"): an
# allreduce of S bytes on n ranks must at least read each rank's input and
# write each rank's output, 2nS bytes; the copy benchmark moves 2B per
# process for a buffer of B. At 2 ranks the figure is t(copy of S, both
# processes at once) / t(allreduce of S). Where the 2n buffers fit in the
# last-level cache (up to 8 MiB on a 32 MiB L3) it can pass 100%.
for case in cases:
    coll, np = case.split(":")
    if coll != "allreduce":
        continue
    n = int(np)
    for tool in tools:
        name = names[tool]
        cells = []
        for s in sorted(med[case, tool]):
            if s >= 1 << 20:
                gbs = 2 * n * s / med[case, tool][s] / 1e3
                cells.append(f"{sz(s)} {gbs:.1f} GB/s = {100 * gbs / cr:.0f}%")
        print(f"allreduce {n} ranks, {name}: model bytes / time against the copy rate: "
              + "; ".join(cells))
EOF
