#!/usr/bin/env bash
# tests/gpu/test_gpu_kit.sh: the real-GPU kit's parts that need no GPU.
# - the kit's CUDA programs were compiled (when nvcc exists), for sm_80,
#   sm_90 and sm_90 PTX;
# - on the emulated driver: rt_graphs (its kernels from rt_graphs_kernels.so
#   through CUDAEMU_MODULES) runs and matches its host recomputation;
#   step_timer prints the same checksum as the workload it times, and its
#   event timings;
# - calibrate (the per-call costs of the bench's cost table) runs on the
#   emulated driver: every figure at every size, the updates it times change
#   exactly 0, 1 and every node (as the emulated driver counts them), and its
#   output converts into a cost table that tests/bench/costmodel.py reads;
# - facts (the driver's answers to what the emulator answers with readings)
#   runs on the emulated driver with its line format and count, prints the
#   same lines twice, gives the emulator's documented answers, and prints
#   the same lines through the library (skip_temp): the library's
#   transparency on these points, on the emulator; the facts comparison
#   passes equal runs and fails (naming the fact) on any difference;
# - run-all.sh without a GPU exits 0 with a summary saying so (skipped on a
#   machine that has a GPU: there run-all.sh would run the whole kit);
# - the policy loop covers no library plus all four policies (the same list
#   as core/config.h and scripts/stablegraph-run) and sets them right;
# - the comparison passes equal outputs and fails every kind of mismatch;
# - run-all.sh --emulator (a rehearsal of the GPU stages on the emulated
#   driver) labels itself and its timings as not GPU results, passes what
#   is right, and fails (exit 1) when a program's result changes under the
#   library.
. "$(dirname "$0")/../lib.sh"
. "$SRC/tests/gpu/kitlib.sh"
KIT_SRC=$SRC KIT_BUILD=$BUILD KIT_LIB=$BUILD/libstablegraph.so
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
RUNALL=$SRC/tests/gpu/run-all.sh
# Not in a sanitizer build: this tests the kit's scripts and programs (nvcc,
# not instrumented); the library's paths they drive (the CUDA runtime, the
# workloads under every policy) run instrumented in test_runtime.sh and
# test_skip_*.sh.
normal_build_only "the real-GPU kit" "the kit's programs are not instrumented"

# ------------------------------------------------------------------ compiled
# archs FILE: the code kinds of every fatbin embedded in FILE ("ptx_90 sm_80 ...").
archs() {
    python3 - "$1" <<'PY'
import struct, sys
d, out, at = open(sys.argv[1], 'rb').read(), set(), 0
while True:
    at = d.find(struct.pack('<I', 0xBA55ED50), at)
    if at < 0: break
    _, _, hsz, size = struct.unpack_from('<IHHQ', d, at)
    off = at + hsz
    while off < at + hsz + size:
        kind, _, ehsz, psz = struct.unpack_from('<HHIQ', d, off)
        out.add({1: 'ptx', 2: 'sm'}.get(kind, '?') + '_%d' % struct.unpack_from('<I', d, off + 28)[0])
        off += ehsz + psz
    at += 4
print(' '.join(sorted(out)))
PY
}
have_nvcc=0; [ -x "$NVCC" ] && have_nvcc=1
if [ "$have_nvcc" = 1 ]; then
    for p in rt_graphs step_timer; do
        check "nvcc present: $p built (is tests/gpu/gpu.mk included by the Makefile?)" test -x "$BUILD/gpu/$p"
    done
    check_eq "rt_graphs holds sm_80 and sm_90 code and sm_90 PTX" "$(archs "$BUILD/gpu/rt_graphs")" "ptx_90 sm_80 sm_90"
else
    ok "# SKIP no nvcc: the kit's .cu files are not compiled here"
fi

check "calibrate built (plain C, with or without nvcc)" test -x "$BUILD/gpu/calibrate"

