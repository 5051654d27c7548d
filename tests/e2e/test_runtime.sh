#!/usr/bin/env bash
# tests/e2e/test_runtime.sh: unmodified CUDA runtime programs (nvcc, static
# runtime unless named otherwise) on the emulated driver, with and without
# the library.
#   - rt_prog (tests/e2e/rt_prog.cu): the runtime starts (its private tables,
#     the integrity check it verifies), registers its fat binary, finds its
#     C++ kernels by mangled name in CUDAEMU_MODULES, and every check gives
#     the expected value: launches, device properties, function attributes,
#     occupancy, the dynamic shared memory limit, a captured graph updated
#     with cudaGraphExecUpdate and cudaGraphExecKernelNodeSetParams,
#     cudaMallocAsync, cudaDeviceReset and a fresh start; the same output
#     under every policy; the report shows our wrappers handed out through
#     cuGetProcAddress_v2 for every hooked call the program used;
#   - a kernel no module provides fails its launch, named in the log; with a
#     bad CUDAEMU_MODULES (no such file, not a module, no emu_module[]) no
#     CUDA image loads and the log says why;
#   - CUDAEMU_TRACE_RESOLVE=1 logs the runtime's requests; none is unknown;
#   - the runtime workloads ($BUILD/workloads/rt/): their checksum is their
#     driver-API twin's and the Python model's; under off, always_update,
#     skip_temp and skip_profiled, with and without
#     CUDAEMU_KERNEL_DELAY_US=200 (a sanitizer build: without only): the
#     same checksum, 0 violations, and the
#     same graph updates and instantiations reach the driver as for the twin
#     (the same savings); the report counts the updates skipped;
#   - cudaDeviceReset gives back the program's memory under every policy.
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
PROG=$BUILD/tests/e2e/rt_prog
RT=$BUILD/workloads/rt
WL=$BUILD/workloads
REF=$SRC/tests/workloads/wl_reference.py
CXX_MODS=$BUILD/tests/emu/mod_cxx.so
WL_MODS=$WL/wl_kernels.so
POLICIES="off always_update skip_temp skip_profiled"
if [ ! -x "$PROG" ] || [ ! -x "$RT/rt_recapture_temps" ]; then
    skip "the runtime programs" "no nvcc: $PROG and $RT not built"
    done_testing; exit
fi
# The programs run through rt_run (tests/lib.sh, which says what a
# sanitizer build changes); under the library, variants are bought at
# skip_profiled's decision (a table in which they are free): the runtime
# program and its twin then make the same calls whatever their measured
# update times (the purchase itself: test_skip_profiled.sh).
rt_setup "$LIB"
RT_LIB_ENV=(STABLEGRAPH_COSTS="$SRC/tests/lib/costs-free-variants.tsv")
sum_of() { sed -n 's/^checksum: \([0-9a-f]\{16\}\)$/\1/p' "$TMP/$1.out"; }
calls() { json_get "$TMP/$1.json" "calls.$2"; }
# counted TAG: "NAME=N ..." for the calls in $COUNTED that reached the driver,
# then violations=N (one python3 run).
counted() {
    python3 - "$TMP/$1.json" $COUNTED <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join("%s=%d" % (c, d["calls"].get(c, 0)) for c in sys.argv[2:]), "violations=%d" % d["violations"])
PY
}

# --------------------------------------------------------------- rt_prog
export CUDAEMU_MODULES=$CXX_MODS
rt_run none prog "$PROG"
check_eq "rt_prog runs to completion" "$rc" 0
[ "$rc" -eq 0 ] || diag "$(cat "$TMP/prog.out" "$TMP/prog.err")"
expect() { check_eq "rt_prog: $1" "$(grep "^$1=" "$TMP/prog.out")" "$1=$2"; }
expect devices 1
expect launch 3
expect occupancy 16
expect big_smem cudaErrorInvalidValue
expect big_smem_allowed 4
expect graph 14
expect graph_update 14,5
expect graph_set_params 114,5
expect after_reset 7
check_eq "rt_prog: device properties" "$(grep '^name=' "$TMP/prog.out")" \
    "name=cudaemu emulated device 0 cc=9.0 sms=132"
check_eq "rt_prog: function attributes" "$(grep '^attr_' "$TMP/prog.out")" \
    "attr_regs=32 attr_max_threads=1024 attr_max_dyn=49152"
check_eq "rt_prog: the runtime registered its fat binary as a library" "$(calls prog cuLibraryLoadData)" 1
check "rt_prog: the runtime launched kernels found by mangled name" [ "$(calls prog cuLaunchKernel)" -ge 5 ]
check_eq "rt_prog: cudaDeviceReset reset the primary context" "$(calls prog cuDevicePrimaryCtxReset)" 1
base=$(cat "$TMP/prog.out")
for policy in $POLICIES; do
    rt_run "$policy" prog.$policy "$PROG"
    check_eq "rt_prog/$policy: same output as without the library" "$(cat "$TMP/prog.$policy.out")" "$base"
