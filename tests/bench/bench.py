#!/usr/bin/env python3
"""tests/bench/bench.py: the benchmark behind `make bench` (python3, stdlib only).

For every workload x graph size x mode ("none" = without the library, then each
policy) it runs the workload with --steps T and --steps 2T and takes the
difference divided by T, so warm-up and exit are excluded ("per steady-state
step"). T is a multiple of --steps S, raised per workload and size until T steps
take --min-time seconds without the library (a calibration pair of runs), so
that process start-up jitter stays small against the time measured. Per cell
it records:

  - driver calls per step by kind, from the emulated driver's CUDAEMU_STATS
    (on a real GPU: from the library's report, see `counts_from_report`);
  - the library's report totals (launches, updates seen/forwarded/skipped per
    step; bytes requested and mapped at the end of the 2T run);
  - violations counted by the emulated driver;
  - wall time per step (median of --repeats runs of T and of 2T), and its ratio
    to the no-library run of the same cell, measured in this invocation with
    the modes interleaved;
  - for the --callgrind-sizes, instructions counted by valgrind's callgrind:
    the library's own code plus the non-driver code it calls (libc, ld.so),
    per step and per launch, and per hooked call (see `parse_callgrind`).

Separately, for the --skip-cost-sizes (issue 4's target: at most 200), the
library's instructions per kernel node per skip decision: recapture_temps
under skip_temp (when both are selected) runs under callgrind counting only
inside the library's graph entry point (--toggle-collect=sg_graph_call) with
--skip-cost-steps S and S + 2; the difference of the library object's own
instructions, divided by the updates skipped in between (from the report)
and by the node count, is the figure (`skip_cost`; the same with the libc /
ld.so code the library calls is given beside it).

Every cell also gets a modeled driver time per steady-state step
(costmodel.py): every call that reached the emulated driver, the program's and
the library's own, charged from the cost table (--costs, default
core/costs.tsv), updates under the "every node" and the "changed
nodes" rule, at the three query costs of the table. --model-sizes adds graph
sizes (16384 by default) that run once with S and 2S steps for their counts.

Then issue 11's figures (targets.py), each printed beside its target with
PASS or FAIL: library instructions per non-captured cuLaunchKernel, per node
per re-captured step, per node of an accepted pointer-only update, per
steady-state cuGraphLaunch; host memory per node; driver calls the library
makes per step; modeled driver time against the run without the library; the
cumulative modeled driver time over steps with instantiations at 2 and 8 ms
(plotted, with its checks); the instantiations a 50-step rotating_inputs run
adds. A missed target is reported, not a failure; a figure that cannot be
measured is a failure.

Every run's checksum must equal the no-library run's: a mismatch, a failed
run or more violations than without the library is a failure, printed loudly,
recorded in the results, and makes the exit status 1.

Writes OUT/results.json, OUT/results.csv, OUT/table.md and (with gnuplot)
OUT/*.png, and prints a summary with the command line and the date.
"""
import argparse
import concurrent.futures
import csv
import datetime
import itertools
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import costmodel  # noqa: E402  (tests/bench/costmodel.py)
import targets  # noqa: E402  (tests/bench/targets.py)

ALL_WORKLOADS = ["recapture_temps", "rotating_inputs", "fresh_inputs", "slices",
                 "scalar_changes", "topology_changes", "train_loop"]
NOLIB = "none"

# Kinds of driver calls, by exact ELF name (all variants of each entry point).
KINDS = [
    ("updates", re.compile(r"^cuGraphExec(Update|\w*NodeSetParams)(_v\d+)?(_ptsz)?$")),
    ("launches", re.compile(r"^cuGraphLaunch(_ptsz)?$")),
    ("instantiations", re.compile(r"^cuGraphInstantiate\w*$")),
    ("vmm", re.compile(r"^cuMem(Create|Map|Unmap|SetAccess|Release|AddressReserve|AddressFree)"
                       r"(_v\d+)?$")),
    ("allocs", re.compile(r"^cuMem(Alloc|AllocAsync|AllocFromPoolAsync|AllocPitch)(_v\d+)?(_ptsz)?$")),
    ("frees", re.compile(r"^cuMemFree(Async)?(_v\d+)?(_ptsz)?$")),
]
KIND_NAMES = [k for k, _ in KINDS] + ["total"]
REPORT_TOTALS = ["launches", "updates_seen", "updates_forwarded", "updates_skipped"]


def split_list(s):
    return [x for x in re.split(r"[\s,]+", s or "") if x]


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(timespec="seconds")


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------ arithmetic

def per_step(short, long, steps):
    """Steady-state rate: (value after 2S steps - value after S steps) / S.
    None if either value is missing."""
    if short is None or long is None or steps <= 0:
        return None
    return (long - short) / steps


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def kind_counts(calls):
    """Sums a {name: count} dict by kind; None if there are no counts."""
    if calls is None:
        return None
    out = {k: 0 for k in KIND_NAMES}
    for name, n in calls.items():
        out["total"] += n
        for kind, pat in KINDS:
            if pat.match(name):
                out[kind] += n
    return out


def counts_from_report(report):
    """Real-GPU path (untested here): the driver calls the library can see,
    i.e. the hooked calls the program made (updates replaced by those the
    library forwarded) plus the library's own driver calls. Calls to entry
    points that are not hooked are invisible, so `total` is a lower bound."""
    if report is None:
        return None
    calls = {}
    for name, h in (report.get("hooks") or {}).items():
        if h.get("calls") and not KINDS[0][1].match(name):
            calls[name] = h["calls"]
    fwd = (report.get("totals") or {}).get("updates_forwarded", 0)
    if fwd:
        calls["cuGraphExecUpdate"] = fwd  # the forwarded updates of every variant, under one name
    for name, n in (report.get("library_driver_calls") or {}).items():
        calls[name] = calls.get(name, 0) + n
    return calls


def hooked_calls(report, pattern=None):
    """Sum of the report's hooks.*.calls (those whose name matches pattern)."""
    if report is None:
        return None
    return sum(h.get("calls", 0) for n, h in (report.get("hooks") or {}).items()
               if pattern is None or pattern.match(n))


def timing_steps(S, est_per_step, min_time, max_factor):
    """Step count T for the timed runs: a multiple of S (keeps the workloads'
    periodic patterns whole), large enough that T steps last min_time."""
    if min_time <= 0 or est_per_step is None or est_per_step <= 0:
        return S
    k = math.ceil(min_time / (est_per_step * S) - 1e-9)
    return S * int(min(max(k, 1), max_factor))


# ------------------------------------------------------------------ callgrind

