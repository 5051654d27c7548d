#!/usr/bin/env bash
# tests/bench/test_bench.sh: fast self-test of the `make bench` driver
# (tests/bench/bench.py): its arithmetic, its callgrind parser, its outputs, and
# that a checksum that differs from the no-library run fails loudly. Uses fake
# workloads (shell scripts with known call counts) and one tiny real cell.
. "$(dirname "$0")/../lib.sh"
BENCH=$SRC/tests/bench/bench.py
PY=python3
export PYTHONDONTWRITEBYTECODE=1  # importing bench.py must leave no __pycache__ in the tree

# ---------------------------------------------------------------- arithmetic
out=$(cd "$SRC/tests/bench" && $PY - <<'PY'
import bench
print(bench.per_step(10, 16, 3), bench.per_step(None, 5, 2), bench.ratio(3.0, 1.5))
k = bench.kind_counts({"cuGraphExecUpdate_v2": 3, "cuGraphExecKernelNodeSetParams_v2": 1,
                       "cuGraphExecNodeSetParams": 1, "cuGraphLaunch_ptsz": 2, "cuMemMap": 4,
                       "cuMemMapArrayAsync": 9, "cuMemAlloc_v2": 5, "cuMemAllocHost_v2": 7,
                       "cuMemFreeAsync_ptsz": 1})
print(k["updates"], k["launches"], k["vmm"], k["allocs"], k["frees"], k["total"])
print(bench.timing_steps(20, 0.0001, 0.05, 50), bench.timing_steps(20, 1.0, 0.05, 50),
      bench.timing_steps(20, 1e-9, 0.05, 50), bench.timing_steps(20, 0.001, 0, 50))
# the real-GPU path: counts from the library's report
k = bench.kind_counts(bench.counts_from_report({
    "hooks": {"cuGraphLaunch": {"calls": 5}, "cuGraphExecUpdate_v2": {"calls": 4},
              "cuMemAlloc_v2": {"calls": 2}},
    "totals": {"updates_forwarded": 1}, "library_driver_calls": {"cuMemMap": 3}}))
print(k["updates"], k["launches"], k["vmm"], k["allocs"], k["total"])
PY
)
check_eq "per_step, ratio" "$(sed -n 1p <<<"$out")" "2.0 None 2.0"
check_eq "kinds: updates launches vmm allocs frees total" "$(sed -n 2p <<<"$out")" "5 2 4 5 1 33"
check_eq "timing steps: multiple of S, >= min time, capped" "$(sed -n 3p <<<"$out")" "500 20 1000 20"
check_eq "real-GPU counts from the report: updates launches vmm allocs total" \
    "$(sed -n 4p <<<"$out")" "1 5 3 2 11"

# A hand-written callgrind file: the library's self cost, its calls into libc
# (counted) and into the driver (not), and call costs that are no self cost.
cat >"$TMP/cg.out" <<'EOF'
# callgrind format
version: 1
positions: line
events: Ir
summary: 1165

