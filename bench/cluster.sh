#!/bin/sh
# cluster.sh — an emulated cluster on this machine: ddpc's flat and
# hierarchical collectives beside OpenMPI and gloo, across "hosts" joined by
# links with a real rate limit.
#
#   bench/cluster.sh [ROUNDS]        (as root, from the repository root, after `make`)
#
# The hosts are bench/cluster_lib.sh's: network namespaces on a bridge in
# 198.18.0.0/24, every link shaped in both directions with tc tbf to RATE
# (default 1gbit; rate only, this kernel has no netem). One topology of
# max(LAYOUTS) hosts serves every layout (default "2x2 4x2": hosts x ranks
# per host, on the first hosts). Per layout, size (8 B, 1 MiB, 64 MiB;
# SIZES=) and round (ROUNDS, default 3), float32 sum COLL (default
# allreduce), ITERS timed calls (default 10) after 2 warm-ups, each of
# TOOLS (default "flat hier mpi gloo"), interleaved:
#   flat, hier  build/bin/ddpc-bench under DDPC_ALGO=flat / hier (ranks of a
#               host share memory, hosts talk TCP)
#   mpi         OpenMPI's MPI_Allreduce (bench/mpi_allreduce.c) over TCP
#               (--mca btl tcp,self), one orted per namespace started by
#               mpirun as on a real cluster (cl_mpirun; allreduce only)
#   gloo        torch.distributed on gloo (bench/gloo_allreduce.py,
#               /usr/bin/python3), GLOO_SOCKET_IFNAME=eth0 (allreduce only)
#   s<N>        ddpc-bench with DDPC_SOCKETS_PER_PEER=N, algorithm auto
#               (bench/streams.sh)
# A peer's run that fails or passes TIMEOUT (default 1500 s) is kept as
# FILE.failed and shows as "-"; ddpc's failing stops the script.
# Every tool prints nccl-tests' table (time: median over iterations of the
# maximum over ranks; busbw = algbw * 2(n-1)/n) and checks its results.
# Prints per layout and size the median over rounds of each tool's time and
# bus bandwidth, hier's busbw as a share of the link rate, and hier's
# speed-up over flat, mpi and gloo (their time / hier's); then the same for
# each tool's fastest round (on a loaded machine, the least disturbed). Raw tables go to
# $OUT (default build/bench/cluster/); with RESUME=1 a run whose table is
# already there (from an interrupted run of the same settings) is not run
# again; SUMMARY=1 only prints the summary of the tables there (a run that
# did not finish shows as "-"). Without root it says so and exits 0.
set -eu

ROUNDS=${1:-3}
LAYOUTS=${LAYOUTS:-"2x2 4x2"}
SIZES=${SIZES:-"8 1M 64M"}
TOOLS=${TOOLS:-"flat hier mpi gloo"}
COLL=${COLL:-allreduce}
ITERS=${ITERS:-10}
OUT=${OUT:-build/bench/cluster}
TIMEOUT=${TIMEOUT:-1500} # gloo's 64 MiB on 4 x 2 took over 20 minutes at load 40
PY=/usr/bin/python3
HOSTS=0
for lay in $LAYOUTS; do [ "${lay%x*}" -gt $HOSTS ] && HOSTS=${lay%x*}; done
. bench/cluster_lib.sh

[ -x "$BIN/ddpc-bench" ] || { echo "cluster.sh: $BIN/ddpc-bench is not built (run make)" >&2; exit 1; }
case " $TOOLS " in
*" mpi "* | *" gloo "*)
    [ "$COLL" = allreduce ] || { echo "cluster.sh: mpi and gloo run allreduce only (TOOLS=\"flat hier\" for $COLL)" >&2; exit 2; }
    ;;
esac
mkdir -p "$OUT"
case " $TOOLS " in *" mpi "*)
    command -v mpicc > /dev/null || { echo "cluster.sh: no mpicc (DDPC_SETUP_PEERS=1 bash scripts/setup.sh)" >&2; exit 1; }
    mpicc -O2 -o "$OUT/mpi_allreduce" bench/mpi_allreduce.c ;;
esac
case " $TOOLS " in *" gloo "*)
    $PY -c 'import torch' 2> /dev/null || { echo "cluster.sh: $PY has no torch (DDPC_SETUP_PEERS=1 bash scripts/setup.sh)" >&2; exit 1; } ;;
esac
if [ "${SUMMARY:-0}" = 1 ]; then
    ROUNDS_RUN=0