def parse_callgrind(path, lib_name, driver_prefix="libcuda.so"):
    """Reads a callgrind output file (any name compression, subposition
    compression, threads combined). Returns a dict:
      total:     Ir of the whole process (the `totals:`/`summary:` line);
      self_sum:  the sum of all self costs (equals total: a consistency check);
      lib_self:  Ir executed in the library object's own code;
      lib_callees: inclusive Ir of calls the library object makes into other
                 objects except the driver (libc, ld.so: memcpy, locks, lazy
                 binding); what the driver does for a forwarded call is not
                 the library's cost;
      lib:       lib_self + lib_callees, the figure the bench reports.
    Self cost lines follow a function; the cost line right after `calls=` is
    the inclusive cost of that call and belongs to no one's self cost."""
    names = {}
    cur_ob = None
    call_ob = None
    in_call = False
    npos = 1
    ir_idx = 0
    total = None
    self_by_ob = {}
    lib_callees = 0

    def resolve(spec):
        spec = spec.strip()
        m = re.match(r"^\((\d+)\)(?:\s+(.*))?$", spec)
        if not m:
            return spec
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "?")

    def is_lib(ob):
        return ob is not None and os.path.basename(ob) == lib_name

    def is_driver(ob):
        return ob is not None and os.path.basename(ob).startswith(driver_prefix)

    with open(path, errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                if in_call:
                    in_call = False
                    fields = line.split()
                    cost = int(fields[npos + ir_idx]) if len(fields) > npos + ir_idx else 0
                    target = call_ob if call_ob is not None else cur_ob
                    if is_lib(cur_ob) and not is_lib(target) and not is_driver(target):
                        lib_callees += cost
                    call_ob = None
                    continue
                fields = line.split()
                cost = int(fields[npos + ir_idx]) if len(fields) > npos + ir_idx else 0
                self_by_ob[cur_ob] = self_by_ob.get(cur_ob, 0) + cost
            elif line.startswith("ob="):
                cur_ob = resolve(line[3:])
            elif line.startswith("cob="):
                call_ob = resolve(line[4:])
            elif line.startswith("calls="):
                in_call = True
            elif line.startswith("positions:"):
                npos = len(line.split()[1:])
            elif line.startswith("events:"):
                ev = line.split()[1:]
                ir_idx = ev.index("Ir") if "Ir" in ev else 0
            elif line.startswith("totals:") or line.startswith("summary:"):
                total = int(line.split()[1])
    lib_self = sum(v for ob, v in self_by_ob.items() if is_lib(ob))
    return {"total": total, "self_sum": sum(self_by_ob.values()), "lib_self": lib_self,
            "lib_callees": lib_callees, "lib": lib_self + lib_callees}


# ------------------------------------------------------------------ running

class Runner:
    def __init__(self, args, tmp):
        self.a = args
        self.tmp = tmp
        self._seq = itertools.count(1)   # next() is atomic: callgrind runs go in threads
        self.lib = os.path.join(args.build, "libstablegraph.so")
        self.emu = os.path.join(args.build, "emu")
        self.wldir = args.workload_dir or os.path.join(args.build, "workloads")

    def env(self, mode, stats, report):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("STABLEGRAPH_", "CUDAEMU_")) and k != "LD_PRELOAD"}
        if self.a.driver == "emu":
            old = e.get("LD_LIBRARY_PATH")
            e["LD_LIBRARY_PATH"] = self.emu + (":" + old if old else "")
            e["CUDAEMU_STATS"] = stats
        if mode != NOLIB:
            e["LD_PRELOAD"] = self.lib
            e["STABLEGRAPH_POLICY"] = mode
            e["STABLEGRAPH_REPORT"] = report
            e["STABLEGRAPH_STRICT"] = "1"  # an unknown policy fails instead of running as off
        return e

    def run(self, wl, nodes, steps, mode, callgrind=False, toggle=None, prog=None, extra=(),
            env=None, dump_after=None):
        """One run; returns its record (never raises for a failing program).
        callgrind: under valgrind's callgrind, collecting everything or, with
        toggle, only inside that function; dump_after: a function (pattern)
        after each return from which callgrind writes what it collected since
        the last dump (one part per call); prog: a program instead of the
        workload named wl (wl then only names the run); extra: more options;
        env: more environment variables (of a run with the library).
        The record holds rc, wall, checksum, stderr, stats (CUDAEMU_STATS),
        report (the library's), maxrss_kb (peak RSS, not under callgrind) and,
        under callgrind, cg (parse_callgrind; with dump_after, of what
        followed the last dump) and, with dump_after, cg_parts (parse_callgrind
        of each part, in order)."""
        base = os.path.join(self.tmp, "%s-%d-%d-%s-%s-%d" % (
            wl, nodes, steps, mode, "cg" if callgrind else "run", next(self._seq)))
        stats, report, cgout = base + ".stats.json", base + ".report.json", base + ".callgrind"
        cmd = [prog or os.path.join(self.wldir, wl), "--steps", str(steps),
               "--nodes", str(nodes)] + list(extra)
        if callgrind:
            cmd = ["valgrind", "--tool=callgrind", "-q", "--callgrind-out-file=" + cgout] + \
                (["--collect-atstart=no", "--toggle-collect=" + toggle] if toggle else []) + \
                (["--dump-after=" + dump_after] if dump_after else []) + cmd
        e = self.env(mode, stats, report)
        if env and mode != NOLIB:
            e.update(env)
        rc, out, err, wall, rss = spawn(cmd, e, self.a.timeout)
        m = re.search(r"^checksum: *([0-9a-fA-F]+)\s*$", out, re.M)
        rec = {"rc": rc, "wall": wall, "checksum": m.group(1).lower() if m else None,
               "stderr": err[-400:], "stats": load_json(stats), "report": load_json(report),
               "maxrss_kb": None if callgrind else rss}
        parts = []
        if callgrind:
            rec["cg"] = parse_callgrind(cgout, os.path.basename(self.lib)) \
                if os.path.exists(cgout) else None
            if dump_after:        # callgrind names the parts <out>.1, <out>.2, ...
                n = 1
                while os.path.exists("%s.%d" % (cgout, n)):
                    parts.append("%s.%d" % (cgout, n))
                    n += 1
                rec["cg_parts"] = [parse_callgrind(f, os.path.basename(self.lib)) for f in parts]
        for f in [stats, report, cgout] + parts:
            if os.path.exists(f):
                if self.a.keep_raw:
                    os.makedirs(os.path.join(self.a.out, "raw"), exist_ok=True)
                    shutil.copy(f, os.path.join(self.a.out, "raw", os.path.basename(f)))
                os.unlink(f)
        return rec

    def command(self, wl, nodes, steps, mode, toggle=None, prog=None, extra=(), env=None,
                dump_after=None):
        """A shell command line that repeats one run (for the tables)."""
        e = env
        env = "LD_LIBRARY_PATH=%s " % self.rel(self.emu) if self.a.driver == "emu" else ""
        if mode != NOLIB:
            env += "LD_PRELOAD=%s STABLEGRAPH_POLICY=%s " % (self.rel(self.lib), mode)
            env += "".join("%s=%s " % kv for kv in sorted((e or {}).items()))
        vg = ""
        if toggle is not None:
            vg = "valgrind --tool=callgrind %s%s" % (
                "--collect-atstart=no --toggle-collect=%s " % toggle if toggle else "",
                "'--dump-after=%s' " % dump_after if dump_after else "")
        return "%s%s%s --steps %s --nodes %d%s" % (
            env, vg, self.rel(prog or os.path.join(self.wldir, wl)), steps, nodes,
            "".join(" " + x for x in extra))

    @staticmethod
    def rel(path):
        r = os.path.relpath(path, SRC)
        return path if r.startswith("..") else r


def spawn(cmd, env, timeout):
    """Runs cmd with its output captured; returns (rc, stdout, stderr, wall
    seconds, peak RSS in KiB). rc: the exit status (negative: the signal),
    "timeout" or "exec-failed". The child is reaped with wait4, whose rusage
    gives the peak RSS of that child alone."""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        try:
            p = subprocess.Popen(cmd, env=env, stdout=fo, stderr=fe)
        except OSError as ex:
            return "exec-failed", "", str(ex), 0.0, None
        done = {}
        waiter = threading.Thread(target=lambda: done.update(r=os.wait4(p.pid, 0)))
        waiter.start()
        waiter.join(timeout)
        timed_out = waiter.is_alive()
        if timed_out:
            p.kill()
            waiter.join()
        wall = time.perf_counter() - t0
        _, status, ru = done["r"]
        p.returncode = os.waitstatus_to_exitcode(status)   # reaped here, not by Popen
        fo.seek(0)
        fe.seek(0)
        out = fo.read().decode(errors="replace")
        err = fe.read().decode(errors="replace")
    if timed_out:
        return "timeout", out, "timed out after %ss" % timeout, wall, None
    return p.returncode, out, err, wall, ru.ru_maxrss


def detect_driver(choice):
    if choice in ("emu", "real"):
        return choice, None
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            p = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               timeout=30)
            name = p.stdout.strip().splitlines()[0] if p.stdout.strip() else ""
            if p.returncode == 0 and name and "cudaemu" not in name.lower():
                return "real", name
        except (OSError, subprocess.TimeoutExpired):
            pass
    return "emu", None


# ------------------------------------------------------------------ one cell

def counts_of(rec, driver):
    if driver == "emu":
        return (rec["stats"] or {}).get("calls")
    return counts_from_report(rec["report"])


