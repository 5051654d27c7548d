#!/usr/bin/env bash
# tests/e2e/test_skip_profiled.sh: the skip_profiled policy (core/profiled.c)
# on the emulated driver, counted by its CUDAEMU_STATS, 30 steps, with and
# without CUDAEMU_KERNEL_DELAY_US=200:
#   - rotating_inputs, fresh_inputs, slices: checksums equal to the run
#     without the library, 0 violations; update calls reaching the driver
#     (cuGraphExecUpdate(_v2), cuGraphExecKernelNodeSetParams(_v2),
#     cuGraphExecNodeSetParams) at most (PROFILE_STEPS + 2) x the updates the
#     program makes per step (rotating_inputs makes one per seed node, the
#     others one), and none at all between step 10 and step 30 (--steps 10
#     vs --steps 30). slices rotates among 7 states: the default 8
#     generations serve it; with 4 it must still be right.
#   - rotating_inputs steady state: no cuMemMap / cuMemUnmap / cuMemSetAccess
#     / cuMemCreate between step 10 and step 30.
#   - scalar_changes: every changed scalar reaches the driver; topology_changes:
#     right checksum.
#   - aliasing exercised: CUDAEMU_GRANULARITY=65536 STABLEGRAPH_ALIAS_MIN_BYTES=4096
#     STABLEGRAPH_ALIAS=always STABLEGRAPH_MAX_GENERATIONS=1: fresh_inputs
#     gets no update after profiling (the one translation of the program's
#     exec included: <= PROFILE_STEPS + 2), cuMemMap every step, right
#     checksum, 0 violations; then the same with a fault injected in each VMM
#     and event call the aliasing makes (1st call, and from the Nth on).
#   - restoring the program's exec with the library's own driver calls
#     failing (each restore path's entries, one at a time, 1st call on):
#     checksum equal to the run without the library, no error reaching the
#     program, the fallback path that restored it; every path failing: the
#     launch gets CUDA_ERROR_OUT_OF_MEMORY instead of running a wrong state.
#   - always_update's would_skip_profiled equals skip_profiled's skipped count
#     (rotating_inputs, fresh_inputs); the report carries a "profile" object.
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
W=$BUILD/workloads
STEPS=30
UPDATES="cuGraphExecUpdate_v2 cuGraphExecUpdate cuGraphExecKernelNodeSetParams_v2 cuGraphExecKernelNodeSetParams cuGraphExecNodeSetParams"
VMM="cuMemMap cuMemUnmap cuMemSetAccess cuMemCreate"

# run TAG NAME POLICY STEPS [ENV...]: runs workload NAME (policy none = no
# library, and then checked: status 0, the model's checksum) leaving
# $TMP/TAG.{out,json,report.json}.
run() {
    local tag=$1 name=$2 policy=$3 steps=$4; shift 4
    if [ "$policy" = none ]; then
        env "$@" CUDAEMU_STATS=$TMP/$tag.json LD_LIBRARY_PATH="$EMU_LIB" "$W/$name" --steps "$steps" \
            >"$TMP/$tag.out" 2>&1
        check_baseline "$name, $steps steps${*:+ ($*)}" "$TMP/$tag.out" $?
    else
        env "$@" STABLEGRAPH_POLICY=$policy STABLEGRAPH_REPORT=$TMP/$tag.report.json \
            CUDAEMU_STATS=$TMP/$tag.json LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" \
            "$W/$name" --steps "$steps" >"$TMP/$tag.out" 2>&1
    fi
}
sum_of() { sum_in "$TMP/$1.out"; }
# calls TAG NAMES...: sum of those driver calls
calls() {
    python3 - "$TMP/$1.json" "${@:2}" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["calls"]
print(sum(c.get(n, 0) for n in sys.argv[2:]))
PY
}
# exec_sum TAG FIELD: a per-exec report field summed over execs
exec_sum() {
    python3 -c 'import json,sys; print(sum(e[sys.argv[2]] for e in json.load(open(sys.argv[1]))["execs"]))' \
        "$TMP/$1.report.json" "$2"
}

