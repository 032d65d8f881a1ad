#!/usr/bin/env bash
# bootstrap.sh — how long N ranks on this machine take to create a
# communicator, with connections made on first use (DDPC_LAZY_CONNECT=1,
# the default) beside every pair at creation (=0), in interleaved runs.
#
#   bash bench/bootstrap.sh            # 64 ranks, 5 runs of each mode
#   N=32 RUNS=9 bash bench/bootstrap.sh
#
# Each run is `ddpc-run --standalone --nproc-per-node=N ddpc-bench
# bootstrap`: ready = from the first rank entering ddpc_comm_create_env to
# the last one leaving it (process start-up included); then the first
# allreduce, broadcast and barrier (where lazy connections are made) and the
# descriptors each rank holds after them. Prints one line per run and the
# medians per mode. Target (issue 19): 64 ranks ready in under 2 s.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-64}
RUNS=${RUNS:-5}
make -s -j2 build/bin/ddpc-run build/bin/ddpc-bench >/dev/null
out=$(mktemp /tmp/bootstrap.XXXXXX)
trap 'rm -f "$out"' EXIT
for ((i = 1; i <= RUNS; i++)); do
  for lazy in 1 0; do
    if ! DDPC_LAZY_CONNECT=$lazy timeout 300 build/bin/ddpc-run --standalone \
        --nproc-per-node="$N" build/bin/ddpc-bench bootstrap >"$out.run" 2>&1; then
      echo "bootstrap: run $i (DDPC_LAZY_CONNECT=$lazy) failed:" >&2
      tail -5 "$out.run" >&2
      rm -f "$out.run"
      exit 1
    fi
    ready=$(sed -n 's/.*ready in \([0-9.]*\) s.*/\1/p' "$out.run")
    calls=$(sed -n 's/.*allreduce \([0-9.]*\) ms, broadcast \([0-9.]*\) ms, barrier \([0-9.]*\) ms.*/\1 \2 \3/p' "$out.run")
    fds=$(sed -n 's/.*: \([0-9]*-[0-9]*\) descriptors open, \([0-9]*-[0-9]*\) of them sockets.*/\1 \2/p' "$out.run")
    echo "$lazy $ready $calls $fds" >>"$out"
    printf 'run %d  DDPC_LAZY_CONNECT=%d  ready %s s  first allreduce/broadcast/barrier %s ms  fds %s\n' \
      "$i" "$lazy" "$ready" "$(echo "$calls" | tr ' ' '/')" "$fds"
  done
done
rm -f "$out.run"
python3 - "$out" "$N" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
n = sys.argv[2]
for lazy in ("1", "0"):
    r = [x for x in rows if x[0] == lazy]
    med = lambda k: statistics.median(float(x[k]) for x in r)
    print(f"{n} ranks, DDPC_LAZY_CONNECT={lazy}: ready {med(1):.3f} s (median of {len(r)}); "
          f"first allreduce {med(2):.1f} ms, broadcast {med(3):.1f} ms, barrier {med(4):.1f} ms; "
          f"descriptors per rank {r[-1][5]}, sockets {r[-1][6]}")
lazy = statistics.median(float(x[1]) for x in rows if x[0] == "1")
print(f"target: {n} ranks ready in under 2 s with the default: {'met' if lazy < 2 else 'MISSED'}")
EOF
