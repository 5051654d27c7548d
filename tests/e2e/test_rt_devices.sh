#!/usr/bin/env bash
# tests/e2e/test_rt_devices.sh: one process, several GPUs, through the CUDA
# runtime (correctness round 24). tests/e2e/rt_devices.cu (nvcc, static
# runtime; kernels from tests/emu/mod_rtdev.c) on two emulated devices
# (CUDAEMU_DEVICES=2), without the library and under skip_temp and
# skip_profiled, with CUDAEMU_KERNEL_DELAY_US=0 and 200 (the pressure modes and a
# sanitizer build: 0 only). Each mode's output
# is the values the host read back (sums, update results, error names); it
# must be the one written here (the program also compares each with what the
# host computed and prints <mode>_check=ok) with and without the library,
# with 0 violations:
#   - devices: kernels on each device after cudaSetDevice, blocks allocated
#     and freed on both (one freed with the other device current), pointer
#     attributes naming the right device; the library placed memory on both
#     (a reservation per device);
#   - peer: cudaDeviceEnablePeerAccess, cudaMemcpyPeer, cudaMemcpyPeerAsync
#     and cudaMemcpy(Default) between blocks of each device, re-allocated
#     every step (the runtime reaches cuMemcpyPeer and cuMemcpyPeerAsync);
#   - graphs: a graph re-captured every step on each device's stream,
#     temporaries from cudaMalloc and cudaMallocAsync allocated and freed in
#     the step, cudaGraphExecUpdate, steps alternating devices: 10 updates,
#     4 of which change a scalar; under the library only those 4 reach the
#     driver (6 skipped, counted in the report);
#   - reset: cudaDeviceReset of device 1 between steps; device 1 used again
#     from scratch (all its memory free after the reset) while device 0's
#     buffers and exec carry on;
#   - threads: one host thread per device (DataParallel), each re-capturing
#     its own graph (thread-local capture) while the other allocates;
#   - pressure (256 MiB devices, CUDAEMU_FUNC_BYTES=16M; under the library
#     also with STABLEGRAPH_HEADROOM=0): most of device 1 filled with
#     cudaMalloc blocks and freed (the library keeps them), then the first
#     launches of two kernels on device 1 and a big cudaMalloc there.
#     `pressure fresh`: the kernels' first use in the process is on device
#     1 (the library loads them at their lookup); `pressure` and `pressure
#     kernel-first`: they were launched on device 0 first, so their first
#     launches on device 1 load them there, uncaptured (before the launch
#     filter, core/memory.h: cudaErrorMemoryAllocation for the second, or
#     with STABLEGRAPH_HEADROOM=0 for both; now such a launch takes the
#     general path, which gives the arenas' memory back and retries).
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
PROG=$BUILD/tests/e2e/rt_devices
MODS=$BUILD/tests/emu/mod_rtdev.so
POLICIES="skip_temp skip_profiled"
if [ ! -x "$PROG" ]; then
    skip "the several-device runtime program" "no nvcc: $PROG not built"
    done_testing; exit
fi
rt_setup "$LIB"          # (tests/lib.sh: what a sanitizer build changes)
export CUDAEMU_MODULES=$MODS CUDAEMU_DEVICES=2

# rtrun POLICY DELAY TAG ARGS...: runs the program without the library
# (POLICY none) or under POLICY (rt_run), with the variables in $EXTRA_ENV,
# leaving $TMP/TAG.{out,err,json,rep.json} and $rc.
EXTRA_ENV=
rtrun() {
    local policy=$1 delay=$2 tag=$3; shift 3
    read -r -a RT_ENV <<<"CUDAEMU_KERNEL_DELAY_US=$delay $EXTRA_ENV"
    rt_run "$policy" "$tag" "$PROG" "$@"
}
violations() { json_get "$TMP/$1.json" violations; }
calls() { json_get "$TMP/$1.json" "calls.$2"; }