done
rep=$TMP/prog.always_update.rep.json
check "the runtime resolved its table through cuGetProcAddress_v2" \
    [ "$(json_get "$rep" hooks.cuGetProcAddress_v2.calls)" -gt 100 ]
for name in cuMemAlloc_v2 cuGraphLaunch cuGraphLaunch_ptsz cuGraphExecUpdate_v2 cuStreamBeginCapture_v2_ptsz \
            cuStreamBeginCapture_v2 cuGraphInstantiateWithParams_ptsz; do
    check "runtime table holds our $name" [ "$(json_get "$rep" hooks.$name.resolved)" -ge 1 ]
done
# Every hooked call the program made went through a wrapper the runtime got
# from cuGetProcAddress_v2 (the runtime has no other way to our hooks).
unresolved=$(python3 - "$rep" <<'PY'
import json, sys
hooks = json.load(open(sys.argv[1]))["hooks"]
print(" ".join(sorted(n for n, h in hooks.items()
                      if h.get("calls", 0) and not h.get("resolved", 0) and n != "cuGetProcAddress_v2")))
PY
)
check_eq "every hooked call the program used was handed out through cuGetProcAddress_v2" "$unresolved" ""
check "the report counts the program's updates" [ "$(json_get "$rep" totals.updates_seen)" -ge 2 ]

# --------------------------------------------------------------- kernels no module provides
rt_run none missing "$PROG" missing
check_eq "a kernel no module provides: the launch fails" "$(grep '^missing=' "$TMP/missing.out")" \
    "missing=cudaErrorNoKernelImageForDevice"
check "a kernel no module provides: the log names it" \
    grep -q "kernel '_Z7missingPf' is not provided by any module in CUDAEMU_MODULES" "$TMP/missing.err"
CUDAEMU_MODULES= rt_run none nomods "$PROG"
check "CUDAEMU_MODULES unset: the first launch fails" grep -q "^error=cudaErrorNoKernelImageForDevice" "$TMP/nomods.out"
check "CUDAEMU_MODULES unset: the log says so" grep -q "kernel '_Z3addPffi' is not provided.*(unset)" "$TMP/nomods.err"
for bad in /nonexistent/mod.so /etc/hostname "$BUILD/libstablegraph.so"; do
    CUDAEMU_MODULES=$CXX_MODS:$bad rt_run none badmods "$PROG"
    check "a bad CUDAEMU_MODULES ($bad): the fat binary cannot be loaded, the program's launch fails" \
        grep -q "^error=cudaErrorSharedObjectInitFailed" "$TMP/badmods.out"
    check "a bad CUDAEMU_MODULES ($bad): the log names the variable and the path" \
        grep -q "cudaemu: bad value for CUDAEMU_MODULES: '$bad'" "$TMP/badmods.err"
done

# --------------------------------------------------------------- what the runtime asks for
CUDAEMU_TRACE_RESOLVE=1 rt_run none trace "$PROG"
check_eq "traced: same output" "$(cat "$TMP/trace.out")" "$base"
check_eq "traced: every private table the runtime asks for is known" \
    "$(grep -c 'unknown private table\|does not implement' "$TMP/trace.err")" 0
check_eq "traced: the tables asked for" \
    "$(sed -n 's/.*cuGetExportTable([0-9a-f-]*) -> \([A-Z_]*\)$/\1/p' "$TMP/trace.err" | sort -u | tr '\n' ' ')" \
    "BOOTSTRAP CALLBACK_HOOKS CONTEXT_CHECKS CONTEXT_STORAGE CUDART_INTERFACE INTEGRITY_CHECK TOOLS_TLS "
check "traced: the integrity check asked with version % 10 == 2 (the hash)" \
    grep -q "INTEGRITY_CHECK\[1\] version [0-9]*2$" "$TMP/trace.err"