ob=(1) /x/libstablegraph.so
fl=(1) hooks.c
fn=(1) cuGraphLaunch
10 7
+1 3
cob=(2) /x/libcuda.so.1
cfn=(2) emu_launch
calls=1 0
* 1000
cob=(3) /lib/libc.so.6
cfn=(3) memcpy
calls=2 0
* 40
* 5
ob=(2)
fl=(2) emu.c
fn=(2)
0 1000
ob=(3)
fl=(3) memcpy.c
fn=(3)
0 40
ob=(4) /x/app
fl=(4) app.c
fn=(4) main
0 100
cob=(1)
cfn=(1)
calls=1 0
0 1055
0 10
EOF
out=$(cd "$SRC/tests/bench" && $PY -c "
import bench; r = bench.parse_callgrind('$TMP/cg.out', 'libstablegraph.so')
print(r['total'], r['self_sum'], r['lib_self'], r['lib_callees'], r['lib'])")
check_eq "callgrind parser: total self_sum lib_self lib_callees lib" "$out" "1165 1165 15 40 55"

# The skip-decision cost: (library Ir at S+2 - at S) / updates skipped / nodes;
# none when an update in between was forwarded.
out=$(cd "$SRC/tests/bench" && $PY - <<'PY'
import bench
s = {"lib_self": 1000, "lib": 1200, "skipped": 2, "seen": 2, "forwarded": 0}
l = {"lib_self": 1000 + 2 * 16 * 150, "lib": 1200 + 2 * 16 * 160, "skipped": 4, "seen": 4,
     "forwarded": 0}
r = bench.skip_cost(s, l, 16)
print(r["updates_skipped"], r["lib_self_ir_per_node"], r["lib_ir_per_node"])
print(bench.skip_cost(s, dict(l, seen=5, forwarded=1), 16), bench.skip_cost(s, dict(l, lib=None), 16))
print(bench.skip_cost_summary([{"nodes": 16, "lib_self_ir_per_node": 150.0, "lib_ir_per_node": 160.0,
                                "met": True}])["met"])
PY
)
check_eq "skip cost: updates, library Ir/node, with libc" "$(sed -n 1p <<<"$out")" "2 150.0 160.0"
check_eq "skip cost: none with a forwarded update or a missing count" "$(sed -n 2p <<<"$out")" "None None"
check_eq "skip cost: summary target" "$(sed -n 3p <<<"$out")" "True"

# ---------------------------------------------------------------- fake workloads
# Known counts: per step 3 updates, 1 launch, 5 allocations; a warm-up of 2
# updates and 1 cuMemCreate; the library report: per step 1 update forwarded,
# 2 skipped. fake_bad prints another checksum when the library is preloaded.
mkdir -p "$TMP/wl"
cat >"$TMP/wl/fake_ok" <<'EOF'
#!/usr/bin/env bash
steps=0 nodes=0
while [ $# -gt 0 ]; do case $1 in --steps) steps=$2; shift 2 ;; --nodes) nodes=$2; shift 2 ;; *) exit 2 ;; esac; done
if [ -n "${CUDAEMU_STATS:-}" ]; then
    printf '{"calls": {"cuInit": 1, "cuMemCreate": 1, "cuGraphExecUpdate_v2": %d, "cuGraphLaunch": %d, "cuMemAlloc_v2": %d}, "violations": 0}\n' \
        $((2 + 3 * steps)) "$steps" $((5 * steps)) >"$CUDAEMU_STATS"
fi
if [ -n "${STABLEGRAPH_REPORT:-}" ]; then
    printf '{"policy": "%s", "hooks": {"cuGraphLaunch": {"calls": %d, "resolved": 0}}, "totals": {"launches": %d, "updates_seen": %d, "updates_forwarded": %d, "updates_skipped": %d, "bytes_requested": %d, "bytes_mapped": %d}, "library_driver_calls": {}, "execs": []}\n' \
        "$STABLEGRAPH_POLICY" "$steps" "$steps" $((2 + 3 * steps)) $((2 + steps)) $((2 * steps)) \
        $((4096 * steps)) 8192 >"$STABLEGRAPH_REPORT"
fi
sum=00000000000000aa
case ${0##*/}:${LD_PRELOAD:-} in fake_bad:*libstablegraph*) sum=00000000000000bb ;; esac
echo "${0##*/}: steps=$steps nodes=$nodes"
echo "checksum: $sum"
EOF
chmod +x "$TMP/wl/fake_ok"
ln -s fake_ok "$TMP/wl/fake_bad"

bench_fake() {  # bench_fake WORKLOAD OUTDIR: runs bench.py on the fake, one tiny cell
    $PY "$BENCH" --build "$BUILD" --workload-dir "$TMP/wl" --out "$2" --workloads "$1" \
        --sizes 16 --steps 4 --repeats 2 --min-time 0 --policies "off skip_temp" \
        --callgrind-sizes "" --driver emu --no-plots >"$2.log" 2>&1
}

bench_fake fake_ok "$TMP/ok"; rc=$?
check_eq "fake_ok: bench exits 0" "$rc" 0
[ "$rc" -eq 0 ] || diag "$(tail -20 "$TMP/ok.log")"
out=$($PY - "$TMP/ok/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = {x["mode"]: x for x in r["cells"]}
print(sorted(c), r["failures"])
s = c["skip_temp"]
print(s["steps_short"], s["steps_long"], s["calls_per_step"]["updates"], s["calls_per_step"]["launches"],
      s["calls_per_step"]["vmm"], s["calls_per_step"]["allocs"], s["calls_per_step"]["total"])
print(s["lib_per_step"]["updates_forwarded"], s["lib_per_step"]["updates_skipped"],
      s["bytes_requested"], s["bytes_mapped"], s["mapped_over_requested"])
print(s["checksum_ok"], c["none"]["wall_ratio"], type(s["wall_ratio"]).__name__, s["violations"])
for k in ("date", "command", "driver", "sizes", "modes", "steps", "repeats"):
    assert k in r["meta"], k
print("meta ok")
PY
)
check_eq "fake_ok: cells and no failures" "$(sed -n 1p <<<"$out")" "['none', 'off', 'skip_temp'] []"
check_eq "fake_ok: per step: updates launches vmm allocs total (warm-up excluded)" \
    "$(sed -n 2p <<<"$out")" "4 8 3.0 1.0 0.0 5.0 9.0"
check_eq "fake_ok: library per step forwarded, skipped; bytes" "$(sed -n 3p <<<"$out")" \
    "1.0 2.0 32768 8192 0.25"
check_eq "fake_ok: checksum ok, wall ratio, violations" "$(sed -n 4p <<<"$out")" "True 1.0 float 0"
check_eq "fake_ok: meta fields" "$(sed -n 5p <<<"$out")" "meta ok"

hdr=$(head -1 "$TMP/ok/results.csv")
miss=""
for f in workload nodes mode steps_short steps_long checksum checksum_ok violations failures \
         updates_per_step launches_per_step vmm_per_step allocs_per_step \
         lib_updates_forwarded_per_step lib_updates_skipped_per_step bytes_requested bytes_mapped \
         wall_per_step_us wall_ratio cg_lib_ir_per_step cg_lib_ir_per_launch cg_lib_ir_per_hooked_call; do
    case ",$hdr," in *",$f,"*) ;; *) miss="$miss $f" ;; esac
done
check_eq "results.csv: expected columns" "${miss:-none missing}" "none missing"
check_eq "results.csv: one row per cell" "$(($(wc -l <"$TMP/ok/results.csv") - 1))" 3
check "table.md written with the command" grep -q "Command: " "$TMP/ok/table.md"

bench_fake fake_bad "$TMP/bad"; rc=$?
check "fake_bad: bench exits non-zero" test "$rc" -ne 0
check "fake_bad: loud failure on stdout" grep -q "BENCH FAILED" "$TMP/bad.log"
check "fake_bad: mismatch named on stdout" grep -q "CHECKSUM MISMATCH" "$TMP/bad.log"
out=$($PY - "$TMP/bad/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(" ".join("%s=%s" % (c["mode"], c["checksum_ok"]) for c in r["cells"]),
      all("MISMATCH" in f for f in r["failures"]) and len(r["failures"]) > 0)
PY
)
check_eq "fake_bad: results mark the library cells" "$out" "none=True off=False skip_temp=False True"
check "fake_bad: results.csv marks them" grep -q "CHECKSUM MISMATCH" "$TMP/bad/results.csv"

