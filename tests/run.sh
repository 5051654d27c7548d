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
logdir=$BUILD/test-logs
mkdir -p "$logdir"

tests=()
while IFS= read -r t; do tests+=("$t"); done < <(
    { find "$BUILD/tests" -type f -name 'test_*' -perm -u+x 2>/dev/null
      find "$SRC/tests" -type f -name 'test_*.sh' 2>/dev/null; } | sort)

passed=0 failed=0 skipped=0 failed_names=()
for t in "${tests[@]}"; do
    name=${t#"$BUILD/"}; name=${name#"$SRC/"}
    case "$name" in *"$filter"*) ;; *) continue ;; esac
    log="$logdir/$(echo "$name" | tr '/' '_').log"
    start=$(date +%s)
    if [[ $t == *.sh ]]; then
        LD_LIBRARY_PATH="$EMU_LIB" timeout "$per_test_timeout" bash "$t" >"$log" 2>&1
    else
        LD_LIBRARY_PATH="$EMU_LIB" timeout "$per_test_timeout" "$t" >"$log" 2>&1
    fi
    verdict "$log" $?
    passed=$((passed + v_pass)) failed=$((failed + v_fail)) skipped=$((skipped + v_skip))
    secs=$(( $(date +%s) - start ))
    case $v_result in
    PASS) printf 'PASS %-50s %4d cases%s %4ds\n' "$name" "$v_pass" \
              "$([ "$v_skip" -eq 0 ] || echo ", $v_skip skipped")" "$secs" ;;
    SKIP) printf 'SKIP %-50s %4d skipped %4ds\n' "$name" "$v_skip" "$secs" ;;
    FAIL) printf 'FAIL %-50s %4d ok, %d failed (log: %s)\n' "$name" "$v_pass" "$v_fail" "$log"
          grep -E '^not ok|^#' "$log" | head -20 | sed 's/^/    /'
          failed_names+=("$name") ;;
    esac
    [ "$v_skip" -eq 0 ] || grep -iE '^ok .*#[[:space:]]*skip' "$log" | head -5 | sed 's/^/    /'
done
echo
[ "${#failed_names[@]}" -eq 0 ] || echo "failed tests: ${failed_names[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
