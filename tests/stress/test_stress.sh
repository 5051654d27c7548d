#!/usr/bin/env bash
# tests/stress/test_stress.sh: the concurrency stress program (stress.c) run
# without the library (twice: it must be deterministic) and under every
# policy: same exit status, same per-thread and total checksums, no
# violation, a report written, and no sanitizer report (under SAN=thread this
# is the ThreadSanitizer run; under SAN=address,undefined the ASan/UBSan one).
#
# In `make test`: a small configuration (8 own-exec threads + 2 sharing one
# exec, 40 iterations), once as fast as possible and once with kernels
# delayed so that work stays in flight. STRESS=big: 16 + 4 threads, 2000
# iterations, and the delayed run with 400. The "threads x operations"
# figures are printed as diagnostics (# lines) for the README.
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
PROG=$BUILD/tests/stress/stress
. "$SRC/tests/lib/policies.sh"
LIMIT=${STRESS_TIMEOUT:-240}

if [ "${STRESS:-}" = big ]; then
    CONFIGS=("fast|0|--threads 16 --shared 4 --iters 2000 --nodes 8"
             "delayed|20|--threads 16 --shared 4 --iters 400 --nodes 8")
else
    CONFIGS=("fast|0|--threads 8 --shared 2 --iters 40"
             "delayed|50|--threads 8 --shared 2 --iters 12")
fi

if [ ! -x "$PROG" ]; then
    not_ok "stress program built ($PROG: add tests/stress/stress.mk to the Makefile)"
    done_testing; exit
fi

# go NAME DELAY_US [VAR=VALUE...] -- ARGS...: runs the program; output in
# $TMP/NAME.{out,err,rc,stats.json}.
go() {
    local name=$1 delay=$2; shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env LD_LIBRARY_PATH="$EMU_LIB" CUDAEMU_KERNEL_DELAY_US="$delay" \
        CUDAEMU_STATS="$TMP/$name.stats.json" "${envs[@]}" \
        timeout -k 5 "$LIMIT" "$PROG" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}

# clean NAME: no violation and no sanitizer report.
clean() {
    check_eq "$1: no violation" "$(json_get "$TMP/$1.stats.json" violations)" 0
    local san
    san=$(grep -m1 -E 'WARNING: ThreadSanitizer|ERROR: (Address|Leak|Thread)Sanitizer|runtime error:' "$TMP/$1.err")
    check_eq "$1: no sanitizer report" "$san" ""
}

for cfg in "${CONFIGS[@]}"; do
    IFS='|' read -r label delay args <<<"$cfg"
    read -ra argv <<<"$args"
    base=$label.base
    go "$base" "$delay" -- "${argv[@]}"
    check_eq "$label: runs without the library ($args)" "$(cat "$TMP/$base.rc")" 0
    [ "$(cat "$TMP/$base.rc")" = 0 ] || sed 's/^/#   /' "$TMP/$base.err" | head -5
    threads=$(( $(sed -n 's/.*--threads \([0-9]*\).*/\1/p' <<<"$args") + $(sed -n 's/.*--shared \([0-9]*\).*/\1/p' <<<"$args") ))
    check_eq "$label: without the library: a well-formed checksum per thread ($threads)" \
        "$(grep -cE '^thread [0-9]+ \((own|shared) exec\): [0-9a-f]{16}$' "$TMP/$base.out")" "$threads"
    check "$label: without the library: a well-formed total checksum" test -n "$(sum_in "$TMP/$base.out")"
    clean "$base"
    go "$base.again" "$delay" -- "${argv[@]}"
    check "$label: deterministic without the library" cmp -s "$TMP/$base.out" "$TMP/$base.again.out"
    diag "$label: $(grep '^stress:' "$TMP/$base.out")"
    diag "$label: $(grep '^operations:' "$TMP/$base.out")"
    for p in $POLICIES; do
        t=$label.$p
        go "$t" "$delay" LD_PRELOAD="$LIB" STABLEGRAPH_POLICY="$p" \
            STABLEGRAPH_REPORT="$TMP/$t.report.json" -- "${argv[@]}"
        check_eq "$t: exit status" "$(cat "$TMP/$t.rc")" 0
        [ "$(cat "$TMP/$t.rc")" = 0 ] || sed 's/^/#   /' "$TMP/$t.err" | head -5
        if cmp -s "$TMP/$base.out" "$TMP/$t.out"; then
            ok "$t: same checksums (every thread) and operation counts"
        else
            not_ok "$t: same checksums (every thread) and operation counts"
            diff "$TMP/$base.out" "$TMP/$t.out" | head -6 | sed 's/^/#   /'
        fi
        clean "$t"
        check "$t: report written" [ "$(json_get "$TMP/$t.report.json" version)" = 1 ]
        case $p in
        skip_*)
            skipped=$(json_get "$TMP/$t.report.json" totals.updates_skipped)
            diag "$t: updates skipped: $skipped of $(json_get "$TMP/$t.report.json" totals.updates_seen)"
            check "$t: some identical updates were skipped (the skip path ran concurrently)" \
                [ "${skipped:-0}" -gt 0 ] ;;
        esac
    done
done
done_testing
