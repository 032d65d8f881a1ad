#!/bin/sh
# wait_coloc.sh — what a waiting rank's polling costs, in the two places the
# scheduler (or a hypervisor) may put two ranks: on two CPUs, and both on one.
#
#   bench/wait_coloc.sh [ROUNDS]        (from the repository root, after `make`)
#
# 2 ranks, 8-byte float32 allreduce over shared memory, ddpc-bench under
# ddpc-run, median time per call:
#   apart     the ranks where the scheduler puts them (this host: 2 CPUs);
#   together  both ranks moved onto CPU 0 with taskset once they have started
#             (they chose their wait when they saw 2 CPUs, as ranks do that a
#             hypervisor later stacks on one core).
# A waiting rank first polls without yielding (DDPC_SPIN_US in the README); a
# rank that does not yield keeps a peer that shares its CPU from running, so
# "together" shows what that polling costs where it cannot help.
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
[ -x build/bin/ddpc-bench ] && [ -x build/bin/ddpc-run ] || { echo "wait_coloc: run make first"; exit 1; }
command -v taskset >/dev/null || { echo "wait_coloc: taskset (util-linux) is needed"; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "wait_coloc: needs 2 CPUs"; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# run ITERS WARMUP MOVE -> the median time (us) ddpc-bench printed
run() {
  timeout 120 build/bin/ddpc-run --nproc-per-node=2 --standalone build/bin/ddpc-bench allreduce \
    -b 8 -e 8 -n "$1" -w "$2" -c 0 >"$out" 2>&1 &
  pid=$!
  if [ "$3" = 1 ]; then
    sleep 0.15
    for p in $(pgrep -f "build/bin/ddpc-bench allreduce -b 8 -e 8 -n $1"); do
      taskset -a -p -c 0 "$p" >/dev/null 2>&1 || true
    done
  fi
  wait "$pid" || { echo "wait_coloc: the run failed:"; cat "$out"; exit 1; }
  grep -v '#' "$out" | grep -v 'ddpc-run' | tail -n 1 | awk '{print $7}'
}

echo "# $(date -u +%FT%TZ) 8-byte allreduce, 2 ranks, shared memory: median us per call"
for r in $(seq 1 "$ROUNDS"); do
  a=$(run 200000 20000 0)
  t=$(run 3000000 300000 1)
  echo "round $r: apart $a us, together on CPU 0 $t us"
done