# ------------------------------------------------------------------ on the emulated driver
if [ -x "$BUILD/gpu/rt_graphs" ]; then
    out=$(CUDAEMU_MODULES=$BUILD/gpu/rt_graphs_kernels.so emu "$BUILD/gpu/rt_graphs" \
        --steps 3 --nodes 4 --elems 256 2>&1); rc=$?
    check "rt_graphs on the emulation: ran, matched the host, and printed a checksum" \
        test "$rc" = 0 -a -n "$(sed -n 's/^checksum: //p' <<<"$out")" -a -n "$(grep '^reference: match' <<<"$out")"
    diag "rt_graphs says: $(head -n 1 <<<"$out")"
    out=$(emu "$BUILD/gpu/rt_graphs" --steps 0 2>&1)
    check_eq "rt_graphs: a bad option exits 2" "$?" 2
fi
if [ -x "$BUILD/gpu/step_timer" ]; then
    for w in recapture_temps rotating_inputs; do
        t=$(emu "$BUILD/gpu/step_timer" "$w" --steps 12 --nodes 9 2>&1)
        check_sum "step_timer $w: same checksum as the workload" "$(kit_checksum <(echo "$t"))" \
            "$(kit_checksum <(emu "$BUILD/workloads/$w" --steps 12 --nodes 9))"
        check "step_timer $w: event and host medians over steps 3-12" \
            grep -qE '^step_ms_events: median=[0-9.]+ .* steps=10 ' <<<"$t"
        check "step_timer $w: says it ran on the emulated driver" grep -q 'driver=emulated' <<<"$t"
    done
    emu "$BUILD/gpu/step_timer" bogus >/dev/null 2>&1
    check_eq "step_timer: an unknown loop exits 2" "$?" 2
fi

# ------------------------------------------------------------------ calibrate
# Sizes 4 and 16, 4 timed repetitions after 2 warm-up calls: per size 6
# identical updates (0 nodes changed), 6 changing one node, 6 changing all;
# 6 set-params calls leaving the node, 6 changing it.
if [ -x "$BUILD/gpu/calibrate" ]; then
    CUDAEMU_STATS=$TMP/cal.json emu "$BUILD/gpu/calibrate" --sizes "4 16" --reps 4 >"$TMP/cal.txt" 2>&1
    check_eq "calibrate on the emulated driver: exits 0" "$?" 0
    check "calibrate: header names the device, driver and granularity" \
        grep -qE '^calibrate: device="cudaemu[^"]*" driver=[0-9]+\.[0-9]+ date=[0-9T:Z-]+ granularity=[0-9]+ emulated=1 ' "$TMP/cal.txt"
    check_eq "calibrate: 11 figures per size and 7 VMM calls, 4 repetitions each" \
        "$(awk '/^measure / && $6 == 4 { n++ } END { print n }' "$TMP/cal.txt")" 29
    check "calibrate: finished within its budget" grep -qx 'calibrate: done' "$TMP/cal.txt"
    out=$(python3 - "$TMP/cal.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n, c = d["nodes"], d["calls"]
u, s = n["cuGraphExecUpdate_v2"], n["cuGraphExecKernelNodeSetParams_v2"]
print(c["cuGraphExecUpdate_v2"], u["nodes"], u["changed"])
print(c["cuGraphExecKernelNodeSetParams_v2"], s["nodes"], s["changed"])
print(n["cuGraphInstantiateWithFlags"]["nodes"], n["cuGraphLaunch"]["nodes"], d["violations"])
PY
)
    check_eq "calibrate: updates: 2 x 18 calls, 3 x 6 x (4 + 16) nodes, 6 x (1 + 4) + 6 x (1 + 16) changed" \
        "$(sed -n 1p <<<"$out")" "36 360 132"
    check_eq "calibrate: set params: 24 calls of one node, 12 changed" "$(sed -n 2p <<<"$out")" "24 24 12"
    check_eq "calibrate: instantiated nodes (7 + 4 kept at once) x (4 + 16), launched 6 x (4 + 16), no violation" \
        "$(sed -n 3p <<<"$out")" "220 120 0"
    python3 "$SRC/tests/bench/costmodel.py" calibrated "$TMP/cal.txt" --out "$TMP/costs.tsv" 2>"$TMP/conv.err"
    check_eq "calibrate's output converts into a cost table" "$?" 0
    out=$(python3 "$SRC/tests/bench/costmodel.py" check "$TMP/costs.tsv" 2>&1)
    check "... which costmodel.py reads" grep -q "costs.tsv: [0-9]* calls, query range" <<<"$out"
    check_eq "... whose measured rows name the device" \
        "$(grep -c '^cuGraphExecUpdate .*measured on cudaemu emulated device 0, driver ' "$TMP/costs.tsv")" 4
    check_eq "... and an exec's host bytes per node, measured, for each instantiation call" \
        "$(grep -c '^cuGraphInstantiate[A-Za-z]* *host_bytes_node *[0-9][0-9.]* *measured on cudaemu' "$TMP/costs.tsv")" 3
    emu "$BUILD/gpu/calibrate" --reps 0 >/dev/null 2>&1
    check_eq "calibrate: a bad option exits 2" "$?" 2
    emu "$BUILD/gpu/calibrate" --sizes "4 16" --reps 3 --budget 0.000001 >"$TMP/cal2.txt" 2>&1
    check_eq "calibrate: a spent budget starts no graph size, and says so" \
        "$(grep -c '^measure [a-z_]* [1-9]' "$TMP/cal2.txt") $(tail -n 1 "$TMP/cal2.txt")" \
        "0 calibrate: budget of 1e-06 s spent after the VMM calls"
