#!/usr/bin/env bash
# tests/harness/test_run.sh: the test harness itself. tests/run.sh runs a
# tree of fake tests (the real run.sh and tests/lib/, linked into a
# temporary tree) and must judge each one right: a test that prints no case,
# no plan, fewer cases than planned, or exits non-zero with every case
# passed fails; "# SKIP" cases are counted as skipped, not passed; a test
# whose cases are all skipped is SKIP; the summary line and the exit status
# say the same; with TEST_JOBS=2 two tests run side by side. Also: the checksum helpers of tests/lib/checksum.sh never
# take two missing checksums for equal, and a baseline run must exit 0 with
# the independent model's checksum.
. "$(dirname "$0")/../lib.sh"
normal_build_only "the test runner" "it tests tests/run.sh"

tree=$TMP/tree
mkdir -p "$tree/tests/fake" "$tree/build/tests/fake"
ln -s "$SRC/tests/run.sh" "$SRC/tests/lib.sh" "$tree/tests/"
ln -s "$SRC/tests/lib" "$tree/tests/lib"

# fake NAME BODY: a shell test tests/fake/test_NAME.sh running BODY.
fake() { printf '%s\n' "$2" >"$tree/tests/fake/test_$1.sh"; }
fake pass     'echo "ok 1 - a"; echo "ok 2 - b"; echo "1..2"'
fake lib      '. "$(dirname "$0")/../lib.sh"; ok one; skip two "no device"; done_testing'
fake nocase   'echo "nothing to see"; exit 0'
fake skiponly 'echo "ok 1 - a # SKIP no nvcc"; echo "ok 2 - b # skip not root"; echo "1..2"'
fake failing  'echo "ok 1 - a"; echo "not ok 2 - b"; echo "1..2"; exit 1'
fake badexit  'echo "ok 1 - a"; echo "1..1"; exit 3'
fake noplan   'echo "ok 1 - a"'
fake short    'echo "1..3"; echo "ok 1 - a"'
fake twoplans 'echo "ok 1 - a"; echo "1..1"; echo "ok 1 - a"; echo "1..1"'
fake slow     'echo "ok 1 - a"; sleep 30; echo "1..1"'
# a built test program (not a .sh): run directly
printf '#!/bin/sh\necho "ok 1 - built"\necho "1..1"\n' >"$tree/build/tests/fake/test_prog"
chmod +x "$tree/build/tests/fake/test_prog"

# runner [FILTER]: the fake tree's run.sh; output in $TMP/run.out, status in $rc.
runner() {
    BUILD=$tree/build TEST_TIMEOUT=2 "$tree/tests/run.sh" "$@" >"$TMP/run.out" 2>&1
    rc=$?
}
# verdict_of NAME: the PASS/SKIP/FAIL word of a test's line.
verdict_of() { awk -v t="$1" '$2 == t { print $1 }' "$TMP/run.out"; }

runner
for t in pass:PASS lib:PASS nocase:FAIL skiponly:SKIP failing:FAIL badexit:FAIL noplan:FAIL \
         short:FAIL twoplans:PASS slow:FAIL; do
    check_eq "test_${t%%:*}.sh: ${t#*:}" "$(verdict_of "tests/fake/test_${t%%:*}.sh")" "${t#*:}"
done
check_eq "a built test program is run" "$(verdict_of tests/fake/test_prog)" PASS
# passed: pass 2, lib 1, failing 1, badexit 1, noplan 1, short 1, twoplans 2, slow 1, prog 1
# failed: nocase, failing, badexit, noplan, short, slow (timeout) 1 each
# skipped: lib 1, skiponly 2
check_eq "summary: passes, failures and skips counted apart" "$(tail -n 1 "$TMP/run.out")" \
    "11 passed, 6 failed, 3 skipped"
check "exit status non-zero when a test failed" [ "$rc" -ne 0 ]
check "the failing tests are named" \
    grep -qx 'failed tests: tests/fake/test_badexit.sh tests/fake/test_failing.sh tests/fake/test_nocase.sh tests/fake/test_noplan.sh tests/fake/test_short.sh tests/fake/test_slow.sh' \
    "$TMP/run.out"
check "why: no case" grep -q 'not ok - (tests/run.sh) the test ran no case' "$TMP/run.out"
check "why: a non-zero status" grep -q 'exited with status 3 without reporting a failure' "$TMP/run.out"
check "why: a timeout, and no plan" \
    grep -q 'exited with status 124 without reporting a failure; no plan line' "$TMP/run.out"
check "why: no plan" grep -q 'no plan line (1..N)' "$TMP/run.out"
check "why: fewer cases than planned" grep -q 'planned 3 cases, printed 1' "$TMP/run.out"
check "skip reasons are shown" grep -q '^    ok 2 - b # skip not root$' "$TMP/run.out"