for delay in 0 200; do
    export CUDAEMU_KERNEL_DELAY_US=$delay
    for name in rotating_inputs fresh_inputs slices; do
        tag="$name/delay=$delay"
        extra=()
        run base $name none $STEPS
        run prof $name skip_profiled $STEPS "${extra[@]}"
        run prof10 $name skip_profiled 10 "${extra[@]}"
        check_sum "$tag: checksum" "$(sum_of prof)" "$(sum_of base)"
        check "$tag: runs" [ -n "$(sum_of prof)" ]
        check_eq "$tag: violations" "$(json_get "$TMP/prof.json" violations)" 0
        per_step=$(( $(calls base $UPDATES) / STEPS ))
        [ "$per_step" -ge 1 ] || per_step=1
        n=$(calls prof $UPDATES)
        check "$tag: update calls reaching the driver <= (3 + 2) x $per_step (got $n)" \
            [ "$n" -le $(( 5 * per_step )) ]
        check_eq "$tag: no update reaches the driver between step 10 and 30" \
            "$(calls prof10 $UPDATES)" "$n"
        check_eq "$tag: report: decided generations" \
            "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["execs"][0]["profile"]["mode"])' "$TMP/prof.report.json")" generations
        if [ $name = rotating_inputs ]; then
            check_eq "$tag: steady state: no VMM call between step 10 and 30" \
                "$(calls prof10 $VMM)" "$(calls prof $VMM)"
        fi
    done
    # slices with 4 generations: 7 states, so variants get updated; still right
    run prof slices skip_profiled $STEPS STABLEGRAPH_MAX_GENERATIONS=4
    run base slices none $STEPS
    check_sum "slices/delay=$delay, 4 generations: checksum" "$(sum_of prof)" "$(sum_of base)"
    check_eq "slices/delay=$delay, 4 generations: violations" "$(json_get "$TMP/prof.json" violations)" 0
done
unset CUDAEMU_KERNEL_DELAY_US

run base scalar_changes none $STEPS
run prof scalar_changes skip_profiled $STEPS
check_sum "scalar_changes: checksum" "$(sum_of prof)" "$(sum_of base)"
lanes=$(( $(calls base cuGraphExecKernelNodeSetParams_v2) / STEPS ))
check "scalar_changes: the workload sets its seed nodes every step" [ "$lanes" -ge 1 ]
check_eq "scalar_changes: every scalar change reaches the driver" \
    "$(calls prof cuGraphExecKernelNodeSetParams_v2)" $(( (STEPS - 1) * lanes ))
check_eq "scalar_changes: decided plain" \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["execs"][0]["profile"]["mode"])' "$TMP/prof.report.json")" plain

run base topology_changes none $STEPS
run prof topology_changes skip_profiled $STEPS
check_sum "topology_changes: checksum" "$(sum_of prof)" "$(sum_of base)"
check_eq "topology_changes: violations" "$(json_get "$TMP/prof.json" violations)" 0

# Aliasing: small granules, every buffer its own handles, one generation.
ALIAS_ENV=(CUDAEMU_GRANULARITY=65536 STABLEGRAPH_ALIAS_MIN_BYTES=4096 STABLEGRAPH_ALIAS=always
           STABLEGRAPH_MAX_GENERATIONS=1)
for delay in 0 200; do
    tag="aliasing/fresh_inputs/delay=$delay"
    run base fresh_inputs none $STEPS CUDAEMU_GRANULARITY=65536
    run alias fresh_inputs skip_profiled $STEPS "${ALIAS_ENV[@]}" CUDAEMU_KERNEL_DELAY_US=$delay
    run alias10 fresh_inputs skip_profiled 10 "${ALIAS_ENV[@]}" CUDAEMU_KERNEL_DELAY_US=$delay
    check_sum "$tag: checksum" "$(sum_of alias)" "$(sum_of base)"
    check_eq "$tag: violations" "$(json_get "$TMP/alias.json" violations)" 0
    n=$(calls alias $UPDATES)
    check "$tag: update calls <= 3 + 2 (got $n)" [ "$n" -le 5 ]
    check_eq "$tag: no update after profiling (step 10 to 30)" "$(calls alias10 $UPDATES)" "$n"
    maps=$(( $(calls alias cuMemMap) - $(calls alias10 cuMemMap) ))
    check "$tag: the slot is remapped every step (cuMemMap steps 10..30: $maps)" [ "$maps" -ge 20 ]
    check_eq "$tag: one aliased slot in the report" \
        "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["execs"][0]["profile"]["aliased_slots"])' "$TMP/alias.report.json")" 1
done