# ---------------------------------------------------------------- one real cell
# recapture_temps, 16 nodes, under off; callgrind with 1 and 2 steps (not in
# sanitizer builds: valgrind and ASan do not mix), plots when gnuplot is here.
cg=16
if ! command -v valgrind >/dev/null || grep -qs "[a-z]" "$BUILD/san.cfg"; then cg=""; fi
plots=--no-plots
command -v gnuplot >/dev/null && plots=
$PY "$BENCH" --build "$BUILD" --out "$TMP/real" --workloads recapture_temps --sizes 16 --steps 2 \
    --repeats 1 --min-time 0 --policies off --callgrind-sizes "$cg" --callgrind-steps 1 \
    --driver emu $plots >"$TMP/real.log" 2>&1; rc=$?
check_eq "real cell: bench exits 0" "$rc" 0
[ "$rc" -eq 0 ] || diag "$(tail -20 "$TMP/real.log")"
check "real cell: summary has command and date" \
    grep -qE "^stablegraph bench: [0-9]{4}-" "$TMP/real.log"
out=$($PY - "$TMP/real/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = {x["mode"]: x for x in r["cells"]}["off"]
print(c["checksum_ok"], c["calls_per_step"]["launches"], c["calls_per_step"]["updates"])
g = c["callgrind"]
print(g is not None and g["lib_ir_per_hooked_call"] > 0 and g["lib_ir_per_launch"] > 0
      and r["instr_per_forwarded_call_off"]["target"] == 100)
PY
)
check_eq "real cell: checksum equal, 1 launch and 1 update per step" "$(sed -n 1p <<<"$out")" "True 1.0 1.0"
if [ -n "$cg" ]; then
    check_eq "real cell: callgrind figures" "$(sed -n 2p <<<"$out")" "True"
