#!/usr/bin/env bash
# tests/e2e/test_demo.sh: scripts/demo.sh (`make demo`) on the emulated
# driver, small: the CUDA-runtime train_loop by default when nvcc built it,
# with the driver-API twin's checksum; the table has its three columns and rows, says which driver
# ran, reports equal checksums, writes demo.md; its modeled driver time is the
# cost table's (core/costs.tsv) charge of every call that reached the
# driver, the library's own included, per steady-state step ((2N - N) / N)
# and over the run, under both update rules; a custom table changes it; a
# caller's STABLEGRAPH_* settings do not reach the runs; a run whose checksum
# differs, or that fails, makes it exit non-zero naming that run; bad
# settings exit 2.
. "$(dirname "$0")/../lib.sh"
normal_build_only "the demo" "it runs workloads through the wrapper, which test_workloads.sh and test_skip_*.sh run instrumented"
DEMO=$SRC/scripts/demo.sh
export BUILD DEMO_DRIVER=emu DEMO_STEPS=6 DEMO_NODES=32

# demo [VAR=VALUE...]: runs demo.sh into $TMP/out/; sets $rc, $out (stdout), $err.
demo() {
    env "$@" DEMO_OUT="$TMP/out" "$DEMO" >"$TMP/stdout" 2>"$TMP/stderr"
    rc=$?
    out=$(cat "$TMP/stdout"); err=$(cat "$TMP/stderr")
}
# lacks PATTERN TEXT: succeeds if no line of TEXT matches PATTERN (grep).
lacks() { ! grep -q -- "$1" <<<"$2"; }
# cell ROW COLUMN: the cell of the table row whose label is ROW (column 1..3).
cell() {
    awk -F'|' -v row="$1" -v col="$(($2 + 2))" '
        { label = $2; gsub(/^ +| +$/, "", label) }
        label == row { v = $col; gsub(/^ +| +$/, "", v); print v; exit }' <<<"$out"
}

demo STABLEGRAPH_POLICY=off STABLEGRAPH_REPORT="$TMP/stray.json"
check_eq "exits 0" "$rc" 0
[ "$rc" -eq 0 ] || diag "$err"
check "says it runs on the emulated driver" grep -q '^Driver: emulated driver' <<<"$out"
header=$(grep -m1 '^| *| no library' <<<"$out")
check "table header: no library, always_update, default policy" \
    grep -Eq '^\| +\| no library +\| always_update +\| default policy: [a-z_]+ +\|$' <<<"$header"
default=$(sed -n 's/.*| default policy: \([a-z_]*\) .*/\1/p' <<<"$header")
. "$SRC/tests/lib/policies.sh"
a_policy_but_off() { [ -n "$1" ] && [ "$1" != off ] && [[ " $POLICIES " == *" $1 "* ]]; }
check "the default column names a policy ($default), not the caller's STABLEGRAPH_POLICY (off)" \
    a_policy_but_off "$default"
check "the caller's STABLEGRAPH_REPORT is not used" [ ! -e "$TMP/stray.json" ]
for c in 1 2 3; do
    check_eq "column $c: 6 steps" "$(cell steps $c)" 6
    check_eq "column $c: 32 nodes" "$(cell 'kernel nodes per graph' $c)" 32
    check_eq "column $c: 6 graph launches" "$(cell 'graph launches' $c)" 6
done
check_eq "no library: 5 updates reach the driver" "$(cell 'graph updates reaching the driver' 1)" 5
check_eq "always_update: 5 updates reach the driver" "$(cell 'graph updates reaching the driver' 2)" 5
check_eq "no library: no VMM calls" "$(cell 'VMM calls [3]' 1)" "0 (0/0/0/0/0/0)"
check_eq "no library: 4 weights + 6 x (batch + 8 temporaries) allocations" \
    "$(cell 'allocations reaching the driver' 1)" 58