def build_cell(a, wl, nodes, mode, runs, base_cell, cgruns, cg_base, counts_only=False):
    """runs: {steps: [records]} for S and 2S. base_cell: the no-library cell
    of the same workload and size (None for that cell itself). counts_only:
    one run of each, for the driver counts and the model (no wall time)."""
    S, L = sorted(runs)
    cell = {"workload": wl, "nodes": nodes, "mode": mode, "steps_short": S, "steps_long": L,
            "counts_only": counts_only, "failures": []}
    fails = cell["failures"]
    first = {st: runs[st][0] for st in (S, L)}

    for st in (S, L):
        for i, r in enumerate(runs[st]):
            if r["rc"] != 0:
                fails.append("run failed (--steps %d, repeat %d): status %s: %s"
                             % (st, i, r["rc"], r["stderr"].strip().splitlines()[-1:]))
            elif r["checksum"] is None:
                fails.append("no checksum printed (--steps %d, repeat %d)" % (st, i))
    # The reference: the first no-library run with the same step count.
    ref = base_cell["_ref"] if base_cell else {st: first[st]["checksum"] for st in (S, L)}
    cell["_ref"] = ref
    cell["checksum"] = first[L]["checksum"]
    cell["checksum_ref"] = ref[L]
    ok = True
    for st in (S, L):
        for i, r in enumerate(runs[st]):
            if r["checksum"] is not None and r["checksum"] != ref[st]:
                ok = False
                fails.append("CHECKSUM MISMATCH (--steps %d, repeat %d): %s, without the library %s"
                             % (st, i, r["checksum"], ref[st]))
    cell["checksum_ok"] = ok and all(r["checksum"] for st in (S, L) for r in runs[st])

    # Driver calls per steady-state step.
    cs, cl = counts_of(first[S], a.driver), counts_of(first[L], a.driver)
    ks, kl = kind_counts(cs), kind_counts(cl)
    cell["calls_per_step"] = {k: per_step(ks[k], kl[k], S) for k in KIND_NAMES} \
        if ks and kl else {k: None for k in KIND_NAMES}
    if cs is not None and cl is not None:
        names = sorted(set(cs) | set(cl))
        cell["calls_per_step_by_name"] = {
            n: per_step(cs.get(n, 0), cl.get(n, 0), S) for n in names
            if cs.get(n, 0) != cl.get(n, 0)}
    else:
        cell["calls_per_step_by_name"] = None
    cell["counts_source"] = "CUDAEMU_STATS" if a.driver == "emu" else "library report"

    # Modeled driver time per step: every call that reached the emulated
    # driver, charged from the cost table (costmodel.py); needs its node counts.
    ms, ml = (costmodel.stats_counts(first[st]["stats"]) for st in (S, L))
    if a.driver == "emu" and ms[0] is not None and ml[0] is not None:
        pcalls, pnodes = costmodel.diff_counts(ms, ml, S)
        cell["nodes_per_step_by_name"] = {n: v for n, v in pnodes.items() if v["nodes"]}
        cell["model"] = costmodel.model(a.table, pcalls, pnodes)
        b = (base_cell or {}).get("model") if base_cell else cell["model"]
        cell["model_ratio"] = {r: [ratio(x, y) for x, y in zip(cell["model"]["us"][r],
                                                               b["us"][r])]
                               for r in costmodel.RULES} if b else None
    else:
        cell["model"] = cell["model_ratio"] = None
    rss = [r["maxrss_kb"] for r in runs[L] if r.get("maxrss_kb")]
    cell["maxrss_kb"] = min(rss) if rss else None
    cell["maxrss_kb_runs"] = rss
    calls_l = (first[L]["stats"] or {}).get("calls") if a.driver == "emu" else None
    cell["instantiations_run"] = sum(n for k, n in calls_l.items()
                                     if k.startswith("cuGraphInstantiate")) if calls_l else None

    viol = [((r["stats"] or {}).get("violations")) for st in (S, L) for r in runs[st]]
    viol = [v for v in viol if v is not None]
    cell["violations"] = max(viol) if viol else None
    if base_cell and cell["violations"] and cell["violations"] > (base_cell["violations"] or 0):
        fails.append("VIOLATIONS: %d (without the library: %s)"
                     % (cell["violations"], base_cell["violations"]))

    # The library's own totals.
    rs, rl = first[S]["report"], first[L]["report"]
    if mode != NOLIB and rs and rl:
        ts, tl = rs.get("totals", {}), rl.get("totals", {})
        cell["lib_per_step"] = {k: per_step(ts.get(k), tl.get(k), S) for k in REPORT_TOTALS}
        cell["bytes_requested"] = tl.get("bytes_requested")
        cell["bytes_mapped"] = tl.get("bytes_mapped")
        cell["mapped_over_requested"] = ratio(cell["bytes_mapped"], cell["bytes_requested"])
        cell["library_driver_calls_per_step"] = {
            n: per_step((rs.get("library_driver_calls") or {}).get(n, 0), v, S)
            for n, v in (rl.get("library_driver_calls") or {}).items()}
        cell["report_policy"] = rl.get("policy")
        if rl.get("policy") != mode:
            fails.append("report says policy %r, asked for %r" % (rl.get("policy"), mode))
    else:
        cell["lib_per_step"] = {k: None for k in REPORT_TOTALS}
        cell["bytes_requested"] = cell["bytes_mapped"] = cell["mapped_over_requested"] = None
        cell["library_driver_calls_per_step"] = None
        if mode != NOLIB and not fails:
            fails.append("no library report written")

    # Wall time per steady-state step.
    if counts_only:
        cell["wall_per_step_us"] = cell["wall_ratio"] = None
    else:
        ws = statistics.median(r["wall"] for r in runs[S])
        wl_ = statistics.median(r["wall"] for r in runs[L])
        cell["wall_per_step_us"] = per_step(ws, wl_, S) * 1e6
        cell["wall_ratio"] = ratio(cell["wall_per_step_us"], base_cell["wall_per_step_us"]) \
            if base_cell else 1.0

    cell["callgrind"] = callgrind_figures(a, mode, cgruns, cg_base, fails)
    return cell


def callgrind_figures(a, mode, cgruns, cg_base, fails):
    """Instruction figures from the callgrind runs of one cell (or None)."""
    if not cgruns:
        return None
    S, L = a.callgrind_steps, 2 * a.callgrind_steps
    rs, rl = cgruns[S], cgruns[L]
    for st, r in ((S, rs), (L, rl)):
        if r["rc"] != 0 or r["cg"] is None:
            fails.append("callgrind run failed (--steps %d): status %s: %s"
                         % (st, r["rc"], r["stderr"].strip().splitlines()[-1:]))
            return None
    if cg_base is not None:
        for st, r in ((S, rs), (L, rl)):
            b = cg_base[st]
            if b["rc"] == 0 and r["checksum"] != b["checksum"]:
                fails.append("CHECKSUM MISMATCH under callgrind (--steps %d): %s, without the "
                             "library %s" % (st, r["checksum"], b["checksum"]))
    out = {"steps_short": S, "steps_long": L,
           "process_ir_short": rs["cg"]["total"], "process_ir_long": rl["cg"]["total"]}
    if mode == NOLIB:
        return out
    lib_s, lib_l = rs["cg"]["lib"], rl["cg"]["lib"]
    self_s, self_l = rs["cg"]["lib_self"], rl["cg"]["lib_self"]
    hs, hl = hooked_calls(rs["report"]), hooked_calls(rl["report"])
    # launches the program made (the report counts hook calls under every policy)
    launches = per_step(hooked_calls(rs["report"], KINDS[1][1]),
                        hooked_calls(rl["report"], KINDS[1][1]), S)
    out.update({
        "lib_ir_short": lib_s, "lib_ir_long": lib_l,
        "lib_self_ir_short": self_s, "lib_self_ir_long": self_l,
        "hooked_calls_short": hs, "hooked_calls_long": hl,
        "hooked_calls_per_step": per_step(hs, hl, S),
        "lib_ir_per_step": per_step(lib_s, lib_l, S),
        "lib_self_ir_per_step": per_step(self_s, self_l, S),
        "lib_ir_per_launch": ratio(per_step(lib_s, lib_l, S), launches),
        # per hooked call, steady state: library code only
        "lib_ir_per_hooked_call": ratio(lib_l - lib_s, (hl - hs) if hs is not None else None),
        "lib_ir_per_hooked_call_whole_run": ratio(lib_s, hs),
    })
    if cg_base is not None:
        bs, bl = cg_base[S]["cg"], cg_base[L]["cg"]
        if bs and bl:
            ds, dl = rs["cg"]["total"] - bs["total"], rl["cg"]["total"] - bl["total"]
            out.update({
                "process_ir_added_short": ds, "process_ir_added_long": dl,
                # the brief's method: whole process with minus without, per hooked call
                "process_ir_added_per_hooked_call_whole_run": ratio(ds, hs),
                "process_ir_added_per_hooked_call": ratio(dl - ds, (hl - hs) if hs is not None
                                                          else None),
            })
    return out


# ------------------------------------------------------------------ skip decision cost

SKIP_COST_WORKLOAD = "recapture_temps"
SKIP_COST_POLICY = "skip_temp"
SKIP_COST_TARGET = 200
SKIP_COST_TOGGLE = "sg_graph_call"   # the library's entry for graph calls (core/graphs.c)


def skip_cost(short, long, nodes):
    """Library instructions per kernel node per skip decision from two runs
    (dicts: lib_self, lib from parse_callgrind; skipped, seen, forwarded from
    the report totals). None where something is missing, or when an update
    between the two runs was not skipped (then it is not a skip decision)."""
    need = ("lib_self", "lib", "skipped", "seen", "forwarded")
    if any(r is None or r.get(k) is None for r in (short, long) for k in need) or nodes <= 0:
        return None
    skipped = long["skipped"] - short["skipped"]
    if skipped <= 0 or long["seen"] - short["seen"] != skipped or \
            long["forwarded"] != short["forwarded"]:
        return None
    return {"updates_skipped": skipped,
            "lib_self_ir_per_node": (long["lib_self"] - short["lib_self"]) / skipped / nodes,
            "lib_ir_per_node": (long["lib"] - short["lib"]) / skipped / nodes}


