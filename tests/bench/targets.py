"""tests/bench/targets.py: the figures of issue 11 that `make bench` prints beside
their targets (imported by tests/bench/bench.py; python3, stdlib only).

Each figure is measured on the library as it is, every run's checksum is
compared with the run without the library, and each figure gets PASS or FAIL
against its target; a missed target is reported, never an error. A figure
that cannot be measured (its runs failed, or they did not contain what it
measures) is NOT MEASURED with the reason, which bench.py counts as a failure.
SKIPPED: the tools it needs are absent (valgrind) or its workload or policy
was not selected.

Figures (`Spec` ids):
  uncaptured_launch   library instructions per cuLaunchKernel outside capture:
                      tests/bench/launch_loop under callgrind, (library Ir with
                      N launches per step - with 2N) / launches
  node_cost           library instructions per kernel node per re-captured
                      step, capture hooks and decision all in: whole-run
                      callgrind at S and S+P steps, difference / P / nodes
  accept_cost         library instructions per node for a pointer-only update
                      accepted under skip_profiled (train_loop): callgrind
                      inside the library's graph entry only, S and S+2 steps,
                      / updates skipped in between / nodes
  launch_cost         library instructions per steady-state cuGraphLaunch
                      under skip_profiled: callgrind inside cuGraphLaunch only,
                      one part per launch, the launches after the decision and
                      the purchase averaged (the renting path too)
  host_memory         peak RSS under skip_profiled minus without the library,
                      per node, at the largest model size (16384); each the
                      least of --repeats runs
  library_calls       driver calls the library makes per steady-state step
                      (its report), recapture workloads, every policy
  modeled_ratio_*     modeled driver time per step under skip_temp and
                      skip_profiled / without the library (>= 64 nodes, query
                      cost 0.3 us), under each update rule
  curve_twice_*       cumulative modeled driver time (instantiations at 2 and
                      8 ms): the highest ratio of any policy to no library
  curve_end_*         the same for skip_profiled at the horizon (2000 steps)
  rotating_50         instantiations a 50-step rotating_inputs run under
                      skip_profiled adds to the run without the library
Instruction counts include the libc / ld.so code the library calls (not the
driver's). All callgrind runs use --elems 64 (the library's work does not
depend on the buffer size; the emulated kernels' does).
"""
import os

import costmodel

RECAPTURE_WORKLOADS = ["recapture_temps", "fresh_inputs", "slices", "train_loop"]
ACCEPT = ("train_loop", "skip_profiled")
LAUNCH_COST_WORKLOADS = ["rotating_inputs", "recapture_temps", "train_loop"]
MEM_POLICY = "skip_profiled"
RATIO_POLICIES = ["skip_temp", "skip_profiled"]
CURVE_POLICY_END = "skip_profiled"
GRAPH_TOGGLE = "sg_graph_call"      # the library's entry for graph calls (core/graphs.c)
LAUNCH_TOGGLE = "cuGraphLaunch"
LAUNCH_DUMP = "sg_hook_cuGraphLaunch*"   # the library's launch hooks: one part per launch
# The launch at which skip_profiled decides an exec that reports no purchase
# (a plain one): STABLEGRAPH_PROFILE_STEPS (3 by default; the bench does not
# set it) + 1.
PLAIN_DECISION_LAUNCH = 4
CG_ELEMS = ("--elems", "64")
NO_CALLGRIND = "no callgrind (valgrind missing, a sanitizer build, or a real driver)"


class Spec:
    def __init__(self, id_, what, unit, op, target, fmt="%.1f"):
        self.id, self.what, self.unit, self.op, self.target, self.fmt = \
            id_, what, unit, op, target, fmt

    def met(self, v):
        return v <= self.target if self.op == "<=" else v < self.target


