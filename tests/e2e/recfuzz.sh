#!/usr/bin/env bash
# tests/e2e/recfuzz.sh: runs the random programs of adv_recfuzz.c (or
# adv_memfuzz.c, --prog) over a range of seeds, each without the library and with it (every record
# audited: STABLEGRAPH_AUDIT_RECORDS=1), and reports every seed whose output
# differs, whose baseline is wrong, whose run did not finish or whose report
# counts an audit mismatch. test_correctness.sh runs a few seeds of each
# mode; this is for many (about 0.2 s a seed on the normal build).
#
# Usage: tests/e2e/recfuzz.sh [--build DIR] [--policy P] [--prog NAME] [--mode M] [--ptsz] FROM TO
#   --build   the build directory (default build/); a sanitizer build's
#             library is preloaded after its runtime
#   --policy  skip_temp, skip_profiled (default) or always_update
#   --prog    adv_recfuzz (default) or adv_memfuzz (random programs of
#             memory operations)
#   --mode    the program's mode: for adv_recfuzz capture (default),
#             explicit, temps, rotate, threads or wild; for adv_memfuzz
#             sync (default), async, capture, contexts, threads or mixed
#   --ptsz    adv_recfuzz built for the per-thread default stream
#             (adv_recfuzz_ptsz)
# Extra variables for both runs: RECFUZZ_ENV="NAME=VALUE ..." (for example
# CUDAEMU_KERNEL_DELAY_US=200). Exit status: 0 if every seed passed, 1 if
# one did not, 2 for a bad command line. Failing seeds keep their outputs
# in a directory the last line names.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
build=$SRC/build policy=skip_profiled mode="" name=adv_recfuzz
while [ $# -gt 2 ]; do
    case $1 in
    --ptsz) name=adv_recfuzz_ptsz; shift ;;
    --prog) name=$2; shift 2 ;;
    --build) build=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    *) echo "recfuzz: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ $# -ne 2 ] || ! [[ $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ ]]; then
    echo "usage: $0 [--build DIR] [--policy P] [--prog NAME] [--mode M] [--ptsz] FROM TO" >&2
    exit 2
fi
case $name in
adv_recfuzz | adv_recfuzz_ptsz) mode=${mode:-capture} ;;
adv_memfuzz) mode=${mode:-sync} ;;
*) echo "recfuzz: unknown program $name" >&2; exit 2 ;;
esac
prog=$build/tests/e2e/$name
lib=$build/libstablegraph.so
[ -x "$prog" ] && [ -f "$lib" ] || { echo "recfuzz: build $build first (make)" >&2; exit 2; }
preload=$lib
if grep -qs address "$build/san.cfg"; then
    preload="$(gcc -print-file-name=libasan.so):$lib"
    export ASAN_OPTIONS=detect_leaks=0
fi
read -r -a extra <<<"${RECFUZZ_ENV:-}"
out=$(mktemp -d "${TMPDIR:-/tmp}/recfuzz.XXXXXX")
bad=0
for seed in $(seq "$1" "$2"); do
    d=$out/$seed
    mkdir -p "$d"
    env "${extra[@]}" LD_LIBRARY_PATH="$build/emu" timeout 60 "$prog" "$seed" "$mode" >"$d/base" 2>&1
    rb=$?
    env "${extra[@]}" LD_LIBRARY_PATH="$build/emu" LD_PRELOAD="$preload" STABLEGRAPH_POLICY="$policy" \
        STABLEGRAPH_AUDIT_RECORDS=1 STABLEGRAPH_REPORT="$d/report.json" \
        timeout 60 "$prog" "$seed" "$mode" >"$d/lib" 2>"$d/lib.err"
    rl=$?
    why=$(python3 - "$d/report.json" <<'PY'
import json, sys
try:
    print(json.load(open(sys.argv[1]))["graph_descriptions"]["audit_mismatches"])
except Exception as e:
    print("no report (%s)" % type(e).__name__)
PY
)
    problem=""
    [ $rb -eq 0 ] || problem="baseline exit $rb"
    [ -z "$problem" ] && [ $rl -ne 0 ] && problem="exit $rl with the library"
    [ -z "$problem" ] && ! cmp -s "$d/base" "$d/lib" && problem="output differs"
    [ -z "$problem" ] && [ "$why" != 0 ] && problem="audit mismatches: $why"
    if [ -n "$problem" ]; then
        echo "seed $seed: $problem"
        bad=$((bad + 1))
    else
        rm -rf "$d"
    fi
done
echo "recfuzz: seeds $1..$2, mode $mode, policy $policy, $name, $(basename "$build"): $bad failed"
if [ $bad -eq 0 ]; then rm -rf "$out"; exit 0; fi
echo "recfuzz: the failing seeds' outputs are in $out"
exit 1