def run_skip_cost(runner, nodes, steps):
    """One callgrind run for the skip cost; returns the dict skip_cost wants
    plus rc / stderr."""
    r = runner.run(SKIP_COST_WORKLOAD, nodes, steps, SKIP_COST_POLICY, callgrind=True,
                   toggle=SKIP_COST_TOGGLE)
    out = {"rc": r["rc"], "stderr": r["stderr"], "lib_self": None, "lib": None}
    if r["rc"] == 0 and r.get("cg"):
        out["lib_self"], out["lib"] = r["cg"]["lib_self"], r["cg"]["lib"]
    t = (r["report"] or {}).get("totals") or {}
    out["skipped"], out["seen"] = t.get("updates_skipped"), t.get("updates_seen")
    out["forwarded"] = t.get("updates_forwarded")
    return out


def skip_cost_rows(runner, a, sizes, steps):
    """The skip-cost rows for the given sizes; failures as strings."""
    rows, fails = [], []
    for n in sizes:
        short, long = run_skip_cost(runner, n, steps), run_skip_cost(runner, n, steps + 2)
        fig = skip_cost(short, long, n)
        row = {"workload": SKIP_COST_WORKLOAD, "policy": SKIP_COST_POLICY, "nodes": n,
               "steps_short": steps, "steps_long": steps + 2,
               "command": runner.command(SKIP_COST_WORKLOAD, n, steps, SKIP_COST_POLICY,
                                         toggle=SKIP_COST_TOGGLE) + " (and --steps %d)" % (steps + 2),
               "lib_self_ir_per_node": None, "lib_ir_per_node": None, "updates_skipped": None}
        if fig:
            row.update(fig)
            row["met"] = fig["lib_self_ir_per_node"] <= SKIP_COST_TARGET
        else:
            row["met"] = None
            why = [("--steps %d: status %s: %s" % (st, r["rc"], r["stderr"].strip()
                                                    .splitlines()[-1:]))
                   for st, r in ((steps, short), (steps + 2, long)) if r["rc"] != 0]
            fails.append("skip cost, %d nodes: not measured (%s)" % (
                n, "; ".join(why) or "an update between the runs was not skipped"))
        rows.append(row)
    return rows, fails


def skip_cost_summary(rows):
    vals = [r for r in rows if r.get("lib_self_ir_per_node") is not None]
    if not vals:
        return None
    worst = max(vals, key=lambda r: r["lib_self_ir_per_node"])
    return {"target": SKIP_COST_TARGET, "workload": SKIP_COST_WORKLOAD,
            "policy": SKIP_COST_POLICY,
            "max_lib_self_ir_per_node": worst["lib_self_ir_per_node"],
            "at_nodes": worst["nodes"],
            "max_lib_ir_per_node": max(r["lib_ir_per_node"] for r in vals),
            "met": all(r["met"] for r in vals) and len(vals) == len(rows)}


# ------------------------------------------------------------------ outputs

CSV_FIELDS = [
    "workload", "nodes", "mode", "steps_short", "steps_long", "checksum", "checksum_ref",
    "checksum_ok", "violations", "failures",
    "updates_per_step", "launches_per_step", "instantiations_per_step", "vmm_per_step",
    "allocs_per_step", "frees_per_step", "total_calls_per_step",
    "lib_launches_per_step", "lib_updates_seen_per_step", "lib_updates_forwarded_per_step",
    "lib_updates_skipped_per_step", "bytes_requested", "bytes_mapped", "mapped_over_requested",
    "wall_per_step_us", "wall_ratio",
    "cg_steps_short", "cg_lib_ir_per_step", "cg_lib_self_ir_per_step", "cg_lib_ir_per_launch",
    "cg_lib_ir_per_hooked_call", "cg_process_ir_added_per_hooked_call",
    "cg_process_ir_added_per_hooked_call_whole_run",
    "skip_lib_self_ir_per_node", "skip_lib_ir_per_node", "counts_only", "maxrss_kb",
] + ["model_%s_us_%s" % (r, q) for r in costmodel.RULES for q in costmodel.QUERY_LEVELS]


def flat(cell):
    r = {k: cell.get(k) for k in ("workload", "nodes", "mode", "steps_short", "steps_long",
                                  "checksum", "checksum_ref", "checksum_ok", "violations",
                                  "bytes_requested", "bytes_mapped", "mapped_over_requested",
                                  "wall_per_step_us", "wall_ratio")}
    r["failures"] = "; ".join(cell["failures"])
    cps = cell["calls_per_step"]
    for k in KIND_NAMES:
        r[("total_calls" if k == "total" else k) + "_per_step"] = cps.get(k)
    for k in REPORT_TOTALS:
        r["lib_%s_per_step" % k] = cell["lib_per_step"].get(k)
    cg = cell.get("callgrind") or {}
    r["cg_steps_short"] = cg.get("steps_short")
    for k in ("lib_ir_per_step", "lib_self_ir_per_step", "lib_ir_per_launch",
              "lib_ir_per_hooked_call", "process_ir_added_per_hooked_call",
              "process_ir_added_per_hooked_call_whole_run"):
        r["cg_" + k] = cg.get(k)
    sk = cell.get("skip_cost") or {}
    r["skip_lib_self_ir_per_node"] = sk.get("lib_self_ir_per_node")
    r["skip_lib_ir_per_node"] = sk.get("lib_ir_per_node")
    r["counts_only"], r["maxrss_kb"] = cell.get("counts_only"), cell.get("maxrss_kb")
    mo = cell.get("model")
    for rule in costmodel.RULES:
        for i, q in enumerate(costmodel.QUERY_LEVELS):
            r["model_%s_us_%s" % (rule, q)] = mo["us"][rule][i] if mo else None
    return r


def fmt(v, nd=2):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e9:
            return str(int(v))
        return ("%." + str(nd) + "f") % v
    return str(v)


def write_csv(path, cells):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for c in cells:
            w.writerow({k: ("" if v is None else v) for k, v in flat(c).items()})


def headline(cells):
    """Instructions per forwarded call under `off` (issue 3 target: <= 100)."""
    vals = [(c["callgrind"]["lib_ir_per_hooked_call"], c) for c in cells
            if c["mode"] == "off" and c.get("callgrind")
            and c["callgrind"].get("lib_ir_per_hooked_call") is not None]
    proc = [c["callgrind"].get("process_ir_added_per_hooked_call") for _, c in vals]
    proc = [p for p in proc if p is not None]
    if not vals:
        return None
    worst = max(vals, key=lambda x: x[0])
    return {"target": 100, "max_lib_ir_per_forwarded_call": worst[0],
            "at": "%s, %d nodes" % (worst[1]["workload"], worst[1]["nodes"]),
            "median_lib_ir_per_forwarded_call": statistics.median(v for v, _ in vals),
            "max_process_ir_added_per_forwarded_call": max(proc) if proc else None,
            "met": worst[0] <= 100}


def pivot(lines, cells, meta, title, getter, nd=2, sizes=None):
    sizes, modes = sizes or meta["sizes"], meta["modes"]
    lines += ["", "#### " + title, "",
              "| workload | mode | " + " | ".join(str(s) for s in sizes) + " |",
              "| --- | --- |" + " ---: |" * len(sizes)]
    idx = {(c["workload"], c["nodes"], c["mode"]): c for c in cells}
    for wl in meta["workloads"]:
        for m in modes:
            row = [fmt(getter(idx[(wl, s, m)]), nd) if (wl, s, m) in idx else "-" for s in sizes]
            row = [x if isinstance(x, str) else fmt(x, nd) for x in row]
            lines.append("| %s | %s | %s |" % (wl, m, " | ".join(row)))


