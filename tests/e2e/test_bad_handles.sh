#!/usr/bin/env bash
# tests/e2e/test_bad_handles.sh: bad handles through every hooked entry
# point that takes them (bad_handles.c: NULL and destroyed execs, destroyed
# graphs, foreign, freed and interior pointers, double free and double
# destroy), under every policy: the program gets, call by call, the CUresult
# it gets without the library, nothing crashes or hangs, the live exec still
# gives the same checksum afterwards, and the report is written.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/life_lib.sh"

# Every policy prints exactly the baseline (legacy IPC of placed memory
# included: core/ipc.c).
# the live exec (3 kernels on 64 words) launched 3 times after the bad calls
scenario bad_handles 1 --sum "live exec after the bad calls" 64 9 \
    -- "$BUILD/tests/e2e/bad_handles" "$BUILD/tests/emu/mod_test.so"
# (an interior pointer is bad only for a free)
check "bad_handles: every bad call failed without the library" \
    [ -z "$(grep -E '^cu[A-Za-z0-9_]*\((NULL|destroyed|0|freed|foreign|never)[^)]*\) = CUDA_SUCCESS$|^cuMemFree.*inside.* = CUDA_SUCCESS$' \
            "$TMP/bad_handles.base.out")" ]
for p in $POLICIES; do
    check "bad_handles.$p: no violation" [ -z "$(grep VIOLATION "$TMP/bad_handles.$p.err")" ]
done
done_testing
