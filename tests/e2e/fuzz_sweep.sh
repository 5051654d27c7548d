#!/usr/bin/env bash
# tests/e2e/fuzz_sweep.sh: runs the random programs over many seeds (round
# 22; make test runs only tests/e2e/test_fuzz_sweep.sh, which tests this
# tool on a few seeds: a sweep takes minutes to hours; test_correctness.sh
# runs fixed seeds). Every generator (adv_recfuzz, adv_recfuzz_ptsz,
# adv_memfuzz, adv_lifefuzz) and every mode of each by default, or those --gens names;
# each program once without the library (the baseline) and once under each
# policy; every run that is not as the baseline is reported.
#
# Per unit (generator, mode, seed, delay):
#   baseline   LD_LIBRARY_PATH=<build>/emu, no library: must exit 0 and print
#              "wrong: 0" (the program's own checks against the host model);
#   each policy (--policies, default skip_temp skip_profiled always_update):
#              LD_PRELOAD=<build>/libstablegraph.so, STABLEGRAPH_POLICY=P,
#              STABLEGRAPH_PROFILE_STEPS=3, STABLEGRAPH_MAX_GENERATIONS=8,
#              STABLEGRAPH_COSTS=tests/lib/costs-free-variants.tsv (variants
#              bought at the decision, as test_correctness.sh does),
#              STABLEGRAPH_AUDIT_RECORDS=1 and STABLEGRAPH_REPORT; must
#              finish under the timeout (124/137: a hang), exit as the
#              baseline, print the same stdout, report 0 audit mismatches;
#   every run: no "cudaemu: VIOLATION" line on stderr (the emulator's
#              illegal-address report), no sanitizer report
#              ("ERROR: AddressSanitizer", "runtime error:",
#              "WARNING: ThreadSanitizer"), CUDAEMU_STATS violations 0.
# One unit in K (--delay-every, default 10) of each prog:mode runs with
# CUDAEMU_KERNEL_DELAY_US=200 (kernels stay in flight: early reuse and lost
# ordering show), the rest 0. Do not rebuild DIR during a sweep: a unit's
# runs must use the same binary (the digest hashes source line numbers).
#
# adv_lifefuzz (round 44) draws object lifecycles: graphs, nodes, execs,
# streams, events, a created context, the module and foreign memory
# (managed, cuMemHostAlloc, cuMemAllocHost, a VMM mapping) destroyed and
# made again between and within steps, so that handle values and addresses
# come back; mode one is a program, mode threads two at once (with
# --env CUDAEMU_DESTROY_DELAY_US=N one thread's destroys stay in flight while
# the other makes objects of their values).
#
# Usage: tests/e2e/fuzz_sweep.sh [options] FROM COUNT
#   --build DIR       build directory (default build/); a sanitizer build
#                     (san.cfg names address) preloads libasan first
#   --gens LIST       "prog:mode ..." (default: every mode of every generator)
#   --policies LIST   default "skip_temp skip_profiled always_update"
#   --jobs N          units at once (default 2)
#   --timeout S       per run (default 60)
#   --delay-every K   one unit in K at delay 200 (0: never; default 10)
#   --env LIST        "NAME=VALUE ..." set for every run, the baseline's too
#                     (for example CUDAEMU_KERNEL_DELAY_US=50)
#   --out DIR         results directory (default a new mktemp -d); it holds
#                     results.tsv (one line per run: prog mode seed delay
#                     policy status detail) and fail/<unit>/ for every unit
#                     that failed (outputs kept)
# Seeds FROM .. FROM+COUNT-1 for every prog:mode. The last line counts the
# runs and failures; exit status 0 if none failed, 1 otherwise, 2 for a bad
# command line.
#
# Example (round 22): tests/e2e/fuzz_sweep.sh --build build 1000 100 (every
# mode, 7,600 runs: about 30 min, 2 at a time on 2 shared cores; none failed).
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)

