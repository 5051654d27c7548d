#!/usr/bin/env bash
# tests/gpu/run-all.sh: the real-GPU validation kit. On a machine with a GPU,
# within an 8-minute budget (each stage has its own cap and every command a
# timeout), it:
#   1. builds (make), or uses a pre-built build/ (if build/libstablegraph.so
#      exists it does not rebuild; only the kit's programs are added with
#      nvcc if missing);
#   1b. asks the driver the facts the emulator answers with readings
#      (tests/gpu/facts, at most 30 s): without the library, through the
#      library (skip_temp; it must print the same lines) and on the emulated
#      driver when the build has it (each difference is an emulator reading
#      to fix, docs/emulator.md);
#   2. runs every workload without the library and under each policy
#      (through scripts/stablegraph-run): same checksum everywhere, equal to
#      the emulated driver's and, on a small shape, to the reference model;
#   3. runs tests/gpu/rt_graphs (CUDA runtime: stream capture,
#      cudaGraphExecUpdate, a temporary per step; checked against a host
#      recomputation), with cudaMalloc and cudaMallocAsync temporaries, same
#      comparison;
#   4. measures with CUDA events (tests/gpu/step_timer) the per-step time of
#      the recapture_temps and rotating_inputs loops at 256 and 4096 nodes,
#      without the library, under always_update and under skip_profiled;
#      then (tests/gpu/calibrate, at most 150 s) the per-call costs the
#      bench's cost table assumes (updates identical / one node / every node
#      changed, set params, node queries, instantiation and launch, 16..4096
#      nodes; the VMM calls), written as a table of the same format:
#      $OUT/costs-measured.tsv (or $BUILD/gpu/costs-measured.tsv), which
#      replaces core/costs.tsv with one cp;
#   5. runs the test suite's tests that make sense on the real driver (rule in
#      kitlib.sh: kit_suite_select; emulator-only ones are listed as skipped);
#   6. runs tests/gpu/torch_graph.py and tests/gpu/jax_step.py (when torch /
#      jax import and see the GPU; otherwise one SKIP line each), same
#      comparison.
# It writes ONE summary file: $OUT/gpu-summary.txt if OUT is set, else
# $BUILD/gpu/summary.txt. Each program's output is kept in $BUILD/gpu/logs/
# or the --logs directory, emptied first (and, when OUT is set, archived as
# $OUT/gpu-logs.tar.gz).
# Without a GPU it says so in the summary and exits 0 without running
# anything. Exit status: 1 if any check FAILED (skips do not count), else 0.
#
# Usage: tests/gpu/run-all.sh [--summary FILE] [--logs DIR] [--budget SECONDS]
#                             [--timing-nodes "256 4096"] [--emulator]
#   --logs DIR   the programs' logs go to DIR instead of $BUILD/gpu/logs
#                (the test suite runs the kit on a shared build directory
#                and keeps its writes out of it)
#   --emulator   a rehearsal of stages 1b-4 on the emulated driver (no GPU
#                needed; the summary says in its header and its timing
#                table that nothing in it is a GPU result)
# Environment: BUILD (default build), CUDA_HOME, OUT.
set -u
KIT_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$KIT_SRC/tests/gpu/kitlib.sh"
. "$KIT_SRC/tests/lib/verdict.sh"
cd "$KIT_SRC" || exit 1

BUILD=${BUILD:-build}
KIT_BUILD=$(mkdir -p "$BUILD" && cd "$BUILD" && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
budget=480 mode=gpu timing_nodes="256 4096" summary=""
logs=$KIT_BUILD/gpu/logs
[ -n "${OUT:-}" ] && summary=$OUT/gpu-summary.txt
while [ $# -gt 0 ]; do
    case "$1" in
    --summary) summary=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --timing-nodes) timing_nodes=$2; shift 2 ;;
    --emulator) mode=emulator; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run-all.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
summary=${summary:-$KIT_BUILD/gpu/summary.txt}
rm -rf "$logs"   # this run's logs only (a carried build/ may hold older ones)
mkdir -p "$(dirname "$summary")" "$logs"
kit_budget_start "$budget"
started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
KIT_LIB=$KIT_BUILD/libstablegraph.so
TIMING=() CALIBRATION=() FACTS=()