def write_table(path, cells, meta, head, skip=None, trows=None, curves=None):
    L = ["### Benchmark: %s driver, %s" % (meta["driver_desc"], meta["date"]), "",
         "Command: `%s` (commit %s). Per steady-state step = (run of 2T steps - run of T steps) "
         "/ T, T a multiple of %d chosen per workload and size so that T steps take >= %g s "
         "(results.csv: steps_short); graph sizes in kernel nodes; `none` = without the library. "
         "Wall time: median of %d runs each, as a ratio to `none` measured in the same "
         "invocation, modes interleaved (emulated kernels run on the CPU: not GPU timings; "
         "load average %.1f at start, %.1f at end on %d CPUs)."
         % (meta["command"], meta["commit"], meta["steps"], meta["min_time"], meta["repeats"],
            meta["loadavg_start"], meta["loadavg_end"], meta["cpus"])]
    nbad = sum(1 for c in cells if c["failures"])
    L += ["", "Checksums equal to the run without the library: %s."
          % ("all %d cells" % len(cells) if nbad == 0 else "**%d of %d cells FAILED**"
             % (nbad, len(cells)))]
    if head:
        L += ["", "Instructions the library adds per forwarded call under `off` (callgrind, library "
              "code and the libc/ld.so code it calls, steady state): max **%s** (%s), median %s; "
              "target <= %d: %s. Whole process with the library minus without: max %s."
              % (fmt(head["max_lib_ir_per_forwarded_call"], 1), head["at"],
                 fmt(head["median_lib_ir_per_forwarded_call"], 1), head["target"],
                 "met" if head["met"] else "**NOT MET**",
                 fmt(head["max_process_ir_added_per_forwarded_call"], 1)),
              "", "The library figure is deterministic; the whole-process difference is a "
              "cross-check only: the emulated driver's threads make a run's total vary by a few "
              "hundred instructions, which is large against a few dozen per call."]
    if skip and skip.get("rows"):
        sm = skip.get("summary")
        L += ["", "#### Library instructions per kernel node per skip decision (callgrind)", "",
              "%s under %s, counted only inside the library's graph entry point "
              "(`--toggle-collect=%s`): (library Ir at --steps %d+2 - at --steps %d) / updates "
              "skipped in between / nodes. `library` is the library object's own code (the "
              "target: <= %d); `with libc` adds the libc / ld.so code it calls. %s"
              % (SKIP_COST_WORKLOAD, SKIP_COST_POLICY, SKIP_COST_TOGGLE, skip["steps"],
                 skip["steps"], SKIP_COST_TARGET,
                 ("Max **%s** (%d nodes): %s." % (fmt(sm["max_lib_self_ir_per_node"], 1),
                                                  sm["at_nodes"],
                                                  "met" if sm["met"] else "**NOT MET**"))
                 if sm else "**Not measured.**"),
              "", "| nodes | library Ir/node | with libc Ir/node | updates skipped | command |",
              "| ---: | ---: | ---: | ---: | --- |"]
        for r in skip["rows"]:
            L.append("| %d | %s | %s | %s | `%s` |" % (
                r["nodes"], fmt(r["lib_self_ir_per_node"], 1), fmt(r["lib_ir_per_node"], 1),
                fmt(r["updates_skipped"]), r["command"]))
    if trows:
        L += ["", "#### Issue 11's figures, each beside its target", "",
              "Measured on the library as it is (a missed target is reported, not an error; "
              "NOT MEASURED is a bench failure). Instruction counts: callgrind, the library's "
              "code plus the libc / ld.so code it calls. How each is measured: "
              "tests/bench/targets.py and docs/benchmarks.md.", ""]
        L += targets.markdown(trows)
        L += targets.detail_markdown(trows)
    if any(c.get("model") for c in cells):
        q = meta["query_us"]
        L += ["", "#### Modeled driver time per steady-state step (us)", "",
              costmodel.describe(costmodel_table(meta)) + " Each cell: query %s us."
              % " / ".join("%g" % x for x in q)]
        for rule in costmodel.RULES:
            pivot(L, cells, meta, "Modeled driver time per step, %s rule (us; query %s us)"
                  % (costmodel.RULE_NAMES[rule], " / ".join("%g" % x for x in q)),
                  lambda c, r=rule: fmt_us3(c["model"]["us"][r]) if c.get("model") else None,
                  sizes=meta["model_sizes"])
    if curves:
        L += curve_table(curves, meta)
    if any(c.get("library_driver_calls_per_step") is not None for c in cells):
        pivot(L, cells, meta, "Driver calls made by the library per step (its report)",
              lambda c: sum(c["library_driver_calls_per_step"].values())
              if c.get("library_driver_calls_per_step") is not None else None,
              sizes=meta["model_sizes"])
    pivot(L, cells, meta, "Graph updates reaching the driver per step",
          lambda c: c["calls_per_step"]["updates"])
    pivot(L, cells, meta, "VMM calls reaching the driver per step",
          lambda c: c["calls_per_step"]["vmm"])
    pivot(L, cells, meta, "Wall time per step, ratio to no library",
          lambda c: c["wall_ratio"])
    cgc = [c for c in cells if c.get("callgrind") and c["mode"] != NOLIB]
    if cgc:
        L += ["", "#### Instructions of the library (callgrind, %d vs %d steps)"
              % (2 * meta["callgrind_steps"], meta["callgrind_steps"]), "",
              "| workload | nodes | mode | Ir/step | Ir/launch | Ir/hooked call | "
              "process Ir added/hooked call |", "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
        for c in cgc:
            g = c["callgrind"]
            L.append("| %s | %d | %s | %s | %s | %s | %s |" % (
                c["workload"], c["nodes"], c["mode"], fmt(g.get("lib_ir_per_step"), 0),
                fmt(g.get("lib_ir_per_launch"), 0), fmt(g.get("lib_ir_per_hooked_call"), 1),
                fmt(g.get("process_ir_added_per_hooked_call"), 1)))
    big = max(meta["sizes"]) if meta["sizes"] else None
    if big is not None:
        L += ["", "#### Memory at %d nodes (whole run of 2T steps)" % big, "",
              "| workload | mode | bytes requested | bytes mapped | mapped/requested | updates skipped/step |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    for c in cells:
        if c["nodes"] == big and c["mode"] != NOLIB:
            L.append("| %s | %s | %s | %s | %s | %s |" % (
                c["workload"], c["mode"], fmt(c["bytes_requested"]), fmt(c["bytes_mapped"]),
                fmt(c["mapped_over_requested"], 3), fmt(c["lib_per_step"]["updates_skipped"])))
    bad = [c for c in cells if c["failures"]]
    if bad:
        L += ["", "#### FAILURES", ""]
        for c in bad:
            L.append("- %s, %d nodes, %s: %s" % (c["workload"], c["nodes"], c["mode"],
                                                 "; ".join(c["failures"])))
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


def costmodel_table(meta):
    return costmodel.Table(os.path.join(SRC, meta["costs"]))


def curve_table(curves, meta):
    """Cumulative modeled driver time: per workload and mode, at the high query
    value, the highest ratio to no library over the run and the ratio at the
    horizon, for each instantiation assumption and rule."""
    c = curves["curves"]
    qi = 2
    q = meta["query_us"][qi]
    L = ["", "#### Cumulative modeled driver time (%d nodes, query %g us)" % (curves["nodes"], q),
         "", "Whole runs of %s steps (their driver calls charged as above, each "
         "instantiation at %s ms instead; the library's runs made with a cost table that says "
         "so, STABLEGRAPH_COSTS, so that it prices variants as they are charged here)%s. "
         "max: the highest ratio to no library over the run; end: the ratio at %d steps."
         % (", ".join(str(t) for t in curves["steps"]),
            " or ".join("%g" % x for x in curves["instantiate_ms"]),
            "" if curves["steps"][-1] >= curves["horizon"] else
            ", extrapolated linearly from the last two to %d steps" % curves["horizon"],
            curves["horizon"]), ""]
    hdr = ["workload", "mode"]
    for rule in costmodel.RULES:
        for ms in curves["instantiate_ms"]:
            hdr.append("%s, %g ms: max / end" % (costmodel.RULE_NAMES[rule], ms))
    L += ["| " + " | ".join(hdr) + " |", "|" + " --- |" * 2 + " ---: |" * (len(hdr) - 2)]
    for wl in meta["workloads"]:
        for m in meta["modes"][1:]:
            cols = []
            for rule in costmodel.RULES:
                for ms in curves["instantiate_ms"]:
                    k = "|".join(str(x) for x in (wl, m, rule, qi, ms))
                    kb = "|".join(str(x) for x in (wl, NOLIB, rule, qi, ms))
                    if k in c and kb in c:
                        mx, _ = targets.max_ratio(c[k], c[kb])
                        end = c[k][-1][1] / c[kb][-1][1]
                        cols.append("%.2f / %.2f" % (mx, end))
                    else:
                        cols.append("-")
            L.append("| %s | %s | %s |" % (wl, m, " | ".join(cols)))
    return L


def write_plots(out, cells, meta, curves=None):
    """Data files of blocks and the static gnuplot scripts: plot.gp (counts,
    wall ratio, instructions per graph size), plot_model.gp (modeled driver
    time per step per graph size), plot_curves.gp (cumulative modeled driver
    time per step count). Returns (PNGs written, a note or None)."""
    gp = shutil.which("gnuplot")
    if not gp:
        return None, "gnuplot not found (apt-get install -y gnuplot-nox): no plots"
    idx = {(c["workload"], c["nodes"], c["mode"]): c for c in cells}
    subtitle = "%s driver, %s, T >= %s steps (see table.md for the command)" % (
        meta["driver_desc"], meta["date"], meta["steps"])
    gvars = {"outdir": out, "workloads": " ".join(meta["workloads"]),
             "modes": " ".join(meta["modes"]), "subtitle": subtitle}
    dat = os.path.join(out, "plot.dat")
    with open(dat, "w") as f:
        f.write("# nodes updates/step vmm/step wall_ratio lib_Ir/launch calls/step\n")
        for wl in meta["workloads"]:
            for m in meta["modes"]:
                f.write("# %s %s\n" % (wl, m))
                for s in meta["sizes"]:
                    c = idx.get((wl, s, m))
                    if not c:
                        continue
                    g = c.get("callgrind") or {}
                    vals = [c["calls_per_step"]["updates"], c["calls_per_step"]["vmm"],
                            c["wall_ratio"], g.get("lib_ir_per_launch"),
                            c["calls_per_step"]["total"]]
                    f.write("%d %s\n" % (s, " ".join("?" if v is None else "%.6g" % v
                                                     for v in vals)))
                f.write("\n\n")
    notes = [run_gnuplot(gp, "plot.gp", dict(gvars, datafile=dat))]
    if any(c.get("model") for c in cells):
        dat = os.path.join(out, "model.dat")
        with open(dat, "w") as f:
            f.write("# nodes, then us per step: every-node rule low mid high, changed-nodes "
                    "rule low mid high (query %s us)\n"
                    % " / ".join("%g" % x for x in meta["query_us"]))
            for wl in meta["workloads"]:
                for m in meta["modes"]:
                    f.write("# %s %s\n" % (wl, m))
                    for s in meta["model_sizes"]:
                        mo = (idx.get((wl, s, m)) or {}).get("model")
                        if mo:
                            f.write("%d %s\n" % (s, " ".join("%.6g" % v for r in costmodel.RULES
                                                             for v in mo["us"][r])))
                    f.write("\n\n")
        sub = "%s driver, %s; bars: query %s us" % (
            meta["driver_desc"], meta["date"], " / ".join("%g" % x for x in meta["query_us"]))
        notes.append(run_gnuplot(gp, "plot_model.gp", dict(gvars, datafile=dat, subtitle=sub)))
    if curves:
        dat = os.path.join(out, "curves.dat")
        c = curves["curves"]
        ms_list = curves["instantiate_ms"]
        with open(dat, "w") as f:
            f.write("# steps, cumulative modeled driver time in ms (query %g us); blocks: "
                    "rule x instantiation ms x workload x (modes, then 2 x no library)\n"
                    % meta["query_us"][2])
            for rule in costmodel.RULES:
                for ms in ms_list:
                    for wl in meta["workloads"]:
                        for m in meta["modes"] + ["2x"]:
                            k = "|".join(str(x) for x in (wl, NOLIB if m == "2x" else m, rule, 2,
                                                          ms))
                            f.write("# %s %g ms %s %s\n" % (rule, ms, wl, m))
                            for t, us in c.get(k, []):
                                f.write("%d %.6g\n" % (t, us / 1000.0 * (2 if m == "2x" else 1)))
                            f.write("\n\n")
        sub = "%s driver, %s, %d nodes, query %g us; beyond %d steps extrapolated" % (
            meta["driver_desc"], meta["date"], curves["nodes"], meta["query_us"][2],
            curves["steps"][-1])
        notes.append(run_gnuplot(gp, "plot_curves.gp", dict(
            gvars, datafile=dat, rules=" ".join(costmodel.RULES), horizon=curves["horizon"],
            instms=" ".join("%g" % x for x in ms_list), subtitle=sub)))
    pngs = sorted(os.path.join(out, n) for n in os.listdir(out) if n.endswith(".png"))
    notes = [n for n in notes if n]
    return pngs, "; ".join(notes) if notes else None


def run_gnuplot(gp, script, gvars):
    """Runs tests/bench/SCRIPT with the variables set; a note if it failed."""
    cmd = [gp, "-e", "; ".join('%s="%s"' % (k, str(v).replace('"', "'"))
                              for k, v in sorted(gvars.items())), os.path.join(HERE, script)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return "gnuplot %s failed: %s" % (script, p.stdout.strip()[-500:]) if p.returncode else None


# ------------------------------------------------------------------ main

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--out", default=None, help="default BUILD/bench")
    ap.add_argument("--workload-dir", default=None, help="default BUILD/workloads")
    ap.add_argument("--workloads", default=" ".join(ALL_WORKLOADS))
    ap.add_argument("--sizes", default="16 64 256 1024 4096")
    ap.add_argument("--model-sizes", default="16 64 256 1024 4096 16384",
                    help="sizes with a modeled driver time per step; those not in --sizes run "
                         "once with S and 2S steps, for their counts only")
    ap.add_argument("--policies", default=None,
                    help="default: every policy of the build (BUILD/policies, from core/config.h)")
    ap.add_argument("--steps", type=int, default=20, help="S: runs of S and 2S steps")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per step count")
    ap.add_argument("--min-time", type=float, default=0.2,
                    help="seconds the timed runs' difference should last: T, a multiple of "
                         "--steps, is raised per cell until T steps take this long (0: T = S)")
    ap.add_argument("--max-steps-factor", type=int, default=50, help="T <= this x --steps")
    ap.add_argument("--callgrind-sizes", default="16 256", help="empty: no callgrind")
    ap.add_argument("--callgrind-steps", type=int, default=8)
    ap.add_argument("--skip-cost-sizes", default="256 1024",
                    help="sizes for the instructions per kernel node per skip decision "
                         "(recapture_temps under skip_temp, when both are selected); empty: none")
    ap.add_argument("--skip-cost-steps", type=int, default=3,
                    help="S: the skip-cost runs use --steps S and S + 2")
    ap.add_argument("--costs", default=costmodel.DEFAULT_TABLE,
                    help="the per-call cost table (core/costs.tsv format)")
    g = ap.add_argument_group("issue 11's figures (targets.py)")
    g.add_argument("--no-targets", action="store_true", help="measure none of them")
    g.add_argument("--targets", default="",
                   help="the figures to measure, by id (%s); default all"
                        % ", ".join(s.id for s in targets.SPECS))
    g.add_argument("--uncaptured-steps", type=int, default=4)
    g.add_argument("--uncaptured-launches", type=int, default=64,
                   help="N: launch_loop runs with N and 2N launches per step")
    g.add_argument("--node-cost-sizes", default="16 256 4096")
    g.add_argument("--node-cost-steps", type=int, default=10, help="S: runs of S and S+P steps")
    g.add_argument("--node-cost-period", type=int, default=6, help="P")
    g.add_argument("--accept-sizes", default="64 256 1024 4096")
    g.add_argument("--accept-steps", type=int, default=10, help="S: runs of S and S+P steps")
    g.add_argument("--accept-period", type=int, default=10, help="P")
    g.add_argument("--launch-cost-nodes", type=int, default=256)
    g.add_argument("--launch-cost-steps", type=int, default=30,
                   help="S: one run of 2S steps, the launches after S and after the "
                        "decision and purchase averaged")
    g.add_argument("--curve-nodes", type=int, default=256)
    g.add_argument("--curve-first", type=int, default=12,
                   help="K: the curves run 1..K steps, then --steps S and 2S")
    g.add_argument("--curve-horizon", type=int, default=2000)
    g.add_argument("--instantiate-ms", default="2 8",
                   help="assumed milliseconds per instantiation in the curves")
    ap.add_argument("--jobs", type=int, default=1,
                    help="parallel callgrind runs (timed runs are always sequential); more than "
                         "one makes the whole-process instruction differences noisier")
    ap.add_argument("--driver", choices=("auto", "emu", "real"), default="auto")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per run")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--keep-raw", action="store_true", help="keep stats, reports, callgrind files")
    ap.add_argument("--command", default=None, help="command line to quote (make passes its own)")
    ap.add_argument("--from-results", default=None, metavar="RESULTS_JSON",
                    help="run nothing: write table.md and the plots into --out from a results.json")
    a = ap.parse_args(argv)
    a.build = os.path.abspath(a.build)
    a.out = os.path.abspath(a.out or os.path.join(a.build, "bench"))
    if min(a.steps, a.repeats, a.callgrind_steps, a.skip_cost_steps, a.uncaptured_steps,
           a.uncaptured_launches, a.node_cost_steps, a.node_cost_period, a.accept_steps,
           a.accept_period, a.launch_cost_steps, a.curve_first) < 1:
        ap.error("step counts, repeats and launch counts must be >= 1")
    unknown = set(split_list(a.targets)) - set(targets.SPEC)
    if unknown:
        ap.error("--targets: unknown %s" % ", ".join(sorted(unknown)))
    try:
        a.table = costmodel.Table(a.costs)
    except (OSError, costmodel.TableError) as ex:
        ap.error("--costs: %s" % ex)
    if a.policies is None:
        try:
            with open(os.path.join(a.build, "policies")) as f:
                a.policies = f.read()
        except OSError as ex:
            ap.error("--policies: no policy list in the build (%s): run make first" % ex)
    return a


def git_commit():
    try:
        commit = subprocess.run(["git", "-C", SRC, "rev-parse", "--short", "HEAD"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True).stdout.strip() or "?"
        if subprocess.run(["git", "-C", SRC, "status", "--porcelain", "--untracked-files=no"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True).stdout.strip():
            commit += "+changes"
    except OSError:
        commit = "?"
    return commit


def timed_runs(R, a, workloads, sizes, modes):
    """The timed runs, sequential, the modes interleaved: {(wl, n, mode): {steps: [recs]}}."""
    runs = {}
    for wl in workloads:
        for n in sizes:
            # calibration: one no-library pair at S and 2S gives the time per step
            c1, c2 = R.run(wl, n, a.steps, NOLIB), R.run(wl, n, 2 * a.steps, NOLIB)
            est = per_step(c1["wall"], c2["wall"], a.steps)
            if est is not None and est <= 0:
                est = c2["wall"] / (2 * a.steps)
            T = timing_steps(a.steps, est, a.min_time, a.max_steps_factor)
            for _ in range(a.repeats):
                for st in (T, 2 * T):
                    for m in modes:
                        runs.setdefault((wl, n, m), {}).setdefault(st, []).append(
                            R.run(wl, n, st, m))
            print("bench: %-18s %5d nodes: --steps %d and %d, %d runs done" % (
                wl, n, T, 2 * T, 2 * a.repeats * len(modes)), flush=True)
    return runs


def count_runs(R, a, workloads, sizes, modes, mem_nodes=None):
    """One run of S and 2S steps per cell, for counts and the model only; at
    mem_nodes, the 2S run --repeats times without the library and under
    targets.MEM_POLICY (host_memory: the least peak RSS of each, since a run's
    peak RSS varies by tens of MB with where the C library's arenas happen to
    grow)."""
    runs = {}
    for wl in workloads:
        for n in sizes:
            for m in modes:
                runs[(wl, n, m)] = {st: [R.run(wl, n, st, m)] for st in (a.steps, 2 * a.steps)}
                if n == mem_nodes and m in (NOLIB, targets.MEM_POLICY):
                    runs[(wl, n, m)][2 * a.steps] += [R.run(wl, n, 2 * a.steps, m)
                                                      for _ in range(a.repeats - 1)]
            print("bench: %-18s %5d nodes: --steps %d and %d, counts only" % (
                wl, n, a.steps, 2 * a.steps), flush=True)
    return runs


def callgrind_runs(R, a, workloads, cg_sizes, modes):
    cg = {}
    jobs = [(wl, n, m, st) for wl in workloads for n in cg_sizes for m in modes
            for st in (a.callgrind_steps, 2 * a.callgrind_steps)]
    if jobs:
        print("bench: %d callgrind runs (%d at a time)" % (len(jobs), a.jobs), flush=True)
        with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as ex:
            futs = {ex.submit(R.run, wl, n, st, m, True): (wl, n, m, st)
                    for wl, n, m, st in jobs}
            for f in concurrent.futures.as_completed(futs):
                wl, n, m, st = futs[f]
                cg.setdefault((wl, n, m), {})[st] = f.result()
    return cg


def target_rows(R, a, workloads, policies, vg, cells, model_sizes):
    """Issue 11's figures (targets.py), those --targets selects: (rows,
    curves, failures)."""
    M = targets.Measure(R, a, a.table, workloads, policies, vg)
    want = set(split_list(a.targets)) or set(targets.SPEC)
    vg_note = "" if vg else " (no callgrind: instruction counts skipped)"
    print("bench: issue 11's figures%s" % vg_note, flush=True)
    rows = []
    if "uncaptured_launch" in want:
        rows.append(M.uncaptured_launch(os.path.join(a.build, "tests", "bench", "launch_loop"),
                                        a.uncaptured_steps, a.uncaptured_launches))
    if "node_cost" in want:
        rows.append(M.node_cost([int(x) for x in split_list(a.node_cost_sizes)],
                                a.node_cost_steps, a.node_cost_period))
    if "accept_cost" in want:
        rows.append(M.accept_cost([int(x) for x in split_list(a.accept_sizes)], a.accept_steps,
                                  a.accept_period))
    if "launch_cost" in want:
        rows.append(M.launch_cost(a.launch_cost_nodes, a.launch_cost_steps))
    rows += [r for r in targets.from_cells(cells, a.table, policies,
                                           max(model_sizes) if model_sizes else None)
             if r["id"] in want]
    curves = None
    if want & {"curve_twice_every", "curve_twice_changed", "curve_end_every",
               "curve_end_changed"}:
        curves, crows = M.curves(a.curve_nodes, a.curve_first, a.steps, a.curve_horizon,
                                 [float(x) for x in split_list(a.instantiate_ms)])
        rows += [r for r in crows if r["id"] in want]
    if "rotating_50" in want:
        rows.append(M.rotating_50(a.curve_nodes))
    order = [s.id for s in targets.SPECS]
    rows.sort(key=lambda r: order.index(r["id"]))
    return rows, curves, M.failures


def rewrite_outputs(a):
    """--from-results: the tables and plots of an earlier run, from its results.json."""
    res = load_json(a.from_results)
    if not res or "cells" not in res:
        print("bench: %s: not a results.json" % a.from_results, file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    write_table(os.path.join(a.out, "table.md"), res["cells"], res["meta"],
                res.get("instr_per_forwarded_call_off"), res.get("instr_per_node_per_skip_decision"),
                res.get("targets"), res.get("curves"))
    pngs, note = (None, None) if a.no_plots else write_plots(a.out, res["cells"], res["meta"],
                                                             res.get("curves"))
    print("bench: %s written from %s%s" % (os.path.join(a.out, "table.md"), a.from_results,
                                          "; plots: " + " ".join(pngs) if pngs else ""))
    if note:
        print("plots: " + note)
    return 0


def main(argv):
    a = parse_args(argv)
    if a.from_results:
        return rewrite_outputs(a)
    workloads = split_list(a.workloads)
    sizes = [int(s) for s in split_list(a.sizes)]
    model_sizes = sorted(set(int(s) for s in split_list(a.model_sizes)) | set(sizes))
    count_sizes = [n for n in model_sizes if n not in sizes]
    policies = [p for p in split_list(a.policies) if p != NOLIB]
    modes = [NOLIB] + policies
    cg_sizes = [int(s) for s in split_list(a.callgrind_sizes) if int(s) in sizes]
    a.driver, gpu_name = detect_driver(a.driver)
    vg = bool(shutil.which("valgrind")) and a.driver == "emu"
    san = (open(os.path.join(a.build, "san.cfg")).read().strip()
           if os.path.exists(os.path.join(a.build, "san.cfg")) else "")
    if a.driver == "real":
        print("bench: real driver: no callgrind runs, no modeled driver time (instruction "
              "counts and node counts come from the emulated driver)")
        cg_sizes, count_sizes = [], []
    elif not vg:
        print("bench: valgrind not found: no instruction counts (apt-get install -y valgrind)")
        cg_sizes = []
    elif san:
        print("bench: a sanitizer build (SAN=%s): no callgrind runs (valgrind and sanitizers do "
              "not mix), no instruction counts" % san)
        cg_sizes, vg = [], False
    skip_sizes = [int(x) for x in split_list(a.skip_cost_sizes)]
    if SKIP_COST_WORKLOAD not in workloads or SKIP_COST_POLICY not in policies or not vg:
        skip_sizes = []
    os.makedirs(a.out, exist_ok=True)
    date = now_iso()
    command = a.command or " ".join(shlex.quote(x) for x in [sys.executable] + sys.argv[:1] + argv)
    commit = git_commit()
    meta = {"date": date, "command": command,
            "bench_py_argv": [sys.argv[0]] + list(argv), "commit": commit,
            "driver": a.driver, "gpu": gpu_name,
            "driver_desc": ("real (%s)" % gpu_name) if a.driver == "real" else "emulated",
            "host": os.uname().nodename, "cpus": os.cpu_count(), "build": a.build,
            "loadavg_start": os.getloadavg()[0],
            "workloads": workloads, "sizes": sizes, "model_sizes": model_sizes,
            "modes": modes, "steps": a.steps,
            "repeats": a.repeats, "min_time": a.min_time, "callgrind_sizes": cg_sizes,
            "callgrind_steps": a.callgrind_steps, "skip_cost_sizes": skip_sizes,
            "skip_cost_steps": a.skip_cost_steps,
            "costs": os.path.relpath(a.table.path, SRC), "query_us": list(a.table.query),
            "method": {
                "per_step": "(value after 2T steps - value after T steps) / T; T: a multiple of "
                            "--steps such that T steps take >= --min-time without the library",
                "wall_ratio": "median wall time of the runs, same per-step difference, divided "
                              "by that of the no-library cell measured in this invocation",
                "callgrind_lib": "self Ir of libstablegraph.so plus inclusive Ir of its calls into "
                                 "objects other than the driver (libc, ld.so), parsed from the "
                                 "callgrind output; the driver's own work is excluded",
                "per_forwarded_call": "library Ir difference between 2S and S steps divided by the "
                                      "difference of the hooked calls (sum of report hooks.*.calls)",
                "skip_cost": "recapture_temps under skip_temp, callgrind --collect-atstart=no "
                             "--toggle-collect=sg_graph_call, --skip-cost-steps S and S + 2: "
                             "(library object's own Ir difference) / updates skipped in between "
                             "(report) / nodes; lib_ir_per_node adds the libc / ld.so code the "
                             "library calls",
                "model": costmodel.describe(a.table),
                "targets": targets.__doc__,
            }}
    t_start = time.time()
    failures = []
    with tempfile.TemporaryDirectory(prefix="sgbench.") as tmp:
        R = Runner(a, tmp)
        runs = timed_runs(R, a, workloads, sizes, modes)
        cruns = count_runs(R, a, workloads, count_sizes, modes,
                           max(model_sizes) if model_sizes else None)
        cg = callgrind_runs(R, a, workloads, cg_sizes, modes)
        skip_rows, skip_fails = [], []
        if skip_sizes:
            print("bench: skip-decision cost at %s nodes (callgrind)"
                  % " ".join(str(n) for n in skip_sizes), flush=True)
            skip_rows, skip_fails = skip_cost_rows(R, a, skip_sizes, a.skip_cost_steps)
        cells = []
        for wl in workloads:
            for n in sorted(set(sizes) | set(count_sizes)):
                base = None
                for m in modes:
                    c = build_cell(a, wl, n, m, runs.get((wl, n, m)) or cruns[(wl, n, m)], base,
                                   cg.get((wl, n, m)),
                                   cg.get((wl, n, NOLIB)) if m != NOLIB else None,
                                   counts_only=n not in sizes)
                    if m == NOLIB:
                        base = c
                    cells.append(c)
        trows, curves, tfails = ([], None, []) if a.no_targets else \
            target_rows(R, a, workloads, policies, vg, cells, model_sizes)
    by_size = {r["nodes"]: r for r in skip_rows}
    for c in cells:
        if c["workload"] == SKIP_COST_WORKLOAD and c["mode"] == SKIP_COST_POLICY and \
                c["nodes"] in by_size:
            c["skip_cost"] = by_size[c["nodes"]]
    failures.extend(skip_fails)
    failures.extend(tfails)
    failures.extend("%s: NOT MEASURED: %s" % (r["id"], r["why"]) for r in trows
                    if r["result"] == "NOT MEASURED")
    skip = {"steps": a.skip_cost_steps, "summary": skip_cost_summary(skip_rows),
            "rows": skip_rows} if skip_rows else None
    for c in cells:
        c.pop("_ref", None)
        for msg in c["failures"]:
            failures.append("%s %d nodes %s: %s" % (c["workload"], c["nodes"], c["mode"], msg))
    head = headline(cells)
    meta["seconds"] = round(time.time() - t_start, 1)
    meta["loadavg_end"] = os.getloadavg()[0]
    res = {"meta": meta, "instr_per_forwarded_call_off": head,
           "instr_per_node_per_skip_decision": skip, "targets": trows, "curves": curves,
           "failures": failures, "cells": cells}
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=False)
        f.write("\n")
    write_csv(os.path.join(a.out, "results.csv"), cells)
    write_table(os.path.join(a.out, "table.md"), cells, meta, head, skip, trows, curves)
    pngs, plot_note = (None, "plots not requested") if a.no_plots else \
        write_plots(a.out, cells, meta, curves)
    print_summary(a, meta, cells, head, skip, skip_sizes, trows, failures, pngs, plot_note)
    return 1 if failures else 0


def print_summary(a, meta, cells, head, skip, skip_sizes, trows, failures, pngs, plot_note):
    workloads, sizes, modes = meta["workloads"], meta["sizes"], meta["modes"]
    print()
    print("stablegraph bench: %s" % meta["date"])
    print("command: %s" % meta["command"])
    print("driver: %s; commit %s; %d workloads x %d sizes x %d modes = %d cells; "
          "T >= %d steps (T vs 2T), %d repeats; %.0f s; load average %.1f at start, %.1f at end "
          "on %d CPUs (other load makes the wall-time ratios noisy)"
          % (meta["driver_desc"], meta["commit"], len(workloads), len(meta["model_sizes"]),
             len(modes), len(cells), a.steps, a.repeats, meta["seconds"], meta["loadavg_start"],
             meta["loadavg_end"], meta["cpus"]))
    idx = {(c["workload"], c["nodes"], c["mode"]): c for c in cells}
    big = max(sizes) if sizes else None     # --sizes '': no timed cells (targets only)
    if big is not None:
        print("\nper steady-state step at %d nodes: driver updates / VMM calls / wall ratio" % big)
        print("  %-18s" % "workload" + "".join("%22s" % m for m in modes))
        for wl in workloads:
            line = []
            for m in modes:
                c = idx[(wl, big, m)]
                line.append("%22s" % ("%s / %s / %s" % (fmt(c["calls_per_step"]["updates"]),
                                                        fmt(c["calls_per_step"]["vmm"]),
                                                        fmt(c["wall_ratio"]))))
            print("  %-18s" % wl + "".join(line))
    if big is not None and any(c.get("model") for c in cells):
        q = a.table.query
        print("\nmodeled driver time per steady-state step at %d nodes, us (query %s us; "
              "every-node rule | changed-nodes rule):" % (big, " / ".join("%g" % x for x in q)))
        for wl in workloads:
            for m in modes:
                mo = idx[(wl, big, m)].get("model")
                if mo:
                    print("  %-18s %-14s %s | %s" % (wl, m, fmt_us3(mo["us"]["every"]),
                                                     fmt_us3(mo["us"]["changed"])))
    if head:
        print("\ninstructions added per forwarded call under off: max %s at %s (median %s; "
              "whole-process difference max %s); target <= 100: %s"
              % (fmt(head["max_lib_ir_per_forwarded_call"], 1), head["at"],
                 fmt(head["median_lib_ir_per_forwarded_call"], 1),
                 fmt(head["max_process_ir_added_per_forwarded_call"], 1),
                 "met" if head["met"] else "NOT MET"))
    else:
        print("\ninstructions per forwarded call: not measured (no callgrind runs under off)")
    if skip and skip["summary"]:
        sm = skip["summary"]
        print("\nlibrary instructions per kernel node per skip decision (%s, %s): %s; "
              "max %s at %d nodes (with libc: %s); target <= %d: %s"
              % (SKIP_COST_WORKLOAD, SKIP_COST_POLICY,
                 ", ".join("%d nodes %s" % (r["nodes"], fmt(r["lib_self_ir_per_node"], 1))
                           for r in skip["rows"]),
                 fmt(sm["max_lib_self_ir_per_node"], 1), sm["at_nodes"],
                 fmt(sm["max_lib_ir_per_node"], 1), sm["target"],
                 "met" if sm["met"] else "NOT MET"))
        print("  measured with: %s" % skip["rows"][0]["command"])
    elif skip_sizes:
        print("\nlibrary instructions per kernel node per skip decision: not measured")
    if trows:
        print("\nissue 11's figures (a missed target is reported, not an error):")
        for line in targets.summary_lines(trows):
            print(line)
    print("\noutputs: %s/{results.json,results.csv,table.md}" % a.out)
    if pngs:
        print("plots: " + " ".join(pngs))
    if plot_note:
        print("plots: " + plot_note)
    if failures:
        print("\n" + "!" * 72)
        print("BENCH FAILED: %d problem(s):" % len(failures))
        for f_ in failures:
            print("  " + f_)
        print("!" * 72)
    else:
        print("\nall %d cells: checksums equal to the run without the library, no failed runs"
              % len(cells))


def fmt_us3(v):
    return " / ".join("%.1f" % x for x in v)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
