#!/bin/sh
# check-layers.sh — fails when a file includes a header of a layer above its
# own (`make check-layers`; `make test` runs it). The rule, as the README's
# source layout states it:
#
#   base → store, transport → comm → coll        (libddpc)
#   base → nn, data;  comm, coll, nn, data → ddp (libddpc_train)
#   bridges: the public headers only;  tools, examples, tests: anything
#
# A header's layer is its folder under src/ ("comm/comm.h": comm); the public
# headers belong to the layer that implements them (ddpc.h and try.h: base,
# whose status codes and types they declare; store.h: store; nn.h, data.h,
# ddp.h: their own). Usage: check-layers.sh [FILE...] (default: every C and
# C++ file under src/, include/ddpc/ and bridges/).
cd "$(dirname "$0")/.." || exit 2
[ $# -gt 0 ] || set -- $(ls src/*/*.c src/*/*.h include/ddpc/*.h bridges/*/*.c bridges/*/*.h \
    bridges/*/*.cpp 2>/dev/null)

# what each layer may include (itself included)
allowed() {
    case $1 in
    base) echo "base" ;;
    store) echo "base store" ;;
    transport) echo "base transport" ;;
    comm) echo "base store transport comm" ;;
    coll) echo "base store transport comm coll" ;;
    nn) echo "base nn" ;;
    data) echo "base data" ;;
    ddp) echo "base store transport comm coll nn data ddp" ;;
    bridge) echo "" ;; # the public headers only (below)
    esac
}

# the layer a file is in, or a header belongs to (empty: not ddpc's)
layer_of() {
    case $1 in
    ddpc/ddpc.h | ddpc/try.h | include/ddpc/ddpc.h | include/ddpc/try.h) echo base ;;
    ddpc/store.h | include/ddpc/store.h) echo store ;;
    ddpc/nn.h | include/ddpc/nn.h) echo nn ;;
    ddpc/data.h | include/ddpc/data.h) echo data ;;
    ddpc/ddp.h | include/ddpc/ddp.h) echo ddp ;;
    src/*/*) l=${1#src/}; echo "${l%%/*}" ;;
    bridges/*) echo bridge ;;
    base/* | store/* | transport/* | comm/* | coll/* | nn/* | data/* | ddp/*) echo "${1%%/*}" ;;
    esac
}

bad=0
for f in "$@"; do
    mine=$(layer_of "$f")
    [ -n "$mine" ] || continue
    ok=" $(allowed "$mine") "
    for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        theirs=$(layer_of "$h")
        [ -n "$theirs" ] || continue # the file's own neighbours, system headers
        case $mine/$h in bridge/ddpc/*) continue ;; bridge/*) theirs="$theirs (internal)" ;; esac
        case $ok in
        *" $theirs "*) ;;
        *)
            echo "$f: includes \"$h\" ($theirs), a layer $mine may not use" >&2
            bad=1
            ;;
        esac
    done
done
[ $bad = 0 ] && echo "layers ok"
exit $bad
