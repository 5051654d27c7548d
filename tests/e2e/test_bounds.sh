#!/usr/bin/env bash
# tests/e2e/test_bounds.sh: what the library keeps is bounded by what is
# alive (issue 14, "Memory that must stay bounded"). Three loops, each run
# small and large, without the library and under every policy:
#   topology   workloads/topology_changes, 2,000 vs 200,000 steps (a graph
#              captured every step, an exec re-instantiated and destroyed
#              every second step: 1,000 vs 100,000 execs)
#   execs      bounds_prog execs: 1,000 vs 100,000 exec instantiate /
#              launch / update / launch / destroy cycles
#   contexts   bounds_prog contexts: 100 vs 10,000 contexts created, used
#              (module, buffer, graph, exec) and destroyed
# (the large sizes are these in `make bench`, a quarter of them in `make
# test`: BOUNDS_SCALE below)
# For each loop and policy, from small to large (the bound of the issue,
# 64 KiB each):
#   - the report's size grows by at most 64 KiB;
#   - the library's share of the heap (bytes malloc handed out and did not
#     get back at exit, with the library minus without) grows by at most
#     64 KiB;
#   - the library's share of resident anonymous memory (RssAnon at exit,
#     with minus without) grows by at most 64 KiB;
#   - the program's result is the same as without the library.
# The figures come from tests/e2e/libbounds_probe.so, preloaded after the
# library; each is printed as a diagnostic line. Sanitizer builds run the
# loops shorter and check the report and the result only (their allocators
# keep freed memory on purpose). BOUNDS_SCALE (below) sets the large sizes.
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
PROBE=$BUILD/tests/e2e/libbounds_probe.so
PROG=$BUILD/tests/e2e/bounds_prog
MOD=$BUILD/tests/emu/mod_test.so
TOPO=$BUILD/workloads/topology_changes
BOUND=65536
. "$SRC/tests/lib/policies.sh"
sanitized=$(cat "$BUILD/san.cfg" 2>/dev/null)
# BOUNDS_SCALE: the large runs are the issue's sizes (200,000 steps, 100,000
# execs, 10,000 contexts) divided by it; the small runs are the issue's
# sizes (2,000, 1,000, 100). Default 4 in `make test` (50,000, 25,000 and
# 2,500: a leak of 2 bytes a step, or of one malloc chunk every 16 steps,
# still shows against the 64 KiB bound; the issue's sizes took 94 s of CPU,
# a tenth of the CI's normal stage, which was over its budget, 2026-12-07);
# `make bench` runs 1, the issue's sizes, for bounds.txt. Sanitizer builds
# divide the small runs by 10 and the large by 100 by default (they check
# the report and the result only: their allocators keep freed memory on
# purpose).
sscale=1
lscale=${BOUNDS_SCALE:-4}
if [ -n "$sanitized" ]; then sscale=10 lscale=${BOUNDS_SCALE:-100}; fi
[[ $lscale =~ ^[1-9][0-9]*$ ]] || { echo "test_bounds: BOUNDS_SCALE must be a positive integer, not '$lscale'" >&2; exit 2; }

