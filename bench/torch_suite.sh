#!/bin/bash
# bench/torch_suite.sh — PyTorch's own distributed test suite on gloo and on
# ddpc, side by side, at world sizes 2 and 3 (tests/py/dist_suite.py).
#
#   bash bench/torch_suite.sh [--out DIR] [--worlds "2 3"] [--backends "gloo ddpc"]
#                             [--python PY] [dist_suite.py options: --subset ci, -k PATTERN, ...]
#
# --python: the Python whose torch (and its suite) is tested: Debian's
# /usr/bin/python3 with torch 1.13 (the default), or a venv's with torch
# 2.13 and ddpc_torch installed (build/venv-torch2/bin/python, make torch2).
# Runs one suite at a time (each test already takes world size + 1 processes),
# keeps every run's JSON and chunk logs under DIR (default
# /tmp/torch_suite.<date>), then prints a markdown table of ok / failed /
# skipped per backend and world size, and the tests that pass on gloo but not
# on ddpc. ddpc is left out (and said so) when ddpc_torch does not import
# (make torch; PYTHONPATH defaults to this checkout's build/python).
# The whole suite takes 20-30 minutes per backend and world size on 2 cores
# (1.13, gloo: 20 min at world size 2, 23 at 3); --subset ci 2-7 minutes, by
# load; torch 2.13 is slower (a rank imports it in 4-10 s on a loaded machine).
# See docs/torch_suite.md.
set -u
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
OUT=/tmp/torch_suite.$(date +%Y%m%d-%H%M%S)
WORLDS="2 3"
BACKENDS="gloo ddpc"
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT=$2; shift 2 ;;
        --worlds) WORLDS=$2; shift 2 ;;
        --backends) BACKENDS=$2; shift 2 ;;
        --python) PY=$2; shift 2 ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) ARGS+=("$1"); shift ;;
    esac
done
# Debian's torch 1.13 finds ddpc_torch in build/python; a venv's torch 2.x
# autoloads the one installed there (build/python's, built for 1.13, must
# not come first on its path)
[ "$PY" = /usr/bin/python3 ] && export PYTHONPATH=${PYTHONPATH:-$PWD/build/python}
mkdir -p "$OUT"
jsons=()
for backend in $BACKENDS; do
    if [ "$backend" = ddpc ] && ! $PY -c "import ddpc_torch" >/dev/null 2>&1; then
        echo "torch_suite: ddpc left out: ddpc_torch does not import with $PY (PYTHONPATH=${PYTHONPATH:-}; make torch or torch2)"
        continue
    fi
    for world in $WORLDS; do
        name=${backend}_w${world}
        echo "torch_suite: $backend, world size $world (log: $OUT/$name.out)"
        start=$(date +%s)
        # dist_suite bounds every chunk and test itself; exit 1 only says a test failed
        $PY tests/py/dist_suite.py --backend "$backend" --world-size "$world" "${ARGS[@]}" \
            --json "$OUT/$name.json" --log-dir "$OUT/${name}_logs" > "$OUT/$name.out" 2>&1
        rc=$?
        echo "torch_suite: $backend, world size $world: $(tail -n 1 "$OUT/$name.out") ($(( $(date +%s) - start )) s, rc=$rc)"
        [ -f "$OUT/$name.json" ] && jsons+=("$OUT/$name.json")
    done
done
[ ${#jsons[@]} -gt 0 ] || { echo "torch_suite: no run produced results; see $OUT"; exit 1; }
echo
$PY tests/py/dist_suite.py --table "${jsons[@]}" | tee "$OUT/table.md"
echo
echo "torch_suite: results in $OUT"
