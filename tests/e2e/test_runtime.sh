#!/usr/bin/env bash
# tests/e2e/test_runtime.sh: a program built with nvcc and the static CUDA
# runtime, run with the library on the emulated driver. The runtime resolves
# its driver table through cuGetProcAddress_v2 (flags 0 and 2); the report
# must show our wrappers handed out for the variants it uses. The runtime
# cannot run further on the emulation (cuGetExportTable returns
# CUDA_ERROR_NOT_SUPPORTED, so cudaGetDeviceCount fails): that is expected.
. "$(dirname "$0")/../lib.sh"
PROG=$BUILD/tests/e2e/rt_prog
if [ ! -x "$PROG" ]; then
    skip "the runtime program" "no nvcc: $PROG not built"
    done_testing; exit
fi
# Sanitizer build (make test SAN=address,... or SAN=thread): rt_prog (nvcc,
# not instrumented) would load the ASan/TSan runtime only as a dependency of
# the instrumented emulated driver or library, too late for it to work (ASan
# dies at start-up; TSan never sees the CUDA runtime's threads and their
# calls into instrumented code crash): preload the runtime the library links
# first. No leak check: the static CUDA runtime, which gives up here, leaves
# its own (uninstrumented) allocations behind, and LeakSanitizer's exit would
# lose the output; the library's paths are leak-checked by instrumented tests.
san_pre=
if [ -s "$BUILD/san.cfg" ]; then
    san_pre=$(ldd "$BUILD/libstablegraph.so" | awk '$1 ~ /^lib[at]san\.so/ { print $3; exit }')
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
base=$(LD_PRELOAD=$san_pre emu "$PROG")
rep=$TMP/rt.json
out=$(STABLEGRAPH_REPORT=$rep LD_PRELOAD=${san_pre:+$san_pre:}$BUILD/libstablegraph.so emu "$PROG")
check_eq "same runtime result as without the library (expected: not supported on the emulation)" "$out" "$base"
diag "runtime says: $out"
check "the runtime went through cuGetProcAddress_v2" [ "$(json_get "$rep" hooks.cuGetProcAddress_v2.calls)" -gt 100 ]
for name in cuMemAlloc_v2 cuGraphLaunch cuGraphLaunch_ptsz cuGraphExecUpdate_v2 cuStreamBeginCapture_v2_ptsz \
            cuStreamBeginCapture_v2 cuGraphInstantiateWithParams_ptsz; do
    check "runtime table holds our $name" [ "$(json_get "$rep" hooks.$name.resolved)" -ge 1 ]
done
done_testing
