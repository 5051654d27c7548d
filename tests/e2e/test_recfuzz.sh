#!/usr/bin/env bash
# tests/e2e/test_recfuzz.sh: tests/e2e/recfuzz.sh, the driver of the random
# record programs (adv_recfuzz.c): two seeds of every mode pass (output as
# without the library, no audit mismatch), one of the per-thread default
# stream build (--ptsz) in mode threads too, and a run with the library that
# fails (an unknown policy under STABLEGRAPH_STRICT=1 stops it before main)
# is reported, with exit status 1 and the seed named; --prog runs the random
# memory programs (adv_memfuzz.c) the same way.
. "$(dirname "$0")/../lib.sh"
tool=$SRC/tests/e2e/recfuzz.sh
for mode in capture explicit temps rotate threads wild; do
    out=$("$tool" --build "$BUILD" --mode "$mode" 1 2 2>&1)
    rc=$?
    check_eq "recfuzz $mode seeds 1-2 pass" "$rc:$(tail -1 <<<"$out")" \
        "0:recfuzz: seeds 1..2, mode $mode, policy skip_profiled, adv_recfuzz, $(basename "$BUILD"): 0 failed"
done
out=$("$tool" --build "$BUILD" --mode threads --ptsz 1 1 2>&1)
check_eq "recfuzz --ptsz threads seed 1 passes" "$?:$(tail -1 <<<"$out")" \
    "0:recfuzz: seeds 1..1, mode threads, policy skip_profiled, adv_recfuzz_ptsz, $(basename "$BUILD"): 0 failed"
out=$(RECFUZZ_ENV=STABLEGRAPH_STRICT=1 "$tool" --build "$BUILD" --policy no_such_policy 3 3 2>&1)
rc=$?
check_eq "a failing run is reported (exit 1)" "$rc" 1
check "the failing seed is named" grep -q "^seed 3: exit [0-9]* with the library" <<<"$out"
rm -rf "$(sed -n 's/^recfuzz: the failing seeds. outputs are in //p' <<<"$out")"
out=$("$tool" --build "$BUILD" --prog adv_memfuzz --mode async 1 1 2>&1)
check_eq "--prog adv_memfuzz async seed 1 passes" "$?:$(tail -1 <<<"$out")" \
    "0:recfuzz: seeds 1..1, mode async, policy skip_profiled, adv_memfuzz, $(basename "$BUILD"): 0 failed"
check_eq "a bad command line exits 2" "$("$tool" 1 2>/dev/null; echo $?)" 2
check_eq "an unknown program exits 2" "$("$tool" --prog adv_nothing 1 1 2>/dev/null; echo $?)" 2
done_testing
