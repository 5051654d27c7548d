#!/usr/bin/env python3
"""
tests/e2e/fault_matrix.py: the fault-injection matrix of issue 6.

For every driver call the library makes on its own behalf (discovered from a
clean run's report, "library_driver_calls", per workload and policy), the
emulated driver is made to fail that entry (CUDAEMU_FAIL=NAME:N[+]:ERROR)
the 1st, 2nd or every call from the 1st on, with each error, under each
policy, for each workload. A cell passes when the program
  - exits 0 with the checksum it prints without the library, or
  - exits reporting, for one of its own calls, the injected error, and that
    is an error the real driver could have given that call: either the call
    is the injected entry itself (the program's own call of it was one of the
    failed ones and the library passed the result through), or it is an
    allocation and the error is CUDA_ERROR_OUT_OF_MEMORY ("surfaced");
and in every case: no crash, no hang, no violation (CUDAEMU_STATS), and,
when the build is a sanitizer build, no LeakSanitizer/ASan/UBSan report.

A cell whose injection never fired (the entry was called fewer than N
times) is "not reached" and counts neither way.

Output: TAP lines (one per call x policy, and one per failing cell), and a
markdown table (call x policy -> passed/total, failures listed with the
command that reproduces them) written to --md.

Usage: fault_matrix.py --build DIR [--full] [--md FILE] [--jobs N]
"""
import argparse
import concurrent.futures as cf
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.dont_write_bytecode = True
import checksum  # noqa: E402  (tests/lib/checksum.py: the checksum reader and the model)

ERRORS_FULL = ["CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_INVALID_VALUE",
               "CUDA_ERROR_NOT_SUPPORTED", "CUDA_ERROR_UNKNOWN"]
ERRORS_CI = ["CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_INVALID_VALUE"]
NTHS_FULL = ["1", "2", "1+"]
NTHS_CI = ["1", "1+"]
SIZE = ["--steps", "5", "--nodes", "8", "--elems", "256"]
# (label, program, extra arguments)
WORKLOADS = [
    ("recapture_temps", "recapture_temps", []),
    ("recapture_temps_async", "recapture_temps", ["--async-alloc"]),
    ("rotating_inputs", "rotating_inputs", []),
    ("fresh_inputs", "fresh_inputs", []),
    ("slices", "slices", []),
    ("scalar_changes", "scalar_changes", []),
    ("topology_changes", "topology_changes", []),
]
# The CI subset: one workload per policy, chosen so that together they reach
# graph inspection with memcpy/memset nodes (slices), a skipped update that
# must not be skipped when only a scalar changed (scalar_changes), and
# stream-ordered temporaries freed through events (recapture_temps
# --async-alloc).
CI_WORKLOAD = {"always_update": "slices", "skip_temp": "scalar_changes",
               "skip_profiled": "recapture_temps_async"}
# When an injected failure of the library's own call may surface as the
# error of a program call, because the real driver's call could fail the same
# way: (injected entry, program call, errors (empty: any), why).
SURFACE_OK = [
    (r"cuMem[A-Za-z]*(_v\d+)?", r"cuMemAlloc(Async|Pitch|Host|FromPoolAsync)?",
     {"CUDA_ERROR_OUT_OF_MEMORY"}, "an allocation may run out of memory"),
    (r"cu(Ctx|Stream)Synchronize(_ptsz)?", r"cuMemFree",
     set(), "cuMemFree synchronizes implicitly and returns that synchronization's error"),
]
WL_ERROR = re.compile(r"^\S+:\d+: ((cu[A-Za-z0-9_]*)\(.*\)) failed: (CUDA_[A-Z0-9_]+) \(-?\d+\)$", re.M)
SAN_ERROR = re.compile(r"ERROR: (LeakSanitizer|AddressSanitizer|ThreadSanitizer)|runtime error:")
TIMEOUT_S = 60


class Run:
    """One execution of a workload: status, stdout, stderr, stats, report."""

    def __init__(self, rc, out, err, stats, report):
        self.rc, self.out, self.err, self.stats, self.report = rc, out, err, stats, report

    def checksum(self):
        return checksum.parse(self.out)


