#!/usr/bin/env bash
# tests/stress/test_scale.sh: no operation may slow down with the number of
# objects alive (round 18). tests/stress/scale_prog.c makes N objects live,
# then times a loop of M operations whose cost on the driver does not depend
# on N. For each scenario:
#   - without the library at the large N: the reference output;
#   - under POLICY at a small N and at the large N (100 times as many
#     objects): the same output as without the library, and the loop at the
#     large N takes at most 3 times the loop at the small N plus 200 ms.
# Scenarios (the fixed bugs, docs/testing.md "Scale"):
#   view   100,000 live placed blocks, 2,000 steps that allocate a block and
#          update a skip_profiled exec (each step copied every live block:
#          about 8 times slower than at 1,000 blocks before the fix)
#   execs  20,000 live execs, 2,000 steps that capture, update and destroy a
#          graph (each graph destroy visited every exec: about 15 times
#          slower than at 200 execs)
# Sanitizer builds: skipped (the loops' times are the sanitizer's there).
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
PROG=$BUILD/tests/stress/scale_prog
MOD=$BUILD/tests/emu/mod_test.so
LIMIT=${SCALE_TIMEOUT:-60}

if [ ! -x "$PROG" ]; then
    not_ok "scale program built ($PROG: tests/stress/stress.mk)"
    done_testing; exit
fi
if san_build; then
    skip "scale scenarios" "sanitizer build: loop times measure the sanitizer, not the library"
    done_testing; exit
fi

# go NAME [VAR=VALUE...] -- ARGS...: output in $TMP/NAME.{out,err,rc}.
go() {
    local name=$1; shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env LD_LIBRARY_PATH="$EMU_LIB" STABLEGRAPH_REPORT=/dev/null "${envs[@]}" \
        timeout -k 5 "$LIMIT" "$PROG" "$MOD" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}

loop_ms() { sed -n 's/^loop_ms \([0-9]*\).*/\1/p' "$TMP/$1.err"; }

# scenario NAME SMALL LARGE M POLICY
scenario() {
    local s=$1 small=$2 large=$3 m=$4 p=$5
    go "$s.base" -- "$s" "$large" "$m"
    check_eq "$s $large $m: runs without the library" "$(cat "$TMP/$s.base.rc")" 0
    for n in "$small" "$large"; do
        go "$s.$p.$n" LD_PRELOAD="$LIB" STABLEGRAPH_POLICY="$p" -- "$s" "$n" "$m"
        check_eq "$s $n $m, $p: exit status" "$(cat "$TMP/$s.$p.$n.rc")" 0
        [ "$(cat "$TMP/$s.$p.$n.rc")" = 0 ] || sed 's/^/#   /' "$TMP/$s.$p.$n.out" | head -3
    done
    check "$s $large $m, $p: same output as without the library" \
        cmp -s "$TMP/$s.base.out" "$TMP/$s.$p.$large.out"
    local a b
    a=$(loop_ms "$s.$p.$small")
    b=$(loop_ms "$s.$p.$large")
    diag "$s, $p: loop of $m: ${a:-?} ms with $small objects, ${b:-?} ms with $large" \
         "(without the library, $large: $(loop_ms "$s.base") ms)"
    check "$s, $p: the loop with $large objects takes at most 3 times (+200 ms) the one with $small" \
        test "${b:-999999}" -le $((3 * ${a:-0} + 200))
}

scenario view 1000 100000 2000 skip_profiled
scenario execs 200 20000 2000 skip_profiled
done_testing