fi

# ------------------------------------------------------------------ no GPU
KIT_DRIVER_PATH=$(kit_strip_emulator "$EMU_LIB:/nonexistent")
check_eq "the emulator's directory is never taken for the system driver" "$KIT_DRIVER_PATH" /nonexistent
KIT_DRIVER_PATH=$EMU_LIB
if grep -qs thread "$BUILD/san.cfg"; then
    # kit_probe_driver dlopens libcuda.so.1 from python3 with LD_PRELOAD
    # cleared; a TSan-instrumented one needs libtsan, which cannot be dlopened
    # ("cannot allocate memory in static TLS block").
    ok "the emulated driver is not a GPU # skip sanitizer build (TSan): python3 cannot dlopen the TSan-instrumented emulated driver"
elif kit_detect_gpu; then
    not_ok "the emulated driver is not a GPU"; diag "$KIT_GPU_WHY"
else
    check "the emulated driver is not a GPU, and the reason says so" grep -q cudaemu <<<"$KIT_GPU_WHY"
fi
KIT_DRIVER_PATH=$(kit_strip_emulator "${LD_LIBRARY_PATH:-}")
if kit_detect_gpu; then
    ok "# SKIP this machine has a GPU ($KIT_GPU_NAME): run-all.sh would run the whole kit"
else
    # Its logs go to $TMP: $BUILD is shared with the tests running beside this
    # one, and test_build checks that nothing in it changes under make -n.
    touch "$TMP/before-runall"
    out=$(BUILD=$BUILD OUT="" "$RUNALL" --summary "$TMP/none.txt" --logs "$TMP/logs" 2>&1); rc=$?
    check_eq "no GPU: run-all.sh exits 0" "$rc" 0
    check "no GPU: the summary says so" grep -q '^gpu: *none' "$TMP/none.txt"
    check "no GPU: the summary says nothing was run" grep -q '^mode: *no GPU: nothing was run' "$TMP/none.txt"
    check "no GPU: no PASS or FAIL in the summary" test -z "$(grep -E '^(PASS|FAIL) ' "$TMP/none.txt")"
    check "no GPU: the emulated driver in LD_LIBRARY_PATH was ignored, and said so" \
        grep -q "emulated driver ignored" "$TMP/none.txt"
    mkdir -p "$TMP/out"
    OUT=$TMP/out BUILD=$BUILD "$RUNALL" --logs "$TMP/logs" >/dev/null 2>&1
    check "with OUT set, the summary is \$OUT/gpu-summary.txt" test -s "$TMP/out/gpu-summary.txt"
    check "--logs: the logs went to the directory given" test -d "$TMP/logs"
    check_eq "--logs: nothing in \$BUILD/gpu written" \
        "$(find "$BUILD/gpu" -newer "$TMP/before-runall" 2>/dev/null)" ""
