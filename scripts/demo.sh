#!/usr/bin/env bash
# scripts/demo.sh: what `make demo` runs. Runs the train_loop workload
# (its CUDA-runtime build tests/workloads/rt_train_loop.cu when nvcc is
# present, else the driver-API tests/workloads/train_loop.c) three ways: without the library, under
# always_update and under the library's default policy (STABLEGRAPH_POLICY
# unset), the last two through scripts/stablegraph-run with a report, and
# prints a side-by-side table of what reached the driver, the checksums and
# the modeled driver time: every call that reached the driver (the program's
# and the library's own) charged from the per-call cost table
# core/costs.tsv (tests/bench/costmodel.py, the same model as
# `make bench`), per steady-state step and over the whole run, updates under
# the "every node" and the "changed nodes" rule, at the table's three query
# costs; and the driver time the library avoids over the run (negative: it
# adds), instantiations included.
#
# The driver: a real GPU when nvidia-smi works and names a device that is not
# "cudaemu"; otherwise the emulated driver ($BUILD/emu/libcuda.so.1), whose
# CUDAEMU_STATS files count every call that reached it and the graph nodes
# of updates, instantiations and launches. On the emulated driver each
# configuration also runs with twice the steps, so that (run of 2N steps - run
# of N) / N is the steady-state step. On a real GPU the counts come from the
# library's report and the program's own counts (no node counts: no model),
# and the median wall time per step is measured.
#
# Environment (all optional):
#   BUILD          build directory (default: build/ of this checkout)
#   DEMO_STEPS     steps (default 50)
#   DEMO_NODES     kernel nodes in the graph (default 320)
#   DEMO_DRIVER    auto | emu | real (default auto)
#   DEMO_PROGRAM   the program to run (default $BUILD/workloads/rt/rt_train_loop,
#                  the CUDA-runtime twin, when nvcc built it; else
#                  $BUILD/workloads/train_loop)
#   DEMO_POLICY    policy of the third run (default: none set, i.e. the
#                  library's own default, named in the table from its report)
#   DEMO_COSTS     the cost table (default core/costs.tsv)
#   DEMO_OUT       output directory (default $BUILD/demo): demo.md (the
#                  table), and per run its output, report and driver counts
# Exit status: 0 when every run succeeded and printed the checksum of the run
# without the library; 1 otherwise (the failing runs are named); 2 for a bad
# setting or a missing build.
set -u