# mode | extra environment ('-': none; p: 256 MiB devices, lazy loading
# taking 16 MiB per kernel and context) | expected output (\n between lines)
MODES="devices|-|devices=2\ndevices_sum=87934,1103611\ndevices_both=13307,14331\ndevices_check=ok
peer|-|peer_can=1,1\npeer_sum=79809.5\npeer_check=ok
graphs|-|graphs_sum=73638,196518\ngraphs_updates=5,5\ngraphs_check=ok
reset|-|reset_free=all\nreset_before=61410\nreset_sum=59317,100307,108494\nreset_updates=4,2\nreset_check=ok
threads|-|threads_sum=139104,302944\nthreads_updates=7,7\nthreads_check=ok
pressure fresh|p|pressure_blocks=most\npressure_late_launch=cudaSuccess\npressure_axpy_launch=cudaSuccess\npressure_big_malloc=cudaSuccess\npressure_sum=4091,22508,7163\npressure_check=ok
pressure|p|pressure_blocks=most\npressure_late_launch=cudaSuccess\npressure_axpy_launch=cudaSuccess\npressure_big_malloc=cudaSuccess\npressure_sum=18412,22508,7163\npressure_check=ok
pressure kernel-first|p|pressure_blocks=most\npressure_late_launch=cudaSuccess\npressure_axpy_launch=cudaSuccess\npressure_big_malloc=cudaSuccess\npressure_sum=18412,22508,7163\npressure_check=ok"
# Each mode without the library and under each policy, at each delay; the
# pressure modes at delay 0 only (what they test is memory, not ordering),
# under each policy also with STABLEGRAPH_HEADROOM=0 (freed memory kept
# until the driver refuses a call: the lookup's load, the launch filter's
# retry and the trims alone). A sanitizer build runs delay 0 only (it looks
# for memory and thread errors on the same paths; CI's time).
delays=$(test_delays)
while IFS='|' read -r mode extra want; do
    t=$(echo "$mode" | tr ' ' '_')
    want=$(printf '%b' "$want")
    md=$delays
    [ "$extra" = - ] || md=0
    runs=
    for delay in $md; do
        runs="$runs none:$delay"
        for policy in $POLICIES; do
            runs="$runs $policy:$delay"
            [ "$extra" = - ] || runs="$runs $policy:$delay:0"
        done
    done
    for run in $runs; do
        IFS=: read -r policy delay headroom <<<"$run"
        EXTRA_ENV=
        [ "$extra" = - ] || EXTRA_ENV="CUDAEMU_DEVICE_MEMORY=256M CUDAEMU_FUNC_BYTES=16M"
        name="$mode/$policy/delay $delay"
        if [ -n "$headroom" ]; then
            EXTRA_ENV="$EXTRA_ENV STABLEGRAPH_HEADROOM=$headroom"
            name="$name/headroom $headroom"
        fi
        tag=$t.$policy.$delay${headroom:+.h$headroom}
        # shellcheck disable=SC2086
        rtrun "$policy" "$delay" "$tag" $mode
        out=$(cat "$TMP/$tag.out")
        check_eq "$name: runs to completion" "$rc" 0
        [ "$rc" -eq 0 ] || diag "$(tail -n 3 "$TMP/$tag.err")"
        check_eq "$name: 0 violations" "$(violations "$tag")" 0
        check_eq "$name: the expected output (the run without the library's)" "$out" "$want"
    done
done <<<"$MODES"

# The library was at work on both devices, and what reached the driver.
check "devices/skip_temp: the library placed memory on both devices (a reservation each)" \
    [ "$(json_get "$TMP/devices.skip_temp.0.rep.json" library_driver_calls.cuMemAddressReserve)" -ge 2 ]
check "peer: the runtime made its peer copies through cuMemcpyPeer and cuMemcpyPeerAsync" \
    [ "$(calls peer.skip_temp.0 cuMemcpyPeer)" -ge 6 -a "$(calls peer.skip_temp.0 cuMemcpyPeerAsync)" -ge 6 ]
check_eq "graphs/none: all 10 updates reach the driver" "$(calls graphs.none.0 cuGraphExecUpdate_v2)" 10
for policy in $POLICIES; do
    check_eq "graphs/$policy: only the 4 updates that change a scalar reach the driver" \
        "$(calls graphs.$policy.0 cuGraphExecUpdate_v2)" 4
    check_eq "graphs/$policy: the report counts 6 updates skipped" \
        "$(json_get "$TMP/graphs.$policy.0.rep.json" totals.updates_skipped)" 6
    check "pressure fresh/$policy: the library loaded the kernel at its lookup (cuKernelGetFunction)" \
        [ "$(json_get "$TMP/pressure_fresh.$policy.0.rep.json" library_driver_calls.cuKernelGetFunction)" -ge 1 ]
done
check_eq "reset: cudaDeviceReset reset device 1's primary context" "$(calls reset.none.0 cuDevicePrimaryCtxReset)" 1
done_testing
