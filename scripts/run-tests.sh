#!/usr/bin/env bash
# Runs test binaries one after another, passing the filters after "--" to
# each, and ends with one line: "N passed, N failed, N skipped".
# DDPC_TEST_WRAPPER, when set, is a command line each binary runs under
# (make check-valgrind sets it to valgrind and its options).
set -u
read -ra wrap <<<"${DDPC_TEST_WRAPPER:-}"
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
pass=0 fail=0 skip=0 broken=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for b in "${bins[@]}"; do
  echo "== ${b##*/}"
  "${wrap[@]}" "$b" "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  out=$(tail -n 1 "$log")
  if [[ "$out" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
    pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2])); skip=$((skip + BASH_REMATCH[3]))
    [ "${BASH_REMATCH[1]}${BASH_REMATCH[2]}${BASH_REMATCH[3]}" = 000 ] && continue
    [ "$rc" -ne 0 ] && [ "${BASH_REMATCH[2]}" = 0 ] && { fail=$((fail + 1)); broken+=("${b##*/}"); }
  else
    fail=$((fail + 1)); broken+=("${b##*/}")
  fi
done
[ ${#broken[@]} -gt 0 ] && echo "broken test binaries: ${broken[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ $((pass + skip)) -gt 0 ]