fi
"$RUNALL" --bogus >/dev/null 2>&1
check_eq "run-all.sh: an unknown option exits 2" "$?" 2

# ------------------------------------------------------------------ the policy loop
. "$SRC/tests/lib/policies.sh"
check_eq "configurations: no library, then every policy" "$KIT_CONFIGS" "nolib $POLICIES"
check_eq "the kit's policies are core/config.h's (make print-policies)" "$KIT_POLICIES" "$POLICIES"
check_eq "the kit's policies are stablegraph-run's" "$KIT_POLICIES" \
    "$(sed -n 's/^POLICIES="\(.*\)"$/\1/p' "$SRC/scripts/stablegraph-run")"
d=$TMP/env; mkdir -p "$d"
KIT_DRIVER_PATH=$EMU_LIB
kit_budget_start 120
for cfg in $KIT_CONFIGS; do
    kit_run_config "$cfg" "$d" envprobe 30 sh -c 'echo "policy=${STABLEGRAPH_POLICY:-none} preload=${LD_PRELOAD:-none}"'
done
check_eq "nolib: no library, no policy" "$(grep '^policy=' "$d/envprobe.nolib.out")" "policy=none preload=none"
for p in $KIT_POLICIES; do
    check_eq "$p: the library preloaded with policy $p" "$(grep '^policy=' "$d/envprobe.$p.out")" \
        "policy=$p preload=$(readlink -f "$KIT_LIB")"
done
d=$TMP/matrix; mkdir -p "$d"
verdict=$(kit_run_matrix "$d" probe 60 "$BUILD/workloads/rotating_inputs" --steps 3 --nodes 4)
check "a workload on the emulated driver passes the matrix" grep -q '^PASS probe: checksum [0-9a-f]\{16\} ' <<<"$verdict"
check_eq "the matrix ran once per configuration" "$(cd "$d" && ls probe.*.rc | sort | tr '\n' ' ')" \
    "$(printf 'probe.%s.rc\n' nolib $POLICIES | sort | tr '\n' ' ')"
check "the verdict quotes each policy's report" grep -q 'skip_profiled: launches 3' <<<"$verdict"

