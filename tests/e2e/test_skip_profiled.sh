#!/usr/bin/env bash
# tests/e2e/test_skip_profiled.sh: the skip_profiled policy (core/profiled.c)
# on the emulated driver, counted by its CUDAEMU_STATS, 30 steps, with and
# without CUDAEMU_KERNEL_DELAY_US=200 (a sanitizer build: without only,
# test_delays in tests/lib.sh):
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
#   - the library's own driver calls per step do not grow with the graph
#     (topology_changes and slices under skip_profiled, slices under
#     always_update: 16 vs 256 nodes).
#   - the host memory budget (STABLEGRAPH_VARIANT_MEMORY): none, or one byte
#     short of the variants that may be made: plain, no variant; exactly
#     their bytes: bought, no update after step 10; checksums right.
#   - always_update's would_skip_profiled equals skip_profiled's skipped count
#     (rotating_inputs, fresh_inputs); the report carries a "profile" object.
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
W=$BUILD/workloads
STEPS=30
UPDATES="cuGraphExecUpdate_v2 cuGraphExecUpdate cuGraphExecKernelNodeSetParams_v2 cuGraphExecKernelNodeSetParams cuGraphExecNodeSetParams"
VMM="cuMemMap cuMemUnmap cuMemSetAccess cuMemCreate"
INSTS="cuGraphInstantiate cuGraphInstantiate_v2 cuGraphInstantiateWithFlags cuGraphInstantiateWithParams"
# Variants bought at the decision (a cost table in which they are free), for
# the checks of what variants do; the purchase itself is tested at the
# shipped figures below ("renting", "buying").
FREE=STABLEGRAPH_COSTS=$SRC/tests/lib/costs-free-variants.tsv

# run TAG NAME POLICY STEPS [ENV...] [ARGS...]: runs workload NAME (policy none = no
# library, and then checked: status 0, the model's checksum) leaving
# $TMP/TAG.{out,json,report.json}.
run() {
    local tag=$1 name=$2 policy=$3 steps=$4 a envs=() args=(); shift 4
    for a in "$@"; do      # VAR=value: the environment; anything else: the program's
        case $a in -*) args+=("$a") ;; *=*) envs+=("$a") ;; *) args+=("$a") ;; esac
    done
    set -- "${envs[@]}"
    if [ "$policy" = none ]; then
        env "$@" CUDAEMU_STATS=$TMP/$tag.json LD_LIBRARY_PATH="$EMU_LIB" "$W/$name" --steps "$steps" "${args[@]}" \
            >"$TMP/$tag.out" 2>&1
        check_baseline "$name, $steps steps${*:+ ($*)}" "$TMP/$tag.out" $?
    else
        env "$@" STABLEGRAPH_POLICY=$policy STABLEGRAPH_REPORT=$TMP/$tag.report.json \
            CUDAEMU_STATS=$TMP/$tag.json LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" \
            "$W/$name" --steps "$steps" "${args[@]}" >"$TMP/$tag.out" 2>&1
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

for delay in $(test_delays); do
    export CUDAEMU_KERNEL_DELAY_US=$delay
    for name in rotating_inputs fresh_inputs slices; do
        tag="$name/delay=$delay"
        extra=("$FREE")
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
    run prof slices skip_profiled $STEPS STABLEGRAPH_MAX_GENERATIONS=4 "$FREE"
    run base slices none $STEPS
    check_sum "slices/delay=$delay, 4 generations: checksum" "$(sum_of prof)" "$(sum_of base)"
    check_eq "slices/delay=$delay, 4 generations: violations" "$(json_get "$TMP/prof.json" violations)" 0
done
unset CUDAEMU_KERNEL_DELAY_US

run base_fi fresh_inputs none 40
run base scalar_changes none $STEPS
run prof scalar_changes skip_profiled $STEPS "$FREE"
check_sum "scalar_changes: checksum" "$(sum_of prof)" "$(sum_of base)"
lanes=$(( $(calls base cuGraphExecKernelNodeSetParams_v2) / STEPS ))
check "scalar_changes: the workload sets its seed nodes every step" [ "$lanes" -ge 1 ]
check_eq "scalar_changes: every scalar change reaches the driver" \
    "$(calls prof cuGraphExecKernelNodeSetParams_v2)" $(( (STEPS - 1) * lanes ))
check_eq "scalar_changes: decided plain" \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["execs"][0]["profile"]["mode"])' "$TMP/prof.report.json")" plain
# The workload names its seed nodes by the handles cuStreamGetCaptureInfo
# gives during the capture: the recorder learns them, so its per-node updates
# need no read-back of the graph (12 driver calls per node before).
check_eq "scalar_changes: per-node updates on handles learned at capture: no read-back, no node query" \
    "$(python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
