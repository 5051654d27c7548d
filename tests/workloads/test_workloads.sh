#!/usr/bin/env bash
# tests/workloads/test_workloads.sh: the workload programs on the emulated
# driver: they run, their checksums are stable across runs, depend on the
# work done and match an independent model (wl_reference.py); the driver sees
# exactly the calls each workload is meant to make (CUDAEMU_STATS); no
# violations with slow kernels; driver errors are reported by name; the
# fatbin for real GPUs is built when nvcc is present. (The workloads with the
# library: tests/e2e/test_passthrough.sh and the policies' tests.)
. "$(dirname "$0")/../lib.sh"
WL=$BUILD/workloads
REF=$SRC/tests/workloads/wl_reference.py
NAMES="recapture_temps rotating_inputs fresh_inputs slices scalar_changes topology_changes"

# run NAME ARGS...: runs a workload on the emulated driver; sets $rc, $out
# (also in $TMP/run.out) and $sum (empty without a well-formed checksum).
run() {
    emu "$WL/$1" "${@:2}" >"$TMP/run.out" 2>&1; rc=$?
    out=$(cat "$TMP/run.out")
    sum=$(sum_in "$TMP/run.out")
}
# stat FILE NAME: a call count from a CUDAEMU_STATS file.
stat() { json_get "$1" "calls.$2"; }

for w in $NAMES; do
    run "$w"
    check_baseline "$w" "$TMP/run.out" "$rc"
    first=$sum
    run "$w"
    check_sum "$w: same checksum on a second run" "$sum" "$first"

    run "$w" --steps 5; s5=$sum
    run "$w" --steps 6; s6=$sum
    check "$w: --steps 5 and --steps 6 give different checksums" test -n "$s5" -a -n "$s6" -a "$s5" != "$s6"
    run "$w" --steps 6 --nodes 9
    check "$w: --nodes changes the checksum" test -n "$sum" -a -n "$s6" -a "$sum" != "$s6"

    for shape in "5 8 64" "7 2 33" "9 5 16"; do
        set -- $shape
        run "$w" --steps "$1" --nodes "$2" --elems "$3"
        check_sum "$w: steps=$1 nodes=$2 elems=$3 matches the reference model" \
            "$sum" "$(python3 "$REF" "$w" "$1" "$2" "$3")"
    done

    CUDAEMU_KERNEL_DELAY_US=200 CUDAEMU_STATS=$TMP/delay.json run "$w" --steps 4 --nodes 8
    check_eq "$w: slow kernels: exits 0" "$rc" 0
    check_eq "$w: slow kernels: 0 violations" "$(json_get "$TMP/delay.json" violations)" 0
    delayed=$sum
    run "$w" --steps 4 --nodes 8
    check_sum "$w: slow kernels: same checksum" "$delayed" "$sum"
done

# --- the calls each workload makes, counted by the driver (30 steps, 64 nodes: 4 seed nodes)
CUDAEMU_STATS=$TMP/rt.json run recapture_temps --steps 30
check_eq "recapture_temps: 29 cuGraphExecUpdate_v2" "$(stat "$TMP/rt.json" cuGraphExecUpdate_v2)" 29
check_eq "recapture_temps: 1 instantiation" "$(stat "$TMP/rt.json" cuGraphInstantiateWithFlags)" 1
check_eq "recapture_temps: 30 captures" "$(stat "$TMP/rt.json" cuStreamBeginCapture_v2)" 30
check_eq "recapture_temps: 30 launches" "$(stat "$TMP/rt.json" cuGraphLaunch)" 30
check_eq "recapture_temps: 4 temps a step + in/out" "$(stat "$TMP/rt.json" cuMemAlloc_v2)" 122
check_eq "recapture_temps: every allocation freed" "$(stat "$TMP/rt.json" cuMemFree_v2)" 122
check "recapture_temps: the program saw no failed update" grep -q "updates=29 update_failures=0" <<<"$out"
sync_sum=$sum

CUDAEMU_STATS=$TMP/ra.json run recapture_temps --steps 30 --async-alloc
check_sum "recapture_temps --async-alloc: same checksum" "$sum" "$sync_sum"
check_eq "recapture_temps --async-alloc: 120 cuMemAllocAsync" "$(stat "$TMP/ra.json" cuMemAllocAsync)" 120
check_eq "recapture_temps --async-alloc: 120 cuMemFreeAsync" "$(stat "$TMP/ra.json" cuMemFreeAsync)" 120
check_eq "recapture_temps --async-alloc: only in/out from cuMemAlloc" "$(stat "$TMP/ra.json" cuMemAlloc_v2)" 2
check_eq "recapture_temps --async-alloc: 29 updates" "$(stat "$TMP/ra.json" cuGraphExecUpdate_v2)" 29