# cmd LOOP SIZE: the command line of one loop.
cmd() {
    case $1 in
    topology) echo "$TOPO --steps $2 --nodes 2 --elems 16" ;;
    execs) echo "$PROG $MOD execs $2" ;;
    contexts) echo "$PROG $MOD contexts $2" ;;
    esac
}
# measure LOOP SIZE POLICY: runs it (POLICY "none": without the library);
# leaves rss (KiB), heap (bytes), report (bytes), result (the program's
# last line) and rc.
measure() {
    local tag="$1.$2.$3" pre=$PROBE
    [ "$3" = none ] || pre="$LIB $PROBE"
    [ -n "$sanitized" ] && pre=${pre% *}   # no probe: the figures mean nothing there
    rm -f "$TMP/$tag.probe" "$TMP/$tag.json"
    # One malloc arena (every run, with and without the library): the
    # emulated driver's stream workers are threads, and how many per-thread
    # arenas they touch varies from run to run by tens of KiB of resident
    # memory (seen: -64 to +80 KiB in the contexts loop), noise as large as
    # the bound.
    # shellcheck disable=SC2046
    MALLOC_ARENA_MAX=1 \
    BOUNDS_PROBE_OUT=$TMP/$tag.probe STABLEGRAPH_POLICY=$3 STABLEGRAPH_REPORT=$TMP/$tag.json \
        LD_PRELOAD=${pre# } emu $(cmd "$1" "$2") >"$TMP/$tag.out" 2>"$TMP/$tag.err"
    rc=$?
    result=$(grep -v '^stablegraph' "$TMP/$tag.out" | tail -n 1)
    [ "$1" = topology ] && result=$(sum_in "$TMP/$tag.out")
    rss=$(awk '$1 == "rss_anon_kb" {print $2}' "$TMP/$tag.probe" 2>/dev/null)
    heap=$(awk '$1 == "heap_bytes" {print $2}' "$TMP/$tag.probe" 2>/dev/null)
    report=$(stat -c %s "$TMP/$tag.json" 2>/dev/null || echo 0)
}
# baseline_ok LOOP SIZE: after `measure LOOP SIZE none`: status 0 and the
# right result: the model's checksum for topology_changes, "<mode> N: ok" for
# bounds_prog (which checks every cycle's words itself).
baseline_ok() {
    if [ "$1" = topology ]; then
        check_baseline "$1 $2" "$TMP/$1.$2.none.out" "$rc"
    else
        check_eq "$1 $2: exits 0 without the library, every cycle right" "$rc: $result" "0: $1 $2: ok"
    fi
}
# within NAME GROWTH: ok if GROWTH <= BOUND (bytes).
within() {
    if [ -n "$2" ] && [ "$2" -le "$BOUND" ]; then ok "$1: grows $2 bytes"
    else not_ok "$1: grows ${2:-?} bytes, more than $BOUND"; fi
}

for loop in topology execs contexts; do
    case $loop in
    topology) small=2000 large=200000 ;;
    execs) small=1000 large=100000 ;;
    contexts) small=100 large=10000 ;;
    esac
    small=$((small / sscale)) large=$((large / lscale))
    [ "$large" -gt "$small" ] || large=$((small * 2))
    measure $loop $small none; base_small=$result; rss0_small=$rss heap0_small=$heap
    baseline_ok $loop $small
    measure $loop $large none; base_large=$result; rss0_large=$rss heap0_large=$heap
    baseline_ok $loop $large
    diag "$loop $small/$large without the library: resident anon ${rss0_small:-?}/${rss0_large:-?} KiB, heap ${heap0_small:-?}/${heap0_large:-?} bytes"
    for policy in $POLICIES; do
        t="$loop $small -> $large, $policy"
        measure $loop $small "$policy"
        check_eq "$t: result at $small as without the library (status $rc)" "$result" "$base_small"
        rss_small=$rss heap_small=$heap report_small=$report
        measure $loop $large "$policy"
        check_eq "$t: result at $large as without the library (status $rc)" "$result" "$base_large"
        check "$t: a report written" [ "$report" -gt 0 ]
        within "$t: report size" $((report - report_small))
        diag "$t: report $report_small -> $report bytes"
        if [ -n "$sanitized" ]; then
            skip "$t: heap and resident memory" "under SAN=$sanitized"
            continue
        fi
        lib_heap_small=$((heap_small - heap0_small)) lib_heap_large=$((heap - heap0_large))
        lib_rss_small=$((rss_small - rss0_small)) lib_rss_large=$((rss - rss0_large))
        within "$t: the library's heap" $((lib_heap_large - lib_heap_small))
        within "$t: the library's resident anonymous memory" $(((lib_rss_large - lib_rss_small) * 1024))
        diag "$t: the library's heap $lib_heap_small -> $lib_heap_large bytes, resident anon $lib_rss_small -> $lib_rss_large KiB"
    done
done
done_testing