if [ "${1:-}" = --one ]; then
    # --one PROG MODE SEED DELAY: one unit (called by xargs below)
    prog=$2 mode=$3 seed=$4 delay=$5
    unit=$prog.$mode.$seed.$delay
    d=$FS_OUT/work/$unit
    rm -rf "$d" && mkdir -p "$d"
    bin=$FS_BUILD/tests/e2e/$prog
    res=()
    fail=0
    san_check() {  # $1: stderr file; prints a problem or nothing
        if grep -q "cudaemu: VIOLATION" "$1"; then echo "violation: $(grep -m1 'cudaemu: VIOLATION' "$1" | cut -c1-160)"
        elif grep -qE "ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer|ERROR: LeakSanitizer" "$1"; then
            echo "sanitizer: $(grep -m1 -E 'ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer|ERROR: LeakSanitizer' "$1" | cut -c1-160)"
        fi
    }
    # (grep, not python: an interpreter start costs more than a run)
    num() { local v; v=$(grep -o "\"$2\": *[0-9]*" "$1" 2>/dev/null | head -1); [ -n "$v" ] && echo "${v##*[ :]}" || echo "none"; }
    stats_v() { num "$1" violations; }
    read -r -a extra <<<"$FS_ENV"
    env CUDAEMU_KERNEL_DELAY_US="$delay" "${extra[@]}" CUDAEMU_STATS="$d/base.stats" LD_LIBRARY_PATH="$FS_BUILD/emu" \
        timeout -k 2 "$FS_TIMEOUT" "$bin" "$seed" "$mode" >"$d/base.out" 2>"$d/base.err" </dev/null
    rb=$?
    st=ok detail=""
    if [ $rb -eq 124 ] || [ $rb -eq 137 ]; then st=hang detail="baseline timed out"
    elif [ $rb -ne 0 ]; then st=base_bad detail="baseline exit $rb"
    elif ! grep -q "wrong: 0" "$d/base.out"; then st=base_bad detail="baseline checks failed"
    else
        p=$(san_check "$d/base.err"); [ -n "$p" ] && st=base_bad detail=$p
        v=$(stats_v "$d/base.stats"); [ "$st" = ok ] && [ "$v" != 0 ] && st=base_bad detail="baseline violations $v"
    fi
    res+=("$prog	$mode	$seed	$delay	base	$st	$detail")
    [ "$st" = ok ] || fail=1
    for pol in $FS_POLICIES; do
        pfx=$d/$pol
        env CUDAEMU_KERNEL_DELAY_US="$delay" "${extra[@]}" CUDAEMU_STATS="$pfx.stats" LD_LIBRARY_PATH="$FS_BUILD/emu" \
            LD_PRELOAD="$FS_PRELOAD" STABLEGRAPH_POLICY="$pol" STABLEGRAPH_PROFILE_STEPS=3 \
            STABLEGRAPH_MAX_GENERATIONS=8 STABLEGRAPH_COSTS="$SRC/tests/lib/costs-free-variants.tsv" \
            STABLEGRAPH_AUDIT_RECORDS=1 STABLEGRAPH_REPORT="$pfx.report.json" \
            timeout -k 2 "$FS_TIMEOUT" "$bin" "$seed" "$mode" >"$pfx.out" 2>"$pfx.err" </dev/null
        rl=$?
        st=ok detail=""
        if [ $rl -eq 124 ] || [ $rl -eq 137 ]; then st=hang detail="timed out after $FS_TIMEOUT s"
        elif [ $rl -ne "$rb" ]; then st=exit detail="exit $rl, baseline $rb"
        elif ! cmp -s "$d/base.out" "$pfx.out"; then
            st=differs detail=$(diff "$d/base.out" "$pfx.out" | grep -m2 '^[<>]' | tr '\n\t' '  ' | cut -c1-200)
        else
            p=$(san_check "$pfx.err"); [ -n "$p" ] && st=${p%%:*} detail=$p
            if [ "$st" = ok ]; then
                v=$(stats_v "$pfx.stats"); [ "$v" != 0 ] && st=violation detail="CUDAEMU_STATS violations $v"
            fi
            if [ "$st" = ok ]; then
                a=$(num "$pfx.report.json" audit_mismatches)
                [ "$a" != 0 ] && st=audit detail="audit mismatches: $a"
            fi
        fi
        res+=("$prog	$mode	$seed	$delay	$pol	$st	$detail")
        [ "$st" = ok ] || fail=1
    done
    printf '%s\n' "${res[@]}" >"$d/res.tsv"
    # one write per unit (short lines: atomic with O_APPEND)
    cat "$d/res.tsv" >>"$FS_OUT/results.tsv"
    if [ $fail = 1 ]; then
        mkdir -p "$FS_OUT/fail" && mv "$d" "$FS_OUT/fail/$unit"
    else
        rm -rf "$d"
    fi
    exit 0