own = r["library_driver_calls"]
print(r["graph_descriptions"]["read_back"]["no_node_handles"],
      sum(v for k, v in own.items() if k.startswith("cuGraphKernelNode") or k == "cuGraphNodeGetType"))' \
      "$TMP/prof.report.json")" "0 0"
# A plain exec never makes a variant: its clone goes at the decision (the
# driver's copy of the graph), not with the exec; an exec that buys variants
# keeps it.
run prof scalar_changes skip_profiled $STEPS "$FREE" STABLEGRAPH_LOG=debug
check_sum "scalar_changes, log on: checksum" "$(sum_of prof)" "$(sum_of base)"
check_eq "scalar_changes: the plain exec never copies its graph (no cuGraphClone)" \
    "$(calls prof cuGraphClone)/$(grep -c "clone released" "$TMP/prof.out")" 0/0
run prof rotating_inputs skip_profiled $STEPS "$FREE" STABLEGRAPH_LOG=debug
check_eq "rotating_inputs: variants bought, one clone taken (from its source graph), kept" \
    "$(calls prof cuGraphClone)/$(grep -c "clone released" "$TMP/prof.out")/$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["execs"][0]["profile"]["mode"])' "$TMP/prof.report.json")" 1/0/generations
# The purchase reads the clone back once to map its node handles: node types
# and parameters only (sg_fp_build_layout), no attribute (10 queries per node
# before); the graph itself was recorded, so nothing else reads a node.
check_eq "rotating_inputs: the clone is mapped with no attribute query, at most 2 node queries per node" \
    "$(python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
own, n = r["library_driver_calls"], r["execs"][0]["nodes"]
q = sum(v for k, v in own.items() if k.startswith("cuGraphKernelNodeGetParams") or k == "cuGraphNodeGetType")
print(own.get("cuGraphKernelNodeGetAttribute", 0), int(0 < q <= 2 * n))' "$TMP/prof.report.json")" "0 1"
# fresh_inputs destroys each graph after its update: the clone comes from
# the graph of a whole-graph update (the one whose rent made the purchase
# due, or with variants free, the first one after the decision)
for t in "$FREE" STABLEGRAPH_COST_TIMES=table; do      # table: bought at launch 31
    run prof fresh_inputs skip_profiled 40 "$t"
    check_eq "fresh_inputs ($t): variants bought from one clone of an updating graph" \
        "$(calls prof cuGraphClone)/$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["execs"][0]["profile"]["mode"])' "$TMP/prof.report.json")" 1/generations
    check_sum "fresh_inputs ($t): checksum" "$(sum_of prof)" "$(sum_of base_fi)"
done

# The host memory budget (STABLEGRAPH_VARIANT_MEMORY): slices rotates among 7
# states, each profiled launch a new one, so the budget must hold all the
# variants that may be made (7). With no budget, or one byte short of them,
# it stays plain, says why, and instantiates nothing; with exactly their
# bytes it buys them (6 made for its 7 states): no update after that, the
# checksum right every time. (Giving variants up when the budget has no
# room for one more: tests/unit/test_profiled.c, variant_memory_budget.)
prof_field() {   # TAG FIELD: a field of the first exec's profile
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["execs"][0]["profile"].get(sys.argv[2]))' \
        "$TMP/$1.report.json" "$2"
}
run base slices none $STEPS
run mem0 slices skip_profiled $STEPS "$FREE" STABLEGRAPH_VARIANT_MEMORY=0
check_sum "slices, no variant memory: checksum" "$(sum_of mem0)" "$(sum_of base)"
check_eq "slices, no variant memory: plain, the budget named, no instantiation of the library's" \
    "$(prof_field mem0 mode)/$(prof_field mem0 why | grep -c STABLEGRAPH_VARIANT_MEMORY)/$(calls mem0 $INSTS)" \
    "plain/1/$(calls base $INSTS)"
need=$(prof_field mem0 variant_host_bytes)
check "slices, no variant memory: the variants' host memory reported ($need bytes)" [ "${need:-0}" -gt 0 ]
run memshort slices skip_profiled $STEPS "$FREE" STABLEGRAPH_VARIANT_MEMORY=$((need - 1))
check_sum "slices, one byte short: checksum" "$(sum_of memshort)" "$(sum_of base)"
check_eq "slices, one byte short: plain, no instantiation of the library's" \
    "$(prof_field memshort mode)/$(calls memshort $INSTS)" "plain/$(calls base $INSTS)"