class Matrix:
    def __init__(self, args):
        self.build = os.path.abspath(args.build)
        self.lib = os.path.join(self.build, "libstablegraph.so")
        self.emu = os.path.join(self.build, "emu")
        self.tmp = tempfile.mkdtemp(prefix="sgfault.")
        self.full = args.full
        self.errors = ERRORS_FULL if args.full else ERRORS_CI
        self.nths = NTHS_FULL if args.full else NTHS_CI
        self.jobs = args.jobs
        san = ""
        try:
            with open(os.path.join(self.build, "san.cfg")) as f:
                san = f.read().strip()
        except OSError:
            pass
        self.leak_check = "address" in san or "leak" in san
        self.san = san
        self.seq = itertools.count(1)  # next() is atomic under the GIL

    def env(self, policy=None, fail=None):
        """The environment of one run; LD_PRELOAD only when policy is given."""
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("STABLEGRAPH_", "CUDAEMU_")) and k != "LD_PRELOAD"}
        e["LD_LIBRARY_PATH"] = self.emu
        if self.leak_check:
            e["ASAN_OPTIONS"] = "verify_asan_link_order=0:detect_leaks=1"
        if policy:
            e["LD_PRELOAD"] = self.lib
            e["STABLEGRAPH_POLICY"] = policy
        if fail:
            e["CUDAEMU_FAIL"] = fail
        return e

    def argv(self, wl):
        label, prog, extra = next(w for w in WORKLOADS if w[0] == wl)
        return [os.path.join(self.build, "workloads", prog)] + extra + SIZE

    def command(self, wl, policy=None, fail=None):
        """The shell command that reproduces a run (for the report)."""
        parts = ["LD_LIBRARY_PATH=" + self.emu]
        if policy:
            parts += ["LD_PRELOAD=" + self.lib, "STABLEGRAPH_POLICY=" + policy]
        if fail:
            parts.append("CUDAEMU_FAIL=" + fail)
        return " ".join(parts + [shlex.quote(a) for a in self.argv(wl)])

    def run(self, wl, policy=None, fail=None):
        base = os.path.join(self.tmp, "r%d" % next(self.seq))
        e = self.env(policy, fail)
        e["CUDAEMU_STATS"] = base + ".stats.json"
        if policy:
            e["STABLEGRAPH_REPORT"] = base + ".report.json"
        try:
            p = subprocess.run(self.argv(wl), env=e, capture_output=True, text=True,
                               timeout=TIMEOUT_S)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as t:
            rc, out, err = "timeout", t.stdout or "", t.stderr or ""
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
            err = err.decode(errors="replace") if isinstance(err, bytes) else err
        return Run(rc, out, err, load_json(base + ".stats.json"), load_json(base + ".report.json"))


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# cuda.h macros that rename a call to a differently named entry.
CUDA_H_ALIASES = {"cuGraphInstantiate": "cuGraphInstantiateWithFlags"}


def elf_matches(call, entry):
    """Whether a call as the program writes it (cuMemAlloc) is ELF entry `entry`
    (cuMemAlloc_v2): the same name up to the version and per-thread suffixes."""
    call = CUDA_H_ALIASES.get(call, call)
    return re.fullmatch(re.escape(call) + r"(_v\d+)?(_ptsz|_ptds)?", entry) is not None


