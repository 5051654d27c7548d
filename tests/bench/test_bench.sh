#!/usr/bin/env bash
# tests/bench/test_bench.sh: fast self-test of the `make bench` driver
# (tests/bench/bench.py): its arithmetic, its callgrind parser, its outputs, and
# that a checksum that differs from the no-library run fails loudly. Uses fake
# workloads (shell scripts with known call counts) and one tiny real cell.
. "$(dirname "$0")/../lib.sh"
# The bench driver is Python, the same in every build, and its real cells
# run workloads the sanitizer stage runs instrumented in test_skip_*.sh:
# a sanitizer build (whose CI stage has less time) leaves it to the normal
# build.
normal_build_only "the bench driver's self-test" "its workloads run instrumented in test_skip_*.sh"
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

# ---------------------------------------------------------------- cost model
# costmodel.py: the shipped table parses; names lose their version and
# per-thread suffixes; a small table charges known counts to the microsecond
# under both rules and the three query values; bad tables are refused.
out=$(cd "$SRC/tests/bench" && $PY - <<'PY'
import costmodel as cm
t = cm.Table()
print(t.query, t.rows["cuGraphExecUpdate"]["node"][0], t.rows["cuMemCreate"]["call"][0],
      "Foundry" in t.source("cuGraphExecUpdate", "node"))
print(cm.base_name("cuGraphExecUpdate_v2"), cm.base_name("cuGraphLaunch_ptsz"),
      cm.base_name("cuStreamBeginCapture_v2_ptsz"), cm.base_name("cuMemcpy_ptds"))
T = cm.Table("t", text="""# a comment
query range 0.1,0.2,0.4 src
* call query src
cuGraphExecUpdate call 2 src
cuGraphExecUpdate node 1 src
cuGraphExecUpdate changed_node 3 src
cuGraphExecUpdate scanned_node 0.5 src
cuGraphInstantiateWithFlags call query src
cuGraphInstantiateWithFlags node 10 src
cuMemMap call 5 src
""")
calls = {"cuGraphExecUpdate_v2": 2, "cuGraphInstantiateWithFlags": 1, "cuMemMap": 3,
         "cuStreamSynchronize": 4, "cuGraphLaunch": 0}
nodes = {"cuGraphExecUpdate_v2": {"nodes": 20, "changed": 3},
         "cuGraphInstantiateWithFlags": {"nodes": 10, "changed": 0}}
tot, by = cm.charge(T, calls, nodes, "every")
print(round(tot, 6), round(by["update"], 6), round(by["instantiate"], 6), by["vmm"],
      round(by["other"], 6))
print(round(cm.charge(T, calls, nodes, "changed")[0], 6),
      round(cm.charge(T, calls, nodes, "every", inst_us=2000)[0], 6))
m = cm.model(T, calls, nodes)
print([round(x, 6) for x in m["us"]["every"]], [round(x, 6) for x in m["us"]["changed"]])
c, n = cm.diff_counts(({"a": 2}, {"a": {"nodes": 4, "changed": 1}}),
                      ({"a": 6, "b": 2}, {"a": {"nodes": 12, "changed": 3}}), 2)
print(sorted(c.items()), n)
bad = {"no query row": "* call 1 s\n",
       "no default": "query range 1,2,3 s\n",
       "bad basis": "query range 1,2,3 s\n* call 1 s\nx per_node 1 s\n",
       "twice": "query range 1,2,3 s\n* call 1 s\n* call 2 s\n",
       "suffix": "query range 1,2,3 s\n* call 1 s\ncuGraphLaunch_ptsz call 1 s\n",
       "no node row": "query range 1,2,3 s\n* call 1 s\nx call 1 s\nx changed_node 1 s\n",
       "negative": "query range 1,2,3 s\n* call -1 s\n",
       "range order": "query range 3,2,1 s\n* call 1 s\n",
       "no source": "query range 1,2,3 s\n* call 1\n"}
refused = []
for why, text in bad.items():
    try:
        cm.Table("bad", text=text)
    except cm.TableError:
        refused.append(why)
print(len(refused) == len(bad) or sorted(set(bad) - set(refused)))
PY
)
check_eq "cost table: query range, update per node, cuMemCreate, source named" \
    "$(sed -n 1p <<<"$out")" "(0.03, 0.1, 0.3) 1.0247 193.0 True"
