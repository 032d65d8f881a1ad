#!/bin/sh
# docs.sh BIN_DIR — rewrites the generated parts of the docs from the code:
# docs/ENVIRONMENT.md's table from `ddpc-run --env` (src/base/env_vars.h),
# and the README's example from examples/ddp_mnist.c's main. `make docs`
# runs it; tests/unit/test_docs.c fails when either is out of date.
set -eu
bin=${1:-build/bin}
# replace_block FILE BEGIN END NEWFILE: the lines strictly between the
# first BEGIN line and the next END line become NEWFILE's.
replace_block() {
    awk -v b="$2" -v e="$3" -v new="$4" '
        !done && $0 == b { print; while ((getline l < new) > 0) print l; skip = 1; next }
        skip && $0 == e { skip = 0; done = 1 }
        !skip { print }' "$1" > "$1.tmp" && mv "$1.tmp" "$1"
}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
"$bin/ddpc-run" --env > "$tmp"
replace_block docs/ENVIRONMENT.md '<!-- generated: ddpc-run --env -->' '<!-- end generated -->' "$tmp"
sed -n '/^int main/,/^}/p' examples/ddp_mnist.c > "$tmp"
replace_block README.md '```c' '```' "$tmp"
echo "docs.sh: docs/ENVIRONMENT.md and README.md's example rewritten"