check "traced: cuGetProcAddress requests logged" \
    [ "$(grep -c 'runtime: cuGetProcAddress("' "$TMP/trace.err")" -eq "$(calls trace cuGetProcAddress_v2)" ]
check "traced: the runtime's context-local storage and its destroy callback (cudaDeviceReset)" \
    grep -q "CONTEXT_STORAGE destroy callback" "$TMP/trace.err"

# --------------------------------------------------------------- runtime workloads
export CUDAEMU_MODULES=$WL_MODS
# name | args | driver-API twin (same args) | model name ('-': none)
WORKLOADS="rt_recapture_temps||recapture_temps|recapture_temps
rt_recapture_temps|--async-alloc|recapture_temps|recapture_temps
rt_recapture_temps_ptds||recapture_temps|recapture_temps
rt_rotating_inputs||rotating_inputs|rotating_inputs
rt_rotating_inputs_shared||rotating_inputs|rotating_inputs
rt_fresh_inputs||fresh_inputs|fresh_inputs
rt_instantiate_loop||recapture_temps|recapture_temps
rt_train_loop|--steps 12 --nodes 48|train_loop|-"
COUNTED="cuGraphExecUpdate_v2 cuGraphExecKernelNodeSetParams_v2 cuGraphInstantiateWithFlags cuGraphLaunch"
# A sanitizer build runs the workloads at delay 0 only (it looks for memory
# and thread errors on the same paths; CI's time).
RT_DELAYS=$(test_delays)

while IFS='|' read -r name args twin model; do
    t=$(echo "$name$args" | tr -d ' -')
    rt_run none "$t" "$RT/$name" $args
    check_eq "$name $args: runs on the emulated driver" "$rc" 0
    [ "$rc" -eq 0 ] || diag "$(tail -n 3 "$TMP/$t.err")"
    base=$(sum_of "$t")
    rt_run none "$t.twin" "$WL/$twin" $args
    check "$name $args: checksum = $twin's" [ -n "$base" -a "$base" = "$(sum_of "$t.twin")" ]
    if [ "$model" != - ]; then
        rt_run none "$t.small" "$RT/$name" $args --steps 5 --nodes 8 --elems 64
        check_eq "$name $args: checksum = the Python model's (5 steps, 8 nodes, 64 words)" \
            "$(sum_of "$t.small")" "$(python3 "$REF" "$model" 5 8 64)"
    fi
    for policy in $POLICIES; do
        for delay in $RT_DELAYS; do
            tag=$t.$policy.$delay
            CUDAEMU_KERNEL_DELAY_US=$delay rt_run "$policy" "$tag" "$RT/$name" $args
            check_eq "$name $args/$policy/delay $delay: checksum as without the library" "$(sum_of "$tag")" "$base"
            check "$name $args/$policy/delay $delay: 0 violations" grep -q ' violations=0$' <<<"$(counted "$tag")"
        done
        # the same savings as the twin: what reaches the driver
        if [ "$name" = rt_instantiate_loop ]; then
            check_eq "$name/$policy: every instantiation and launch still reaches the driver" \
                "$(counted "$t.$policy.0")" "$(counted "$t")"
        else
            rt_run "$policy" "$t.twin.$policy" "$WL/$twin" $args
            check_eq "$name $args/$policy: the driver sees what it sees for $twin" \
                "$(counted "$t.$policy.0")" "$(counted "$t.twin.$policy")"
        fi
    done
done <<<"$WORKLOADS"

# the savings, spelled out for the update-heavy ones (30 steps, 64 nodes, 4 seed nodes)
check_eq "rt_recapture_temps/skip_temp: no update reaches the driver" \
    "$(calls rt_recapture_temps.skip_temp.0 cuGraphExecUpdate_v2)" 0
check_eq "rt_recapture_temps/skip_temp: the report counts 29 updates skipped" \
    "$(json_get "$TMP/rt_recapture_temps.skip_temp.0.rep.json" totals.updates_skipped)" 29
check_eq "rt_recapture_temps/always_update: all 29 reach the driver" \
    "$(calls rt_recapture_temps.always_update.0 cuGraphExecUpdate_v2)" 29
check "rt_rotating_inputs/skip_profiled: most of the 120 node updates skipped" \
    [ "$(calls rt_rotating_inputs.skip_profiled.0 cuGraphExecKernelNodeSetParams_v2)" -lt 30 ]
check "rt_recapture_temps_ptds: the per-thread wrappers were handed out and used" \
    [ "$(json_get "$TMP/rt_recapture_temps_ptds.always_update.0.rep.json" hooks.cuStreamBeginCapture_v2_ptsz.calls)" -eq 30 ]

# --------------------------------------------------------------- cudaDeviceReset gives memory back
# 6 rounds of 100 MiB allocated and left to cudaDeviceReset, on a 256 MiB
# device. The CUDA 13 runtime resets through the 7.0 entry
# cuDevicePrimaryCtxReset (cuGetProcAddress "cuDevicePrimaryCtxReset", 7000).
export CUDAEMU_MODULES=$CXX_MODS
for policy in none $POLICIES; do
    CUDAEMU_DEVICE_MEMORY=$((256 << 20)) rt_run "$policy" reset.$policy "$PROG" reset 6 100
    check_eq "cudaDeviceReset frees what the program left ($policy)" "$(cat "$TMP/reset.$policy.out")" \
        "$(printf 'devices=1\nreset=ok')"
done

# --------------------------------------------------------------- lazy loading on a full device
# Most of a 256 MiB device allocated and freed (the library's arenas keep
# it), then a kernel's first launch: under lazy loading its code takes
# device memory then (CUDAEMU_FUNC_BYTES=16M). The runtime looks the kernel
# up (cuLibraryGetKernel) and launches the CUkernel straight away; the
# library loads it at the lookup, giving back what the arenas hold if short
# (core/memory.c kernel_lookup).
for policy in none $POLICIES; do
    CUDAEMU_DEVICE_MEMORY=$((256 << 20)) CUDAEMU_FUNC_BYTES=16M rt_run "$policy" squeeze.$policy "$PROG" squeeze
    check_eq "a kernel's first launch after the device was filled and freed ($policy)" \
        "$(cat "$TMP/squeeze.$policy.out")" "$(printf 'devices=1\nsqueeze=2.5')"
done
done_testing