check_eq "cost model: names without suffixes" "$(sed -n 2p <<<"$out")" \
    "cuGraphExecUpdate cuGraphLaunch cuStreamBeginCapture cuMemcpy"
check_eq "cost model: every-node rule total, update, instantiate, vmm, other" \
    "$(sed -n 3p <<<"$out")" "140.0 24.0 100.2 15.0 0.8"
check_eq "cost model: changed-nodes rule; instantiation at a fixed 2 ms" \
    "$(sed -n 4p <<<"$out")" "139.0 2039.8"
check_eq "cost model: at the three query values, both rules" "$(sed -n 5p <<<"$out")" \
    "[139.5, 140.0, 141.0] [138.5, 139.0, 140.0]"
check_eq "cost model: per-step counts" "$(sed -n 6p <<<"$out")" \
    "[('a', 2.0), ('b', 1.0)] {'a': {'nodes': 4.0, 'changed': 1.0}}"
check_eq "cost model: every bad table refused" "$(sed -n 7p <<<"$out")" "True"
out=$($PY "$SRC/tests/bench/costmodel.py" check 2>&1)
check "costmodel.py check: the shipped table" grep -q "costs.tsv: [0-9]* calls, query range 0.03 / 0.1 / 0.3" <<<"$out"

# The calibration's output becomes a table of the same format: fits of known
# lines come out exactly; unmeasured rows keep their published figure.
{
    echo 'calibrate: device="Fake GPU" driver=13.0 date=2026-01-01 granularity=2097152'
    for n in 16 64 256; do
        awk -v n=$n 'BEGIN {
            printf "measure update_identical %d %.6f %.6f 5\n", n, 5 + 0.1 * n, 5 + 0.1 * n
            printf "measure update_one %d %.6f %.6f 5\n", n, 6 + 0.1 * n, 6 + 0.1 * n
            printf "measure update_all %d %.6f %.6f 5\n", n, 5 + 1.1 * n, 5 + 1.1 * n
            printf "measure setparams_identical %d 0.5 0.5 5\n", n
            printf "measure setparams_changed %d 1.5 1.5 5\n", n
            printf "measure get_params %d 0.2 0.2 5\n", n
            printf "measure get_attribute %d 0.05 0.05 5\n", n
            printf "measure get_nodes %d %.6f %.6f 5\n", n, 1 + 0.01 * n, 1 + 0.01 * n
            printf "measure instantiate %d %.6f %.6f 5\n", n, 20 + 0.9 * n, 20 + 0.9 * n
            printf "measure launch %d %.6f %.6f 5\n", n, 2 + 0.001 * n, 2 + 0.001 * n }'
    done
    for w in mem_create:150 mem_map:2 mem_set_access:30 mem_unmap:20 mem_release:3 \
             address_reserve:15 address_free:4; do
        echo "measure ${w%%:*} 0 ${w#*:} ${w#*:} 5"
    done
} >"$TMP/calib.txt"
$PY "$SRC/tests/bench/costmodel.py" calibrated "$TMP/calib.txt" --out "$TMP/costs-measured.tsv"
check_eq "calibrated table: written" "$?" 0
out=$(cd "$SRC/tests/bench" && $PY - "$TMP/costs-measured.tsv" <<'PY'
import sys, costmodel as cm
t = cm.Table(sys.argv[1])
r = lambda c, b: round(t.rows[c][b][0], 4)
print(r("cuGraphExecUpdate", "call"), r("cuGraphExecUpdate", "node"),
      r("cuGraphExecUpdate", "scanned_node"), r("cuGraphExecUpdate", "changed_node"))
print(r("cuGraphExecKernelNodeSetParams", "call"), r("cuGraphExecKernelNodeSetParams", "node"),
      r("cuGraphKernelNodeGetParams", "call"), r("cuGraphKernelNodeGetAttribute", "call"),
      r("cuGraphGetNodes", "call"), r("cuGraphGetNodes", "node"))
print(r("cuGraphInstantiateWithFlags", "node"), r("cuGraphInstantiate", "call"),
      r("cuGraphLaunch", "call"), r("cuMemCreate", "call"), r("cuMemAddressFree", "call"))
print("measured on Fake GPU, driver 13.0" in t.source("cuGraphExecUpdate", "node"),
      t.rows["cuGraphExecMemcpyNodeSetParams"]["node"][0],
      "Foundry" in t.source("cuGraphExecMemcpyNodeSetParams", "node"), t.query)
PY
)
check_eq "calibrated: update per call, per node (all changed), per node scanned, per changed node" \
    "$(sed -n 1p <<<"$out")" "5.0 1.1 0.1 1.0"
