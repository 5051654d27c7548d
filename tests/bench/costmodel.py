#!/usr/bin/env python3
"""tests/bench/costmodel.py: the modeled driver time (python3, stdlib only).

Reads the per-call cost table (core/costs.tsv, format in its header) and
charges driver call counts with it: every call that reached the driver (the
emulated driver's CUDAEMU_STATS counts the program's calls and the library's
own alike) times its cost, plus, for calls that cover graph nodes (updates,
per-node set-params, instantiations, launches, node listings), their per-node
cost times the nodes CUDAEMU_STATS counted for them. Two rules for updates:

  every    an update costs its per-node figure for every node it covers (the
           published figure is for rewriting every node);
  changed  it costs the per-node figure only for the nodes whose parameters it
           changed (recent drivers diff parameters), plus its scanned_node
           figure for every node it covers.

Calls with no published figure are charged the query range (0.03 / 0.1 /
0.3 us per call in the default table); every figure is given at the three
values. Used by tests/bench/bench.py (`make bench`), scripts/demo.sh
(`make demo`) and tests/gpu/run-all.sh (which writes a table of measured
figures with `calibrated`).

Command line:
  costmodel.py check [TABLE]                 parse a table, print its rows
  costmodel.py charge STATS.json [TABLE]     the modeled driver time of one run
  costmodel.py calibrated RAW [--base TABLE] [--out FILE]
        a table of the same format from tests/gpu/calibrate's output: its
        measured figures replace the base table's rows for those calls, every
        other row is kept with its source
"""
import argparse
import json
import re
import statistics
import sys
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TABLE = os.path.normpath(os.path.join(HERE, "..", "..", "core", "costs.tsv"))
RULES = ("every", "changed")
RULE_NAMES = {"every": "every-node", "changed": "changed-nodes"}
# host_bytes_node is not a time: the bytes an exec holds per node (the
# library's estimate of a variant's host memory); the model charges no time
# for it.
BASES = ("call", "node", "changed_node", "scanned_node", "host_bytes_node")
QUERY_LEVELS = ("low", "mid", "high")
# Groups for the breakdown of a modeled time (first match wins).
GROUPS = [
    ("update", re.compile(r"^cuGraphExec(Update|\w*NodeSetParams)$")),
    ("instantiate", re.compile(r"^cuGraphInstantiate\w*$")),
    ("launch", re.compile(r"^cuGraph(Launch|Upload)$")),
    ("vmm", re.compile(r"^cuMem(Create|Map|Unmap|SetAccess|Release|AddressReserve|AddressFree)$")),
    ("graph query", re.compile(r"^cuGraph(Get|Node|KernelNodeGet|\w+NodeGet)\w*$")),
]
GROUP_NAMES = [g for g, _ in GROUPS] + ["other"]


class TableError(ValueError):
    pass


def base_name(name):
    """cuGraphExecUpdate_v2 -> cuGraphExecUpdate; cuGraphLaunch_ptsz -> cuGraphLaunch;
    cuStreamBeginCapture_v2_ptsz -> cuStreamBeginCapture."""
    return re.sub(r"(_v\d+)?(_pt(?:sz|ds))?$", "", name)


def group_of(base):
    for g, pat in GROUPS:
        if pat.match(base):
            return g
    return "other"


