#!/usr/bin/env bash
# tests/e2e/test_skip_temp_mem.sh: placement of allocations under skip_temp
# (core/memory.c, core/arena.c) on the emulated driver.
#   - every workload (and recapture_temps --async-alloc) gives the checksum it
#     gives without the library, with 0 violations, also with
#     CUDAEMU_KERNEL_DELAY_US=200 (not in a sanitizer build: test_delays,
#     tests/lib.sh); cuMemAlloc_v2 / cuMemAllocAsync no longer reach the
#     driver, cuMemCreate / cuMemMap only a handful of times;
#     bytes_mapped <= 1.05 x bytes_requested + one granularity (report);
#   - fault injection on cuMemCreate, cuMemMap, cuMemSetAccess and
#     cuMemAddressReserve (1st call, 2nd call, every call): same checksums;
#   - CUDAEMU_NO_VMM=1: same checksums and a log line;
#   - what a program observes (mem_prog observe) is what it observes without
#     the library, legacy IPC included (core/ipc.c exports placed blocks;
#     another process opening them: tests/e2e/test_correctness.sh, c16);
#   - cuMemFree still waits for queued work (mem_prog sync);
#   - another thread's allocations during a GLOBAL-mode capture behave as
#     the driver's (mem_prog capture: refused, and the capture invalidated).
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
PROG=$BUILD/tests/e2e/mem_prog
MOD=$BUILD/tests/emu/mod_test.so
GRAN=$((2 << 20))
STEPS=12