fi

build=$SRC/build jobs=2 timeout=60 delay_every=10 out="" fenv=""
policies="skip_temp skip_profiled always_update"
gens="adv_recfuzz:capture adv_recfuzz:explicit adv_recfuzz:temps adv_recfuzz:rotate adv_recfuzz:threads
adv_recfuzz:wild adv_recfuzz:extra adv_recfuzz:threads_tl adv_recfuzz:unhooked adv_recfuzz_ptsz:capture
adv_recfuzz_ptsz:temps adv_recfuzz_ptsz:threads adv_recfuzz_ptsz:extra adv_recfuzz_ptsz:threads_tl
adv_recfuzz_ptsz:unhooked adv_memfuzz:sync adv_memfuzz:async
adv_memfuzz:capture adv_memfuzz:contexts adv_memfuzz:threads adv_memfuzz:mixed adv_memfuzz:events
adv_lifefuzz:one adv_lifefuzz:threads"
while [ $# -gt 2 ]; do
    case $1 in
    --build) build=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --gens) gens=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --delay-every) delay_every=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --env) fenv=$2; shift 2 ;;
    *) echo "fuzz_sweep: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ $# -ne 2 ] || ! [[ $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ && $jobs =~ ^[1-9][0-9]*$ && $delay_every =~ ^[0-9]+$ ]]; then
    echo "usage: $0 [--build DIR] [--gens LIST] [--policies LIST] [--jobs N] [--timeout S] [--delay-every K] [--env LIST] [--out DIR] FROM COUNT" >&2
    exit 2
fi
lib=$build/libstablegraph.so
[ -f "$lib" ] || { echo "fuzz_sweep: build $build first (make)" >&2; exit 2; }
for g in $gens; do
    [ -x "$build/tests/e2e/${g%%:*}" ] || { echo "fuzz_sweep: no $build/tests/e2e/${g%%:*}" >&2; exit 2; }
done
preload=$lib
if grep -qs address "$build/san.cfg"; then
    preload="$(gcc -print-file-name=libasan.so):$lib"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
fi
[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/fuzz_sweep.XXXXXX")
mkdir -p "$out"
export FS_BUILD=$build FS_PRELOAD=$preload FS_TIMEOUT=$timeout FS_POLICIES=$policies FS_OUT=$out FS_ENV=$fenv
t0=$(date +%s)
for seed in $(seq "$1" $(($1 + $2 - 1))); do
    gi=0
    for g in $gens; do
        # seed + gi: every prog:mode gets delay 200 for one seed in K, whatever
        # the number of prog:modes (a running count would give it to the same
        # ones each seed when that number and K share a factor)
        delay=0
        [ "$delay_every" -gt 0 ] && [ $(((seed + gi) % delay_every)) -eq 0 ] && delay=200
        gi=$((gi + 1))
        echo "${g%%:*} ${g#*:} $seed $delay"
    done
done | xargs -P "$jobs" -n 4 bash "$0" --one
t1=$(date +%s)
runs=$(wc -l <"$out/results.tsv" 2>/dev/null || echo 0)
bad=$(awk -F'\t' '$6 != "ok"' "$out/results.tsv" 2>/dev/null | wc -l)
awk -F'\t' '$6 != "ok" { print "FAIL " $0 }' "$out/results.tsv" 2>/dev/null
echo "fuzz_sweep: seeds $1..$(($1 + $2 - 1)), $(wc -w <<<"$gens") prog:modes, policies $policies, $(basename "$build"): $runs runs in $((t1 - t0)) s, $bad failed; results in $out"
[ "$bad" -eq 0 ]