check_eq "calibrated: set params, get params, get attribute, get nodes" "$(sed -n 2p <<<"$out")" \
    "0.5 1.0 0.2 0.05 1.0 0.01"
check_eq "calibrated: instantiate, launch, VMM" "$(sed -n 3p <<<"$out")" "0.9 20.0 2.0 150.0 4.0"
check_eq "calibrated: sources say measured; unmeasured rows keep the published figure" \
    "$(sed -n 4p <<<"$out")" "True 1.0247 True (0.03, 0.1, 0.3)"
grep -v '^measure launch' "$TMP/calib.txt" >"$TMP/calib-short.txt"
out=$($PY "$SRC/tests/bench/costmodel.py" calibrated "$TMP/calib-short.txt" 2>&1)
check_eq "calibrated: a missing measurement fails" "$?" 1
check "calibrated: ... and names it" grep -q "lacks: launch" <<<"$out"

# ---------------------------------------------------------------- targets arithmetic
out=$(cd "$SRC/tests/bench" && $PY - <<'PY'
import targets as tg
print(tg.cumulative({1: 10, 2: 12, 10: 20, 20: 30}, 100))
print(tg.max_ratio([(1, 10), (2, 30), (100, 50)], [(1, 10), (2, 10), (100, 100)]))
print(tg.row("node_cost", 150)["result"], tg.row("node_cost", 151)["result"],
      tg.row("curve_end_every", 1.0)["result"], tg.row("curve_end_every", 0.99)["result"],
      tg.row("node_cost", None, why="x")["result"], tg.row("node_cost", skipped="y")["result"])
model = lambda us: {"us": {"every": [us, us, us], "changed": [us / 2] * 3}}
cells = [
    {"workload": "train_loop", "nodes": 64, "mode": "none", "maxrss_kb": 1000, "model": model(100),
     "library_driver_calls_per_step": None},
    {"workload": "train_loop", "nodes": 64, "mode": "skip_profiled", "maxrss_kb": 1032,
     "model": model(5), "library_driver_calls_per_step": {"cuGraphGetNodes": 2, "cuX": 0.5}},
    {"workload": "train_loop", "nodes": 64, "mode": "skip_temp", "maxrss_kb": 1010,
     "model": model(20), "library_driver_calls_per_step": {"cuGraphGetNodes": 1}},
]
class Table:
    query = (0.03, 0.1, 0.3)
rows = {r["id"]: r for r in tg.from_cells(cells, Table(), ["skip_temp", "skip_profiled"], 64)}
for k in ("host_memory", "library_calls", "modeled_ratio_every", "modeled_ratio_changed"):
    print(k, rows[k]["figure"], rows[k]["result"], rows[k]["where"])
PY
)
check_eq "curves: measured points, doubling steps, the horizon" "$(sed -n 1p <<<"$out")" \
    "[(1, 10), (2, 12), (10, 20), (20, 30), (40, 50.0), (80, 90.0), (100, 110.0)]"
check_eq "curves: highest ratio and where" "$(sed -n 2p <<<"$out")" "(3.0, 2)"
check_eq "targets: <= and < judged, not measured, skipped" "$(sed -n 3p <<<"$out")" \
    "PASS FAIL FAIL PASS NOT MEASURED SKIPPED"
check_eq "from cells: host memory = (1032 - 1000) KiB / 64 nodes" "$(sed -n 4p <<<"$out")" \
    "host_memory 512.0 PASS train_loop, 64 nodes"