# place NAME ARGS...: runs a workload under skip_temp into $TMP/NAME.{out,json,rep.json,err}
place() {
    local name=$1; shift
    STABLEGRAPH_POLICY=skip_temp STABLEGRAPH_REPORT=$TMP/$name.rep.json \
        CUDAEMU_STATS=$TMP/$name.json LD_PRELOAD=$LIB emu "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}
sum_of() { sum_in "$TMP/$1.out"; }
calls() { json_get "$TMP/$1.json" "calls.$2"; }

declare -A BASE
runs=()
for w in "$BUILD"/workloads/*; do
    [ -x "$w" ] && [ -f "$w" ] || continue
    case "$w" in *.so|*.fatbin) continue ;; esac
    runs+=("$(basename "$w")")
done
runs+=("recapture_temps --async-alloc")
check "workloads found" [ "${#runs[@]}" -gt 1 ]

for r in "${runs[@]}"; do
    set -- $r
    name=$(echo "$r" | tr -d ' -')
    emu "$BUILD/workloads/$1" "${@:2}" --steps $STEPS >"$TMP/$name.base.out" 2>&1
    check_baseline "$r" "$TMP/$name.base.out" $?
    BASE[$name]=$(sum_in "$TMP/$name.base.out")
    for delay in $(test_delays); do
        run=$name.d$delay
        CUDAEMU_KERNEL_DELAY_US=$delay place "$run" "$BUILD/workloads/$1" "${@:2}" --steps $STEPS
        check_sum "$r (delay $delay): checksum as without the library" "$(sum_of "$run")" "${BASE[$name]}"
        check_eq "$r (delay $delay): 0 violations" "$(json_get "$TMP/$run.json" violations)" 0
    done
    run=$name.d0
    # the library's own (the one-page block of each cuMemFree's synchronization) only
    check_eq "$r: the program's cuMemAlloc_v2 do not reach the driver" "$(calls "$run" cuMemAlloc_v2)" \
        "$(json_get "$TMP/$run.rep.json" library_driver_calls.cuMemAlloc_v2)"
    check_eq "$r: cuMemAllocAsync does not reach the driver" "$(calls "$run" cuMemAllocAsync)" 0
    creates=$(calls "$run" cuMemCreate) maps=$(calls "$run" cuMemMap)
    check "$r: cuMemCreate/cuMemMap a handful of times ($creates/$maps)" \
        [ "$creates" -ge 1 -a "$creates" -le 4 -a "$maps" -eq "$creates" ]
    # No capture is in progress at the program's cuMemFree: the one-page
    # block is allocated in the program's mode, with no capture-mode exchange
    # (two per free before); the exchanges left are the VMM set-up's (relaxed,
    # then back: the reservation and each chunk). cuMemFreeAsync records its
    # event in relaxed mode, as before.
    if [[ $r != *--async-alloc* ]]; then
        xch=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["library_driver_calls"].get("cuThreadExchangeStreamCaptureMode", 0))' "$TMP/$run.rep.json")
        check "$r: capture-mode exchanges only around VMM set-up ($xch, $creates chunks)" \
            [ "$xch" -le $((2 * creates + 2)) ]
    fi
    req=$(json_get "$TMP/$run.rep.json" totals.bytes_requested)
    mapped=$(json_get "$TMP/$run.rep.json" totals.bytes_mapped)
    diag "$r: bytes_requested=$req bytes_mapped=$mapped"
    check "$r: bytes_mapped $mapped <= 1.05 x $req + granularity" \
        python3 -c "import sys; sys.exit(not ($mapped <= 1.05 * $req + $GRAN and $req > 0))"
done

# Fault injection: each VMM call failing the 1st time, the 2nd time, always.
# Buffers of 1.2 MB make the arena grow several times. 5 nodes: the 4 lanes
# (4 temporaries a step, as with the default 64 nodes, and the same VMM calls)
# with few enough kernels that the Python model can check the baseline.
FRUNS=("recapture_temps --elems 300000 --nodes 5" "recapture_temps --async-alloc --elems 300000 --nodes 5")
for r in "${FRUNS[@]}"; do
    set -- $r
    name=$(echo "$r" | tr -d ' -')
    emu "$BUILD/workloads/$1" "${@:2}" --steps $STEPS >"$TMP/$name.base.out" 2>&1
    check_baseline "$r" "$TMP/$name.base.out" $?
    BASE[$name]=$(sum_in "$TMP/$name.base.out")
    place big.$name "$BUILD/workloads/$1" "${@:2}" --steps $STEPS
    check_sum "$r: checksum" "$(sum_of big.$name)" "${BASE[$name]}"
    req=$(json_get "$TMP/big.$name.rep.json" totals.bytes_requested)
    mapped=$(json_get "$TMP/big.$name.rep.json" totals.bytes_mapped)
    diag "$r: bytes_requested=$req bytes_mapped=$mapped"
    check "$r: bytes_mapped $mapped <= 1.05 x $req + granularity" \
        python3 -c "import sys; sys.exit(not ($mapped <= 1.05 * $req + $GRAN and $req > 0))"
done
for call in cuMemCreate cuMemMap cuMemSetAccess cuMemAddressReserve; do
    for n in 1 2 1+; do
        for r in "${FRUNS[@]}"; do
            set -- $r
            name=$(echo "$r" | tr -d ' -')
            run=fail.$name.$call.$n
            CUDAEMU_FAIL=$call:$n:CUDA_ERROR_OUT_OF_MEMORY place "$run" "$BUILD/workloads/$1" "${@:2}" --steps $STEPS
            check_sum "$call fails at $n: $r checksum" "$(sum_of "$run")" "${BASE[$name]}"
            check_eq "$call fails at $n: $r 0 violations" "$(json_get "$TMP/$run.json" violations)" 0
            # every handle made is released at the end (a failed cuMemCreate made none)
            made=$(calls "$run" cuMemCreate)
            if [ $call = cuMemCreate ]; then
                case $n in *+) made=0 ;; *) [ "$made" -ge "$n" ] && made=$((made - 1)) ;; esac
            fi
            check_eq "$call fails at $n: $r nothing leaked (handles made = cuMemRelease)" \
                "$made" "$(calls "$run" cuMemRelease)"
            if [ "$(calls "$run" $call)" -ge "${n%+}" ]; then
                check "$call fails at $n: $r the log names it" grep -q "$call failed" "$TMP/$run.err"
            else
                diag "$r: $call is called fewer than ${n%+} times (the unit tests cover that failure)"
            fi
        done
    done
    check "$call always failing: allocations forwarded to cuMemAlloc_v2" \
        [ "$(calls "fail.recapture_tempselems300000nodes5.$call.1+" cuMemAlloc_v2)" -gt 0 ]
done

# No VMM on the device.
for r in recapture_temps fresh_inputs; do
    CUDAEMU_NO_VMM=1 place novmm.$r "$BUILD/workloads/$r" --steps $STEPS
    check_sum "no VMM: $r checksum" "$(sum_of novmm.$r)" "${BASE[$r]}"
    check "no VMM: $r logged" grep -q "no virtual memory management support" "$TMP/novmm.$r.err"
    check_eq "no VMM: $r logged once" "$(grep -c 'no virtual memory' "$TMP/novmm.$r.err")" 1
done

# What the program observes.
emu "$PROG" observe >"$TMP/obs.base" 2>&1
STABLEGRAPH_POLICY=skip_temp CUDAEMU_STATS=$TMP/obs.json STABLEGRAPH_REPORT=$TMP/obs.rep.json \
    LD_PRELOAD=$LIB emu "$PROG" observe >"$TMP/obs.lib" 2>"$TMP/obs.err"
# program_allocs STATS REPORT: the cuMemAlloc_v2 that reached the driver for
# the program (the library's own, for cuMemFree's synchronization, apart)
program_allocs() {
    echo $(( $(json_get "$1" calls.cuMemAlloc_v2) - $(json_get "$2" library_driver_calls.cuMemAlloc_v2) ))
}
check_eq "observe: the program's allocations were placed (only alloc(0) reached the driver)" \
    "$(program_allocs "$TMP/obs.json" "$TMP/obs.rep.json")" 1
check_eq "observe: everything as without the library" "$(cat "$TMP/obs.lib")" "$(cat "$TMP/obs.base")"
for line in alloc0=1 range_ok=1 attr_range_ok=1 attr_ctx_ok=1 buffer_ids_ok=1 attrs_ok=1 \
            free_interior=1 free=0 double_free=1 range_after_free=500 attr_after_free=1 \
            "attrs_after_free=0 start=0" new_id=1; do
    check "observe: $line" grep -qx "$line" "$TMP/obs.lib"
done
check_eq "observe: IS_LEGACY_CUDA_IPC_CAPABLE answers as for cuMemAlloc memory" \
    "$(grep '^ipc_capable=' "$TMP/obs.lib")" "$(grep '^ipc_capable=' "$TMP/obs.base")"
check "observe: cuIpcGetMemHandle of a placed allocation succeeds" grep -qx ipc=0 "$TMP/obs.lib"
check "observe: and logs nothing" [ ! -s "$TMP/obs.err" ]
STABLEGRAPH_PLACE_MAX_BYTES=4999 STABLEGRAPH_POLICY=skip_temp LD_PRELOAD=$LIB emu "$PROG" observe \
    >"$TMP/obs.max" 2>&1
check "observe: STABLEGRAPH_PLACE_MAX_BYTES leaves larger allocations to the driver (IPC works)" \
    grep -qx ipc=0 "$TMP/obs.max"

# cuMemFree waits for queued work.
STABLEGRAPH_POLICY=skip_temp CUDAEMU_STATS=$TMP/sync.json STABLEGRAPH_REPORT=$TMP/sync.rep.json \
    LD_PRELOAD=$LIB emu "$PROG" sync "$MOD" >"$TMP/sync.out" 2>&1
check "cuMemFree of placed memory waited for the kernel" grep -qx free_waited=1 "$TMP/sync.out"
check_eq "sync: allocations were placed" "$(program_allocs "$TMP/sync.json" "$TMP/sync.rep.json")" 0

# Another thread's allocations during a GLOBAL capture: as without the
# library (issue 10, class 7): the driver refuses them and invalidates the
# capture; the library must not make them succeed.
emu "$PROG" capture "$MOD" >"$TMP/cap.base" 2>&1
check "capture: without the library the allocations invalidate it (the test is meaningful)" \
    grep -qx end_capture=901 "$TMP/cap.base"
STABLEGRAPH_POLICY=skip_temp CUDAEMU_STATS=$TMP/cap.json LD_PRELOAD=$LIB emu "$PROG" capture "$MOD" \
    >"$TMP/cap.out" 2>&1
check_eq "capture: the same results as without the library" "$(cat "$TMP/cap.out")" "$(cat "$TMP/cap.base")"
check "capture: the allocations reached the driver (which refused them)" \
    [ "$(json_get "$TMP/cap.json" calls.cuMemAlloc_v2)" -ge 1 ]
done_testing
