#!/usr/bin/env bash
# tests/e2e/test_passthrough.sh: every workload in $BUILD/workloads/, run
# without the library, under policy off and under always_update, prints the
# same checksum, and the emulated driver sees exactly the same calls (nothing
# added, nothing lost). Under always_update the library's own driver calls
# (the report's "library_driver_calls", e.g. cuGraphGetNodes at instantiation)
# are subtracted first; under off there must be none.
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so

# compare_counts BASE.json RUN.json REPORT.json: prints the differences.
compare_counts() {
    python3 - "$@" <<'PY'
import json, sys
base = json.load(open(sys.argv[1]))["calls"]
run = dict(json.load(open(sys.argv[2]))["calls"])
own = json.load(open(sys.argv[3])).get("library_driver_calls", {})
for name, n in own.items():
    if n:
        run[name] = run.get(name, 0) - n
        if run[name] == 0: del run[name]
diff = {k: (base.get(k, 0), run.get(k, 0)) for k in set(base) | set(run)
        if base.get(k, 0) != run.get(k, 0)}
print(json.dumps(diff, sort_keys=True) if diff else "")
PY
}

found=0
for w in "$BUILD"/workloads/*; do
    [ -x "$w" ] && [ -f "$w" ] || continue
    case "$w" in *.so|*.fatbin) continue ;; esac
    found=1
    name=$(basename "$w")
    CUDAEMU_STATS=$TMP/$name.base.json emu "$w" >"$TMP/$name.base.out" 2>&1
    check_baseline "$name" "$TMP/$name.base.out" $?
    base_sum=$(sum_in "$TMP/$name.base.out")
    for policy in off always_update; do
        rep=$TMP/$name.$policy.report.json
        STABLEGRAPH_POLICY=$policy STABLEGRAPH_REPORT=$rep CUDAEMU_STATS=$TMP/$name.$policy.json \
            LD_PRELOAD=$LIB emu "$w" >"$TMP/$name.$policy.out" 2>&1
        rc=$?
        check_eq "$name/$policy: exit status" "$rc" 0
        check_sum "$name/$policy: checksum" "$(sum_in "$TMP/$name.$policy.out")" "$base_sum"
        if [ ! -f "$rep" ]; then not_ok "$name/$policy: report written"; continue; fi
        check_eq "$name/$policy: same driver calls as without the library" \
            "$(compare_counts "$TMP/$name.base.json" "$TMP/$name.$policy.json" "$rep")" ""
        if [ "$policy" = off ]; then
            check_eq "$name/off: the library made no driver call of its own" \
                "$(json_get "$rep" library_driver_calls.cuGraphGetNodes)" 0
        else
            # the report agrees with what the workload says it did
            launches=$(sed -n 's/.* launches=\([0-9][0-9]*\).*/\1/p' "$TMP/$name.base.out")
            check_eq "$name/always_update: launches counted (${launches:-none printed})" \
                "$(json_get "$rep" totals.launches)" "${launches:-none printed}"
        fi
    done
done
check "workloads found in $BUILD/workloads" [ "$found" -eq 1 ]
done_testing
