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