runner test_pass
check_eq "only passing tests: exit 0" "$rc" 0
check_eq "only passing tests: summary" "$(tail -n 1 "$TMP/run.out")" "2 passed, 0 failed, 0 skipped"
runner tree
check_eq "the filter matches the test's name, not the directories above it" \
    "$(tail -n 1 "$TMP/run.out")" "0 passed, 0 failed, 0 skipped"
runner test_skiponly
check "only skipped cases: exit non-zero (nothing was tested)" [ "$rc" -ne 0 ]
check_eq "only skipped cases: summary" "$(tail -n 1 "$TMP/run.out")" "0 passed, 0 failed, 2 skipped"

# Tests side by side (TEST_JOBS): two tests that each wait for the other to
# have started pass only when they run at the same time.
rm -f "$tree"/tests/fake/* "$tree"/build/tests/fake/*
for me in a b; do
    other=$([ $me = a ] && echo b || echo a)
    fake "meet$me" "touch '$tree/$me'; for i in \$(seq 15); do [ -e '$tree/$other' ] && break; sleep 0.1; done
[ -e '$tree/$other' ] && echo 'ok 1 - met' || echo 'not ok 1 - alone'; echo 1..1"
done
TEST_JOBS=2 runner
check_eq "TEST_JOBS=2: two tests run side by side" "$(tail -n 1 "$TMP/run.out")" "2 passed, 0 failed, 0 skipped"
rm -f "$tree/a" "$tree/b"
TEST_JOBS=1 runner
# (the first waits alone and fails; the second then finds it has run)
check_eq "TEST_JOBS=1: one test at a time" "$(tail -n 1 "$TMP/run.out")" "1 passed, 1 failed, 0 skipped"
TEST_JOBS=x runner
check "TEST_JOBS not a number: refused" [ "$rc" -ne 0 ]
check "TEST_JOBS not a number: said why" grep -q 'TEST_JOBS must be a positive integer' "$TMP/run.out"

# ---------------------------------------------------------------- checksums
good=0123456789abcdef
check_eq "sum_in: a workload's checksum" "$(printf 'w: x\nchecksum: %s\n' $good | sum_in)" $good
for bad in "" "checksum: " "checksum: 0123" "checksum: 0123456789ABCDEF" "checksum: ${good}0" \
           "checksum: $good\nchecksum: $good" "checksum:$good" "checksum: $good x"; do
    out=$(printf "$bad\n" | sum_in); st=$?
    check "sum_in: no checksum in '$bad' (status $st, '$out')" [ "$st" -ne 0 -a -z "$out" ]
done
# check_sum judges in a child shell, so that its verdict can be inspected.
judge() { (_tap_n=0; check_sum x "$1" "$2") | head -n 1 | cut -d' ' -f1-2; }
check_eq "check_sum: equal checksums" "$(judge $good $good)" "ok 1"
check_eq "check_sum: two missing checksums are not equal" "$(judge "" "")" "not ok"
check_eq "check_sum: malformed equal values are not equal" "$(judge 12 12)" "not ok"
check_eq "check_sum: different checksums" "$(judge $good fedcba9876543210)" "not ok"

# check_baseline: a real workload, small; then a wrong status and a wrong checksum.
base() { (_tap_n=0; check_baseline x "$1" "$2") | grep -E '^(not )?ok' | cut -d' ' -f1-2 | paste -sd, -; }
emu "$BUILD/workloads/slices" --steps 3 --nodes 5 --elems 40 >"$TMP/sl.out" 2>&1
check_eq "check_baseline: a right run passes" "$(base "$TMP/sl.out" $?)" "ok 1,ok 2"
check_eq "check_baseline: a non-zero status fails" "$(base "$TMP/sl.out" 1)" "not ok,ok 2"
sed 's/^checksum: .*/checksum: 0000000000000000/' "$TMP/sl.out" >"$TMP/wrong.out"
check_eq "check_baseline: a checksum that is not the model's fails" "$(base "$TMP/wrong.out" 0)" "ok 1,not ok"
grep -v '^checksum' "$TMP/sl.out" >"$TMP/none.out"
check_eq "check_baseline: no checksum fails" "$(base "$TMP/none.out" 0)" "ok 1,not ok"
sed 's/^slices:/unmodelled:/' "$TMP/sl.out" >"$TMP/other.out"
check_eq "check_baseline: a workload without a model: a skip, said so" \
    "$(base "$TMP/other.out" 0)" "ok 1,ok 2,ok 3"
check "check_baseline: the skip is a TAP skip" \
    grep -q '# SKIP' <<<"$(_tap_n=0; check_baseline x "$TMP/other.out" 0)"
done_testing