def judge(m, base, run, entry, nth, err):
    """(verdict, detail): verdict is 'pass', 'surfaced', 'unreached' or 'fail'."""
    if run.rc == "timeout":
        return "fail", "hung (no exit within %d s)" % TIMEOUT_S
    if isinstance(run.rc, int) and run.rc < 0:
        return "fail", "killed by signal %d" % -run.rc
    san = SAN_ERROR.search(run.err)
    if san:
        line = next((l for l in run.err.splitlines() if SAN_ERROR.search(l)), san.group(0))
        return "fail", "sanitizer: " + line.strip()
    if run.stats is None:
        return "fail", "no CUDAEMU_STATS written (status %s): crashed before exit" % run.rc
    if run.stats.get("violations", 0):
        return "fail", "%d violation(s)" % run.stats["violations"]
    n = int(nth.rstrip("+"))
    if run.stats["calls"].get(entry, 0) < n:
        return "unreached", "%s called %d time(s)" % (entry, run.stats["calls"].get(entry, 0))
    if run.report is None:
        return "fail", "no report written (status %s)" % run.rc
    if run.rc == 0:
        if run.checksum() is not None and run.checksum() == base.checksum():
            return "pass", ""
        return "fail", "exit 0 with checksum %s, want %s" % (run.checksum(), base.checksum())
    w = WL_ERROR.search(run.err)
    if not w:
        tail = run.err.strip().splitlines()[-1:] or ["(no output)"]
        return "fail", "status %s, no driver error reported: %s" % (run.rc, tail[0])
    text, call, got = w.group(1), w.group(2), w.group(3)
    if got != err:
        return "fail", "program's %s got %s (injected %s into %s)" % (text, got, err, entry)
    if elf_matches(call, entry):
        return "pass", "program's own %s failed" % call
    for inj, prog, errs, why in SURFACE_OK:
        if re.fullmatch(inj, entry) and re.fullmatch(prog, call) and (not errs or err in errs):
            return "surfaced", "program's %s got %s (%s)" % (call, got, why)
    return "fail", "the library's failed %s surfaced as the program's %s = %s" % (entry, text, got)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--full", action="store_true", help="every workload, error and N")
    ap.add_argument("--md", help="markdown table to write")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--policies", help="comma-separated (default: every policy of the build but off)")
    args = ap.parse_args()
    m = Matrix(args)
    # By default every policy the build lists but off (which makes no driver
    # call of its own): BUILD/policies, core/config.h's list (`make print-policies`).
    if args.policies:
        policies = args.policies.split(",")
    else:
        with open(os.path.join(args.build, "policies")) as f:
            policies = [p for p in f.read().split() if p != "off"]
    tap = [0, 0]

    def ok(good, msg, diag=()):
        tap[0] += 1
        tap[1] += 0 if good else 1
        print("%s %d - %s" % ("ok" if good else "not ok", tap[0], msg))
        for d in diag:
            print("#   " + d)
        sys.stdout.flush()

    wls = sorted({CI_WORKLOAD[p] for p in policies}) if not args.full else [w[0] for w in WORKLOADS]
    # 1. baselines, without the library: status 0, the model's checksum
    base = {wl: m.run(wl) for wl in wls}
    for wl in wls:
        got, want = base[wl].checksum(), checksum.model_for_output(base[wl].out)
        good = base[wl].rc == 0 and got is not None and got == want
        ok(good, "%s: runs without the library, with the model's checksum" % wl,
           [] if good else [m.command(wl), "status %s, checksum %s, the model's %s" % (base[wl].rc, got, want)])
    # 2. clean runs: which calls the library makes on its own behalf
    plan = []  # (wl, policy, entry, program_calls)
    for p in policies:
        for wl in (wls if args.full else [CI_WORKLOAD[p]]):
            clean = m.run(wl, p)
            good = (clean.rc == 0 and clean.checksum() is not None
                    and clean.checksum() == base[wl].checksum() and clean.report)
            ok(good, "%s/%s: clean run gives the checksum and a report" % (wl, p),
               [] if good else [m.command(wl, p), clean.err.strip()[-300:]])
            if not good:
                continue
            own = clean.report.get("library_driver_calls", {})
            prog = base[wl].stats["calls"] if base[wl].stats else {}
            for entry in sorted(k for k, v in own.items() if v):
                plan.append((wl, p, entry, prog.get(entry, 0)))
    # 3. the cells
    cells = [(wl, p, entry, nth, err) for (wl, p, entry, _) in plan
             for err in m.errors for nth in m.nths]
    shared = {(wl, p, entry): n for (wl, p, entry, n) in plan}

    def do(cell):
        wl, p, entry, nth, err = cell
        fail = "%s:%s:%s" % (entry, nth, err)
        verdict, detail = judge(m, base[wl], m.run(wl, p, fail), entry, nth, err)
        return cell, verdict, detail

    with cf.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        results = list(ex.map(do, cells))
    # 4. verdicts per call x policy
    table = {}
    for (wl, p, entry, nth, err), verdict, detail in results:
        t = table.setdefault((entry, p), {"pass": 0, "surfaced": 0, "unreached": 0,
                                          "fail": [], "shared": False})
        t["shared"] |= shared[(wl, p, entry)] > 0
        if verdict == "fail":
            t["fail"].append(((wl, p, entry, nth, err), detail))
        else:
            t[verdict] += 1
    for (entry, p), t in sorted(table.items()):
        total = t["pass"] + t["surfaced"] + len(t["fail"])
        ok(not t["fail"], "%s x %s: %d/%d cells pass (%d surfaced OOM, %d not reached)"
           % (entry, p, t["pass"] + t["surfaced"], total, t["surfaced"], t["unreached"]),
           ["%s:%s:%s on %s: %s" % (c[2], c[3], c[4], c[0], d) for c, d in t["fail"][:3]] +
           (["reproduce: " + m.command(t["fail"][0][0][0], p, "%s:%s:%s" % t["fail"][0][0][2:])]
            if t["fail"] else []))
    npass = sum(1 for _, v, _ in results if v in ("pass", "surfaced"))
    nfail = sum(1 for _, v, _ in results if v == "fail")
    print("# %d cells: %d pass, %d fail, %d not reached (leak check: %s)"
          % (len(results), npass, nfail, len(results) - npass - nfail,
             "LeakSanitizer" if m.leak_check else "off: not a sanitizer build"))
    if args.md:
        write_md(args.md, m, policies, wls, table, results)
    shutil.rmtree(m.tmp, ignore_errors=True)
    print("1..%d" % tap[0])
    return 1 if tap[1] else 0