else
    ROUNDS_RUN=$ROUNDS
    [ "${RESUME:-0}" = 1 ] || rm -f "$OUT"/*.txt
    cl_up
fi
[ "$ROUNDS_RUN" = 0 ] ||
    echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2> /dev/null || echo '?')" >> "$OUT/info.txt"

# run TOOL H R SIZE FILE
run() {
    tool=$1 h_n=$2 r_n=$3 size=$4 file=$5
    args="-b $size -e $size -n $ITERS -w 2"
    case $tool in
    flat | hier) cl_run "$file" "$h_n" "$r_n" env DDPC_ALGO=$tool "$BIN/ddpc-bench" "$COLL" $args -d float32 -o sum ;;
    s[0-9]*) cl_run "$file" "$h_n" "$r_n" env DDPC_SOCKETS_PER_PEER="${tool#s}" "$BIN/ddpc-bench" "$COLL" $args -d float32 -o sum ;;
    mpi) CL_SOFT=1 cl_mpirun "$file" "$h_n" "$r_n" "$OUT/mpi_allreduce" $args || true ;;
    gloo) CL_SOFT=1 cl_run "$file" "$h_n" "$r_n" env OMP_NUM_THREADS=1 $PY bench/gloo_allreduce.py $args || true ;;
    *) echo "cluster.sh: unknown tool $tool (flat, hier, mpi, gloo)" >&2; exit 2 ;;
    esac
}

i=1
while [ $i -le "$ROUNDS_RUN" ]; do
    for lay in $LAYOUTS; do
        for size in $SIZES; do
            for tool in $TOOLS; do
                f=$OUT/$lay.$tool.$size.$i.txt
                if [ "${RESUME:-0}" = 1 ] && { grep -q '^ *[0-9]' "$f" 2> /dev/null || [ -e "$f.failed" ]; }; then continue; fi
                echo "round $i/$ROUNDS: $lay $tool $size" >&2
                run "$tool" "${lay%x*}" "${lay#*x}" "$size" "$OUT/$lay.$tool.$size.$i.txt"
            done
        done
    done
    i=$((i + 1))
done

[ "$ROUNDS_RUN" = 0 ] || echo "# $(date -u +%FT%TZ) done, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/info.txt"
cat "$OUT/info.txt"
$PY - "$OUT" "$ROUNDS" "$LAYOUTS" "$SIZES" "$TOOLS" "$RATE" "$COLL" <<'EOF'
import re, statistics, sys
out, rounds, layouts, sizes, tools, rate, coll = sys.argv[1:8]
rounds, layouts, sizes, tools = int(rounds), layouts.split(), sizes.split(), tools.split()
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate.lower())
link = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8e9 if m else 0  # GB/s
def rows_of(lay, tool, size):
    rows = []
    for i in range(1, rounds + 1):
        try:
            lines = open(f"{out}/{lay}.{tool}.{size}.{i}.txt").readlines()
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) == 9 and f[0].isdigit():
                if f[8] != "0":
                    sys.exit(f"{lay} {tool} {size} round {i}: {f[8]} wrong values")
                rows.append((float(f[5]), float(f[7])))
    return rows
def med(lay, tool, size):
    rows = rows_of(lay, tool, size)
    if not rows:
        return None
    return statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
def best(lay, tool, size):
    rows = rows_of(lay, tool, size)
    return min(rows) if rows else None
names = {"flat": "ddpc flat", "hier": "ddpc hier", "mpi": "OpenMPI TCP", "gloo": "gloo"}
names.update({t: f"ddpc {t[1:]} per peer" for t in tools if re.fullmatch(r"s[0-9]+", t)})
def fmt_t(us):
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} us"
def table(stat, what):
    print(f"links {rate} (tbf, each way), float32 sum {coll}, {what} of {rounds} interleaved "
          "rounds (each round: the median over iterations)" +
          ("; speed-up = the other's time / hier's" if "hier" in tools else ""))
    print("| layout | size | " + " | ".join(f"{names[t]} time, busbw" for t in tools) +
          (" | hier busbw / link" if "hier" in tools and link else "") +
          "".join(f" | hier vs {names[t]}" for t in tools if t != "hier" and "hier" in tools) + " |")
    print("|---|---:|" + "---:|" * (len(tools) + ("hier" in tools and bool(link)) +
                                    (len(tools) - 1 if "hier" in tools else 0)))
    for lay in layouts:
        for size in sizes:
            r = {t: stat(lay, t, size) for t in tools}
            label = size[:-1] + " " + size[-1] + "iB" if size[-1] in "KMG" else size + " B"
            row = f"| {lay.replace('x', ' x ')} | {label} | "
            row += " | ".join(f"{fmt_t(r[t][0])}, {r[t][1]:.3f} GB/s" if r[t] else "-" for t in tools)
            if "hier" in tools:
                h = r["hier"]
                if link:
                    row += f" | {100 * h[1] / link:.0f}%" if h else " | -"
                row += "".join(f" | {r[t][0] / h[0]:.2f}x" if h and r[t] else " | -"
                               for t in tools if t != "hier")
            print(row + " |")
table(med, "medians")
print()
table(best, "the fastest")
EOF
