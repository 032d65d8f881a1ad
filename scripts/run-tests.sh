#!/usr/bin/env bash
# Runs test binaries, passing the filters after "--" to each, and ends with
# one line: "N passed, N failed, N skipped".
#   scripts/run-tests.sh [-j N] BIN... [-- FILTER...]
# One binary at a time by default, its output as it comes; with -j N, up to N
# binaries at once, each one's output printed whole when it ends.
# DDPC_TEST_WRAPPER, when set, is a command line each binary runs under
# (make check-valgrind sets it to valgrind and its options).
set -u
read -ra wrap <<<"${DDPC_TEST_WRAPPER:-}"
jobs=1
if [ "${1:-}" = "-j" ]; then jobs=$2; shift 2; fi
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
pass=0 fail=0 skip=0 broken=()
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Adds binary i's result (its log's last line, its exit code) to the totals.
tally() {
  local b=$1 rc=$2 out
  out=$(tail -n 1 "$3")
  if [[ "$out" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
    pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2])); skip=$((skip + BASH_REMATCH[3]))
    [ "${BASH_REMATCH[1]}${BASH_REMATCH[2]}${BASH_REMATCH[3]}" = 000 ] && return
    [ "$rc" -ne 0 ] && [ "${BASH_REMATCH[2]}" = 0 ] && { fail=$((fail + 1)); broken+=("${b##*/}"); }
  else
    fail=$((fail + 1)); broken+=("${b##*/}")
  fi
}

if [ "$jobs" -le 1 ]; then
  for b in "${bins[@]}"; do
    echo "== ${b##*/}"
    "${wrap[@]}" "$b" "$@" 2>&1 | tee "$dir/log"
    tally "$b" "${PIPESTATUS[0]}" "$dir/log"
  done
else
  # start binary i in the background: its output to i.log, its exit code to i.rc
  start() { ( "${wrap[@]}" "${bins[$1]}" "${@:2}" >"$dir/$1.log" 2>&1; echo $? >"$dir/$1.tmp"; mv "$dir/$1.tmp" "$dir/$1.rc" ) & }
  next=0 shown=0 running=0
  while [ "$shown" -lt ${#bins[@]} ]; do
    while [ "$running" -lt "$jobs" ] && [ "$next" -lt ${#bins[@]} ]; do
      start "$next" "$@"; next=$((next + 1)); running=$((running + 1))
    done
    wait -n 2>/dev/null # one binary has ended
    running=$((running - 1))
    # print, in order, the binaries that have ended
    while [ "$shown" -lt "$next" ] && [ -e "$dir/$shown.rc" ]; do
      echo "== ${bins[$shown]##*/}"
      cat "$dir/$shown.log"
      tally "${bins[$shown]}" "$(cat "$dir/$shown.rc")" "$dir/$shown.log"
      shown=$((shown + 1))
    done
  done
fi
[ ${#broken[@]} -gt 0 ] && echo "broken test binaries: ${broken[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ $((pass + skip)) -gt 0 ]