def write_md(path, m, policies, wls, table, results):
    entries = sorted({e for (e, _) in table})
    with open(path, "w") as f:
        f.write("### Fault-injection matrix (%s)\n\n" % ("full" if m.full else "CI subset"))
        f.write("Workloads: %s (`%s`). Errors: %s. Failing: the %s call(s). "
                "Leak check: %s.\n\n" % (", ".join(wls), " ".join(SIZE), ", ".join(m.errors),
                                         ", ".join("every from the 1st" if n == "1+" else "#" + n
                                                   for n in m.nths),
                                         "LeakSanitizer (%s build)" % m.san if m.leak_check
                                         else "none (not a sanitizer build)"))
        f.write("Each cell: passed/total (a pass includes an OUT_OF_MEMORY surfacing from an "
                "allocation, counted in brackets); `*`: the program calls this entry itself "
                "too; `-`: the library does not call it under this policy.\n\n")
        f.write("| call | " + " | ".join(policies) + " |\n")
        f.write("| --- |" + " --- |" * len(policies) + "\n")
        for e in entries:
            row = []
            for p in policies:
                t = table.get((e, p))
                if not t:
                    row.append("-")
                    continue
                total = t["pass"] + t["surfaced"] + len(t["fail"])
                s = "%d/%d" % (t["pass"] + t["surfaced"], total)
                if t["surfaced"]:
                    s += " (%d)" % t["surfaced"]
                if t["fail"]:
                    s = "**%s**" % s
                row.append(s + ("*" if t["shared"] else ""))
            f.write("| `%s` | %s |\n" % (e, " | ".join(row)))
        fails = [(c, d) for c, v, d in results if v == "fail"]
        f.write("\n%d cells, %d failed.\n" % (len(results), len(fails)))
        if fails:
            f.write("\nFailures:\n\n")
            for (wl, p, entry, nth, err), d in fails:
                f.write("- `%s:%s:%s`, %s, %s: %s  \n  `%s`\n"
                        % (entry, nth, err, wl, p, d, m.command(wl, p, "%s:%s:%s" % (entry, nth, err))))


if __name__ == "__main__":
    sys.exit(main())