run memfit slices skip_profiled $STEPS "$FREE" STABLEGRAPH_VARIANT_MEMORY=$need
run memfit10 slices skip_profiled 10 "$FREE" STABLEGRAPH_VARIANT_MEMORY=$need
check_sum "slices, room for the variants: checksum" "$(sum_of memfit)" "$(sum_of base)"
check_eq "slices, room for the variants: violations" "$(json_get "$TMP/memfit.json" violations)" 0
check_eq "slices, room for the variants: generations, 6 made, the program's instantiations + 6" \
    "$(prof_field memfit mode)/$(prof_field memfit variants)/$(calls memfit $INSTS)" \
    "generations/6/$(( $(calls base $INSTS) + 6 ))"
check_eq "slices, room for the variants: no update reaches the driver between step 10 and 30" \
    "$(calls memfit10 $UPDATES)" "$(calls memfit $UPDATES)"

run base topology_changes none $STEPS
run prof topology_changes skip_profiled $STEPS "$FREE"
check_sum "topology_changes: checksum" "$(sum_of prof)" "$(sum_of base)"
check_eq "topology_changes: violations" "$(json_get "$TMP/prof.json" violations)" 0

# What the library asks the driver for itself per step does not grow with the
# graph: an exec made every other step costs one cuGraphClone, not a
# read-back per node (the clone's node handles are read once, when variants
# are bought), always_update's observation of slices (interior pointers
# into one buffer) asks for the buffer once per comparison, not once per
# pointer, and its pointer scan of topology_changes (a profile restarted at
# every topology change, every word of every kernel looked up) asks the
# driver nothing: it looks in the forwarded allocations. Per step:
# library_driver_calls of 40 steps minus 20, at 16 and at 256 nodes (the
# table's figures for the purchase, so both runs buy at the same launch).
lib_calls() {
    python3 -c 'import json,sys; print(sum(json.load(open(sys.argv[1]))["library_driver_calls"].values()))' \
        "$TMP/$1.report.json"
}
per_step() {   # NAME POLICY NODES: the library's own driver calls per step x 20
    run s20 "$1" "$2" 20 STABLEGRAPH_COST_TIMES=table --nodes "$3"
    run s40 "$1" "$2" 40 STABLEGRAPH_COST_TIMES=table --nodes "$3"
    echo $(( $(lib_calls s40) - $(lib_calls s20) ))
}
not_more() { [ -n "$1" ] && [ -n "$2" ] && [ "$1" -le "$2" ]; }
for case in topology_changes/skip_profiled topology_changes/always_update slices/skip_profiled \
            slices/always_update; do
    small=$(per_step "${case%/*}" "${case#*/}" 16) large=$(per_step "${case%/*}" "${case#*/}" 256)
    check "$case: the library's own driver calls per step do not grow with the nodes ($small per 20 steps at 16 nodes, $large at 256)" \
        not_more "$large" $((small + 20))
done

# Aliasing: small granules, every buffer its own handles, one generation.
ALIAS_ENV=(CUDAEMU_GRANULARITY=65536 STABLEGRAPH_ALIAS_MIN_BYTES=4096 STABLEGRAPH_ALIAS=always
           STABLEGRAPH_MAX_GENERATIONS=1 "$FREE")
for delay in $(test_delays); do
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
    run fault $name skip_profiled 12 STABLEGRAPH_LOG=info CUDAEMU_FAIL=$entry:$when:$err "$FREE"
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
run fault slices skip_profiled 12 "$FREE" \
    CUDAEMU_FAIL=cuGraphKernelNodeSetParams_v2:1+:CUDA_ERROR_UNKNOWN,cuGraphNodeSetParams:1+:CUDA_ERROR_UNKNOWN
check "restore: all paths fail: the launch gets CUDA_ERROR_OUT_OF_MEMORY" \
    grep -q 'cuGraphLaunch(exec, w->stream) failed: CUDA_ERROR_OUT_OF_MEMORY' "$TMP/fault.out"
check "restore: all paths fail: no checksum line at all" [ -z "$(grep checksum "$TMP/fault.out")" ]
check_eq "restore: all paths fail: violations" "$(json_get "$TMP/fault.json" violations)" 0