# ------------------------------------------------------------------ summary
write_summary() {
    local what=$1
    {
        echo "stablegraph real-GPU kit summary"
        echo "date:    $started (took $(( budget - $(kit_left) ))s of a ${budget}s budget)"
        echo "host:    $(uname -n), $(uname -sr)"
        echo "gpu:     ${KIT_GPU_NAME:-none}"
        echo "driver:  ${KIT_GPU_DRIVER:-none}"
        echo "decided: $KIT_GPU_WHY"
        echo "mode:    $what"
        echo "commit:  $(git -C "$KIT_SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)$(
            [ -n "$(git -C "$KIT_SRC" status --porcelain 2>/dev/null | head -n 1)" ] && echo ' (with local changes)')"
        echo
        echo "checks:"
        if [ ${#KIT_RESULTS[@]} -gt 0 ]; then printf '%s\n' "${KIT_RESULTS[@]}"; fi
        echo
        if [ ${#TIMING[@]} -gt 0 ]; then printf '%s\n' "${TIMING[@]}"; else echo "timing: not measured"; fi
        echo
        if [ ${#CALIBRATION[@]} -gt 0 ]; then printf '%s\n' "${CALIBRATION[@]}"; else echo "calibration: not measured"; fi
        echo
        if [ ${#FACTS[@]} -gt 0 ]; then printf '%s\n' "${FACTS[@]}"; else echo "facts: not asked"; fi
        echo
        echo "result: $(kit_count PASS) passed, $(kit_count FAIL) failed, $(kit_count SKIP) skipped"
        echo "logs:   $logs${OUT:+ (also \$OUT/gpu-logs.tar.gz)}"
    } >"$summary"
    # Under OUT, one archive of the logs beside the summary (few files come back from \$OUT).
    [ -z "${OUT:-}" ] || tar -czf "$OUT/gpu-logs.tar.gz" -C "$(dirname "$logs")" "$(basename "$logs")" 2>/dev/null
    echo "summary: $summary"
}

# ------------------------------------------------------------------ 0. the driver
if [ "$mode" = emulator ]; then
    KIT_DRIVER_PATH=$KIT_BUILD/emu
    KIT_GPU_WHY="--emulator: rehearsal on $KIT_BUILD/emu/libcuda.so.1"
    mode_line="REHEARSAL on the emulated driver: NOTHING IN THIS FILE IS A GPU RESULT"
    if [ ! -f "$KIT_BUILD/emu/libcuda.so.1" ]; then
        kit_result FAIL driver "--emulator: $KIT_BUILD/emu/libcuda.so.1 not built (run make first)"
        write_summary "$mode_line"; exit 1
    fi
else
    KIT_DRIVER_PATH=$(kit_strip_emulator "${LD_LIBRARY_PATH:-}")
    ignored=""
    [ "$KIT_DRIVER_PATH" = "${LD_LIBRARY_PATH:-}" ] || ignored=" (LD_LIBRARY_PATH's emulated driver ignored)"
    if ! kit_detect_gpu; then
        KIT_GPU_WHY+=$ignored
        kit_result SKIP "all checks" "no GPU on this machine"
        write_summary "no GPU: nothing was run"
        echo "run-all.sh: no GPU ($KIT_GPU_WHY): nothing run"
        exit 0
    fi
    KIT_GPU_WHY+=$ignored
    mode_line="real GPU"
fi
echo "run-all.sh: $mode_line; ${KIT_GPU_NAME:+$KIT_GPU_NAME, }$KIT_GPU_WHY"

# ------------------------------------------------------------------ 1. build
# stage_log NAME: a log file for a stage's own commands.
stage_log() { echo "$logs/$1.log"; }
have_kit_progs() {
    [ -x "$KIT_BUILD/gpu/rt_graphs" ] && [ -x "$KIT_BUILD/gpu/step_timer" ] && [ -x "$KIT_BUILD/gpu/calibrate" ] &&
        [ -x "$KIT_BUILD/gpu/facts" ]
}
build_kit_progs() {
    if have_kit_progs; then return 0; fi
    # gpu.mk works on its own, so this needs neither uthash nor the top Makefile;
    # without nvcc it still builds calibrate and facts (plain C).
    if kit_timeout 180 make -f tests/gpu/gpu.mk BUILD="$KIT_BUILD" CUDA_HOME="$CUDA_HOME" NVCC="$NVCC" \
            gpu-kit >"$(stage_log build-kit)" 2>&1; then
        if have_kit_progs; then
            kit_result PASS "build: kit programs" "rt_graphs and step_timer built with $NVCC, calibrate and facts with cc"
        else
            kit_result SKIP "build: kit programs" "$NVCC not found and $KIT_BUILD/gpu/ not pre-built: rt_graphs and step_timer missing"
            return 1
        fi
    else
        kit_result FAIL "build: kit programs" "make -f tests/gpu/gpu.mk gpu-kit failed: $(tail -n 1 "$(stage_log build-kit)")"
        return 1
    fi
}

built=1
if [ -f "$KIT_LIB" ]; then
    kit_result SKIP "build" "pre-built $KIT_BUILD used as it is (libstablegraph.so exists; not rebuilt)"
    build_kit_progs
else
    missing=""
    for tool in make cc python3; do command -v "$tool" >/dev/null || missing+=" $tool"; done
    [ -f "$CUDA_HOME/include/cuda.h" ] || missing+=" cuda.h (CUDA toolkit headers; set CUDA_HOME)"
    [ -f /usr/include/uthash.h ] || missing+=" uthash.h (Debian package uthash-dev)"
    if [ -n "$missing" ]; then
        kit_result FAIL "build" "cannot build here, missing:$missing. This machine may have no package registry: build on a machine that has them (make BUILD=build) and carry build/ over; run-all.sh then uses it without rebuilding"
        built=0
    else
        # The top Makefile may already include gpu.mk; add it only if not.
        mkargs=(-j"$(nproc)" BUILD="$KIT_BUILD" CUDA_HOME="$CUDA_HOME")
        grep -q 'tests/gpu/gpu.mk' Makefile || mkargs=(-f Makefile -f tests/gpu/gpu.mk "${mkargs[@]}")
        if kit_timeout 240 make "${mkargs[@]}" >"$(stage_log build)" 2>&1; then
            kit_result PASS "build" "make ${mkargs[*]}"
            have_kit_progs || kit_result SKIP "build: kit programs" "$NVCC not found: rt_graphs and step_timer not built"
        else
            kit_result FAIL "build" "make failed (log $(stage_log build)): $(grep -m1 -E 'error|Error' "$(stage_log build)")"
            built=0
        fi
    fi
fi
if [ "$built" = 0 ]; then
    write_summary "$mode_line"; exit 1
fi
if [ "$mode" = gpu ] && [ ! -f "$KIT_BUILD/workloads/wl_kernels.fatbin" ]; then
    kit_result SKIP "workloads" "$KIT_BUILD/workloads/wl_kernels.fatbin missing (nvcc absent when built): the workloads cannot run on a GPU"
    no_fatbin=1
else
    no_fatbin=0
fi

# ------------------------------------------------------------------ 1b. driver facts
# tests/gpu/facts asks the driver what the emulator answers with readings
# (docs/emulator.md): on this driver without the library, through the library
# (policy skip_temp: it must not change a line) and on the emulated driver
# when the build has it (each difference is an emulator reading to fix).
# At most 10 s a run, 30 s in all.
dir=$logs/facts; mkdir -p "$dir"
FACTS=()
facts_note=""
[ "$mode" = emulator ] && facts_note="rehearsal, the emulated driver stands for the GPU: "
if [ ! -x "$KIT_BUILD/gpu/facts" ]; then
    kit_result SKIP facts "$KIT_BUILD/gpu/facts not built"
else
    kit_run_config nolib "$dir" facts "$(kit_cap 10)" "$KIT_BUILD/gpu/facts"
    kit_run_config skip_temp "$dir" facts "$(kit_cap 10)" "$KIT_BUILD/gpu/facts"
    if [ -f "$KIT_BUILD/emu/libcuda.so.1" ]; then
        KIT_DRIVER_PATH=$KIT_BUILD/emu kit_run_config nolib "$dir" facts-emulator "$(kit_cap 10)" "$KIT_BUILD/gpu/facts"
    fi
    if grep -qx budget "$dir"/facts*.rc; then
        kit_result SKIP facts "time budget spent before every run was done"
    else
        verdict=$(kit_facts_compare library "$dir/facts.nolib.out" "$dir/facts.skip_temp.out")
        kit_result "${verdict%% *}" "facts: library transparent" "$facts_note${verdict#* } (logs $dir)"
        if [ -f "$dir/facts-emulator.nolib.out" ]; then
            verdict=$(kit_facts_compare emulator "$dir/facts.nolib.out" "$dir/facts-emulator.nolib.out")
            kit_result "${verdict%% *}" "facts: emulator readings" "$facts_note${verdict#* }"
        else
            kit_result SKIP "facts: emulator readings" "$KIT_BUILD/emu/libcuda.so.1 not in the build"
        fi
    fi
    if [ "$mode" = emulator ]; then
        FACTS=("facts: EMULATED DRIVER (a rehearsal), NOT the GPU's answers")
    else
        FACTS=("facts: $KIT_GPU_NAME, driver $KIT_GPU_DRIVER")
    fi
    FACTS+=("the driver's answers without the library (tests/gpu/facts; all runs: $dir)")
    while IFS= read -r line; do FACTS+=("$line"); done < <(grep -E '^(fact [A-Za-z0-9_]+: |facts: )' "$dir/facts.nolib.out")
fi

# ------------------------------------------------------------------ 2. workloads
WL_NAMES="recapture_temps rotating_inputs fresh_inputs slices scalar_changes topology_changes"
dir=$logs/workloads; mkdir -p "$dir"
if [ "$no_fatbin" = 0 ]; then
    for w in $WL_NAMES; do
        prog=$KIT_BUILD/workloads/$w
        if [ ! -x "$prog" ]; then kit_result FAIL "workload-$w" "$prog not built"; continue; fi
        kit_run_matrix "$dir" "workload-$w" 60 "$prog" || continue
        # The same binary on the emulated driver, and the reference model on a small shape.
        gpu_sum=$(kit_checksum "$dir/workload-$w.nolib.out")
        if [ "$mode" = gpu ] && [ -f "$KIT_BUILD/emu/libcuda.so.1" ]; then
            emu_sum=$(LD_LIBRARY_PATH=$KIT_BUILD/emu kit_timeout 60 "$prog" 2>&1 | sed -n 's/^checksum: //p')
            if [ "$emu_sum" = "$gpu_sum" ]; then kit_result PASS "workload-$w: GPU = emulator" "checksum $gpu_sum on both"
            else kit_result FAIL "workload-$w: GPU = emulator" "GPU $gpu_sum, emulated driver ${emu_sum:-none}"; fi
        fi
        kit_run_config nolib "$dir" "small-$w" "$(kit_cap 30)" "$prog" --steps 5 --nodes 8 --elems 64
        got=$(kit_checksum "$dir/small-$w.nolib.out")
        if [ "$(cat "$dir/small-$w.nolib.rc")" = budget ]; then
            kit_result SKIP "workload-$w: reference model" "time budget spent"; continue
        fi
        want=$(kit_timeout 60 python3 tests/workloads/wl_reference.py "$w" 5 8 64 2>&1)
        if [ -n "$got" ] && [ "$got" = "$want" ]; then kit_result PASS "workload-$w: reference model" "steps 5 nodes 8 elems 64: $got"
        else kit_result FAIL "workload-$w: reference model" "steps 5 nodes 8 elems 64: program ${got:-none}, model ${want:-none}"; fi
    done
fi

# ------------------------------------------------------------------ 3. CUDA runtime program
dir=$logs/runtime; mkdir -p "$dir"
if [ ! -x "$KIT_BUILD/gpu/rt_graphs" ]; then
    kit_result SKIP "rt_graphs" "not built (no nvcc)"
else
    # On the emulated driver its kernels come from rt_graphs_kernels.so, by mangled name.
    [ "$mode" = emulator ] && export CUDAEMU_MODULES=$KIT_BUILD/gpu/rt_graphs_kernels.so
    kit_run_matrix "$dir" rt_graphs-cudaMalloc 60 "$KIT_BUILD/gpu/rt_graphs"
    kit_run_matrix "$dir" rt_graphs-cudaMallocAsync 60 "$KIT_BUILD/gpu/rt_graphs" --async-alloc
fi

# ------------------------------------------------------------------ 4. per-step timing
dir=$logs/timing; mkdir -p "$dir"
TIMING_CONFIGS="nolib always_update skip_profiled"
# timing_field FILE KEY: the median of a step_ms_* line.
timing_field() { sed -n "s/^$2: *median=\([0-9.]*\) .*/\1/p" "$1"; }
if [ ! -x "$KIT_BUILD/gpu/step_timer" ]; then
    kit_result SKIP timing "step_timer not built (no nvcc)"
elif [ "$no_fatbin" = 1 ]; then
    kit_result SKIP timing "no wl_kernels.fatbin"
else
    if [ "$mode" = emulator ]; then
        label="EMULATED DRIVER: these are CPU times of the emulation, NOT GPU times"
    else
        label="GPU: $KIT_GPU_NAME, driver $KIT_GPU_DRIVER"
    fi
    TIMING=("timing: per-step time of the recapture_temps and rotating_inputs loops (tests/gpu/step_timer: the"
            "workloads' own code; 30 steps, 1024 words per buffer), measured with CUDA events: cuEventRecord on the"
            "workload's stream at every step boundary (the stream is idle there), cuEventElapsedTime between"
            "consecutive ones = host driver calls + graph execution; median over steps 7-30. host_ms: CLOCK_MONOTONIC"
            "at the same boundaries. ratio: event time / event time without the library."
            "$label"
            "$(printf '%-16s %6s  %-14s %10s %10s %7s  %s' workload nodes config event_ms host_ms ratio checksum)")
    for w in recapture_temps rotating_inputs; do
        for n in $timing_nodes; do
            name="timing-$w-$n"
            base_ms="" sums=""
            for cfg in $TIMING_CONFIGS; do
                kit_run_config "$cfg" "$dir" "$name" "$(kit_cap 90)" "$KIT_BUILD/gpu/step_timer" "$w" --steps 30 --nodes "$n"
                f="$dir/$name.$cfg.out"
                ev=$(timing_field "$f" step_ms_events) host=$(timing_field "$f" step_ms_host) sum=$(kit_checksum "$f")
                [ "$cfg" = nolib ] && base_ms=$ev
                ratio=$(awk -v a="$ev" -v b="$base_ms" 'BEGIN { if (a != "" && b > 0) printf "%.3f", a / b; else print "-" }')
                if [ "$(cat "$dir/$name.$cfg.rc")" != 0 ] || [ -z "$ev" ]; then
                    TIMING+=("$(printf '%-16s %6s  %-14s %s' "$w" "$n" "$cfg" "not measured: exit $(cat "$dir/$name.$cfg.rc"), $(tail -n 1 "$f")")")
                else
                    TIMING+=("$(printf '%-16s %6s  %-14s %10s %10s %7s  %s' "$w" "$n" "$cfg" "$ev" "$host" "$ratio" "$sum")")
                fi
                sums+=" $cfg=${sum:-none}"
            done
            # The timed runs must also compute the same result in every configuration.
            if grep -qx budget "$dir/$name".*.rc; then
                kit_result SKIP "$name" "time budget spent before every run was done"
            elif [ "$(tr ' ' '\n' <<<"$sums" | sed -n 's/.*=//p' | sort -u | wc -l)" = 1 ] && [[ $sums != *none* ]]; then
                kit_result PASS "$name" "measured; same checksum$sums"
            else
                kit_result FAIL "$name" "runs failed or checksums differ:$sums"
            fi
        done
    done
fi

# ------------------------------------------------------------------ 4b. per-call costs (the bench's cost table)
# tests/gpu/calibrate measures, on this driver, the figures core/costs.tsv
# assumes; tests/bench/costmodel.py writes them as a table of the same format.
dir=$logs/calibration; mkdir -p "$dir"
COSTS_OUT=${OUT:+$OUT/costs-measured.tsv}
COSTS_OUT=${COSTS_OUT:-$KIT_BUILD/gpu/costs-measured.tsv}
CALIBRATION=()
if [ ! -x "$KIT_BUILD/gpu/calibrate" ]; then
    kit_result SKIP calibration "$KIT_BUILD/gpu/calibrate not built"
elif [ "$no_fatbin" = 1 ]; then
    kit_result SKIP calibration "no wl_kernels.fatbin"
else
    secs=$(kit_cap 150)
    cal_sizes="16 64 256 1024 4096" cal_reps=20
    [ "$mode" = emulator ] && cal_sizes="16 64" cal_reps=4
    if [ "$secs" -le 30 ]; then
        kit_result SKIP calibration "time budget spent"
    else
        env -u LD_PRELOAD LD_LIBRARY_PATH="$KIT_DRIVER_PATH" timeout -k 5 "$secs" "$KIT_BUILD/gpu/calibrate" \
            --sizes "$cal_sizes" --reps "$cal_reps" --budget $((secs - 30)) >"$dir/calibrate.txt" 2>&1
        rc=$?
        if [ "$rc" != 0 ]; then
            kit_result FAIL calibration "calibrate exited $rc: $(tail -n 1 "$dir/calibrate.txt")"
        elif python3 "$KIT_SRC/tests/bench/costmodel.py" calibrated "$dir/calibrate.txt" \
                --out "$COSTS_OUT" 2>"$dir/convert.err"; then
            ended=$(sed -n 's/^calibrate: \(done\|budget .*\)$/\1/p' "$dir/calibrate.txt" | head -n 1)
            kit_result PASS calibration "$(grep -c '^measure ' "$dir/calibrate.txt") figures (${ended:-?}); table: $COSTS_OUT; use it with: cp $COSTS_OUT core/costs.tsv (or make bench BENCH_ARGS='--costs $COSTS_OUT')"
        else
            kit_result FAIL calibration "tests/bench/costmodel.py calibrated: $(cat "$dir/convert.err")"
        fi
        if [ "$mode" = emulator ]; then
            CALIBRATION=("calibration: EMULATED DRIVER: CPU times of the emulation, NOT GPU figures")
        else
            CALIBRATION=("calibration: $KIT_GPU_NAME, driver $KIT_GPU_DRIVER")
        fi
        CALIBRATION+=("host time per call, us (tests/gpu/calibrate; the table: $COSTS_OUT)"
                      "$(printf '%-20s %6s %10s %10s %5s' what nodes median min reps)")
        while read -r _ what n med mn reps; do
            CALIBRATION+=("$(printf '%-20s %6s %10s %10s %5s' "$what" "$n" "$med" "$mn" "$reps")")
        done < <(grep '^measure ' "$dir/calibrate.txt")
    fi
fi

# ------------------------------------------------------------------ 5. the test suite on the real driver
if [ "$mode" = emulator ]; then
    kit_result SKIP "test suite" "--emulator: make test runs it on the emulated driver"
else
    kit_suite_select >"$logs/suite-selection.txt"
    # Each test runs as tests/run.sh runs it (same environment), except that
    # EMU_LIB and LD_LIBRARY_PATH name an empty directory, so the loader finds
    # the system's libcuda.so.1. (Not through run.sh's FILTER: a substring
    # would also pick tests whose names start the same.)
    realdrv=$KIT_BUILD/gpu/real-driver
    mkdir -p "$realdrv"
    while read -r kind t; do
        [ "$kind" = RUN ] || continue
        secs=$(kit_cap 60)
        if [ "$secs" -le 0 ]; then kit_result SKIP "suite $t" "time budget exhausted"; continue; fi
        log="$logs/suite-$(tr / _ <<<"$t").log"
        if [[ $t == *.sh ]]; then set -- bash "$KIT_SRC/$t"; else set -- "$KIT_BUILD/$t"; fi
        SRC=$KIT_SRC BUILD=$KIT_BUILD EMU_LIB=$realdrv LD_LIBRARY_PATH=$realdrv timeout -k 5 "$secs" "$@" >"$log" 2>&1
        verdict "$log" $?   # as tests/run.sh judges (tests/lib/verdict.sh)
        case $v_result in
        PASS) kit_result PASS "suite $t" "real driver: $v_pass passed, $v_skip skipped" ;;
        SKIP) kit_result SKIP "suite $t" "real driver: all $v_skip cases skipped: $(grep -m1 -i '# skip' "$log")" ;;
        *) kit_result FAIL "suite $t" "real driver: $v_pass passed, $v_fail failed: $(grep -m1 '^not ok' "$log") (log $log)" ;;
        esac
    done <"$logs/suite-selection.txt"
    kit_result SKIP "suite: emulator-only tests" "$(grep -c '^EMU' "$logs/suite-selection.txt") not run on the real driver (list with reasons: $logs/suite-selection.txt)"
fi

# ------------------------------------------------------------------ 6. PyTorch and JAX
dir=$logs/python; mkdir -p "$dir"
for script in torch_graph jax_step; do
    if [ "$mode" = emulator ]; then
        kit_result SKIP "$script" "--emulator: frameworks are not run on the emulated driver"
        continue
    fi
    kit_run_matrix "$dir" "$script" 120 env XLA_PYTHON_CLIENT_PREALLOCATE=false CUBLAS_WORKSPACE_CONFIG=:4096:8 \
        python3 "tests/gpu/$script.py"
done

write_summary "$mode_line"
[ "$(kit_count FAIL)" = 0 ]
