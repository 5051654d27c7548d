#!/usr/bin/env bash
# tests/e2e/test_fault_matrix.sh: the fault-injection matrix (issue 6), run by
# tests/e2e/fault_matrix.py. Every driver call the library makes on its own
# behalf is made to fail (CUDAEMU_FAIL) and the program must still give its
# checksum, or report for its own call an error the real driver could give
# it; no crash, hang, violation, or (in a sanitizer build) leak or UB.
#
# In `make test`: the CI subset (one workload per policy, every call, failing
# the 1st and every call, OUT_OF_MEMORY and INVALID_VALUE), < 60 s even under
# ASan on 2 cores. FAULT_MATRIX=full: every workload, the four errors, the
# 1st, 2nd and every call. The table goes to $BUILD/test-logs/fault-matrix.md
# (beside the tests' logs: the rest of $BUILD is the build's, and test_build
# checks that nothing there changes while the suite runs make -n).
# Leak check: run the suite on a SAN=address,undefined build (LeakSanitizer
# checks every cell at exit); a normal build checks results only.
. "$(dirname "$0")/../lib.sh"
mkdir -p "$BUILD/test-logs"
args=(--build "$BUILD" --md "$BUILD/test-logs/fault-matrix.md")
[ "${FAULT_MATRIX:-}" = full ] && args+=(--full)
python3 "$SRC/tests/e2e/fault_matrix.py" "${args[@]}"
