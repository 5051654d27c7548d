#!/usr/bin/env bash
# tests/e2e/test_soak.sh: round 42, what the library holds over long runs
# (docs/testing-correctness.md, "Round 42"). Each case of tests/e2e/adv_soak.c
# churns short-lived objects (graphs, execs and their variants, streams and
# events, modules, contexts, blocks of new sizes, user objects, threads, IPC
# handles, green contexts) while the program holds a bounded amount, and
# prints its figures at each quarter of the run (heap in use, RssAnon, the
# emulated driver's live objects per kind: cuemuLive). It runs without the library and under
# skip_temp, skip_profiled (variants bought at the decision: the cost table in
# which they are free) and, for graphs and execs, skip_profiled with aliasing.
# Per case and configuration:
#   - stdout (checks of the results, digest of every CUresult) and the exit
#     status are those of the run without the library; 0 violations;
#   - after the warm-up (the first half), the library's extra stays flat, from
#     the second quarter's figures to the fourth's, less what the run without
#     the library grew: heap (mallinfo2 bytes in use) and RssAnon within
#     BOUND (64 KiB; a leak of 32 bytes a step shows at 2,000 steps), every
#     kind of live driver object within 0 (the library's own events, streams,
#     VMM handles and reservations included), device bytes charged within one
#     2 MiB chunk over what the run without the library grew (if it grew);
#   - the report lists at most 64 execs beyond the live ones (report.md), and
#     shows memory placed (the library acted).
# SOAK_ONLY=REGEX runs the cases whose name matches; SOAK_VERBOSE=1 prints
# each run's last figures.
# Sanitizer builds run the cases 10 times shorter and skip the heap and RSS
# figures (their allocators keep freed memory on purpose).
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
PROG=$BUILD/tests/e2e/adv_soak
BOUND=65536
scale=1
san_build && scale=10
ALIAS_ENV="STABLEGRAPH_ALIAS=always CUDAEMU_GRANULARITY=65536 STABLEGRAPH_ALIAS_MIN_BYTES=4096"

# run CASE N CFG: one run into $TMP/CASE.CFG.{out,err,rc,stats.json,report.json}.
run() {
    local t=$TMP/$1.$3 env=()
    case $3 in
    none) ;;
    temp) env=(LD_PRELOAD="$LIB" STABLEGRAPH_POLICY=skip_temp) ;;
    prof | alias) env=(LD_PRELOAD="$LIB" STABLEGRAPH_POLICY=skip_profiled) ;;
    esac
    # shellcheck disable=SC2206
    [ "$3" = alias ] && env+=($ALIAS_ENV)
    # One malloc arena: the emulated driver's stream workers are threads, and
    # which per-thread arenas they touch varies from run to run (noise as
    # large as the bound; test_bounds.sh).
    MALLOC_ARENA_MAX=1 CUDAEMU_STATS=$t.stats.json STABLEGRAPH_REPORT=$t.report.json \
        STABLEGRAPH_PROFILE_STEPS=3 STABLEGRAPH_COSTS=$SRC/tests/lib/costs-free-variants.tsv \
        emu env "${env[@]}" timeout -k 2 120 "$PROG" "$1" "$2" >"$t.out" 2>"$t.err" </dev/null
    echo $? >"$t.rc"
}