src=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
build=${BUILD:-$src/build}
case $build in /*) ;; *) build=$src/$build ;; esac
steps=${DEMO_STEPS:-50}
nodes=${DEMO_NODES:-320}
driver=${DEMO_DRIVER:-auto}
third_policy=${DEMO_POLICY:-}
# The default program: the CUDA-runtime twin of train_loop (nvcc-built, the path
# real jobs take: cudaMalloc, cudaStreamBeginCapture, cudaGraphExecUpdate) when
# nvcc was there to build it, else the driver-API train_loop.
program=${DEMO_PROGRAM:-}
if [ -z "$program" ]; then
    program=$build/workloads/train_loop
    [ -x "$build/workloads/rt/rt_train_loop" ] && program=$build/workloads/rt/rt_train_loop
fi
out=${DEMO_OUT:-$build/demo}
costs=${DEMO_COSTS:-$src/core/costs.tsv}

die() { echo "demo: $*" >&2; exit 2; }
[[ $steps =~ ^[1-9][0-9]*$ ]] || die "DEMO_STEPS=$steps: want a positive integer"
[[ $nodes =~ ^[1-9][0-9]*$ ]] || die "DEMO_NODES=$nodes: want a positive integer"
case $driver in auto|emu|real) ;; *) die "DEMO_DRIVER=$driver: want auto, emu or real" ;; esac
[ -x "$program" ] || die "$program not found or not executable (run 'make' first)"
lib=$build/libstablegraph.so
[ -f "$lib" ] || die "$lib not found (run 'make' first)"
msg=$(python3 "$src/tests/bench/costmodel.py" check "$costs" 2>&1 >/dev/null) ||
    die "DEMO_COSTS=$costs: ${msg#costmodel: }"

# --- which driver
gpu_name=
if [ "$driver" != emu ] && command -v nvidia-smi >/dev/null 2>&1; then
    gpu_name=$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    case ${gpu_name,,} in *cudaemu*) gpu_name= ;; esac
fi
if [ "$driver" = real ] || { [ "$driver" = auto ] && [ -n "$gpu_name" ]; }; then
    [ -n "$gpu_name" ] || die "DEMO_DRIVER=real but nvidia-smi names no GPU"
    driver=real
    driver_line="real GPU: $gpu_name (the system's libcuda.so.1)"
    [ -f "$(dirname "$program")/wl_kernels.fatbin" ] || [ -n "${DEMO_PROGRAM:-}" ] ||
        die "$(dirname "$program")/wl_kernels.fatbin not found: the kernels for a real GPU need nvcc at build time"
else
    driver=emu
    [ -f "$build/emu/libcuda.so.1" ] || die "$build/emu/libcuda.so.1 not found (run 'make' first)"
    driver_line="emulated driver: $build/emu/libcuda.so.1 (no GPU found: counts are what reached the emulated driver)"
    export LD_LIBRARY_PATH="$build/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # a runtime program's kernels, by mangled name (docs/emulator-runtime.md)
    case $(basename "$program") in
    rt_*) export CUDAEMU_MODULES=${CUDAEMU_MODULES:-$build/workloads/wl_kernels.so} ;;
    esac
fi

# Nothing of the caller's STABLEGRAPH_* settings may reach the runs: the
# default column must be the library's own default.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^STABLEGRAPH_')
unset CUDAEMU_STATS
export STABLEGRAPH_LIB=$lib

mkdir -p "$out" || die "cannot create $out"
rm -f "$out"/run-*.out "$out"/run-*.rc "$out"/run-*.report.json "$out"/run-*.stats.json "$out/demo.md"
echo "demo: $driver_line"
if [ "$driver" = emu ]; then
    echo "demo: $(basename "$program") --steps $steps (and $((2 * steps)), for the steady state) --nodes $nodes, three ways"
else
    echo "demo: $(basename "$program") --steps $steps --nodes $nodes, three runs"
fi

# run NAME [POLICY [STEPS [SUFFIX]]]: runs the program; NAME none runs it
# without the library, POLICY empty runs it under the library's default.
# Files: $out/run-NAME$SUFFIX.{out,rc,report.json,stats.json}.
run() {
    local name=$1 policy=${2:-} n=${3:-$steps} base=$out/run-$1${4:-} rc
    local -a wrap=()
    if [ "$name" != none ]; then
        wrap=("$src/scripts/stablegraph-run" --report "$base.report.json")
        [ -n "$policy" ] && wrap+=(--policy "$policy")
        wrap+=(--)
    fi
    if [ "$driver" = emu ]; then
        CUDAEMU_STATS=$base.stats.json "${wrap[@]}" "$program" --steps "$n" --nodes "$nodes" \
            >"$base.out" 2>&1
    else
        "${wrap[@]}" "$program" --steps "$n" --nodes "$nodes" >"$base.out" 2>&1
    fi
    rc=$?
    echo "$rc" >"$base.rc"
    echo "demo: run '$name' ${policy:+(policy $policy) }--steps $n exited with status $rc"
}
run none
run always_update always_update
run default "$third_policy"
if [ "$driver" = emu ]; then
    run none "" $((2 * steps)) -2x
    run always_update always_update $((2 * steps)) -2x
    run default "$third_policy" $((2 * steps)) -2x
fi

python3 - "$out" "$driver" "$driver_line" "$steps" "$nodes" "$(basename "$program")" "$src" "$costs" <<'PY'
import json, os, re, sys

out, driver, driver_line, steps, nodes, prog, src, costs = sys.argv[1:9]
steps, nodes = int(steps), int(nodes)
sys.path.insert(0, os.path.join(src, "tests", "bench"))
import costmodel as cm  # the model of `make bench` (tests/bench/costmodel.py)

table = cm.Table(costs)
RUNS = ["none", "always_update", "default"]
VMM_CALLS = ["cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemRelease",
             "cuMemAddressReserve"]
INST_MS = (2.0, 8.0)          # the bench's two assumptions per instantiation

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def counts_of(text):
    """The program's own counts: wl_report's line and train_loop's extra line."""
    c = {}
    for k, v in re.findall(r"\b(\w+)=([0-9.]+)", text):
        c[k] = float(v) if "." in v else int(v)
    m = re.search(r"^checksum: ([0-9a-f]{16})$", text, re.M)
    c["checksum"] = m.group(1) if m else None
    return c

def starts(calls, prefixes, exclude=()):
    return sum(n for k, n in calls.items()
               if any(k.startswith(p) for p in prefixes) and not any(k.startswith(e) for e in exclude))

def one_run(name, suffix):
    """rc, output text, program counts, report and CUDAEMU_STATS of one run."""
    base = os.path.join(out, "run-" + name + suffix)
    text = open(base + ".out", errors="replace").read() if os.path.exists(base + ".out") else ""
    rc = int(open(base + ".rc").read().strip() or 1) if os.path.exists(base + ".rc") else 1
    return {"rc": rc, "text": text, "prog": counts_of(text),
            "report": load(base + ".report.json") if name != "none" else None,
            "stats": load(base + ".stats.json") if driver == "emu" else None}

def summarize(name):
    x = one_run(name, "")
    rep, prog_c = x["report"], x["prog"]
    r = {"name": name, "rc": x["rc"], "text": x["text"], "checksum": prog_c["checksum"],
         "prog": prog_c, "report": rep, "problems": [], "model": None, "model_run": None}
    if x["rc"] != 0:
        r["problems"].append("exited with status %d" % x["rc"])
    if not r["checksum"]:
        r["problems"].append("printed no checksum")
    if name != "none" and rep is None:
        r["problems"].append("wrote no report")
    r["policy"] = rep.get("policy") if rep else ("(no library)" if name == "none" else "?")
    lib_calls = (rep or {}).get("library_driver_calls", {})
    hooks = {k: v.get("calls", 0) for k, v in (rep or {}).get("hooks", {}).items()}
    totals = (rep or {}).get("totals", {})
    r["skipped"] = totals.get("updates_skipped") if rep else None
    r["lib_calls"] = sum(lib_calls.values()) if rep else None
    if driver == "emu":
        if x["stats"] is None:
            r["problems"].append("wrote no CUDAEMU_STATS file")
        calls = (x["stats"] or {}).get("calls", {})
        r["updates"] = starts(calls, ["cuGraphExecUpdate", "cuGraphExecKernelNodeSetParams",
                                      "cuGraphExecNodeSetParams"])
        r["vmm"] = {k: calls.get(k, 0) for k in VMM_CALLS}
        r["allocs"] = starts(calls, ["cuMemAlloc"], ["cuMemAllocHost", "cuMemAllocManaged"])
        r["launches"] = starts(calls, ["cuGraphLaunch"])
        r["inst"] = starts(calls, ["cuGraphInstantiate"])
        r["calls"] = sum(calls.values())
        # The model: the whole run, and the steady state from the run of 2N steps.
        y = one_run(name, "-2x")
        if y["rc"] != 0 or not y["stats"]:
            r["problems"].append("the run of %d steps (for the steady state) failed: status %d"
                                 % (2 * steps, y["rc"]))
        elif y["prog"]["checksum"] is None:
            r["problems"].append("the run of %d steps printed no checksum" % (2 * steps))
        else:
            r["checksum_2x"] = y["prog"]["checksum"]
            short, long = cm.stats_counts(x["stats"]), cm.stats_counts(y["stats"])
            if short[0] is not None:
                r["model"] = cm.model(table, *cm.diff_counts(short, long, steps))
                r["model_run"] = cm.model(table, *short)
                r["model_run_inst"] = {ms: cm.model(table, *short, inst_us=ms * 1000.0)
                                       for ms in INST_MS}
                lc = ((y["report"] or {}).get("library_driver_calls") or {})
                r["lib_calls_step"] = (sum(lc.values()) - r["lib_calls"]) / steps \
                    if rep and y["report"] else None
    elif name == "none":
        # Without the library every call of the program reaches the driver:
        # train_loop counts its own (it makes no VMM or node-level update calls).
        p = prog_c
        r["updates"] = p.get("updates")
        r["vmm"] = {k: 0 for k in VMM_CALLS}
        r["allocs"], r["launches"], r["inst"] = p.get("allocations"), p.get("launches"), \
            p.get("instantiations")
        r["calls"] = None
    else:
        # The program's forwarded updates (train_loop makes whole-graph
        # updates only) plus the library's own driver calls.
        r["updates"] = totals.get("updates_forwarded", 0) + starts(lib_calls, [
            "cuGraphExecUpdate", "cuGraphExecKernelNodeSetParams", "cuGraphExecNodeSetParams"])
        r["vmm"] = {k: lib_calls.get(k, 0) for k in VMM_CALLS}
        if r["policy"] in ("off", "always_update"):
            r["allocs"] = starts(hooks, ["cuMemAlloc"], ["cuMemAllocHost", "cuMemAllocManaged"]) \
                + starts(lib_calls, ["cuMemAlloc"], ["cuMemAllocHost"])
        else:
            r["allocs"] = None   # placed or forwarded: the report does not split them
        r["launches"] = totals.get("launches")
        r["inst"] = starts(hooks, ["cuGraphInstantiate"]) + starts(lib_calls, ["cuGraphInstantiate"])
        r["calls"] = None
    return r

runs = [summarize(n) for n in RUNS]
ref = runs[0]
for r in runs:
    if r is not ref and r["checksum"] and ref["checksum"] and r["checksum"] != ref["checksum"]:
        r["problems"].append("checksum %s differs from the run without the library (%s)"
                             % (r["checksum"], ref["checksum"]))
    if r is not ref and r.get("checksum_2x") and ref.get("checksum_2x") and \
            r["checksum_2x"] != ref["checksum_2x"]:
        r["problems"].append("checksum %s of the run of %d steps differs from the run without the "
                             "library (%s)" % (r["checksum_2x"], 2 * steps, ref["checksum_2x"]))
nodes_run = ref["prog"].get("nodes", nodes)
modeled = driver == "emu" and all(r["model"] for r in runs)

def fmt(v, unit=""):
    return "n/r" if v is None else "%s%s" % (v, unit)

def three(v, scale=1.0, unit="us", signed=False):
    f = "%+.1f" if signed else "%.1f"
    return " / ".join(f % (x * scale) for x in v) + " " + unit

label = {"none": "no library", "always_update": "always_update",
         "default": "%s: %s" % ("policy" if os.environ.get("DEMO_POLICY") else "default policy",
                                runs[2]["policy"])}
cols = [label[r["name"]] for r in runs]
rows = []
def row(name, f):
    rows.append([name] + [f(r) for r in runs])

row("steps", lambda r: fmt(r["prog"].get("steps")))
row("kernel nodes per graph", lambda r: fmt(r["prog"].get("nodes")))
row("graph updates reaching the driver", lambda r: fmt(r["updates"]))
row("updates answered by the library", lambda r: "-" if r["name"] == "none" else fmt(r["skipped"]))
row("VMM calls [3]",
    lambda r: "%d (%s)" % (sum(r["vmm"].values()), "/".join(str(r["vmm"][k]) for k in VMM_CALLS)))
row("allocations reaching the driver", lambda r: fmt(r["allocs"]))
row("graph launches", lambda r: fmt(r["launches"]))
row("graph instantiations reaching the driver", lambda r: fmt(r["inst"]))
if driver == "emu":
    row("driver calls, all (the library's own)", lambda r: "%d (%s)" % (
        r["calls"], "-" if r["name"] == "none" else fmt(r["lib_calls"])))
row("checksum", lambda r: (r["checksum"] or "none") if r is ref else
    ("equal" if r["checksum"] and r["checksum"] == ref["checksum"] else "DIFFERS: %s" % r["checksum"]))
if driver == "real":
    row("wall time per step, median (measured)",
        lambda r: fmt(r["prog"].get("step_us_median"), " us"))

def vs_ref(f):
    return lambda r: "(reference)" if r is ref else f(r)

if modeled:
    for rule in cm.RULES:
        row("modeled driver time per steady-state step, %s rule [1]" % cm.RULE_NAMES[rule],
            lambda r, rule=rule: three(r["model"]["us"][rule]))
    for rule in cm.RULES:
        row("driver time avoided over the %d steps, %s rule [1]" % (steps, cm.RULE_NAMES[rule]),
            vs_ref(lambda r, rule=rule: three(
                [a - b for a, b in zip(ref["model_run"]["us"][rule], r["model_run"]["us"][rule])],
                0.001, "ms", True)))
    for rule in cm.RULES:
        row("the same, each instantiation at %s ms [2]" % " / ".join("%g" % x for x in INST_MS)
            + (", %s rule" % cm.RULE_NAMES[rule]),
            vs_ref(lambda r, rule=rule: " / ".join(
                "%+.2f" % ((ref["model_run_inst"][ms]["us"][rule][2] -
                            r["model_run_inst"][ms]["us"][rule][2]) / 1000.0) for ms in INST_MS)
                + " ms"))

def table_md(header, body):
    widths = [max(len(x[i]) for x in [header] + body) for i in range(len(header))]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                     + [line(b) for b in body])

lines = ["# stablegraph demo: %s, %d steps, %d kernel nodes" % (prog, steps, nodes_run), "",
         "Driver: " + driver_line + ".", "",
         table_md([""] + cols, rows), ""]
q = " / ".join("%g" % x for x in table.query)
notes = [
    "Counts: " + ("calls that reached the emulated driver (CUDAEMU_STATS), the library's own calls "
                  "included; the library's own from its report." if driver == "emu" else
                  "without the library, the program's own counts; with it, the library's report "
                  "(updates_forwarded plus the library's own driver calls). n/r: not in the report."),
    "",
    ("[1] A model, not a measurement: " + cm.describe(table) + " Steady-state step: (run of %d "
     "steps - run of %d) / %d. Over the %d steps: the whole run of %d steps, set-up and "
     "instantiations included; avoided = without the library minus with it (negative: the "
     "library adds driver time). Three figures: query %s us." % (
         2 * steps, steps, steps, steps, steps, q)) if modeled else
    "[1] No modeled driver time: " + ("it needs the node counts of the emulated driver; on a real "
                                      "GPU the measured wall time is the figure."
                                      if driver == "real" else "a run failed."),
    ("[2] The same at the query cost %g us with every cuGraphInstantiate* call charged 2 or 8 ms "
     "instead of its per-node figure (re-instantiation: 8-10 ms in two third-party profiles, "
     "graph sizes not stated; background.md): graph instantiations reaching the driver: %s."
     % (table.query[2], ", ".join("%s %s" % (label[r["name"]], fmt(r["inst"])) for r in runs)))
    if modeled else "",
    "[3] Calls of cuMemCreate/cuMemMap/cuMemUnmap/cuMemSetAccess/cuMemRelease/cuMemAddressReserve, "
    "in that order (the program makes none: they are the library's).",
]
lines += [n for n in notes if n]
failed = [r for r in runs if r["problems"]]
lines.append("")
if failed:
    for r in failed:
        lines.append("FAILED: run '%s' (%s): %s" % (r["name"], label[r["name"]], "; ".join(r["problems"])))
else:
    lines.append("OK: all three runs printed the same checksum (%s)." % ref["checksum"])
text = "\n".join(lines) + "\n"
with open(os.path.join(out, "demo.md"), "w") as f:
    f.write(text)
sys.stdout.write(text)
for r in failed:
    tail = r["text"].strip().splitlines()[-5:]
    sys.stderr.write("demo: run '%s' failed; its output ends with:\n%s\n"
                     % (r["name"], "\n".join("    " + t for t in tail)))
print("demo: table written to %s" % os.path.join(out, "demo.md"))
sys.exit(1 if failed else 0)
PY