# Variants by cost (issue 11, core/prof_rent.c), at the shipped figures
# (core/costs.tsv) with the table's update figures (STABLEGRAPH_COST_TIMES=
# table: the same purchase on any machine; a per-node update: 1325 ns):
#   renting: rotating_inputs at the demo's 320 nodes for 50 steps: its 2
#     variants would cost ~580 us, its 4 per-node updates ~5.3 us a step: it
#     stays on forwarded updates (no instantiation reaches the driver but the
#     program's, every update forwarded but the identical ones, as under
#     skip_temp), and the report says why;
#   buying: at 16 nodes the variants (~32 us) pay for themselves within a few
#     steps: bought at the launch after the update that made the forwarded
#     cost reach their price, 2 instantiations more than without the library,
#     no update reaches the driver after that (steps 100 to 200);
#   checksums equal to the run without the library, 0 violations.
TAB=STABLEGRAPH_COST_TIMES=table
# prof_get TAG EXPR: EXPR over the first exec's profile object (p)
prof_get() {
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["execs"][0]["profile"]; print(eval(sys.argv[2]))' \
        "$TMP/$1.report.json" "$2"
}
run base rotating_inputs none 50 --nodes 320
run rent rotating_inputs skip_profiled 50 "$TAB" --nodes 320
check_sum "renting: checksum" "$(sum_of rent)" "$(sum_of base)"
check_eq "renting: violations" "$(json_get "$TMP/rent.json" violations)" 0
check_eq "renting: no instantiation but the program's" "$(calls rent $INSTS)" "$(calls base $INSTS)"
run temp rotating_inputs skip_temp 50 --nodes 320
check_eq "renting: every update forwarded as under skip_temp (identical ones skipped)" \
    "$(calls rent $UPDATES)" "$(calls temp $UPDATES)"
check_eq "renting: report: mode" "$(prof_get rent 'p["mode"]')" renting
check "renting: report: why ($(prof_get rent 'p["why"]'))" \
    grep -q '^renting: forwarded [0-9.]* of [0-9.]* us (varying pointers' <<<"$(prof_get rent 'p["why"]')"
check_eq "renting: report: 2 variants priced" "$(prof_get rent 'p["purchase"]["variants_priced"]')" 2
check_eq "renting: report: not bought" "$(prof_get rent 'p["purchase"]["bought_at_launch"]')" None
check_eq "renting: report: 46 steps of 4 updates charged at 1325 ns" \
    "$(prof_get rent '(p["purchase"]["rented_updates"], p["purchase"]["forwarded_ns"])')" "(184, 243800)"
check_eq "renting: report: cheaper than the variants, break-even after the run" \
    "$(prof_get rent 'p["purchase"]["forwarded_ns"] < p["purchase"]["variant_ns"] and p["purchase"]["break_even_launch"] > 50')" True

run base rotating_inputs none 200 --nodes 16
run buy rotating_inputs skip_profiled 200 "$TAB" --nodes 16
run buy100 rotating_inputs skip_profiled 100 "$TAB" --nodes 16
check_sum "buying: checksum" "$(sum_of buy)" "$(sum_of base)"
check_eq "buying: violations" "$(json_get "$TMP/buy.json" violations)" 0
check_eq "buying: 2 instantiations more than without the library" \
    "$(calls buy $INSTS)" $(( $(calls base $INSTS) + 2 ))
check_eq "buying: no update reaches the driver between step 100 and 200" \
    "$(calls buy100 $UPDATES)" "$(calls buy $UPDATES)"
check "buying: updates reached the driver before the purchase" [ "$(calls buy $UPDATES)" -gt 20 ]
check_eq "buying: report: mode" "$(prof_get buy 'p["mode"]')" generations
check_eq "buying: report: bought at the first launch after the forwarded cost reached the price" \
    "$(prof_get buy '(lambda q: q["variant_ns"] <= q["forwarded_ns"] < q["variant_ns"] + 4 * 1325 and q["bought_at_launch"] == q["break_even_launch"] > q["decided_at_launch"])(p["purchase"])')" True
check "buying: report: why ($(prof_get buy 'p["why"]'))" \
    grep -q '; bought at launch [0-9]*: forwarded' <<<"$(prof_get buy 'p["why"]')"

# always_update counts what skip_profiled would skip: with variants bought at
# the decision, and at the shipped figures (renting, then buying at the same
# launch: the table's figures, so both runs charge the same).
for costs in "$FREE" STABLEGRAPH_COST_TIMES=table; do
    for name in rotating_inputs fresh_inputs; do
        tag="$name ($costs)"
        args=("$costs")
        [ "$costs" = "$FREE" ] || args+=(--nodes 16)         # bought within the run
        run prof $name skip_profiled $STEPS "${args[@]}"
        run au $name always_update $STEPS "${args[@]}"
        check_sum "$tag: always_update checksum" "$(sum_of au)" "$(sum_of prof)"
        check_eq "$tag: always_update forwards every update" "$(exec_sum au updates_forwarded)" \
            "$(exec_sum au updates_seen)"
        check_eq "$tag: would_skip_profiled = skip_profiled's skipped" \
            "$(exec_sum au would_skip_profiled)" "$(json_get "$TMP/prof.report.json" totals.updates_skipped)"
        check "$tag: skip_profiled skipped something" [ "$(json_get "$TMP/prof.report.json" totals.updates_skipped)" -gt 0 ]
    done
done
done_testing