# Fault injection on every VMM / event call the aliasing makes: right results.
base=$(sum_of base)
for f in cuMemMap cuMemSetAccess cuMemUnmap cuMemAddressReserve cuEventRecord; do
    for when in 1 5+ 12+; do
        run fault fresh_inputs skip_profiled $STEPS "${ALIAS_ENV[@]}" \
            CUDAEMU_FAIL=$f:$when:CUDA_ERROR_OUT_OF_MEMORY
        check_sum "fault $f:$when: checksum" "$(sum_of fault)" "$base"
        check_eq "fault $f:$when: violations" "$(json_get "$TMP/fault.json" violations)" 0
    done
done

# Restoring the program's exec when the library's own driver calls fail
# (profiled.c, "Restoring the program's exec"): each entry failing from its
# 1st call on, the checksum equals the run without the library and nothing
# is launched in another state. slices destroys its graph every step, so
# the per-node exec updates (path B) cannot name its nodes there: the clone
# set through cuGraphNodeSetParams (path C) restores it; rotating_inputs
# keeps its graph: path B.
for spec in slices:cuGraphKernelNodeSetParams_v2:1+:CUDA_ERROR_UNKNOWN:C \
            slices:cuGraphMemcpyNodeSetParams:1+:CUDA_ERROR_UNKNOWN:C \
            slices:cuGraphMemsetNodeSetParams:1+:CUDA_ERROR_UNKNOWN:C \
            slices:cuGraphNodeSetParams:1+:CUDA_ERROR_UNKNOWN:- \
            slices:cuGraphExecMemcpyNodeSetParams:1+:CUDA_ERROR_UNKNOWN:- \
            slices:cuGraphExecMemsetNodeSetParams:1+:CUDA_ERROR_UNKNOWN:- \
            slices:cuFuncGetParamInfo:1:CUDA_ERROR_INVALID_VALUE:- \
            rotating_inputs:cuGraphKernelNodeSetParams_v2:1+:CUDA_ERROR_UNKNOWN:B \
            rotating_inputs:cuGraphExecUpdate_v2:1+:CUDA_ERROR_UNKNOWN:- \
            fresh_inputs:cuGraphKernelNodeSetParams_v2:1+:CUDA_ERROR_UNKNOWN:C; do
    IFS=: read -r name entry when err path <<<"$spec"
    tag="restore $name $entry:$when:$err"
    run base $name none 12
    run fault $name skip_profiled 12 STABLEGRAPH_LOG=info CUDAEMU_FAIL=$entry:$when:$err
    check_sum "$tag: checksum" "$(sum_of fault)" "$(sum_of base)"
    check_eq "$tag: violations" "$(json_get "$TMP/fault.json" violations)" 0
    check "$tag: no error reaches the program" [ -z "$(grep ' failed: ' "$TMP/fault.out")" ]
    if [ "$path" != - ]; then
        check "$tag: restored through path $path" grep -q "through path $path" "$TMP/fault.out"
    fi
done
# Every path failing (the per-type and the generic clone setters; slices'
# nodes cannot be named for path B): the program's launch gets
# CUDA_ERROR_OUT_OF_MEMORY and its exec never runs in another state.
run fault slices skip_profiled 12 \
    CUDAEMU_FAIL=cuGraphKernelNodeSetParams_v2:1+:CUDA_ERROR_UNKNOWN,cuGraphNodeSetParams:1+:CUDA_ERROR_UNKNOWN
check "restore: all paths fail: the launch gets CUDA_ERROR_OUT_OF_MEMORY" \
    grep -q 'cuGraphLaunch(exec, w->stream) failed: CUDA_ERROR_OUT_OF_MEMORY' "$TMP/fault.out"
check "restore: all paths fail: no checksum line at all" [ -z "$(grep checksum "$TMP/fault.out")" ]
check_eq "restore: all paths fail: violations" "$(json_get "$TMP/fault.json" violations)" 0

# always_update counts what skip_profiled would skip.
for name in rotating_inputs fresh_inputs; do
    run prof $name skip_profiled $STEPS
    run au $name always_update $STEPS
    check_sum "$name: always_update checksum" "$(sum_of au)" "$(sum_of prof)"
    check_eq "$name: always_update forwards every update" "$(exec_sum au updates_forwarded)" \
        "$(exec_sum au updates_seen)"
    check_eq "$name: would_skip_profiled = skip_profiled's skipped" \
        "$(exec_sum au would_skip_profiled)" "$(json_get "$TMP/prof.report.json" totals.updates_skipped)"
    check "$name: skip_profiled skipped something" [ "$(json_get "$TMP/prof.report.json" totals.updates_skipped)" -gt 0 ]
done
done_testing