class Table:
    """rows: {call: {basis: (value, source)}}, value a float or "query";
    query: (low, mid, high) and its source; lines: the file's text lines
    (kept so a calibrated table can keep comments and unmeasured rows)."""

    def __init__(self, path=DEFAULT_TABLE, text=None):
        self.path = path
        if text is None:
            with open(path) as f:
                text = f.read()
        self.lines = text.splitlines()
        self.rows = {}
        self.query = None
        self.query_source = None
        for i, line in enumerate(self.lines, 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            parts = s.split(None, 3)
            if len(parts) < 4:
                raise TableError("%s:%d: want CALL BASIS US SOURCE, got %r" % (path, i, s))
            call, basis, us, source = parts
            if call == "query":
                if basis != "range":
                    raise TableError("%s:%d: the query row's basis must be 'range'" % (path, i))
                try:
                    q = tuple(float(x) for x in us.split(","))
                except ValueError:
                    q = ()
                if len(q) != 3 or not (0 <= q[0] <= q[1] <= q[2]):
                    raise TableError("%s:%d: query range must be LOW,MID,HIGH ascending, got %r"
                                     % (path, i, us))
                self.query, self.query_source = q, source
                continue
            if basis not in BASES:
                raise TableError("%s:%d: basis %r is not one of %s" % (path, i, basis,
                                                                       ", ".join(BASES)))
            if us == "query" and basis != "host_bytes_node":
                val = "query"
            else:
                try:
                    val = float(us)
                except ValueError:
                    raise TableError("%s:%d: US must be a number or 'query', got %r"
                                     % (path, i, us)) from None
                if val < 0 or val != val:
                    raise TableError("%s:%d: negative or NaN cost %r" % (path, i, us))
            if call != "*" and base_name(call) != call:
                raise TableError("%s:%d: %s: name the call without _vN/_ptsz (%s)"
                                 % (path, i, call, base_name(call)))
            if basis in self.rows.get(call, {}):
                raise TableError("%s:%d: %s %s given twice" % (path, i, call, basis))
            self.rows.setdefault(call, {})[basis] = (val, source)
        if self.query is None:
            raise TableError("%s: no 'query range LOW,MID,HIGH' row" % path)
        if "*" not in self.rows or "call" not in self.rows["*"]:
            raise TableError("%s: no '* call' row (the cost of calls without a row)" % path)
        for call, r in self.rows.items():
            if "call" not in r:
                raise TableError("%s: %s has no 'call' row" % (path, call))
            if "changed_node" in r and "node" not in r:
                raise TableError("%s: %s: a changed_node row needs a node row (the every-node "
                                 "rule's figure)" % (path, call))
            if "scanned_node" in r and "changed_node" not in r:
                raise TableError("%s: %s: a scanned_node row needs a changed_node row"
                                 % (path, call))

    def rows_for(self, name):
        return self.rows.get(base_name(name)) or self.rows["*"]

    def value(self, v, q):
        return q if v == "query" else v

    def source(self, call, basis):
        r = self.rows.get(call, {}).get(basis)
        return r[1] if r else None


def charge(table, calls, nodes=None, rule="every", q=None, inst_us=None):
    """Modeled microseconds for call counts (may be fractional: per step).
    calls: {exact ELF name: count}; nodes: {name: {"nodes": n, "changed": n}}
    (CUDAEMU_STATS); q: the query cost (default: the table's middle value);
    inst_us: if not None, every instantiation call costs exactly that (its
    rows are ignored). Returns (total, {group: us})."""
    if rule not in RULES:
        raise ValueError("rule %r" % rule)
    q = table.query[1] if q is None else q
    nodes = nodes or {}
    by = {g: 0.0 for g in GROUP_NAMES}
    # in name order: the sum is then the same in every process (the order of
    # a dict built from a set of names depends on the process's hash seed)
    for name, n in sorted(calls.items()):
        if not n:
            continue
        base = base_name(name)
        grp = group_of(base)
        if inst_us is not None and grp == "instantiate":
            by[grp] += n * inst_us
            continue
        rows = table.rows_for(name)
        nd = nodes.get(name) or {}
        covered, changed = nd.get("nodes", 0), nd.get("changed", 0)
        us = n * table.value(rows["call"][0], q)
        if rule == "changed" and "changed_node" in rows:
            us += changed * table.value(rows["changed_node"][0], q)
            if "scanned_node" in rows:
                us += covered * table.value(rows["scanned_node"][0], q)
        elif "node" in rows:
            us += covered * table.value(rows["node"][0], q)
        by[grp] += us
    return sum(by.values()), by


def model(table, calls, nodes=None, inst_us=None):
    """Every figure: {"every": [low, mid, high], "changed": [...]} in us, and
    the breakdown by group at the middle query value under each rule."""
    out = {"us": {}, "by_group_mid": {}}
    for rule in RULES:
        out["us"][rule] = [charge(table, calls, nodes, rule, q, inst_us)[0] for q in table.query]
        out["by_group_mid"][rule] = charge(table, calls, nodes, rule, table.query[1], inst_us)[1]
    return out


def stats_counts(stats):
    """(calls, nodes) from a CUDAEMU_STATS dict (None if missing)."""
    if not stats:
        return None, None
    return stats.get("calls"), stats.get("nodes") or {}


def diff_counts(short, long, steps):
    """Per-step counts: (long - short) / steps, for call dicts and node dicts."""
    calls = {n: (long[0].get(n, 0) - short[0].get(n, 0)) / steps
             for n in set(long[0]) | set(short[0])}
    nodes = {}
    for n in set(long[1]) | set(short[1]):
        a, b = short[1].get(n, {}), long[1].get(n, {})
        nodes[n] = {k: (b.get(k, 0) - a.get(k, 0)) / steps for k in ("nodes", "changed")}
    return calls, nodes


def describe(table):
    """One paragraph naming the model's assumptions and sources (for tables)."""
    r = table.rows
    upd = r.get("cuGraphExecUpdate", {})
    lo, mid, hi = table.query
    return ("Every call that reached the driver (the program's and the library's own, counted by "
            "the emulated driver) times its cost from `%s`. Updates under two rules: *every node* "
            "(an update costs %s us per node of its graph) and *changed nodes* (%s us per node "
            "whose parameters it changed, counted by the emulated driver by comparing the new "
            "parameters with the exec's; %s us per node scanned). Instantiation %s us per node; "
            "VMM calls per call (cuMemCreate %s, cuMemMap %s, cuMemSetAccess %s, cuMemUnmap %s, "
            "cuMemAddressReserve %s us); every call with no published figure (queries, "
            "allocations, launches, capture calls, ...) %s / %s / %s us, each figure given at the "
            "three values." % (
                os.path.relpath(table.path, os.path.dirname(os.path.dirname(HERE)))
                if table.path else "the table",
                _v(upd.get("node")), _v(upd.get("changed_node")), _v(upd.get("scanned_node")),
                _v(r.get("cuGraphInstantiateWithFlags", {}).get("node")),
                *[_v(r.get(c, {}).get("call")) for c in ("cuMemCreate", "cuMemMap",
                                                        "cuMemSetAccess", "cuMemUnmap",
                                                        "cuMemAddressReserve")],
                _g(lo), _g(mid), _g(hi)))


def _v(row):
    if row is None:
        return "0"
    return "a query" if row[0] == "query" else _g(row[0])


def _g(x):
    return ("%.6g" % x) if isinstance(x, float) else str(x)


# ------------------------------------------------------------------ calibration

def fit(points):
    """Least-squares a + b * n over [(n, t)]; with one size, (t, 0)."""
    ns = [n for n, _ in points]
    if len(set(ns)) < 2:
        return statistics.median(t for _, t in points), 0.0
    mn, mt = statistics.mean(ns), statistics.mean(t for _, t in points)
    b = sum((n - mn) * (t - mt) for n, t in points) / sum((n - mn) ** 2 for n in ns)
    return mt - b * mn, b


def parse_calibration(text):
    """tests/gpu/calibrate's output: "calibrate: key=value ..." header lines and
    "measure WHAT NODES MEDIAN_US MIN_US REPS" lines. Returns (info, {what:
    [(nodes, median_us)]})."""
    info, meas = {}, {}
    for line in text.splitlines():
        if line.startswith("calibrate:"):
            for k, v in re.findall(r"(\w+)=(\"[^\"]*\"|\S+)", line):
                info[k] = v.strip('"')
        elif line.startswith("measure "):
            p = line.split()
            if len(p) != 6:
                raise TableError("bad measure line: %r" % line)
            meas.setdefault(p[1], []).append((int(p[2]), float(p[3])))
    return info, meas


def _nonneg(x):
    return max(0.0, x)


def calibrated_rows(info, meas):
    """{call: {basis: (us, source)}} from the measurements; raises TableError
    when one the table needs is missing."""
    need = ["update_identical", "update_one", "update_all", "setparams_identical",
            "setparams_changed", "get_params", "get_attribute", "get_nodes", "instantiate",
            "launch", "mem_create", "mem_map", "mem_set_access", "mem_unmap", "mem_release",
            "address_reserve", "address_free"]
    missing = [w for w in need if not meas.get(w)]
    if missing:
        raise TableError("calibration output lacks: %s" % " ".join(missing))
    where = "measured on %s, driver %s, %s (tests/gpu/calibrate" % (
        info.get("device", "?"), info.get("driver", "?"), info.get("date", "?"))
    sizes = sorted({n for n, _ in meas["update_identical"]})
    span = "%d..%d nodes" % (sizes[0], sizes[-1])
    rows = {}

    def put(call, basis, us, how):
        if us < 0:
            how += "; the fit gave %.3g, taken as 0" % us
        rows.setdefault(call, {})[basis] = (round(_nonneg(us), 4), "%s: %s)" % (where, how))

    a0, b0 = fit(meas["update_identical"])
    aa, ba = fit(meas["update_all"])
    ident = dict(meas["update_identical"])
    per_changed = [(t - ident[n]) / n for n, t in meas["update_all"] if n in ident and n > 0]
    one = [t - ident[n] for n, t in meas["update_one"] if n in ident]
    put("cuGraphExecUpdate", "call", a0, "intercept of the identical update over " + span)
    put("cuGraphExecUpdate", "node", ba, "slope of the update changing every node over " + span)
    put("cuGraphExecUpdate", "scanned_node", b0, "slope of the identical update over " + span)
    put("cuGraphExecUpdate", "changed_node", statistics.median(per_changed),
        "(update changing every node - identical update) / nodes, median over %s; one changed "
        "node adds %.3g us (median)" % (span, statistics.median(one)))
    s_id = statistics.median(t for _, t in meas["setparams_identical"])
    s_ch = statistics.median(t for _, t in meas["setparams_changed"])
    for call in ("cuGraphExecKernelNodeSetParams",):
        put(call, "call", s_id, "cuGraphExecKernelNodeSetParams leaving the node as it was, "
            "median over " + span)
        put(call, "node", s_ch - s_id, "changing the node minus leaving it, median over " + span)
        put(call, "changed_node", s_ch - s_id, "changing the node minus leaving it, median "
            "over " + span)
    for what, call in (("get_params", "cuGraphKernelNodeGetParams"),
                       ("get_attribute", "cuGraphKernelNodeGetAttribute")):
        put(call, "call", statistics.median(t for _, t in meas[what]),
            "median per call over " + span)
    for what, call in (("get_nodes", "cuGraphGetNodes"), ("launch", "cuGraphLaunch")):
        a, b = fit(meas[what])
        put(call, "call", a, "intercept over " + span)
        put(call, "node", b, "slope per node over " + span)
    ai, bi = fit(meas["instantiate"])
    for call in ("cuGraphInstantiate", "cuGraphInstantiateWithFlags",
                 "cuGraphInstantiateWithParams"):
        put(call, "call", ai, "cuGraphInstantiateWithFlags, intercept over " + span)
        put(call, "node", bi, "cuGraphInstantiateWithFlags, slope per node over " + span)
    if meas.get("instantiate_host_bytes"):
        n_hb, b_hb = max(meas["instantiate_host_bytes"])
        for call in ("cuGraphInstantiate", "cuGraphInstantiateWithFlags",
                     "cuGraphInstantiateWithParams"):
            put(call, "host_bytes_node", round(b_hb / max(n_hb, 1)), "resident memory per node "
                "of execs of a %d-node graph kept at once (cuGraphInstantiateWithFlags; bytes, "
                "not us)" % n_hb)
    for what, call in (("mem_create", "cuMemCreate"), ("mem_map", "cuMemMap"),
                       ("mem_set_access", "cuMemSetAccess"), ("mem_unmap", "cuMemUnmap"),
                       ("mem_release", "cuMemRelease"), ("address_reserve", "cuMemAddressReserve"),
                       ("address_free", "cuMemAddressFree")):
        put(call, "call", statistics.median(t for _, t in meas[what]),
            "median per call, one %s granule" % info.get("granularity", "?"))
    return rows


def write_table(base, rows, header_note):
    """The base table's text with the rows of `rows` replacing the base's rows
    for the same calls (rows for new calls are appended)."""
    out, done = [], set()
    col = "%-35s %-13s %-13s %s"
    for line in base.lines:
        s = line.strip()
        parts = s.split(None, 3) if s and not s.startswith("#") else None
        if parts and parts[0] in rows:
            call = parts[0]
            if call not in done:
                for basis in BASES:
                    if basis in rows[call]:
                        us, src = rows[call][basis]
                        out.append(col % (call, basis, _g(float(us)), src))
                done.add(call)
            continue
        out.append(line)
        if s.startswith("# CALL"):
            out.insert(len(out) - 1, "# " + header_note)
    for call in rows:
        if call not in done:
            for basis in BASES:
                if basis in rows[call]:
                    us, src = rows[call][basis]
                    out.append(col % (call, basis, _g(float(us)), src))
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ main

def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("table", nargs="?", default=DEFAULT_TABLE)
    c = sub.add_parser("charge")
    c.add_argument("stats")
    c.add_argument("table", nargs="?", default=DEFAULT_TABLE)
    c = sub.add_parser("calibrated")
    c.add_argument("raw")
    c.add_argument("--base", default=DEFAULT_TABLE)
    c.add_argument("--out", default="-")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "check":
            t = Table(a.table)
            print("%s: %d calls, query range %s" % (a.table, len(t.rows),
                                                    " / ".join(_g(x) for x in t.query)))
            for call in sorted(t.rows):
                for basis, (v, _) in sorted(t.rows[call].items()):
                    print("  %-34s %-13s %s" % (call, basis, _g(v)))
            return 0
        if a.cmd == "charge":
            t = Table(a.table)
            with open(a.stats) as f:
                calls, nodes = stats_counts(json.load(f))
            if calls is None:
                raise TableError("%s: no call counts" % a.stats)
            m = model(t, calls, nodes)
            for rule in RULES:
                print("%s: %s us (query %s us)" % (
                    RULE_NAMES[rule], " / ".join("%.1f" % x for x in m["us"][rule]),
                    " / ".join(_g(x) for x in t.query)))
            return 0
        base = Table(a.base)
        with open(a.raw) as f:
            info, meas = parse_calibration(f.read())
        rows = calibrated_rows(info, meas)
        text = write_table(base, rows, "Calibrated: the rows whose source says 'measured' "
                           "replace %s's; the others are kept." % os.path.basename(a.base))
        Table(a.out if a.out != "-" else "<calibrated>", text=text)  # it must parse
        if a.out == "-":
            sys.stdout.write(text)
        else:
            with open(a.out, "w") as f:
                f.write(text)
        return 0
    except (OSError, TableError, ValueError) as ex:
        print("costmodel: %s" % ex, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
