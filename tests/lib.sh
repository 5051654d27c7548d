# tests/lib.sh: helpers for shell tests. Source it; each ok/not_ok/skip
# prints a TAP line that tests/run.sh counts (tests/lib/verdict.sh). Call
# `done_testing` last: it prints the plan, without which the runner fails the
# test, and its exit status is non-zero if any case failed.
# Checksums: tests/lib/checksum.sh, sourced here.
#
# Environment from the runner: BUILD (the build directory, absolute),
# EMU_LIB (directory holding the emulated libcuda.so.1), SRC (source root).
: "${SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${BUILD:=$SRC/build}"
: "${EMU_LIB:=$BUILD/emu}"
_tap_n=0
_tap_failed=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sgtest.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

ok()     { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $*"; }
not_ok() { _tap_n=$((_tap_n + 1)); _tap_failed=$((_tap_failed + 1)); echo "not ok $_tap_n - $*"; }
diag()   { printf '#   %s\n' "$@"; }
# skip NAME REASON: a case that cannot run here (counted as skipped, not passed).
skip()   { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $1 # SKIP $2"; }

# check NAME CMD...: ok if CMD succeeds.
check() { local name=$1; shift; if "$@"; then ok "$name"; else not_ok "$name"; fi; }
# check_eq NAME GOT WANT
check_eq() {
    if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1"; diag "got:  $2" "want: $3"; fi
}

# san_build: true in a sanitizer build (make SAN=...). $BUILD/san.cfg names
# the sanitizers; the normal build's holds one empty line, so its size says
# nothing.
san_build() { grep -qs '[a-z]' "$BUILD/san.cfg"; }

# normal_build_only WHAT WHY: in a sanitizer build, reports WHAT as skipped
# and ends the test: for tests in which no instrumented code of ours runs in
# a way the other tests do not (scripts, the build, the harness), left to
# the normal build, since the sanitizer stage of the CI, which runs every
# test again, has less time (the CI was over its 15 minutes on 2 cores,
# 2026-12-07).
normal_build_only() {
    san_build || return 0
    skip "$1" "a sanitizer build: $2 (the normal build runs it)"
    done_testing
    exit 0
}

# CUDA runtime programs (nvcc, static runtime) on the emulated driver, with
# and without the library (test_runtime.sh, test_rt_devices.sh).
# rt_setup LIB: the library to preload. In a sanitizer build (make test
# SAN=address,... or SAN=thread) the nvcc-built programs are not
# instrumented and would load the ASan/TSan runtime only as a dependency of
# the instrumented emulated driver or library, too late for it to work (ASan
# dies at start-up; TSan never sees the CUDA runtime's threads and their
# calls into instrumented code crash): the runtime the library links is
# preloaded first. No leak check: the static CUDA runtime leaves its own
# (uninstrumented) allocations behind; the library's and the emulator's
# paths are leak-checked by instrumented tests.
rt_setup() {
    RT_LIB=$1 RT_SAN_PRE=
    if san_build; then
        RT_SAN_PRE=$(ldd "$RT_LIB" | awk '$1 ~ /^lib[at]san\.so/ { print $3; exit }')
        export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
    fi
}
# rt_run POLICY TAG CMD...: runs CMD on the emulated driver without the
# library (POLICY none) or under POLICY, with the variables of the arrays
# RT_ENV (every run) and RT_LIB_ENV (runs under the library), leaving
# $TMP/TAG.{out,err,json,rep.json} and $rc.
RT_ENV=() RT_LIB_ENV=()
rt_run() {
    local policy=$1 tag=$2; shift 2
    local -a envs=(CUDAEMU_STATS="$TMP/$tag.json" LD_LIBRARY_PATH="$EMU_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
                   "${RT_ENV[@]}")
    if [ "$policy" = none ]; then
        [ -z "$RT_SAN_PRE" ] || envs+=(LD_PRELOAD="$RT_SAN_PRE")
    else
        envs+=(LD_PRELOAD="${RT_SAN_PRE:+$RT_SAN_PRE:}$RT_LIB" STABLEGRAPH_POLICY="$policy"
               STABLEGRAPH_REPORT="$TMP/$tag.rep.json" "${RT_LIB_ENV[@]}")
    fi
    env "${envs[@]}" "$@" >"$TMP/$tag.out" 2>"$TMP/$tag.err"
    rc=$?
}

# test_delays: the CUDAEMU_KERNEL_DELAY_US values a test runs its programs
# at: 0 and 200; 0 only in a sanitizer build (it looks for memory and thread
# errors on the same paths, and CI's time is bounded).
test_delays() { if san_build; then echo 0; else echo "0 200"; fi; }

# emu CMD...: runs CMD on the emulated driver.
emu() { LD_LIBRARY_PATH="$EMU_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }

# json_get FILE PATH: prints a value from a JSON file (python3), PATH like
# calls.cuMemAlloc_v2; prints 0 for a missing key under "calls".
json_get() {
    python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cur = d
for part in sys.argv[2].split('.'):
    if isinstance(cur, dict) and part in cur:
        cur = cur[part]
    else:
        cur = 0 if sys.argv[2].startswith('calls.') else None
        break
print(cur if not isinstance(cur, (dict, list)) else json.dumps(cur, sort_keys=True))
PY
}

. "$SRC/tests/lib/checksum.sh"

done_testing() { echo "1..$_tap_n"; [ "$_tap_failed" -eq 0 ]; }