else
    check_eq "real cell: no callgrind figures when callgrind did not run" "$(sed -n 2p <<<"$out")" "False"
    skip "real cell: callgrind figures" "no valgrind or a sanitizer build"
fi
if [ -z "$plots" ]; then
    check "real cell: PNG plots" test -s "$TMP/real/updates_per_step.png" -a -s "$TMP/real/wall_ratio.png"
else
    skip "real cell: PNG plots" "gnuplot not installed"
fi

# ---------------------------------------------------------------- skip-decision cost
# recapture_temps, 16 nodes, under skip_temp: the instructions per kernel
# node per skip decision, in results.json, results.csv and table.md.
$PY "$BENCH" --build "$BUILD" --out "$TMP/skip" --workloads recapture_temps --sizes 16 --steps 2 \
    --repeats 1 --min-time 0 --policies skip_temp --callgrind-sizes "" --skip-cost-sizes "$cg" \
    --driver emu --no-plots >"$TMP/skip.log" 2>&1; rc=$?
check_eq "skip cost: bench exits 0" "$rc" 0
[ "$rc" -eq 0 ] || diag "$(tail -20 "$TMP/skip.log")"
if [ -n "$cg" ]; then
    out=$($PY - "$TMP/skip/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
k = r["instr_per_node_per_skip_decision"]
row = k["rows"][0]
cell = [c for c in r["cells"] if c["mode"] == "skip_temp"][0]
print(row["nodes"], row["updates_skipped"], row["lib_self_ir_per_node"] > 0,
      row["lib_ir_per_node"] >= row["lib_self_ir_per_node"],
      "--toggle-collect=sg_graph_call" in row["command"], k["summary"]["target"],
      cell["skip_cost"]["lib_self_ir_per_node"] == row["lib_self_ir_per_node"])
PY
)
    check_eq "skip cost: row (nodes, updates skipped, Ir > 0, with libc >= own, command, target, in cell)" \
        "$out" "16 2 True True True 200 True"
    check "skip cost: results.csv column" grep -q "skip_lib_self_ir_per_node" "$TMP/skip/results.csv"
    check "skip cost: table.md section" grep -q "per kernel node per skip decision" "$TMP/skip/table.md"
    check "skip cost: summary line" \
        grep -q "^library instructions per kernel node per skip decision" "$TMP/skip.log"
else
    skip "skip cost: figures" "no valgrind or a sanitizer build"
fi

done_testing
