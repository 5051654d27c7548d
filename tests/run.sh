#!/usr/bin/env bash
# tests/run.sh: runs every test and prints one summary line
# "N passed, N failed, N skipped" (cases).
#
# Tests are C programs built as $BUILD/tests/**/test_* and shell scripts
# tests/**/test_*.sh. Each prints TAP lines, judged by tests/lib/verdict.sh:
# "ok" passes, "ok ... # SKIP reason" is skipped, "not ok" fails; a test
# also fails when it prints no case, no plan or fewer cases than planned, or
# exits non-zero without reporting a failure (a crash, a timeout). Each test
# gets one line: PASS, SKIP (every case skipped) or FAIL. Exit status: 0 if
# nothing failed and at least one case passed.
#
# Usage: tests/run.sh [FILTER]   (FILTER: a substring of the test's name, e.g.
#        tests/e2e/test_lifecycle.sh or tests/unit/test_arena)
# Environment: TEST_JOBS (tests run side by side; default: the CPUs + 1),
#        TEST_TIMEOUT (seconds per test; 600, 1800 under ThreadSanitizer).
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
export SRC BUILD EMU_LIB=${EMU_LIB:-$BUILD/emu}
. "$SRC/tests/lib/verdict.sh"
filter=${1:-}
# Sanitizer builds (make test SAN=...; $BUILD/san.cfg says which). A user's
# own ASAN_OPTIONS / TSAN_OPTIONS are kept; an option is only added when the
# user did not set it.
#   address: the library is preloaded into tools that are not instrumented
#     (bash, env, timeout), so the runtime must not insist on being first;
#     leaks are still reported by instrumented programs.
#   thread: tests fork from multi-threaded processes (a child that goes on
#     using CUDA, the emulator's worker threads); TSan would kill such a
#     child by default (die_after_fork=1).
# san_opt VAR NAME=VALUE: appends NAME=VALUE to $VAR unless NAME is set there.
san_opt() {
    local cur=${!1:-}
    case ":${cur// /:}:" in *":${2%%=*}="*) ;; *) export "$1=${cur:+$cur:}$2" ;; esac
}
if [ -s "$BUILD/san.cfg" ] && grep -q address "$BUILD/san.cfg"; then
    san_opt ASAN_OPTIONS verify_asan_link_order=0
fi
per_test_timeout=${TEST_TIMEOUT:-600}
if [ -s "$BUILD/san.cfg" ] && grep -q thread "$BUILD/san.cfg"; then
    san_opt TSAN_OPTIONS die_after_fork=0
    # ThreadSanitizer runs the emulated kernels 5-15 times slower (every
    # memory access is checked): the longest tests need more than 300 s.
    per_test_timeout=${TEST_TIMEOUT:-1800}
fi
# python3 reached through a version manager's shim (pyenv: a shell script
# that starts several processes) costs about 0.6 s a call against 0.07 s for
# the interpreter itself, and the tests call it thousands of times: put the
# interpreter's own directory first in PATH.
if py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$py" ]; then
    export PATH="${py%/*}:$PATH"
fi
logdir=$BUILD/test-logs
mkdir -p "$logdir"

tests=()
while IFS= read -r t; do tests+=("$t"); done < <(
    { find "$BUILD/tests" -type f -name 'test_*' -perm -u+x 2>/dev/null
      find "$SRC/tests" -type f -name 'test_*.sh' 2>/dev/null; } | sort)
# The longest tests start first, so that none of them is left running alone
# at the end while the other CPUs idle (test_correctness alone takes most of
# a CI stage, waiting much of that time on the emulated streams); the rest
# keep their order.
slow_first=(tests/e2e/test_correctness.sh tests/e2e/test_bounds.sh)
ordered=()
for s in "${slow_first[@]}"; do
    for t in "${tests[@]}"; do [ "$t" != "$SRC/$s" ] || ordered+=("$t"); done
done
for t in "${tests[@]}"; do
    [[ " ${slow_first[*]} " == *" ${t#"$SRC/"} "* ]] || ordered+=("$t")
done
tests=("${ordered[@]}")