# ------------------------------------------------------------------ the facts probe
# tests/gpu/facts on the emulated driver: the line format, a count that
# matches, the same lines twice, the emulator's documented answers to a few
# (so the probe asks what it says it asks), and the same lines through the
# library (the library's transparency on these points, on the emulator).
FACT_RE='^fact [a-z0-9_]+: (CUDA_[A-Z0-9_]+|[0-9]+|0x[0-9a-f]+|absent|skip|setup-failed CUDA_[A-Z0-9_]+)$'
if [ -x "$BUILD/gpu/facts" ]; then
    d=$TMP/facts; mkdir -p "$d"
    kit_run_config nolib "$d" facts 30 "$BUILD/gpu/facts"
    f=$d/facts.nolib.out
    check_eq "facts on the emulated driver: exits 0" "$(cat "$d/facts.nolib.rc")" 0
    check_eq "facts: every line but the last is 'fact NAME: VALUE' (a CUresult name, number, absent, skip, setup-failed)" \
        "$(sed '$d' "$f" | grep -cvE "$FACT_RE")" 0
    check "facts: the last line is 'facts: N', N the number of fact lines" \
        test "$(tail -n 1 "$f")" = "facts: $(grep -cE "$FACT_RE" "$f")" -a "$(grep -c '^fact ' "$f")" -gt 40
    check "... which kit_facts_complete accepts" kit_facts_complete "$f"
    check_eq "facts: no set-up failed on the emulated driver" "$(grep -c 'setup-failed' "$f")" 0
    check_eq "facts: a second run prints the same lines (nothing varies between runs)" \
        "$(emu "$BUILD/gpu/facts" 2>&1 | cmp - "$f" && echo same)" same
    check_eq "facts: the emulator's documented answers (docs/emulator.md)" \
        "$(grep -E '^fact (tex_alignment|syncset_alloc|syncset_vmm|syncset_pool|syncset_graph|syncset_hostalloc|syncget_bytes|syncget_after_set|rdma_vmm_rdma|ctx_primary_state_flags_after|dmabuf_alloc_whole):' "$f" | tr '\n' ' ')" \
        "fact tex_alignment: 512 fact syncset_alloc: CUDA_SUCCESS fact syncset_vmm: CUDA_ERROR_NOT_SUPPORTED fact syncset_pool: CUDA_ERROR_NOT_SUPPORTED fact syncset_graph: CUDA_ERROR_NOT_SUPPORTED fact syncset_hostalloc: CUDA_SUCCESS fact syncget_bytes: 4 fact syncget_after_set: 1 fact rdma_vmm_rdma: 1 fact ctx_primary_state_flags_after: 0x80 fact dmabuf_alloc_whole: absent "
    emu "$BUILD/gpu/facts" extra >/dev/null 2>&1
    check_eq "facts: an argument exits 2" "$?" 2
    # A device of 1 MiB: every mapping (2 MiB granules) fails to be made; each
    # such fact says setup-failed and the probe goes on, one line per fact.
    CUDAEMU_DEVICE_MEMORY=1M emu "$BUILD/gpu/facts" >"$d/small.out" 2>&1
    check_eq "facts: set-up failures say so and the rest goes on: exit 0, the same facts in the same order" \
        "$?/$(sed 's/: .*//' "$d/small.out" | tr '\n' ' ')" "0/$(sed 's/: .*//' "$f" | tr '\n' ' ')"
    check_eq "... the 6 facts asked on a mapping say setup-failed CUDA_ERROR_OUT_OF_MEMORY" \
        "$(grep -c '^fact [a-z0-9_]*vmm[a-z0-9_]*: setup-failed CUDA_ERROR_OUT_OF_MEMORY$' "$d/small.out")" 6
    # The library's transparency on the emulated driver: the same lines
    # through the library (skip_temp) as without it.
    kit_run_config skip_temp "$d" facts 30 "$BUILD/gpu/facts"
    verdict=$(kit_facts_compare library "$f" "$d/facts.skip_temp.out")
    check "facts through the library (skip_temp) on the emulated driver: the same lines as without it" \
        test "${verdict%% *}" = PASS
    [ "${verdict%% *}" = PASS ] || diag "$verdict"
    FACTS_VERDICT=${verdict%% *}
    # The comparison.
    printf 'fact a: 1\nfact b: CUDA_SUCCESS\nfact c: 0x80\nfacts: 3\n' >"$d/x"
    printf 'fact a: 1\nfact b: CUDA_ERROR_NOT_SUPPORTED\nfact c: 0x80\nfacts: 3\n' >"$d/y"
    printf 'fact a: 1\nfact b: CUDA_SUCCESS\nfact c: absent\nfacts: 3\n' >"$d/z"
    printf 'fact a: 1\nfact b: CUDA_SUCCESS\nfacts: 3\n' >"$d/short"
    v=$(kit_facts_compare library "$d/x" "$d/x"); st=$?
    check "facts compare: equal files pass" test "$st" = 0 -a "${v%% *}" = PASS
    printf 'fact alloc_alignment: 4096\nfact b: CUDA_SUCCESS\nfacts: 2\n' >"$d/ua"
    printf 'fact alloc_alignment: 512\nfact b: CUDA_SUCCESS\nfacts: 2\n' >"$d/ub"
    printf 'fact alloc_alignment: 512\nfact b: CUDA_ERROR_NOT_SUPPORTED\nfacts: 2\n' >"$d/uc"
    v=$(kit_facts_compare library "$d/ua" "$d/ub"); st=$?
    check "facts compare: a difference in what the driver does not promise (alignment) passes and is listed" \
        test "$st" = 0 -a "${v%% *}" = PASS -a -n "$(echo "$v" | grep 'not promise: alloc_alignment: without the library 4096, with the library 512')"
    v=$(kit_facts_compare library "$d/ua" "$d/uc"); st=$?
    check "facts compare: ... but not beside another difference" test "$st" = 1 -a "${v%% *}" = FAIL
    v=$(kit_facts_compare emulator "$d/ua" "$d/ub"); st=$?
    check "facts compare: the emulator's alignment is still a reading to compare" test "$st" = 1
    v=$(kit_facts_compare library "$d/x" "$d/y"); st=$?
    check "facts compare: one fact changed by the library fails and names it" test "$st" = 1 -a \
        "$v" = "FAIL the library changed 1 of 3 facts (a library bug to fix): b: without the library CUDA_SUCCESS, with the library CUDA_ERROR_NOT_SUPPORTED"
    v=$(kit_facts_compare emulator "$d/x" "$d/y"); st=$?
    check "facts compare: the emulator differing in one fact fails, names both answers and the fix" test "$st" = 1 -a \
        "$v" = "FAIL 1 of 3 facts differ, the emulator's reading must be fixed (docs/emulator.md): b: gpu CUDA_SUCCESS, emulator CUDA_ERROR_NOT_SUPPORTED"
    v=$(kit_facts_compare emulator "$d/x" "$d/z"); st=$?
    check "facts compare: a fact the emulator lacks fails, listed as not emulated" test "$st" = 1 -a \
        "$v" = "FAIL not emulated (1, the emulator lacks the call): c (gpu 0x80)"
    v=$(kit_facts_compare emulator "$d/x" "$d/x"); st=$?
    check "facts compare: the emulator answering alike passes" test "$st" = 0 -a "${v%% *}" = PASS
    v=$(kit_facts_compare library "$d/x" "$d/short"); st=$?
    check "facts compare: a run whose count does not match its lines (it stopped) fails" test "$st" = 1 -a \
        -n "$(grep -F 'the run with the library is incomplete' <<<"$v")"
    v=$(kit_facts_compare library "$d/x" "$d/missing-file"); st=$?
    check "facts compare: a run that wrote nothing fails" test "$st" = 1
