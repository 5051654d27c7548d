#!/usr/bin/env bash
# tests/e2e/test_skip_temp_updates.sh: skipping identical graph updates
# (core/graphs.c), on the emulated driver, counted by its CUDAEMU_STATS:
#   - recapture_temps (plain and --async-alloc) under skip_temp, 30 steps:
#     at most 2 cuGraphExecUpdate_v2 calls reach the driver, the checksum is
#     the one without the library, 0 violations; also with
#     CUDAEMU_KERNEL_DELAY_US=200;
#   - the same under always_update: every update reaches the driver and the
#     report's would_skip (summed over execs) equals what skip_temp skipped;
#   - scalar_changes under skip_temp: every cuGraphExecKernelNodeSetParams
#     whose scalar changed reaches the driver (all but the first step's,
#     which sets the captured value again), checksum right;
#   - every workload under skip_temp gives its no-library checksum with 0
#     violations, and the report's counts add up.
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
W=$BUILD/workloads
STEPS=30

# run NAME POLICY ARGS...: runs workload NAME under POLICY (none = without the
# library, and then checked: status 0, the model's checksum), leaving
# $TMP/NAME.POLICY.{out,json,report.json}.
run() {
    local name=$1 policy=$2; shift 2
    local tag=$name.$policy
    if [ "$policy" = none ]; then
        CUDAEMU_STATS=$TMP/$tag.json emu "$W/$name" --steps $STEPS "$@" >"$TMP/$tag.out" 2>&1
        check_baseline "$name${*:+ $*}${CUDAEMU_KERNEL_DELAY_US:+ (delay $CUDAEMU_KERNEL_DELAY_US)}" "$TMP/$tag.out" $?
    else
        STABLEGRAPH_POLICY=$policy STABLEGRAPH_REPORT=$TMP/$tag.report.json \
            CUDAEMU_STATS=$TMP/$tag.json LD_PRELOAD=$LIB emu "$W/$name" --steps $STEPS "$@" \
            >"$TMP/$tag.out" 2>&1
    fi
}
sum_of() { sum_in "$TMP/$1.out"; }
calls() { json_get "$TMP/$1.json" "calls.$2"; }
would_skip() {
    python3 -c 'import json,sys; print(sum(e["would_skip"] for e in json.load(open(sys.argv[1]))["execs"]))' \
        "$TMP/$1.report.json"
}

for variant in plain async; do
    args=(); [ $variant = async ] && args=(--async-alloc)
    for delay in 0 200; do
        tag="recapture_temps/$variant/delay=$delay"
        export CUDAEMU_KERNEL_DELAY_US=$delay
        run recapture_temps none "${args[@]}"
        base=$(sum_of recapture_temps.none)
        run recapture_temps skip_temp "${args[@]}"
        check "$tag: skip_temp runs" [ -n "$(sum_of recapture_temps.skip_temp)" ]
        check_sum "$tag: skip_temp checksum" "$(sum_of recapture_temps.skip_temp)" "$base"
        n=$(calls recapture_temps.skip_temp cuGraphExecUpdate_v2)
        check "$tag: at most 2 cuGraphExecUpdate_v2 reach the driver (got $n)" [ "$n" -le 2 ]
        check_eq "$tag: skip_temp violations" "$(json_get "$TMP/recapture_temps.skip_temp.json" violations)" 0
        skipped=$(json_get "$TMP/recapture_temps.skip_temp.report.json" totals.updates_skipped)
        check_eq "$tag: skipped + reaching the driver = the 29 updates" "$((skipped + n))" $((STEPS - 1))
        run recapture_temps always_update "${args[@]}"
        check_sum "$tag: always_update checksum" "$(sum_of recapture_temps.always_update)" "$base"
        check_eq "$tag: always_update: every update reaches the driver" \
            "$(calls recapture_temps.always_update cuGraphExecUpdate_v2)" $((STEPS - 1))
        check_eq "$tag: always_update would_skip = skip_temp's skipped" \
            "$(would_skip recapture_temps.always_update)" "$skipped"
    done
done
unset CUDAEMU_KERNEL_DELAY_US

run scalar_changes none
run scalar_changes skip_temp
check_sum "scalar_changes: skip_temp checksum" "$(sum_of scalar_changes.skip_temp)" "$(sum_of scalar_changes.none)"
lanes=$(( $(calls scalar_changes.none cuGraphExecKernelNodeSetParams_v2) / STEPS ))
check "scalar_changes: the workload sets its seed nodes every step" [ "$lanes" -ge 1 ]
check_eq "scalar_changes: every scalar change reaches the driver" \
    "$(calls scalar_changes.skip_temp cuGraphExecKernelNodeSetParams_v2)" $(( (STEPS - 1) * lanes ))
check_eq "scalar_changes: reason scalar_changed" \
    "$(python3 -c 'import json,sys; print(sum(e["forwarded_reasons"]["scalar_changed"] for e in json.load(open(sys.argv[1]))["execs"]))' \
        "$TMP/scalar_changes.skip_temp.report.json")" $(( (STEPS - 1) * lanes ))

found=0
for w in "$W"/*; do
    [ -x "$w" ] && [ -f "$w" ] || continue
    case "$w" in *.so|*.fatbin) continue ;; esac
    found=1
    name=$(basename "$w")
    run "$name" none
    run "$name" skip_temp
    check_sum "$name: skip_temp checksum" "$(sum_of "$name.skip_temp")" "$(sum_of "$name.none")"
    check_eq "$name: skip_temp violations" "$(json_get "$TMP/$name.skip_temp.json" violations)" 0
    rep=$TMP/$name.skip_temp.report.json
    check_eq "$name: seen = forwarded + skipped" "$(json_get "$rep" totals.updates_seen)" \
        "$(( $(json_get "$rep" totals.updates_forwarded) + $(json_get "$rep" totals.updates_skipped) ))"
done
check "workloads found in $W" [ "$found" -eq 1 ]
done_testing
