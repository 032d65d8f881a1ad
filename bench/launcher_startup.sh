#!/usr/bin/env bash
# launcher_startup.sh — what a launcher costs per job and per restart: the wall
# time of starting two workers that do nothing (`true`), ddpc-run beside
# OpenMPI's mpirun, measured in one run with hyperfine (medians).
#
#   bench/launcher_startup.sh            # 30 runs each (RUNS=N to change)
#
# Prints hyperfine's table, then one line per launcher with its median and
# ddpc-run's ratio against mpirun. Target (issue 3): ddpc-run <= 50 ms.
# torchrun is not measured: Debian 12's (python3-torch 1.13.1 on Python 3.11)
# fails before starting any worker.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-30}
make -s -j2 build/bin/ddpc-run >/dev/null
RUN=$PWD/build/bin/ddpc-run
command -v hyperfine >/dev/null || { echo "launcher_startup: needs hyperfine (apt-get install hyperfine)" >&2; exit 1; }
cmds=("$RUN --standalone --nproc-per-node=2 true")
names=("ddpc-run")
if command -v mpirun >/dev/null; then
  cmds+=("mpirun -np 2 --oversubscribe --allow-run-as-root true")
  names+=("mpirun")
fi
json=$(mktemp /tmp/launcher_startup.XXXXXX.json)
trap 'rm -f "$json"' EXIT
hyperfine -N --warmup 3 --runs "$RUNS" --export-json "$json" "${cmds[@]}"
python3 - "$json" "${names[@]}" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
names = sys.argv[2:]
med = [r["median"] * 1000 for r in res]
for n, m in zip(names, med):
    print(f"{n:10s} median {m:8.2f} ms")
if len(med) > 1:
    print(f"ddpc-run / mpirun = {med[0] / med[1]:.3f}  (mpirun takes {med[1] / med[0]:.1f}x as long)")
print(f"ddpc-run target <= 50 ms: {'met' if med[0] <= 50 else 'MISSED'}")
EOF