check_eq "from cells: library calls per step, the worst cell" "$(sed -n 5p <<<"$out")" \
    "library_calls 2.5 FAIL train_loop, skip_profiled, 64 nodes"
check_eq "from cells: modeled ratio, every-node rule" "$(sed -n 6p <<<"$out")" \
    "modeled_ratio_every 0.2 FAIL train_loop, skip_temp, 64 nodes"
check_eq "from cells: modeled ratio, changed-nodes rule" "$(sed -n 7p <<<"$out")" \
    "modeled_ratio_changed 0.2 FAIL train_loop, skip_temp, 64 nodes"

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
        --model-sizes "" --callgrind-sizes "" --driver emu --no-plots --no-targets >"$2.log" 2>&1
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
if ! command -v valgrind >/dev/null || san_build; then cg=""; fi
plots=--no-plots
command -v gnuplot >/dev/null && plots=
$PY "$BENCH" --build "$BUILD" --out "$TMP/real" --workloads recapture_temps --sizes 16 --steps 2 \
    --repeats 1 --min-time 0 --policies off --callgrind-sizes "$cg" --callgrind-steps 1 \
    --model-sizes "" --no-targets --driver emu $plots >"$TMP/real.log" 2>&1; rc=$?
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
    --model-sizes "" --no-targets --driver emu --no-plots >"$TMP/skip.log" 2>&1; rc=$?
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

# ---------------------------------------------------------------- issue 11's figures
# Tiny sizes, real runs: every figure is measured (PASS or FAIL against its
# target; without valgrind the instruction counts are SKIPPED); the model is
# in every cell, and its rules differ by what the emulated driver counted.
$PY "$BENCH" --build "$BUILD" --out "$TMP/t11" --workloads "rotating_inputs train_loop" --sizes 16 \
    --model-sizes "16 64" --steps 2 --repeats 1 --min-time 0 --policies skip_profiled \
    --callgrind-sizes "" --skip-cost-sizes "" --node-cost-sizes 16 --node-cost-steps 4 \
    --node-cost-period 1 --accept-sizes 16 --accept-steps 5 --launch-cost-nodes 16 \
    --launch-cost-steps 3 --curve-nodes 16 --curve-first 2 --uncaptured-launches 4 \
    --uncaptured-steps 1 --driver emu $plots >"$TMP/t11.log" 2>&1; rc=$?
check_eq "issue 11's figures: bench exits 0" "$rc" 0
[ "$rc" -eq 0 ] || diag "$(tail -20 "$TMP/t11.log")"
out=$($PY - "$TMP/t11/results.json" "$cg" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = {x["id"]: x for x in r["targets"]}
cgids = {"uncaptured_launch", "node_cost", "accept_cost", "launch_cost"}
bad = [i for i, x in rows.items()
       if x["result"] not in (("PASS", "FAIL") if sys.argv[2] or i not in cgids else ("SKIPPED",))
       or (x["result"] in ("PASS", "FAIL") and not isinstance(x["figure"], (int, float)))]
print(len(rows), bad or "all measured")
cells = {(c["workload"], c["nodes"], c["mode"]): c for c in r["cells"]}
print(all(c.get("model") for c in cells.values()), cells[("train_loop", 64, "none")]["counts_only"],
      cells[("train_loop", 16, "none")]["counts_only"])
c = cells[("train_loop", 16, "none")]
u = c["nodes_per_step_by_name"]["cuGraphExecUpdate_v2"]
diff = c["model"]["us"]["every"][1] - c["model"]["us"]["changed"][1]
print(u["nodes"], abs(diff - 1.0247 * (u["nodes"] - u["changed"])) < 1e-6, u["changed"] < u["nodes"])
print(r["curves"]["horizon"], sorted(r["curves"]["curves"])[0])
PY
)
check_eq "issue 11's figures: 13, each measured" "$(sed -n 1p <<<"$out")" "13 all measured"
check_eq "model in every cell; 64 nodes counted only" "$(sed -n 2p <<<"$out")" "True True False"
check_eq "train_loop without the library: one update of 16 nodes per step; every - changed = 1.0247 us per unchanged node" \
    "$(sed -n 3p <<<"$out")" "16.0 True True"