check "no library: a checksum" grep -Eqx '[0-9a-f]{16}' <<<"$(cell checksum 1)"
check_eq "always_update: checksum equal" "$(cell checksum 2)" equal
check_eq "default policy: checksum equal" "$(cell checksum 3)" equal
check "says all checksums are the same" grep -q '^OK: all three runs printed the same checksum' <<<"$out"
first_out=$out first_sum=$(cell checksum 1)
# The modeled driver time, recomputed here from the runs' CUDAEMU_STATS with
# the cost table: every call charged, the library's own included; the figure
# without the library's calls would differ.
model=$(cd "$SRC/tests/bench" && PYTHONDONTWRITEBYTECODE=1 python3 - "$TMP/out" 6 <<'PY'
import json, sys, costmodel as cm
out, steps = sys.argv[1], int(sys.argv[2])
t = cm.Table()
st = lambda n: cm.stats_counts(json.load(open("%s/run-%s.stats.json" % (out, n))))
three = lambda v, s=1.0, u="us", sg=False: " / ".join(("%+.1f" if sg else "%.1f") % (x * s) for x in v) + " " + u
for n in ("none", "always_update", "default"):
    print(three(cm.model(t, *cm.diff_counts(st(n), st(n + "-2x"), steps))["us"]["every"]))
ref = cm.model(t, *st("none"))["us"]
d = cm.model(t, *st("default"))["us"]
print(three([a - b for a, b in zip(ref["changed"], d["changed"])], 0.001, "ms", True))
calls, nodes = st("default")
lib = json.load(open(out + "/run-default.report.json"))["library_driver_calls"]
without = cm.model(t, {k: v - lib.get(k, 0) for k, v in calls.items()}, nodes)["us"]
print(three([a - b for a, b in zip(ref["changed"], without["changed"])], 0.001, "ms", True))
PY
)
for c in 1 2 3; do
    check_eq "column $c: modeled driver time per steady-state step, every-node rule, from the stats" \
        "$(cell 'modeled driver time per steady-state step, every-node rule [1]' $c)" "$(sed -n ${c}p <<<"$model")"
done
check "modeled: the changed-nodes rule too" test -n "$(cell 'modeled driver time per steady-state step, changed-nodes rule [1]' 3)"
got=$(cell 'driver time avoided over the 6 steps, changed-nodes rule [1]' 3)
check_eq "driver time avoided over the run: every call charged, the library's own included" "$got" \
    "$(sed -n 4p <<<"$model")"
check "... which differs from leaving the library's calls out" test "$got" != "$(sed -n 5p <<<"$model")"
check_eq "driver time avoided: the reference column" \
    "$(cell 'driver time avoided over the 6 steps, every-node rule [1]' 1)" "(reference)"
check "instantiations at 2 and 8 ms" grep -Eq '^[+-][0-9.]+ / [+-][0-9.]+ ms$' \
    <<<"$(cell 'the same, each instantiation at 2 / 8 ms [2], every-node rule' 3)"
check "the library's own calls counted" grep -Eq '^[0-9]+ \([0-9]+\)$' \
    <<<"$(cell "driver calls, all (the library's own)" 3)"
for src in 'A model, not a measurement' 'core/costs.tsv' 'every node' 'changed nodes' \
           '1.0247 us per node' 'cuMemCreate 193' '0.03 / 0.1 / 0.3 us' '8-10 ms'; do
    check "footnotes name the model and its figures: $src" grep -qF -- "$src" <<<"$out"
done
check "no measured wall time on the emulated driver" lacks "wall time" "$out"
check "demo.md holds the table" grep -qF -- "$header" "$TMP/out/demo.md"
check "each run's report kept" [ -s "$TMP/out/run-always_update.report.json" -a -s "$TMP/out/run-default.report.json" ]

# A policy that places memory: the library's calls show up.
demo DEMO_POLICY=skip_temp
check_eq "DEMO_POLICY=skip_temp: exits 0" "$rc" 0
check "DEMO_POLICY=skip_temp: named in the header" grep -q '| policy: skip_temp ' <<<"$out"
# every allocation that reaches the driver is the library's own (the one-page
# block of each cuMemFree's synchronization): the program's were placed
own=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["library_driver_calls"].get("cuMemAlloc_v2", 0))' \
      "$TMP/out/run-default.report.json")
