#!/bin/bash
# tuner_choices.sh BUILD OUT — the tuner's choices, for comparing two builds:
# builds bench/tuner_probe.c against BUILD/libddpc.a, runs it on 6 layouts
# (DDPC_HOST_ID per rank) under each DDPC_ALGO and two HCCL_ALGO values, and
# writes every operation's algorithm (flight records) and the COLL log's
# choices (the cost model's), timings removed, to OUT. Then: diff OUT1 OUT2.
set -u
B=$(cd "$1" && pwd); OUT=$2; ROOT=$(cd "$(dirname "$0")/.." && pwd)
P=$(mktemp); trap 'rm -f $P' EXIT
cc -std=c11 -D_GNU_SOURCE -O1 -I"$ROOT/include" -I"$ROOT/src" "$ROOT/bench/tuner_probe.c" "$B/libddpc.a" \
  $(pkg-config --libs libcjson 2>/dev/null) -lm -lpthread -lrt -o "$P" || exit 1
: > "$OUT"
one() { # label nproc ranks-per-host, then env assignments
  local label=$1 np=$2 ph=$3; shift 3
  local d; d=$(mktemp -d)
  env "$@" DDPC_TRACE_DIR="$d" DDPC_DEBUG=TRACE DDPC_DEBUG_SUBSYS=COLL timeout 300 \
    "$B/bin/ddpc-run" --standalone --nproc-per-node="$np" \
    bash -c "DDPC_HOST_ID=h\$((LOCAL_RANK/$ph)) exec $P" 2>&1 | grep "\[COLL\]" | grep -v " start$\|flight recorder" \
    | sed -E 's/^\[[0-9]+\]: [^ ]+ \[COLL\] [A-Z]+ //; s/[0-9]+\.[0-9]+ ms/X ms/g' | sort | uniq -c \
    | sed "s|^|np=$np ph=$ph $label log: |" >> "$OUT"
  for f in "$d"/flight-*.txt; do
    grep "^op " "$f" | sed -E 's/ (start|end)=[^ ]*//g' | sed "s|^|np=$np ph=$ph $label $(basename "$f"): |" >> "$OUT"
  done
  rm -rf "$d"
}
for shape in "4 4" "4 2" "4 1" "3 2" "6 3" "8 2"; do
  set -- $shape
  for algo in auto flat hier ring rhd tree; do one "$algo" "$1" "$2" DDPC_ALGO=$algo; done
  for h in "level0:NA;level1:ring" "level0:NA;level1:H-D_R"; do one "$h" "$1" "$2" "HCCL_ALGO=$h"; done
done
wc -l < "$OUT"