fi

# ------------------------------------------------------------------ the comparison
# fake DIR SUM...: one run per configuration, in order, with that checksum
# ("-" none), exit 0 and a report.
fake() {
    local dir=$1 cfg; shift
    rm -rf "$dir"; mkdir -p "$dir"
    for cfg in $KIT_CONFIGS; do
        echo 0 >"$dir/x.$cfg.rc"
        { echo "x: some line"; [ "$1" = - ] || echo "checksum: $1"; } >"$dir/x.$cfg.out"
        echo '{"totals": {"launches": 3, "updates_seen": 2, "updates_forwarded": 1, "updates_skipped": 1}}' \
            >"$dir/x.$cfg.json"
        shift
    done
}
# judge NAME WANT_STATUS WANT_TEXT: kit_compare on $TMP/f must give that status and mention the text.
judge() {
    local v st
    v=$(kit_compare "$TMP/f" x); st=$?
    check "compare: $1 -> ${2}" test "${v%% *}" = "$2" -a "$st" = "$(case $2 in PASS) echo 0;; FAIL) echo 1;; *) echo 2;; esac)"
    check "compare: $1: the verdict says '$3'" grep -qF -- "$3" <<<"$v"
}
fake "$TMP/f" ab ab ab ab ab
judge "all equal" PASS "skip_profiled: launches 3, updates 2 seen/1 forwarded/1 skipped"
fake "$TMP/f" ab ab ab ab cd
judge "one policy differs" FAIL "skip_profiled: checksum cd != ab"
fake "$TMP/f" ab ab - ab ab
judge "a policy printed no checksum" FAIL "always_update: checksum none"
fake "$TMP/f" - ab ab ab ab
judge "no checksum without the library" FAIL "without the library"
fake "$TMP/f" ab ab ab ab ab; echo 1 >"$TMP/f/x.skip_temp.rc"
judge "a policy exited 1" FAIL "skip_temp: exit 1"
fake "$TMP/f" ab ab ab ab ab; echo 124 >"$TMP/f/x.off.rc"
judge "a policy timed out" FAIL "off: exit 124"
fake "$TMP/f" ab ab ab ab ab; rm "$TMP/f/x.off.rc"
judge "a policy did not run" FAIL "off: exit missing"
fake "$TMP/f" ab ab ab ab ab; rm "$TMP/f/x.always_update.json"
judge "a policy wrote no report" FAIL "always_update: no report written"
fake "$TMP/f" ab ab ab ab ab; echo "reference: MISMATCH at element 3" >>"$TMP/f/x.off.out"
judge "a wrong result, the same everywhere" FAIL "off: reference: MISMATCH at element 3"
fake "$TMP/f" ab ab ab ab ab
echo '{"totals": {"launches": 3}, "graph_descriptions": {"audited": 4, "audit_mismatches": 2}}' >"$TMP/f/x.skip_temp.json"
judge "a record differs from the driver's graph (audit)" FAIL "skip_temp: 2 capture-time records differ"
fake "$TMP/f" ab ab ab ab ab
echo '{"totals": {"launches": 3}, "graph_descriptions": {"audited": 4, "audit_mismatches": 0}}' >"$TMP/f/x.skip_temp.json"
judge "records audited, none differs" PASS "skip_temp: launches 3, updates 0 seen/0 forwarded/0 skipped, records audited 4"
fake "$TMP/f" ab ab ab ab ab; echo 77 >"$TMP/f/x.nolib.rc"; echo "skip: torch not installed" >"$TMP/f/x.nolib.out"
judge "the program cannot run here" SKIP "torch not installed"
fake "$TMP/f" ab ab ab ab ab; echo budget >"$TMP/f/x.skip_temp.rc"
judge "the budget ran out" SKIP "time budget spent before the run under skip_temp"
check_eq "checksum: the last one printed" "$(kit_checksum <(printf 'checksum: 01\nchecksum: 0a\nchecksum: zz\n'))" 0a