SPECS = [Spec(*x) for x in [
    ("uncaptured_launch", "library instructions added per cuLaunchKernel outside capture",
     "Ir", "<=", 20),
    ("node_cost", "library instructions per kernel node per re-captured step (capture hooks + "
     "decision, all in)", "Ir/node", "<=", 150),
    ("accept_cost", "library instructions per node, pointer-only update accepted under "
     "skip_profiled (train_loop)", "Ir/node", "<=", 150),
    ("launch_cost", "library instructions per steady-state cuGraphLaunch (skip_profiled)",
     "Ir", "<=", 250),
    ("host_memory", "host memory of skip_profiled per node (peak RSS minus without the library)",
     "bytes/node", "<=", 1536, "%.0f"),
    ("library_calls", "driver calls made by the library per steady-state step (recapture "
     "workloads)", "calls/step", "<=", 2, "%.2f"),
    ("modeled_ratio_every", "modeled driver time per step, skip_temp/skip_profiled over no "
     "library (>= 64 nodes, query 0.3 us), every-node rule", "ratio", "<=", 0.10, "%.3f"),
    ("modeled_ratio_changed", "the same, changed-nodes rule", "ratio", "<=", 0.10, "%.3f"),
    ("curve_twice_every", "cumulative modeled driver time, highest ratio of any policy to no "
     "library over the run, every-node rule", "ratio", "<=", 2.0, "%.2f"),
    ("curve_twice_changed", "the same, changed-nodes rule", "ratio", "<=", 2.0, "%.2f"),
    ("curve_end_every", "cumulative modeled driver time of skip_profiled over no library at the "
     "horizon, every-node rule", "ratio", "<", 1.0, "%.3f"),
    ("curve_end_changed", "the same, changed-nodes rule", "ratio", "<", 1.0, "%.3f"),
    ("rotating_50", "instantiations a 50-step rotating_inputs run under skip_profiled adds",
     "calls", "<=", 0, "%.0f"),
]]
SPEC = {s.id: s for s in SPECS}


def row(spec_id, figure=None, where="", detail=None, command="", why=None, skipped=None):
    """One figure's record. figure None: NOT MEASURED (why) or SKIPPED (skipped)."""
    s = SPEC[spec_id]
    r = {"id": spec_id, "what": s.what, "unit": s.unit, "target": s.target, "op": s.op,
         "figure": figure, "where": where, "detail": detail or [], "command": command}
    if skipped:
        r["result"], r["why"] = "SKIPPED", skipped
    elif figure is None:
        r["result"], r["why"] = "NOT MEASURED", why or "no figure"
    else:
        r["result"], r["why"] = ("PASS" if s.met(figure) else "FAIL"), None
    return r


def worst(items):
    """items: [(value, where)]; the one that is worst for the target
    (the largest: every target here is an upper bound)."""
    items = [x for x in items if x[0] is not None]
    return max(items, key=lambda x: x[0]) if items else (None, "")


# ------------------------------------------------------------------ arithmetic

def per_unit(short, long, units):
    """(long - short) / units, None when something is missing or units <= 0."""
    if short is None or long is None or not units or units <= 0:
        return None
    return (long - short) / units


def cumulative(points, horizon):
    """points: {steps: modeled us of a whole run of that many steps}, at least
    two. Returns [(t, us)] over the measured steps, then up to the horizon
    extrapolated from the last two measured points (the steady state: the
    bench's S and 2S), at doubling step counts (for log-scale plots) and at
    the horizon itself."""
    ts = sorted(points)
    out = [(t, points[t]) for t in ts]
    t1, t2 = ts[-2], ts[-1]
    slope = (points[t2] - points[t1]) / (t2 - t1)
    t = 2 * t2
    while t < horizon:
        out.append((t, points[t2] + slope * (t - t2)))
        t *= 2
    if horizon > t2:
        out.append((horizon, points[t2] + slope * (horizon - t2)))
    return out


def max_ratio(curve, ref):
    """Highest curve/ref over the common steps (both linear between the
    points, so the points bound it); (ratio, at step)."""
    refd = dict(ref)
    best = (None, None)
    for t, v in curve:
        b = refd.get(t)
        if b and b > 0:
            r = v / b
            if best[0] is None or r > best[0]:
                best = (r, t)
    return best


# ------------------------------------------------------------------ runs

