#!/usr/bin/env bash
# tests/e2e/test_fuzz_sweep.sh: tests/e2e/fuzz_sweep.sh, the driver of the
# random programs (adv_recfuzz.c, adv_recfuzz_ptsz, adv_memfuzz.c) over many
# seeds: two seeds of every adv_recfuzz mode pass under skip_profiled
# (output as without the library, no audit mismatch, no violation), one of
# the per-thread default stream build and one of adv_memfuzz too; a run with
# the library that fails (an unknown policy under STABLEGRAPH_STRICT=1 stops
# it before main) is reported, with exit status 1 and its seed named; a bad
# command line and an unknown program exit 2.
. "$(dirname "$0")/../lib.sh"
tool=$SRC/tests/e2e/fuzz_sweep.sh
b=$(basename "$BUILD")
modes="capture explicit temps rotate threads wild extra threads_tl unhooked"
gens=$(for m in $modes; do printf 'adv_recfuzz:%s ' "$m"; done)
out=$("$tool" --build "$BUILD" --gens "$gens" --policies skip_profiled --delay-every 0 --out "$TMP/a" 1 2 2>&1)
rc=$?
check_eq "adv_recfuzz, every mode, seeds 1-2 pass" "$rc:$(tail -1 <<<"$out" | sed 's/ in [0-9]* s,/,/')" \
    "0:fuzz_sweep: seeds 1..2, 9 prog:modes, policies skip_profiled, $b: 36 runs, 0 failed; results in $TMP/a"
out=$("$tool" --build "$BUILD" --gens "adv_recfuzz_ptsz:threads adv_memfuzz:async" --policies "skip_temp skip_profiled" \
    --delay-every 1 --out "$TMP/b" 1 1 2>&1)
check_eq "adv_recfuzz_ptsz threads and adv_memfuzz async, seed 1, two policies, delay 200, pass" \
    "$?:$(tail -1 <<<"$out" | sed 's/ in [0-9]* s,/,/')" \
    "0:fuzz_sweep: seeds 1..1, 2 prog:modes, policies skip_temp skip_profiled, $b: 6 runs, 0 failed; results in $TMP/b"
check_eq "the delayed runs are marked" "$(awk -F'\t' '$4 == 200' "$TMP/b/results.tsv" | wc -l)" 6
out=$("$tool" --build "$BUILD" --gens adv_recfuzz:capture --policies no_such_policy --env STABLEGRAPH_STRICT=1 \
    --out "$TMP/c" 3 1 2>&1)
check_eq "a failing run is reported (exit 1)" "$?" 1
check "the failing run is named, with its seed" grep -q "^FAIL adv_recfuzz	capture	3	0	no_such_policy	exit	" <<<"$out"
check "its outputs are kept" test -s "$TMP/c/fail/adv_recfuzz.capture.3.0/no_such_policy.err"
check_eq "a bad command line exits 2" "$("$tool" 1 2>/dev/null; echo $?)" 2
check_eq "an unknown program exits 2" \
    "$("$tool" --build "$BUILD" --gens adv_nothing:x 1 1 2>/dev/null; echo $?)" 2
done_testing