# ------------------------------------------------------------------ rehearsal on the emulated driver
# run-all.sh --emulator on a build whose slices program gives another result
# under the library (a script in front of the real one): everything else
# must pass, slices must fail, and run-all must exit 1.
if [ -x "$BUILD/gpu/step_timer" ]; then
    fb=$TMP/fakebuild; mkdir -p "$fb/workloads" "$fb/gpu"
    for f in "$BUILD"/*; do case "$(basename "$f")" in workloads|gpu) ;; *) ln -s "$f" "$fb/" ;; esac; done
    for f in "$BUILD"/workloads/* "$BUILD"/gpu/*; do [ -f "$f" ] && ln -s "$f" "$fb/${f#"$BUILD/"}"; done
    rm "$fb/workloads/slices"
    printf '#!/bin/sh\ncase "${LD_PRELOAD:-}" in *stablegraph*) echo "checksum: 0000000000000bad";; *) exec %q "$@";; esac\n' \
        "$BUILD/workloads/slices" >"$fb/workloads/slices"
    chmod +x "$fb/workloads/slices"
    BUILD=$fb "$RUNALL" --emulator --timing-nodes 16 --summary "$TMP/rehearsal.txt" >"$TMP/rehearsal.log" 2>&1
    check_eq "rehearsal with a result changed by the library: run-all exits 1" "$?" 1
    s=$TMP/rehearsal.txt
    failed_before=$_tap_failed
    check "rehearsal: the summary says no GPU result" \
        grep -q '^mode: *REHEARSAL on the emulated driver: NOTHING IN THIS FILE IS A GPU RESULT' "$s"
    check "rehearsal: the timing table says CPU times, not GPU" grep -q '^EMULATED DRIVER: these are CPU times' "$s"
    check "rehearsal: the FAIL line names the policy and both checksums" \
        grep -q '^FAIL workload-slices: off: checksum 0000000000000bad != [0-9a-f]\{16\} without the library' "$s"
    # The facts stage's transparency line is judged by the direct check above
    # (FACTS_VERDICT); the rest of the summary must be as it was.
    check_eq "rehearsal: nothing else failed" "$(grep '^FAIL ' "$s" | grep -vc '^FAIL facts: library transparent: ')" 1
    check_eq "rehearsal: 5 workloads x (policies + model), rt_graphs x 2, 2 timings, the calibration and the facts' emulator readings pass" \
        "$(grep '^PASS ' "$s" | grep -vc '^PASS facts: library transparent: ')" 16
    fp=0; [ "${FACTS_VERDICT:-}" = PASS ] && fp=1
    check "rehearsal: the summary counts the failures" grep -q "^result: $((16 + fp)) passed, $((2 - fp)) failed, " "$s"
    check "rehearsal: facts: the emulator compared with itself passes, and says it is a rehearsal" \
        grep -q '^PASS facts: emulator readings: rehearsal, the emulated driver stands for the GPU: [0-9]* facts, ' "$s"
    check_eq "rehearsal: facts: the library's transparency as the direct run found it" \
        "$(sed -n 's/^\([A-Z]*\) facts: library transparent: rehearsal, .*/\1/p' "$s")" "${FACTS_VERDICT:-none}"
    check "rehearsal: facts: the summary lists the answers, labelled not the GPU's" \
        test "$(grep -c '^fact [a-z0-9_]*: ' "$s")" -gt 40 -a -n "$(grep '^facts: EMULATED DRIVER (a rehearsal), NOT the GPU' "$s")"
    check "rehearsal: facts: the three runs are in the logs" \
        test -s "$fb/gpu/logs/facts/facts.nolib.out" -a -s "$fb/gpu/logs/facts/facts.skip_temp.out" -a -s "$fb/gpu/logs/facts/facts-emulator.nolib.out"
    check "rehearsal: the calibration says CPU times, not GPU" \
        grep -q '^calibration: EMULATED DRIVER: CPU times of the emulation, NOT GPU figures' "$s"
    check "rehearsal: the calibration wrote its table" grep -q '^PASS calibration: 29 figures (done); table: ' "$s"
    check "rehearsal: the timing table has 6 measured rows" \
        test "$(grep -cE '^(recapture_temps|rotating_inputs) +16  [a-z_]+ +[0-9.]+ +[0-9.]+ ' "$s")" = 6
    check "rehearsal: the runtime program runs under every policy (cudaMalloc, cudaMallocAsync)" \
        test "$(grep -c '^PASS rt_graphs-cudaMalloc' "$s")" = 2
    check "rehearsal: the workloads' records are audited against the driver (none differs)" \
        grep -q '^PASS workload-recapture_temps: .*skip_temp: launches [0-9]*, .*, records audited [1-9]' "$s"
    [ "$_tap_failed" = "$failed_before" ] || diag "$(cat "$s")"
fi
done_testing