class Measure:
    """Runs what the figures need through bench.Runner `R` (args `a`)."""

    def __init__(self, R, a, table, workloads, policies, have_valgrind):
        self.R, self.a, self.table = R, a, table
        self.workloads, self.policies = workloads, policies
        self.vg = have_valgrind
        self.failures = []       # checksum mismatches and failed runs: bench failures
        self._ref = {}

    def _check(self, rec, wl, nodes, steps, extra, prog, what):
        """Records a failed run, or a checksum that differs from the run
        without the library of the same program, size, steps and options."""
        if rec["rc"] != 0:
            self.failures.append("%s: run failed: status %s: %s" % (
                what, rec["rc"], rec["stderr"].strip().splitlines()[-1:]))
            return False
        ref = self._reference(wl, nodes, steps, tuple(extra), prog)
        if rec["checksum"] is None or rec["checksum"] != ref:
            self.failures.append("%s: CHECKSUM MISMATCH: %s, without the library %s"
                                 % (what, rec["checksum"], ref))
            return False
        return True

    def _reference(self, wl, nodes, steps, extra, prog=None):
        k = (wl, nodes, steps, extra, prog)
        if k not in self._ref:
            r = self.R.run(wl, nodes, steps, "none", prog=prog, extra=extra)
            self._ref[k] = r["checksum"] if r["rc"] == 0 else "(run without the library failed)"
        return self._ref[k]

    def cg(self, wl, nodes, steps, mode, toggle=None, prog=None, extra=CG_ELEMS, env=None,
           dump_after=None):
        """A callgrind run, checked; None if it failed."""
        r = self.R.run(wl, nodes, steps, mode, callgrind=True, toggle=toggle, prog=prog,
                       extra=extra, env=env, dump_after=dump_after)
        what = "%s %d nodes %s --steps %d%s" % (wl, nodes, mode, steps,
                                               " (callgrind in %s)" % toggle if toggle else "")
        ok = self._check(r, wl, nodes, steps, extra, prog, what)
        return r if ok and r.get("cg") else None

    def command(self, wl, nodes, steps, mode, toggle="", prog=None, extra=CG_ELEMS, env=None,
                dump_after=None):
        return self.R.command(wl, nodes, steps, mode, toggle=toggle, prog=prog, extra=extra,
                              env=env, dump_after=dump_after)

    # -------------------------------------------------------- each figure

    def uncaptured_launch(self, prog, steps, launches):
        if not self.vg:
            return row("uncaptured_launch", skipped=NO_CALLGRIND)
        if not os.path.exists(prog):
            return row("uncaptured_launch", why="%s not built" % prog)
        items, detail, cmds = [], [], {}
        for pol in self.policies:
            cmds[pol] = self.command("launch_loop", launches, steps, pol, prog=prog)
            short = self.cg("launch_loop", launches, steps, pol, prog=prog)
            long = self.cg("launch_loop", 2 * launches, steps, pol, prog=prog)
            v = per_unit(short and short["cg"]["lib"], long and long["cg"]["lib"],
                         steps * launches)
            items.append((v, pol))
            detail.append({"policy": pol, "ir_per_launch": v})
        v, where = worst(items)
        return row("uncaptured_launch", v, where, detail,
                   cmds.get(where, cmds[self.policies[0]]) + " (and --nodes %d); (difference) / "
                   "%d launches" % (2 * launches, steps * launches),
                   why="a run failed (see the failures)")

    def node_cost(self, sizes, steps, period):
        if not self.vg:
            return row("node_cost", skipped=NO_CALLGRIND)
        wls = [w for w in RECAPTURE_WORKLOADS if w in self.workloads]
        pols = [p for p in self.policies if p != "off"]
        if not wls or not pols:
            return row("node_cost", skipped="no recapture workload or policy selected")
        items, detail, cmds = [], [], {}
        for wl in wls:
            for pol in pols:
                for n in sizes:
                    s, l = self.cg(wl, n, steps, pol), self.cg(wl, n, steps + period, pol)
                    v = per_unit(s and s["cg"]["lib"], l and l["cg"]["lib"], period * n)
                    where = "%s, %s, %d nodes" % (wl, pol, n)
                    cmds[where] = self.command(wl, n, steps, pol, toggle="")
                    items.append((v, where))
                    detail.append({"workload": wl, "policy": pol, "nodes": n, "ir_per_node": v})
        v, where = worst(items)
        return row("node_cost", v, where, detail,
                   cmds.get(where, self.command(wls[0], sizes[0], steps, pols[0], toggle="")) +
                   " (and --steps %d); (difference) / %d steps / nodes" % (steps + period, period),
                   why="a run failed (see the failures)")

    def toggled(self, wl, pol, n, steps, toggle):
        r = self.cg(wl, n, steps, pol, toggle=toggle)
        if r is None:
            return None
        t = (r["report"] or {}).get("totals") or {}
        return {"lib": r["cg"]["lib"], "lib_self": r["cg"]["lib_self"],
                "skipped": t.get("updates_skipped"), "seen": t.get("updates_seen"),
                "forwarded": t.get("updates_forwarded"), "launches": t.get("launches")}

    def accept_cost(self, sizes, steps, period):
        wl, pol = ACCEPT
        if not self.vg:
            return row("accept_cost", skipped=NO_CALLGRIND)
        if wl not in self.workloads or pol not in self.policies:
            return row("accept_cost", skipped="%s or %s not selected" % ACCEPT)
        items, detail, cmds, why = [], [], {}, "a run failed (see the failures)"
        for n in sizes:
            cmds["%d nodes" % n] = self.command(wl, n, steps, pol, toggle=GRAPH_TOGGLE)
            s, l = self.toggled(wl, pol, n, steps, GRAPH_TOGGLE), \
                self.toggled(wl, pol, n, steps + period, GRAPH_TOGGLE)
            v = None
            if s and l:
                acc = l["skipped"] - s["skipped"] if None not in (s["skipped"], l["skipped"]) \
                    else None
                if acc and acc > 0 and l["forwarded"] == s["forwarded"]:
                    v = (l["lib"] - s["lib"]) / acc / n
                    if v < 0:   # the runs' own variation (launch ordering) exceeds the figure
                        why = ("negative difference at %d nodes (%.1f Ir/node): measure over a "
                               "longer window (--accept-period)" % (n, v))
                        v = None
                else:
                    why = ("no update accepted (skipped) between --steps %d and %d at %d nodes "
                           "(report: skipped %s -> %s, forwarded %s -> %s)"
                           % (steps, steps + period, n, s["skipped"], l["skipped"], s["forwarded"],
                              l["forwarded"]))
            items.append((v, "%d nodes" % n))
            detail.append({"nodes": n, "ir_per_node": v})
        v, where = worst(items)
        if any(d["ir_per_node"] is None for d in detail):
            v = None   # every size must be measured
        return row("accept_cost", v, where, detail,
                   cmds.get(where, cmds["%d nodes" % sizes[0]]) +
                   " (and --steps %d); (difference) / updates skipped / nodes" % (steps + period),
                   why=why)

    def launch_cost(self, nodes, steps):
        """One callgrind run of 2S launches per cell with a dump after each
        launch (LAUNCH_DUMP), so each launch's library Ir is known exactly.
        The steady state is the launches after launch S and after every
        exec's decision and purchase (the report's decided_at_launch and
        bought_at_launch; a plain exec reports none and decides at launch
        PLAIN_DECISION_LAUNCH): their mean is the figure. The launches before
        are reported apart (one_off_ir: what they cost above the steady state;
        with one exec, the decision's and the purchase's own launch), never
        averaged in. A run whose window is shorter than S/2 launches is
        repeated with twice the steps (up to 16S)."""
        pol = "skip_profiled"
        if not self.vg:
            return row("launch_cost", skipped=NO_CALLGRIND)
        wls = [w for w in LAUNCH_COST_WORKLOADS if w in self.workloads]
        if not wls or pol not in self.policies:
            return row("launch_cost", skipped="no workload of %s or no %s"
                       % (" ".join(LAUNCH_COST_WORKLOADS), pol))
        cells = [(wl, None) for wl in wls]
        if "rotating_inputs" in wls:   # the renting path: table prices buy late
            cells.append(("rotating_inputs", {"STABLEGRAPH_COST_TIMES": "table"}))
        items, detail, cmds, why = [], [], {}, "a run failed (see the failures)"
        for wl, env in cells:
            label = wl + (" (%s)" % " ".join("%s=%s" % kv for kv in env.items()) if env else "")
            d, w = self._launch_window(wl, nodes, steps, pol, env)
            if d is None:
                why = w or why
                items.append((None, label))
                continue
            where = "%s, %s, %d nodes" % (label, d["mode"], nodes)
            cmds[where] = self.command(wl, nodes, d["steps"], pol, toggle=LAUNCH_TOGGLE, env=env,
                                       dump_after=LAUNCH_DUMP)
            items.append((d["ir_per_launch"], where))
            detail.append(dict({"workload": label}, **d))
        v, where = worst(items)
        return row("launch_cost", v, where, detail,
                   cmds.get(where, "") + "; mean of the per-launch parts after the decision, "
                   "the purchase and launch S (detail: the window and the one-off cost)",
                   why=why)

    def _launch_window(self, wl, nodes, steps, pol, env):
        """(detail, None) for launch_cost's cell, or (None, why)."""
        total = 2 * steps
        while True:
            r = self.cg(wl, nodes, total, pol, toggle=LAUNCH_TOGGLE, env=env,
                        dump_after=LAUNCH_DUMP)
            if r is None:
                return None, None
            per = [p["lib"] for p in r.get("cg_parts") or []]
            rep = r["report"] or {}
            launches = (rep.get("totals") or {}).get("launches")
            if launches != len(per):
                return None, ("%s: %s launches in the report, %d callgrind parts"
                              % (wl, launches, len(per)))
            start, modes, marks = steps, [], {}
            for e in rep.get("execs") or []:
                pr = e.get("profile")
                if e.get("launches") and not pr:
                    return None, "%s: exec %s never decided (still profiling)" % (wl, e.get("id"))
                if not pr:
                    continue
                modes.append(pr.get("mode"))
                if pr.get("demotions"):
                    return None, "%s: exec %s left its variants" % (wl, e.get("id"))
                pu = dict(pr.get("purchase") or {})
                pu.setdefault("decided_at_launch", PLAIN_DECISION_LAUNCH)
                for k in ("decided_at_launch", "bought_at_launch"):
                    if pu.get(k):
                        marks[k] = max(marks.get(k, 0), pu[k])
                        # this exec's launches in the window all follow its k-th
                        start = max(start, len(per) - (e["launches"] - pu[k]))
            window = per[start:]
            if len(window) >= max(1, steps // 2):
                break
            if total >= 16 * steps:
                return None, ("%s: no steady window (the purchase came at launch %s of %d)"
                              % (wl, marks.get("bought_at_launch"), total))
            total *= 2
        mean = sum(window) / len(window)
        if len(modes) != 1:       # launch numbers are per exec: only one exec's are the run's
            marks = {}
        return {"mode": "/".join(sorted(set(modes))) or "-", "steps": total,
                "ir_per_launch": mean, "window": "%d-%d" % (start + 1, len(per)),
                "window_min": min(window), "window_max": max(window),
                "one_off_ir": sum(per[:start]) - start * mean,
                "decision_launch_ir": per[marks["decided_at_launch"] - 1]
                if "decided_at_launch" in marks else None,
                "purchase_launch_ir": per[marks["bought_at_launch"] - 1]
                if "bought_at_launch" in marks else None}, None

    def rotating_50(self, nodes):
        wl, pol, steps = "rotating_inputs", "skip_profiled", 50
        if wl not in self.workloads or pol not in self.policies:
            return row("rotating_50", skipped="rotating_inputs or skip_profiled not selected")
        if self.a.driver != "emu":
            return row("rotating_50", skipped="counts from the emulated driver only")
        base = self.R.run(wl, nodes, steps, "none")
        r = self.R.run(wl, nodes, steps, pol)
        what = "%s %d nodes %s --steps %d" % (wl, nodes, pol, steps)
        if base["rc"] != 0 or r["rc"] != 0 or not base["stats"] or not r["stats"]:
            self.failures.append("%s: run failed: %s / %s" % (what, base["rc"], r["rc"]))
            return row("rotating_50", why="a run failed")
        if r["checksum"] != base["checksum"]:
            self.failures.append("%s: CHECKSUM MISMATCH: %s, without the library %s"
                                 % (what, r["checksum"], base["checksum"]))
        inst = [sum(n for k, n in x["stats"]["calls"].items() if k.startswith("cuGraphInstantiate"))
                for x in (base, r)]
        whys = [((e.get("profile") or {}).get("why") or "") for e in
                ((r["report"] or {}).get("execs") or [])]
        return row("rotating_50", float(inst[1] - inst[0]), "%d nodes" % nodes,
                   [{"instantiations_without": inst[0], "instantiations_with": inst[1],
                     "report_why": [w for w in whys if w]}],
                   self.command(wl, nodes, steps, pol, toggle=None, extra=()))

    # -------------------------------------------------------- curves

    def inst_table(self, ms):
        """The cost table with every instantiation at `ms` milliseconds per
        call and nothing per node: a library run of the curve for that
        assumption gets it (STABLEGRAPH_COSTS, with STABLEGRAPH_COST_TIMES=table),
        so that it prices variants as the curve charges them."""
        path = os.path.join(self.R.tmp, "costs-instantiate-%gms.tsv" % ms)
        out = []
        with open(self.table.path) as f:
            for line in f:
                w = line.split()
                if len(w) >= 3 and w[0].startswith("cuGraphInstantiate") and \
                        w[1] in ("call", "node"):
                    us = "%g" % (ms * 1000.0) if w[1] == "call" else "0"
                    line = "%s %s %s make bench curve: %g ms per instantiation\n" % (
                        w[0], w[1], us, ms)
                out.append(line)
        with open(path, "w") as f:
            f.writelines(out)
        return path

    def curves(self, nodes, ks, s, horizon, inst_ms):
        """Cumulative modeled driver time per workload and mode at `nodes`:
        runs of 1..ks steps, s and 2s, and horizon/8, /4, /2 and the horizon
        itself (so that a purchase of variants late in the run is measured,
        not extrapolated). The library's runs are made once per assumed
        instantiation cost, with a cost table that says so (inst_table)."""
        if self.a.driver != "emu":
            return None, [row(x, skipped="counts from the emulated driver only")
                          for x in ("curve_twice_every", "curve_twice_changed",
                                    "curve_end_every", "curve_end_changed")]
        far = [t for t in (horizon // 8, horizon // 4, horizon // 2, horizon) if t > 2 * s]
        steps = sorted(set(list(range(1, ks + 1)) + [s, 2 * s] + far))
        modes = ["none"] + list(self.policies)
        tables = {ms: {"STABLEGRAPH_COSTS": self.inst_table(ms), "STABLEGRAPH_COST_TIMES": "table"}
                  for ms in inst_ms}
        data = {}      # (wl, mode, inst ms or None) -> {steps: (calls, nodes)}
        for wl in self.workloads:
            for m in modes:
                for ms in [None] if m == "none" else inst_ms:
                    for t in steps:
                        r = self.R.run(wl, nodes, t, m, env=tables.get(ms))
                        what = "%s %d nodes %s --steps %d (curve%s)" % (
                            wl, nodes, m, t, "" if ms is None else ", %g ms table" % ms)
                        if m == "none":
                            self._ref[(wl, nodes, t, (), None)] = r["checksum"] if r["rc"] == 0 \
                                else "(run without the library failed)"
                        if not self._check(r, wl, nodes, t, (), None, what) or not r["stats"]:
                            continue
                        data.setdefault((wl, m, ms), {})[t] = costmodel.stats_counts(r["stats"])
        curves = {}    # (wl, mode, rule, q index, inst ms) -> [(t, us)]
        for (wl, m, run_ms), pts in data.items():
            if len(pts) != len(steps):
                continue
            for rule in costmodel.RULES:
                for qi, q in enumerate(self.table.query):
                    for ms in inst_ms if run_ms is None else [run_ms]:
                        tot = {t: costmodel.charge(self.table, c, nd, rule, q, ms * 1000.0)[0]
                               for t, (c, nd) in pts.items()}
                        curves[(wl, m, rule, qi, ms)] = cumulative(tot, horizon)
        rows = []
        for rule in costmodel.RULES:
            items, ends, detail, missing = [], [], [], []
            for wl in self.workloads:
                for qi, q in enumerate(self.table.query):
                    for ms in inst_ms:
                        ref = curves.get((wl, "none", rule, qi, ms))
                        for m in self.policies:
                            c = curves.get((wl, m, rule, qi, ms))
                            if ref is None or c is None:
                                missing.append("%s %s" % (wl, m))
                                continue
                            rt, at = max_ratio(c, ref)
                            end = dict(c)[horizon] / dict(ref)[horizon]
                            where = "%s, %s, query %g us, %g ms per instantiation" % (
                                wl, m, q, ms)
                            items.append((rt, where + ", at step %d" % at))
                            if m == CURVE_POLICY_END:
                                ends.append((end, where))
                            detail.append({"workload": wl, "mode": m, "query_us": q,
                                           "instantiate_ms": ms, "max_ratio": rt,
                                           "max_ratio_at": at, "ratio_at_horizon": end})
            why = "no curve for %s" % ", ".join(sorted(set(missing))) if missing else None
            v, where = worst(items)
            rows.append(row("curve_twice_" + rule, None if missing else v, where, detail,
                            "runs of %s steps at %d nodes, the library's with a cost table "
                            "of the assumed instantiation cost; between points linear%s" % (
                                ", ".join(str(t) for t in steps), nodes,
                                "" if steps[-1] >= horizon else
                                "; beyond %d steps extrapolated from the last two" % steps[-1]),
                            why=why))
            if CURVE_POLICY_END in self.policies:
                v, where = worst(ends)
                rows.append(row("curve_end_" + rule, None if missing else v, where, [],
                                "at %d steps" % horizon, why=why))
            else:
                rows.append(row("curve_end_" + rule, skipped="skip_profiled not selected"))
        return {"nodes": nodes, "steps": steps, "horizon": horizon, "instantiate_ms": inst_ms,
                "curves": {"|".join(str(x) for x in k): v for k, v in curves.items()}}, rows


# ------------------------------------------------------------------ from the cells

def from_cells(cells, table, policies, mem_nodes):
    """The figures bench.py's cells already hold: host memory, library calls,
    modeled ratio."""
    idx = {(c["workload"], c["nodes"], c["mode"]): c for c in cells}
    rows = []
    # host memory at mem_nodes
    items, detail = [], []
    if MEM_POLICY not in policies:
        rows.append(row("host_memory", skipped="skip_profiled not selected"))
    elif mem_nodes is None:
        rows.append(row("host_memory", skipped="no model size selected"))
    else:
        for c in cells:
            if c["nodes"] != mem_nodes or c["mode"] != MEM_POLICY:
                continue
            b = idx.get((c["workload"], mem_nodes, "none"))
            if b and c.get("maxrss_kb") and b.get("maxrss_kb"):
                v = (c["maxrss_kb"] - b["maxrss_kb"]) * 1024.0 / mem_nodes
            else:
                v = None
            items.append((v, "%s, %d nodes" % (c["workload"], mem_nodes)))
            detail.append({"workload": c["workload"], "bytes_per_node": v,
                           "maxrss_kb": c.get("maxrss_kb"),
                           "maxrss_kb_without": b and b.get("maxrss_kb"),
                           "runs_kb": "/".join(str(x) for x in c.get("maxrss_kb_runs") or []),
                           "runs_kb_without": "/".join(str(x) for x in
                                                       (b and b.get("maxrss_kb_runs")) or []),
                           "instantiations": c.get("instantiations_run"),
                           "instantiations_without": b and b.get("instantiations_run")})
        v, where = worst(items)
        if any(d["bytes_per_node"] is None for d in detail) or not detail:
            v = None
        rows.append(row("host_memory", v, where, detail,
                        "least peak RSS (wait4) of the --steps 2S runs at %d nodes (--repeats "
                        "of each)" % mem_nodes,
                        why="no peak RSS for every workload at %s nodes" % mem_nodes))
    # library calls per step
    items, detail = [], []
    for c in cells:
        if c["workload"] not in RECAPTURE_WORKLOADS or c["mode"] == "none" or c["nodes"] > 4096:
            continue
        lc = c.get("library_driver_calls_per_step")
        v = sum(lc.values()) if lc is not None else None
        items.append((v, "%s, %s, %d nodes" % (c["workload"], c["mode"], c["nodes"])))
        detail.append({"workload": c["workload"], "mode": c["mode"], "nodes": c["nodes"],
                       "calls_per_step": v, "by_name": {k: x for k, x in (lc or {}).items() if x}})
    v, where = worst(items)
    if not detail:
        rows.append(row("library_calls", skipped="no recapture workload selected"))
    else:
        if any(d["calls_per_step"] is None for d in detail):
            v = None
        rows.append(row("library_calls", v, where, detail,
                        "the report's library_driver_calls, (2T run - T run) / T",
                        why="no library report for every cell"))
    # modeled ratio, query high, >= 64 nodes
    for rule in costmodel.RULES:
        items, detail = [], []
        for c in cells:
            if c["workload"] not in RECAPTURE_WORKLOADS or c["mode"] not in RATIO_POLICIES or \
                    c["nodes"] < 64:
                continue
            b = idx.get((c["workload"], c["nodes"], "none"))
            m, mb = c.get("model"), b and b.get("model")
            v = m["us"][rule][2] / mb["us"][rule][2] if m and mb and mb["us"][rule][2] else None
            items.append((v, "%s, %s, %d nodes" % (c["workload"], c["mode"], c["nodes"])))
            detail.append({"workload": c["workload"], "mode": c["mode"], "nodes": c["nodes"],
                           "ratio": v})
        sid = "modeled_ratio_" + rule
        if not detail:
            rows.append(row(sid, skipped="no recapture workload with skip_temp/skip_profiled "
                                         "at >= 64 nodes"))
            continue
        v, where = worst(items)
        if any(d["ratio"] is None for d in detail):
            v = None
        rows.append(row(sid, v, where, detail, "cells' modeled driver time per step at query "
                        "%g us" % table.query[2], why="no model for every cell (emulated "
                        "driver only)"))
    return rows


# ------------------------------------------------------------------ output

def fmt_figure(r):
    if r["figure"] is None:
        return "-"
    return SPEC[r["id"]].fmt % r["figure"]


def markdown(rows):
    """The targets table (one line per figure) for table.md."""
    L = ["| figure | measured | target | result | worst case | how |",
         "| --- | ---: | ---: | --- | --- | --- |"]
    for r in rows:
        s = SPEC[r["id"]]
        res = r["result"] if r["result"] in ("PASS", "FAIL") else "%s: %s" % (r["result"],
                                                                               r["why"])
        L.append("| %s | %s %s | %s %s | %s | %s | %s |" % (
            s.what, fmt_figure(r), s.unit, s.op, s.fmt % s.target if isinstance(s.target, float)
            else s.target, "**%s**" % res if r["result"] != "PASS" else res,
            r["where"] or "-", ("`%s`" % r["command"]) if r["command"] else "-"))
    return L


# Figures whose parts get a table of their own (the others' parts are in the
# model and curve tables, or only in results.json).
DETAILED = ("uncaptured_launch", "node_cost", "accept_cost", "launch_cost", "host_memory")


def detail_markdown(rows):
    """One small table per figure whose measurement has several parts (per
    workload, policy, size): every part, not only the worst."""
    L = []
    for r in rows:
        d = [x for x in r["detail"] if isinstance(x, dict)]
        if len(d) < 2 or r["id"] not in DETAILED:
            continue
        keys = [k for k in d[0] if k != "by_name"]
        L += ["", "%s (`%s`), every part:" % (SPEC[r["id"]].what, r["id"]), "",
              "| " + " | ".join(keys) + " |", "|" + " --- |" * len(keys)]
        for x in d:
            L.append("| " + " | ".join(_cell(x.get(k)) for k in keys) + " |")
    return L


def _cell(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.4g" % v
    if isinstance(v, list):
        return "; ".join(str(x) for x in v)
    return str(v)


def summary_lines(rows):
    out = []
    for r in rows:
        s = SPEC[r["id"]]
        out.append("  %-24s %12s  target %s %-8s %-5s %s" % (
            r["id"], fmt_figure(r), s.op, s.fmt % s.target if isinstance(s.target, float)
            else s.target, r["result"] if r["result"] in ("PASS", "FAIL") else "",
            r["where"] if r["result"] in ("PASS", "FAIL") else "%s: %s" % (r["result"], r["why"])))
    return out