check_eq "skip_temp: the program's allocations do not reach the driver" \
    "$(cell 'allocations reaching the driver' 3)" "$own"
vmm=$(cell 'VMM calls [3]' 3)
check "skip_temp: the library's VMM calls are counted ($vmm)" [ "${vmm%% *}" -gt 0 ]

# A run whose checksum differs: the fake program changes the work under always_update.
fake=$TMP/fake_train_loop
cat >"$fake" <<FAKE
#!/usr/bin/env bash
if [ "\${STABLEGRAPH_POLICY:-}" = always_update ]; then exec "$BUILD/workloads/train_loop" "\$@" --elems 100; fi
if [ "\${STABLEGRAPH_REPORT:-}" ] && [ -n "\${FAKE_FAIL_DEFAULT:-}" ]; then echo "fake failure" >&2; exit 3; fi
exec "$BUILD/workloads/train_loop" "\$@"
FAKE
chmod +x "$fake"
demo DEMO_PROGRAM="$fake"
check "checksum differs: exits non-zero" [ "$rc" -ne 0 ]
check "checksum differs: the always_update run is named" \
    grep -q "^FAILED: run 'always_update' (always_update): checksum [0-9a-f]* differs" <<<"$out"
check "checksum differs: the row says so" grep -q '^DIFFERS' <<<"$(cell checksum 2)"
check "checksum differs: the default run is not blamed" lacks "^FAILED: run 'default'" "$out"

demo DEMO_PROGRAM="$fake" FAKE_FAIL_DEFAULT=1
check "a failing run: exits non-zero" [ "$rc" -ne 0 ]
check "a failing run: named with its status" grep -q "^FAILED: run 'default' .*exited with status 3" <<<"$out"
check "a failing run: its output shown" grep -q 'fake failure' <<<"$err"

# Another cost table: every call 1 us, so the modeled time per step is the
# number of calls per step, (calls of 2N steps - calls of N) / N.
printf 'query range 1,1,1 test\n* call query test\n' >"$TMP/ones.tsv"
demo DEMO_COSTS="$TMP/ones.tsv"
check_eq "DEMO_COSTS: exits 0" "$rc" 0
want=$(python3 - "$TMP/out" <<'PY'
import json, sys
n = lambda f: sum(json.load(open("%s/run-none%s.stats.json" % (sys.argv[1], f)))["calls"].values())
print("%.1f" % ((n("-2x") - n("")) / 6.0))
PY
)
check_eq "DEMO_COSTS: 1 us per call = calls per steady-state step" \
    "$(cell 'modeled driver time per steady-state step, every-node rule [1]' 1)" "$want / $want / $want us"
printf 'query range 1,2 test\n' >"$TMP/bad.tsv"

for bad in DEMO_STEPS=0 DEMO_NODES=x DEMO_DRIVER=gpu DEMO_PROGRAM=$TMP/nonexistent DEMO_COSTS=$TMP/bad.tsv; do
    demo "$bad"
    check_eq "$bad: exit status 2" "$rc" 2
    check "$bad: says why" grep -q "^demo: ${bad%%=*}\|^demo: .*not found" <<<"$err"
done
# The default program: the CUDA-runtime twin when nvcc built it (the path real
# jobs take), with the driver-API train_loop's checksum.
if [ -x "$BUILD/workloads/rt/rt_train_loop" ]; then
    check "runs the CUDA-runtime rt_train_loop by default (nvcc built it)" \
        grep -q '^# stablegraph demo: rt_train_loop, 6 steps' <<<"$first_out"
    demo DEMO_PROGRAM="$BUILD/workloads/train_loop"
    check "DEMO_PROGRAM=train_loop runs the driver-API program" \
        grep -q '^# stablegraph demo: train_loop, 6 steps' <<<"$out"
    check_eq "the driver-API twin prints the runtime program's checksum" "$(cell checksum 1)" "$first_sum"
else
    skip "runs the CUDA-runtime rt_train_loop by default" "no nvcc: build/workloads/rt/rt_train_loop not built"
fi
done_testing
