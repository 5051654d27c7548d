#!/usr/bin/env bash
# tests/e2e/test_startup.sh: a library constructor that calls the driver
# before the interposer's constructor ran, and 16 threads released at once
# that call hooks (the first driver calls of the process when libctor is
# told to stay quiet, so they race on the interposer's lazy initialisation).
# Results must equal those without the library, and every call is counted.
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
PROG=$BUILD/tests/e2e/startup_prog

base=$(emu "$PROG")
check "runs without the library" [ -n "$base" ]
for quiet in "" 1; do
    label=${quiet:+threads first}; label=${label:-constructor first}
    rep=$TMP/startup$quiet.json
    out=$(SG_TEST_NO_CTOR_CALLS=$quiet STABLEGRAPH_REPORT=$rep LD_PRELOAD=$LIB emu "$PROG")
    check "$label: exit status 0" [ $? -eq 0 ]
    if [ -z "$quiet" ]; then
        check_eq "$label: same results as without the library" "$out" "$base"
        check_eq "$label: constructor's cuMemAlloc counted" "$(json_get "$rep" hooks.cuMemAlloc_v2.calls)" 1
        init_calls=1601
    else
        check "$label: no failed call" grep -q "bad=0 threads=16 calls=100" <<<"$out"
        init_calls=1600
    fi
    check_eq "$label: cuInit calls" "$(json_get "$rep" hooks.cuInit.calls)" "$init_calls"
    check_eq "$label: cuGetProcAddress_v2 calls" "$(json_get "$rep" hooks.cuGetProcAddress_v2.calls)" 1600
    check_eq "$label: cuGraphLaunch_ptsz handed out" "$(json_get "$rep" hooks.cuGraphLaunch_ptsz.resolved)" 1600
    check_eq "$label: cuGraphLaunch_ptsz calls" "$(json_get "$rep" hooks.cuGraphLaunch_ptsz.calls)" 1600
    check_eq "$label: failed launches are not counted" "$(json_get "$rep" totals.launches)" 0
done
done_testing