check_eq "curves: horizon and keys" "$(sed -n 4p <<<"$out")" \
    "2000 rotating_inputs|none|changed|0|2.0"
check_eq "table.md: 13 figure rows beside their targets" \
    "$(grep -cE '^\| .* \| (PASS|\*\*FAIL\*\*|\*\*SKIPPED: .*\*\*) \| ' "$TMP/t11/table.md")" 13
check "table.md: modeled driver time under both rules" \
    grep -q "^#### Modeled driver time per step, changed-nodes rule" "$TMP/t11/table.md"
check "table.md: cumulative curves" grep -q "^#### Cumulative modeled driver time" "$TMP/t11/table.md"
check "summary: the figures with their targets" \
    grep -qE "^  node_cost +[0-9.-]+ +target <= 150" "$TMP/t11.log"
$PY "$BENCH" --build "$BUILD" --from-results "$TMP/t11/results.json" --out "$TMP/t11r" --no-plots >/dev/null 2>&1
check "--from-results: the same table.md again from results.json" cmp -s "$TMP/t11/table.md" "$TMP/t11r/table.md"
if [ -z "$plots" ]; then
    for png in modeled_per_step_every modeled_per_step_changed cumulative_every_2ms cumulative_changed_8ms; do
        check "plot $png.png" test -s "$TMP/t11/$png.png"
    done
fi
# host_memory: each peak RSS is the least of --repeats runs of the largest
# model size (a run's peak varies with where the C library's arenas grow),
# every run kept in the detail.
$PY "$BENCH" --build "$BUILD" --out "$TMP/t11m" --workloads train_loop --sizes "" --model-sizes 64 \
    --steps 2 --repeats 2 --min-time 0 --policies skip_profiled --callgrind-sizes "" \
    --skip-cost-sizes "" --targets host_memory --driver emu --no-plots >"$TMP/t11m.log" 2>&1; rc=$?
check_eq "host_memory: bench exits 0" "$rc" 0
out=$($PY - "$TMP/t11m/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
row = [x for x in r["targets"] if x["id"] == "host_memory"][0]
d = row["detail"][0]
runs = [int(x) for x in d["runs_kb"].split("/")]
base = [int(x) for x in d["runs_kb_without"].split("/")]
want = (min(runs) - min(base)) * 1024.0 / 64
print(len(runs), len(base), d["maxrss_kb"] == min(runs), abs(row["figure"] - want) < 1e-6)
PY
)
check_eq "host_memory: 2 runs of each, the least of each, their difference per node" "$out" "2 2 True True"
# A figure that cannot be measured fails the bench: no update is accepted
# between steps 1 and 3 (skip_profiled is still profiling then).
if [ -n "$cg" ]; then
    $PY "$BENCH" --build "$BUILD" --out "$TMP/t11b" --workloads train_loop --sizes 16 --model-sizes "" \
        --steps 2 --repeats 1 --min-time 0 --policies skip_profiled --callgrind-sizes "" \
        --skip-cost-sizes "" --targets accept_cost --accept-sizes 16 --accept-steps 1 --driver emu \
        --no-plots >"$TMP/t11b.log" 2>&1; rc=$?
    check "not measurable: bench exits non-zero" test "$rc" -ne 0
    check "not measurable: named" grep -q "accept_cost: NOT MEASURED: no update accepted" "$TMP/t11b.log"
else
    ok "not measurable # SKIP no valgrind or a sanitizer build"
fi
# Only figures, no cell (--sizes '' --model-sizes ''): the summary has no
# per-size table to print, and says so without failing.
$PY "$BENCH" --build "$BUILD" --out "$TMP/t11c" --workloads rotating_inputs --sizes "" --model-sizes "" \
    --policies skip_profiled --callgrind-sizes "" --skip-cost-sizes "" --targets rotating_50 \
    --curve-nodes 16 --driver emu --no-plots >"$TMP/t11c.log" 2>&1; rc=$?
check_eq "no cell at all: bench exits 0" "$rc" 0
check "no cell at all: the figure is still printed" grep -qE "^  rotating_50 +[0-9]" "$TMP/t11c.log"

done_testing