# judge CASE CFG: the TAP lines of one configuration against the baseline.
judge() {
    python3 - "$TMP" "$1" "$2" "$BOUND" "$(san_build && echo 1 || echo 0)" <<'PY'
import json, sys
tmp, case, cfg, bound, san = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"

def read(p, d=""):
    try:
        return open(p, errors="replace").read()
    except OSError:
        return d

def figures(run):
    q = {}
    for l in read(f"{tmp}/{case}.{run}.err").splitlines():
        w = l.split()
        if len(w) < 8 or w[0] != "soak" or w[1] != case: continue
        v = {"heap": int(w[4]), "rss_kb": int(w[6])}
        v.update((k, int(x)) for k, x in (kv.split("=") for kv in w[8:]))
        q[w[2]] = v
    return q

def say(ok, what, diag=""):
    print(("ok" if ok else "not ok") + f"\t{case}/{cfg}: {what}\t" + diag.replace("\n", "\\n"))

base_rc, rc = read(f"{tmp}/{case}.none.rc").strip(), read(f"{tmp}/{case}.{cfg}.rc").strip()
base_out, out = read(f"{tmp}/{case}.none.out"), read(f"{tmp}/{case}.{cfg}.out")
try:
    viol = json.loads(read(f"{tmp}/{case}.{cfg}.stats.json"))["violations"]
except (ValueError, KeyError):
    viol = None
same = rc == base_rc == "0" and out == base_out and "wrong: 0" in out and viol == 0
say(same, "as without the library (exit 0, same stdout and CUresults, 0 violations)",
    "" if same else f"exit {rc} (without {base_rc}), violations {viol}\n" + out[-400:] + read(f"{tmp}/{case}.{cfg}.err")[-300:])

b, l = figures("none"), figures(cfg)
if not all(k in b and k in l for k in ("q2", "q4")):
    say(False, "flat over the second half", "figures missing (the run did not finish)")
    sys.exit(0)
grow = lambda f, k: f["q4"].get(k, 0) - f["q2"].get(k, 0)
bad, shown = [], []
for k in sorted(l["q4"]):
    extra = grow(l, k) - grow(b, k)
    if k in ("heap", "rss_kb"):
        if san: continue
        lim = bound if k == "heap" else bound // 1024
    elif k == "device_bytes":
        extra, lim = grow(l, k) - max(grow(b, k), 0), 2 << 20
    else:
        lim = 0
    shown.append(f"{k} {l['q2'][k]}->{l['q4'][k]} (without {b['q2'].get(k)}->{b['q4'].get(k)})")
    if extra > lim: bad.append(f"{k}: the library's extra grew {extra} (limit {lim})")
say(not bad, "the library's extra stays flat from q2 to q4 (heap, RssAnon, live driver objects, device bytes)",
    "; ".join(bad) + "\n" + "; ".join(shown))
try:
    R = json.loads(read(f"{tmp}/{case}.{cfg}.report.json"))
    live = sum(1 for e in R["execs"] if not e["destroyed"])
    ok = len(R["execs"]) <= 64 + live
    say(ok, "the report lists at most 64 destroyed execs", f"{len(R['execs'])} listed, {live} live")
    say(R["totals"]["bytes_mapped"] > 0, "the library engaged (memory placed)", json.dumps(R["totals"]))
except (ValueError, KeyError) as exc:
    say(False, "the report lists at most 64 destroyed execs; the library engaged", f"no report: {exc}")
PY
}

for c in graphs:4000 execs:8000 streams:4000 modules:4000 contexts:1000 sizes:3000 uobj:8000 \
         threads:2000 ipc:4000 green:2000 odd:2000 libraries:4000 longexec:8000 ipcopen:2000; do
    name=${c%:*} n=$((${c#*:} / scale))
    [[ $name =~ ${SOAK_ONLY:-.} ]] || continue
    cfgs="temp prof"
    case $name in graphs | execs | longexec) cfgs+=" alias" ;; esac
    run "$name" "$n" none
    for cfg in $cfgs; do
        run "$name" "$n" "$cfg"
        while IFS=$'\t' read -r status what d; do
            if [ "$status" = ok ]; then ok "$what"; else
                not_ok "$what"
                while IFS= read -r line; do diag "$line"; done <<<"${d//\\n/$'\n'}"
            fi
        done < <(judge "$name" "$cfg" || echo "not ok	$name/$cfg: the judge failed")
        [ -n "${SOAK_VERBOSE:-}" ] && diag "$(grep '^soak' "$TMP/$name.$cfg.err" | tail -n 1)"
    done
done
done_testing