for w in rotating_inputs scalar_changes; do
    CUDAEMU_STATS=$TMP/$w.json run "$w" --steps 30
    check_eq "$w: 30 cuGraphLaunch" "$(stat "$TMP/$w.json" cuGraphLaunch)" 30
    check_eq "$w: 120 cuGraphExecKernelNodeSetParams_v2" \
        "$(stat "$TMP/$w.json" cuGraphExecKernelNodeSetParams_v2)" 120
    check_eq "$w: captured once" "$(stat "$TMP/$w.json" cuStreamBeginCapture_v2)" 1
    check_eq "$w: instantiated once" "$(stat "$TMP/$w.json" cuGraphInstantiateWithFlags)" 1
    check_eq "$w: no cuGraphExecUpdate" "$(stat "$TMP/$w.json" cuGraphExecUpdate_v2)" 0
done

CUDAEMU_STATS=$TMP/fi.json run fresh_inputs --steps 30
check_eq "fresh_inputs: 29 cuGraphExecUpdate_v2" "$(stat "$TMP/fi.json" cuGraphExecUpdate_v2)" 29
check_eq "fresh_inputs: 1 instantiation" "$(stat "$TMP/fi.json" cuGraphInstantiateWithFlags)" 1
check_eq "fresh_inputs: a new input each step + out + 4 lanes" "$(stat "$TMP/fi.json" cuMemAlloc_v2)" 35
check_eq "fresh_inputs: every allocation freed" "$(stat "$TMP/fi.json" cuMemFree_v2)" 35

CUDAEMU_STATS=$TMP/sl.json run slices --steps 30
check_eq "slices: one allocation" "$(stat "$TMP/sl.json" cuMemAlloc_v2)" 1
check_eq "slices: 29 cuGraphExecUpdate_v2" "$(stat "$TMP/sl.json" cuGraphExecUpdate_v2)" 29
check_eq "slices: 1 instantiation" "$(stat "$TMP/sl.json" cuGraphInstantiateWithFlags)" 1
check_eq "slices: a captured memset per step" "$(stat "$TMP/sl.json" cuMemsetD32Async)" 30
check_eq "slices: a captured memcpy per step" "$(stat "$TMP/sl.json" cuMemcpyDtoDAsync_v2)" 30

CUDAEMU_STATS=$TMP/tc.json run topology_changes --steps 30
check_eq "topology_changes: 29 cuGraphExecUpdate_v2" "$(stat "$TMP/tc.json" cuGraphExecUpdate_v2)" 29
# steps 3,7,...,27 change shape: the update fails there and on the step after
check_eq "topology_changes: 15 instantiations" "$(stat "$TMP/tc.json" cuGraphInstantiateWithFlags)" 15
check "topology_changes: the program saw 14 failed updates" grep -q "updates=29 update_failures=14" <<<"$out"
check_eq "topology_changes: 15 execs destroyed" "$(stat "$TMP/tc.json" cuGraphExecDestroy)" 15

# --- errors
run rotating_inputs --steps 3 --nodes 1
check_eq "--nodes 1 is refused with status 2" "$rc" 2
run slices --async-alloc
check_eq "--async-alloc only where supported" "$rc" 2
CUDAEMU_FAIL=cuGraphLaunch:2:CUDA_ERROR_LAUNCH_FAILED run rotating_inputs --steps 3
check_eq "a driver error exits 1" "$rc" 1
check "a driver error names the call and the error" \
    grep -q "cuGraphLaunch.*CUDA_ERROR_LAUNCH_FAILED" <<<"$out"
check "a driver error prints no checksum" test -z "$(grep checksum <<<"$out")"

# --- the kernels for real GPUs
if [ -x "${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}" ]; then
    fatbin=$WL/wl_kernels.fatbin
    check "nvcc present: the fatbin is built" test -s "$fatbin"
    # Each fatbin entry: u16 kind (1 PTX, 2 ELF), u16 version, u32 header
    # size, u64 padded payload size, ..., u32 SM version at offset 28.
    archs=$(python3 - "$fatbin" <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
magic, _, hsz, size = struct.unpack_from('<IHHQ', d, 0)
assert magic == 0xBA55ED50, 'not a fatbin'
off, out = hsz, []
while off < hsz + size:
    kind, _, ehsz, psz = struct.unpack_from('<HHIQ', d, off)
    out.append({1: 'ptx', 2: 'sm'}.get(kind, '?') + '_%d' % struct.unpack_from('<I', d, off + 28)[0])
    off += ehsz + psz
print(' '.join(sorted(out)))
PY
)
    check_eq "fatbin holds sm_80 and sm_90 code and sm_90 PTX" "$archs" "ptx_90 sm_80 sm_90"
    if command -v cuobjdump >/dev/null; then
        check "cuobjdump lists sm_90 code" bash -c "cuobjdump --list-elf '$fatbin' | grep -q sm_90"
    fi
fi
done_testing