# run_one TEST LOG: runs one test under its time budget, judges it and writes
# "RESULT PASS FAIL SKIP SECONDS" to LOG.res (run in the background).
run_one() {
    local t=$1 log=$2 start=$SECONDS rc
    if [[ $t == *.sh ]]; then
        LD_LIBRARY_PATH="$EMU_LIB" timeout "$per_test_timeout" bash "$t" >"$log" 2>&1
    else
        LD_LIBRARY_PATH="$EMU_LIB" timeout "$per_test_timeout" "$t" >"$log" 2>&1
    fi
    rc=$?
    verdict "$log" "$rc"
    # The CPU time (user + system) of the processes this shell waited for:
    # the test and what it waited for in turn. The suite is CPU-bound on 2
    # cores (the CI's two stages used 1.9 cores on average, 2026-12-07), so
    # this, not the wall time, says what a test costs. (`times` in this
    # shell: in a command substitution it would speak of a subshell.)
    times >"$log.times"
    echo "$v_result $v_pass $v_fail $v_skip $((SECONDS - start)) $(cpu_seconds "$log.times")" >"$log.res"
}

# cpu_seconds FILE: whole seconds of CPU from the children's line of
# `times` ("XmY.YYYs XmY.YYYs", user and system).
cpu_seconds() {
    awk 'function sec(t, m) { split(t, m, "m"); return m[1] * 60 + m[2] }
         END { printf "%d", sec($1) + sec($2) + 0.5 }' "$1"
}

# report NAME LOG: prints the test's line from LOG.res and adds up its cases.
report() {
    local name=$1 log=$2 res p f s secs cpu
    read -r res p f s secs cpu <"$log.res" || { res=FAIL p=0 f=1 s=0 secs=0 cpu=0; }
    cpu_total=$((cpu_total + ${cpu:-0}))
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
    case $res in
    PASS) printf 'PASS %-50s %4d cases%s %4ds (CPU %ds)\n' "$name" "$p" "$([ "$s" -eq 0 ] || echo ", $s skipped")" "$secs" "${cpu:-0}" ;;
    SKIP) printf 'SKIP %-50s %4d skipped %4ds (CPU %ds)\n' "$name" "$s" "$secs" "${cpu:-0}" ;;
    *)    printf 'FAIL %-50s %4d ok, %d failed (log: %s)\n' "$name" "$p" "$f" "$log"
          grep -E '^not ok|^#' "$log" | head -20 | sed 's/^/    /'
          failed_names+=("$name") ;;
    esac
    [ "$s" -eq 0 ] || grep -iE '^ok .*#[[:space:]]*skip' "$log" | head -5 | sed 's/^/    /'
}

# Tests run TEST_JOBS at a time (default: one more than the CPUs this
# process may use: many tests spend part of their time waiting on the
# emulated driver's stream threads, so one extra test keeps the CPUs busy;
# on 2 cores, 3 jobs took 96 s against 125 s with 2, and 4 no less than 3
# under ASan, 2026-12-02); each test's line is printed when it ends, the summary at the end. Tests
# keep their files in their own temporary directory (tests/lib.sh), so they
# can run side by side.
jobs_max=${TEST_JOBS:-$(( $(nproc 2>/dev/null || echo 1) + 1 ))}
[[ $jobs_max =~ ^[1-9][0-9]*$ ]] || { echo "tests/run.sh: TEST_JOBS must be a positive integer, not '$jobs_max'" >&2; exit 2; }
passed=0 failed=0 skipped=0 cpu_total=0 failed_names=()
declare -A running=()                      # pid -> "name<TAB>log"
# reap: waits for one test to end and reports it.
reap() {
    local pid=
    wait -n -p pid "${!running[@]}" 2>/dev/null
    if [ -z "$pid" ] || [ -z "${running[$pid]:-}" ]; then
        # not told which one ended: look for it (never loops forever)
        for pid in "${!running[@]}"; do kill -0 "$pid" 2>/dev/null || break; pid=; done
        [ -n "$pid" ] || { sleep 0.2; return 0; }
        wait "$pid" 2>/dev/null
    fi
    report "${running[$pid]%%$'\t'*}" "${running[$pid]#*$'\t'}"
    unset "running[$pid]"
}
for t in "${tests[@]}"; do
    name=${t#"$BUILD/"}; name=${name#"$SRC/"}
    case "$name" in *"$filter"*) ;; *) continue ;; esac
    log="$logdir/$(echo "$name" | tr '/' '_').log"
    rm -f "$log.res"
    while [ "${#running[@]}" -ge "$jobs_max" ]; do reap; done
    run_one "$t" "$log" &
    running[$!]="$name"$'\t'"$log"
done
while [ "${#running[@]}" -gt 0 ]; do reap; done
echo
if [ "${#failed_names[@]}" -gt 0 ]; then
    mapfile -t failed_names < <(printf '%s\n' "${failed_names[@]}" | sort)
    echo "failed tests: ${failed_names[*]}"
fi
echo "CPU time of the tests: ${cpu_total} s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
