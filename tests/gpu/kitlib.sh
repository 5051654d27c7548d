# shellcheck shell=bash
# tests/gpu/kitlib.sh: the functions of the real-GPU kit (sourced by
# run-all.sh, and by test_gpu_kit.sh, which calls them with fake outputs).
# Nothing here runs on its own.
#
# Conventions of the programs the kit runs: each prints "checksum: <hex>"
# when it finished its work; exit status 77 with a line "skip: <why>" means
# "cannot run here" (e.g. PyTorch not installed), not a failure.
#
# Variables the caller sets before using the run functions:
#   KIT_SRC      source root           KIT_BUILD   build directory
#   KIT_LIB      libstablegraph.so     KIT_DRIVER_PATH  LD_LIBRARY_PATH for
#   the programs (the real driver: the system's; a rehearsal: the emulator's)

# The configurations every program runs under: without the library, then the
# library under each policy. (Same policy names as core/config.h and
# scripts/stablegraph-run; test_gpu_kit.sh checks they agree.)
# shellcheck disable=SC2034  # KIT_GPU_* and others are read by the callers
KIT_POLICIES="off always_update skip_temp skip_profiled"
KIT_CONFIGS="nolib $KIT_POLICIES"

# ------------------------------------------------------------------ clock
# kit_budget_start SECONDS: the whole run's budget starts now.
kit_budget_start() { KIT_DEADLINE=$(( $(date +%s) + $1 )); }
# kit_left: seconds left of the budget (never negative).
kit_left() { local l=$(( KIT_DEADLINE - $(date +%s) )); echo $(( l > 0 ? l : 0 )); }
# kit_cap SECONDS: the smaller of SECONDS and what is left (keeping 15 s to
# write the summary).
kit_cap() { local l=$(( $(kit_left) - 15 )); echo $(( $1 < l ? $1 : (l > 0 ? l : 0) )); }
# kit_timeout SECONDS CMD...: CMD under `timeout` with at most SECONDS and
# what is left (kit_cap); when nothing is left it does not run CMD and
# returns 124. (A bare `timeout 0` would mean no limit at all.)
kit_timeout() {
    local secs
    secs=$(kit_cap "$1"); shift
    [ "$secs" -gt 0 ] || return 124
    timeout -k 5 "$secs" "$@"
}

# ------------------------------------------------------------------ results
# kit_result STATUS NAME DETAIL: records one check (STATUS: PASS, FAIL, SKIP)
# and echoes it.
KIT_RESULTS=()
kit_result() {
    local line
    printf -v line '%-4s %s: %s' "$1" "$2" "$3"
    KIT_RESULTS+=("$line")
    echo "$line"
}
# kit_count STATUS: how many checks have STATUS.
kit_count() { local n=0 r; for r in "${KIT_RESULTS[@]}"; do [[ $r == "$1 "* ]] && n=$((n + 1)); done; echo $n; }

# ------------------------------------------------------------------ outputs
# kit_checksum FILE: the last "checksum: <hex>" value in FILE (empty if none).
kit_checksum() { sed -n 's/^checksum: \([0-9a-f][0-9a-f]*\)$/\1/p' "$1" 2>/dev/null | tail -n 1; }

# kit_report_totals REPORT.json: "launches L, updates S seen/F forwarded/K skipped"
# from the library's report (empty if unreadable), and ", records audited A"
# where it audited records (STABLEGRAPH_AUDIT_RECORDS).
kit_report_totals() {
    python3 - "$1" 2>/dev/null <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["totals"]
a = r.get("graph_descriptions", {}).get("audited", 0)
print("launches %d, updates %d seen/%d forwarded/%d skipped%s" % (
    t.get("launches", 0), t.get("updates_seen", 0), t.get("updates_forwarded", 0), t.get("updates_skipped", 0),
    ", records audited %d" % a if a else ""))
PY
}

# kit_report_mismatches REPORT.json: the report's audit mismatches (records
# that differed from the graph the real driver reads back), 0 if none or
# not audited.
kit_report_mismatches() {
    python3 - "$1" 2>/dev/null <<'PY' || echo 0
import json, sys
print(json.load(open(sys.argv[1])).get("graph_descriptions", {}).get("audit_mismatches", 0))
PY
}

# kit_compare DIR NAME: judges the runs NAME.<config>.{rc,out,json} in DIR
# (one per configuration of KIT_CONFIGS). Prints "STATUS DETAIL" and returns
# 0 (PASS), 1 (FAIL) or 2 (SKIP). PASS needs: the run without the library
# exited 0 with a checksum; every policy exited 0 with the same checksum and
# wrote its report, in which no capture-time record differed from the
# driver's graph (audit_mismatches); no output says "reference: MISMATCH".
# SKIP: the run
# without the library exited 77 (its "skip:" line is the detail), or a run
# was not started because the time budget was spent.
kit_compare() {
    local dir=$1 name=$2 cfg rc sum base bad="" notes="" totals mism
    rc=$(cat "$dir/$name.nolib.rc" 2>/dev/null || echo missing)
    base=$(kit_checksum "$dir/$name.nolib.out")
    if [ "$rc" = 77 ]; then
        echo "SKIP $(grep -m1 '^skip:' "$dir/$name.nolib.out" | sed 's/^skip: *//')"
        return 2
    fi
    for cfg in $KIT_CONFIGS; do
        if [ "$(cat "$dir/$name.$cfg.rc" 2>/dev/null)" = budget ]; then
            echo "SKIP time budget spent before the run under $cfg"
            return 2
        fi
    done
    if [ "$rc" != 0 ] || [ -z "$base" ]; then
        echo "FAIL without the library: exit $rc, checksum '${base:-none}': $(tail -n 1 "$dir/$name.nolib.out" 2>/dev/null)"
        return 1
    fi
    for cfg in $KIT_CONFIGS; do
        rc=$(cat "$dir/$name.$cfg.rc" 2>/dev/null || echo missing)
        sum=$(kit_checksum "$dir/$name.$cfg.out")
        if grep -q '^reference: MISMATCH' "$dir/$name.$cfg.out" 2>/dev/null; then
            bad+="; $cfg: $(grep -m1 '^reference: MISMATCH' "$dir/$name.$cfg.out")"
        elif [ "$rc" != 0 ]; then
            bad+="; $cfg: exit $rc ($(tail -n 1 "$dir/$name.$cfg.out" 2>/dev/null))"
        elif [ "$sum" != "$base" ]; then
            bad+="; $cfg: checksum ${sum:-none} != $base without the library"
        elif [ "$cfg" != nolib ]; then
            totals=$(kit_report_totals "$dir/$name.$cfg.json")
            mism=$(kit_report_mismatches "$dir/$name.$cfg.json")
            if [ -z "$totals" ]; then
                bad+="; $cfg: no report written"
            elif [ "$mism" != 0 ]; then
                bad+="; $cfg: $mism capture-time records differ from the driver's graph (the log's \"record audit\" lines)"
            else
                notes+="; $cfg: $totals"
            fi
        fi
    done
    if [ -n "$bad" ]; then
        echo "FAIL${bad#;}"
        return 1
    fi
    echo "PASS checksum $base without the library and under every policy$notes"
    return 0
}

# ------------------------------------------------------------------ running
# kit_run_config CONFIG DIR NAME SECONDS CMD...: runs CMD on the kit's driver,
# without the library (CONFIG nolib) or through scripts/stablegraph-run under
# policy CONFIG with a report, for at most SECONDS; with KIT_AUDIT set, every
# capture-time record a decision uses is audited against the driver
# (STABLEGRAPH_AUDIT_RECORDS=1: on a real GPU, a check of what the recorder
# assumes about the driver). Writes DIR/NAME.CONFIG.out
# (stdout and stderr), .rc (exit status; 124 a timeout; "budget" if not run
# because the time budget was spent) and .json (report).
kit_run_config() {
    local cfg=$1 dir=$2 name=$3 secs=$4 rc audit=0
    shift 4
    [ -n "${KIT_AUDIT:-}" ] && audit=1
    local base=$dir/$name.$cfg
    rm -f "$base.out" "$base.rc" "$base.json"
    if [ "$secs" -le 0 ]; then
        echo "kit: not run: time budget exhausted" >"$base.out"; echo budget >"$base.rc"; return
    fi
    if [ "$cfg" = nolib ]; then
        env -u LD_PRELOAD LD_LIBRARY_PATH="$KIT_DRIVER_PATH" timeout -k 5 "$secs" "$@" >"$base.out" 2>&1
    else
        env -u LD_PRELOAD LD_LIBRARY_PATH="$KIT_DRIVER_PATH" STABLEGRAPH_LIB="$KIT_LIB" \
            STABLEGRAPH_AUDIT_RECORDS="$audit" timeout -k 5 "$secs" "$KIT_SRC/scripts/stablegraph-run" --policy "$cfg" --report "$base.json" \
            -- "$@" >"$base.out" 2>&1
    fi
    rc=$?
    echo "$rc" >"$base.rc"
    [ "$rc" = 124 ] && echo "kit: timed out after ${secs}s" >>"$base.out"
}

# kit_run_matrix DIR NAME SECONDS CMD...: CMD under every configuration of
# KIT_CONFIGS (SECONDS each, within the budget; records audited), then kit_compare; records
# the result as check NAME. If the run without the library says "skip", the
# policies are not run. Returns kit_compare's status.
kit_run_matrix() {
    local dir=$1 name=$2 secs=$3 cfg verdict st
    shift 3
    for cfg in $KIT_CONFIGS; do
        KIT_AUDIT=1 kit_run_config "$cfg" "$dir" "$name" "$(kit_cap "$secs")" "$@"
        [ "$cfg" = nolib ] && [ "$(cat "$dir/$name.nolib.rc")" = 77 ] && break
    done
    verdict=$(kit_compare "$dir" "$name"); st=$?
    kit_result "${verdict%% *}" "$name" "${verdict#* }"
    return $st
}

# ------------------------------------------------------------------ the driver
# kit_strip_emulator PATHLIST: PATHLIST (colon-separated) without the
# directories that hold an emulated libcuda.so.1 (it contains "cudaemu").
kit_strip_emulator() {
    local out="" d
    local IFS=:
    for d in $1; do
        [ -n "$d" ] || continue
        if [ -f "$d/libcuda.so.1" ] && grep -aq cudaemu "$d/libcuda.so.1"; then continue; fi
        out+="${out:+:}$d"
    done
    echo "$out"
}

# kit_probe_driver: loads libcuda.so.1 (as the loader finds it with
# LD_LIBRARY_PATH=$KIT_DRIVER_PATH) and prints "key: value" lines: lib (the
# file loaded), error, devices, name (device 0), driver (cuDriverGetVersion).
kit_probe_driver() {
    env -u LD_PRELOAD LD_LIBRARY_PATH="$KIT_DRIVER_PATH" timeout 60 python3 - <<'PY' 2>&1
import ctypes
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    print("error: libcuda.so.1 does not load: %s" % e); raise SystemExit
lib = next((l.split()[-1] for l in open("/proc/self/maps") if "libcuda" in l), "?")
print("lib: %s" % lib)
r = cu.cuInit(0)
if r != 0:
    print("error: cuInit returned %d" % r); raise SystemExit
n, v = ctypes.c_int(0), ctypes.c_int(0)
cu.cuDeviceGetCount(ctypes.byref(n)); cu.cuDriverGetVersion(ctypes.byref(v))
print("devices: %d" % n.value)
print("driver: %d.%d" % (v.value // 1000, v.value % 1000 // 10))
if n.value > 0:
    dev, name = ctypes.c_int(0), ctypes.create_string_buffer(256)
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    cu.cuDeviceGetName(name, 256, dev)
    print("name: %s" % name.value.decode(errors="replace"))
PY
}

# kit_detect_gpu: decides whether a real GPU is usable. Sets KIT_GPU_NAME,
# KIT_GPU_DRIVER, KIT_GPU_WHY (how it decided) and returns 0 for a GPU.
# A GPU: nvidia-smi lists one, or libcuda.so.1 (from KIT_DRIVER_PATH and
# the system, never the emulator) reports a device whose name does not start
# with "cudaemu".
kit_detect_gpu() {
    local probe smi="" name drv
    KIT_GPU_NAME="" KIT_GPU_DRIVER="" KIT_GPU_WHY=""
    if command -v nvidia-smi >/dev/null 2>&1; then
        smi=$(timeout 30 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
    fi
    probe=$(kit_probe_driver)
    name=$(sed -n 's/^name: //p' <<<"$probe")
    drv=$(sed -n 's/^driver: //p' <<<"$probe")
    if [ -n "$name" ] && [[ $name != cudaemu* ]]; then
        KIT_GPU_NAME=$name
        KIT_GPU_DRIVER="CUDA driver API $drv${smi:+, nvidia-smi driver ${smi##*, }}"
        KIT_GPU_WHY="libcuda.so.1 ($(sed -n 's/^lib: //p' <<<"$probe")) reports device 0: $name"
        return 0
    fi
    if [ -n "$smi" ]; then
        KIT_GPU_NAME=${smi%%, *}
        KIT_GPU_DRIVER="nvidia-smi driver ${smi##*, }"
        KIT_GPU_WHY="nvidia-smi lists $KIT_GPU_NAME, but libcuda.so.1: $(grep -m1 -E '^(error|name):' <<<"$probe")"
        return 0
    fi
    if [ -n "$name" ]; then
        KIT_GPU_WHY="no nvidia-smi; libcuda.so.1 is the emulated driver ($name)"
    else
        KIT_GPU_WHY="no nvidia-smi; $(grep -m1 -E '^(error|devices):' <<<"$probe" || echo 'driver probe gave nothing')"
    fi
    return 1
}

# ------------------------------------------------------------------ test suite selection
# kit_suite_select: the tests of tests/run.sh that make sense on the real
# driver, one "RUN path" or "EMU path: reason" line each. Rule: tests under
# tests/emu/ test the emulator itself; a test whose source mentions CUDAEMU_,
# cudaemu or "emulat" relies on the emulator (its knobs, statistics or
# limits); tests/gpu/ is this kit. Everything else runs on the real driver.
kit_suite_select() {
    local t src
    { find "$KIT_BUILD/tests" -type f -name 'test_*' -perm -u+x 2>/dev/null | sed "s|^$KIT_BUILD/||"
      (cd "$KIT_SRC" && find tests -type f -name 'test_*.sh'); } | sort | while read -r t; do
        src=$t
        [[ $t == *.sh ]] || src=$(ls "$KIT_SRC/$t".c* 2>/dev/null | head -n 1)
        src=${src#"$KIT_SRC/"}
        case "$t" in
        tests/emu/*) echo "EMU $t: tests the emulated driver itself" ;;
        tests/gpu/*) echo "EMU $t: this kit's own test" ;;
        *) if [ -n "$src" ] && grep -qiE 'CUDAEMU_|cudaemu|emulat' "$KIT_SRC/$src"; then
               echo "EMU $t: its source relies on the emulator ($(grep -oiE -m1 'CUDAEMU_[A-Z_]*|cudaemu|emulat[a-z]*' "$KIT_SRC/$src" | head -n 1))"
           else
               echo "RUN $t"
           fi ;;
        esac
    done
}

# ------------------------------------------------------------------ driver facts
# The facts probe (tests/gpu/facts.c) prints "fact NAME: VALUE" lines, then
# "facts: N" (the number of fact lines).

# kit_facts_complete FILE: 0 if FILE holds at least one fact line and a
# "facts: N" count equal to the number of them (the probe ran to its end).
kit_facts_complete() {
    local n
    n=$(sed -n 's/^facts: \([0-9][0-9]*\)$/\1/p' "$1" 2>/dev/null | tail -n 1)
    [ -n "$n" ] && [ "$n" -gt 0 ] && [ "$n" = "$(grep -c '^fact [A-Za-z0-9_]*: ' "$1")" ]
}

# kit_facts_compare MODE A B: compares two runs of the facts probe, fact by
# fact (a fact missing from one run reads "missing"). Prints "STATUS DETAIL"
# and returns 0 (PASS) or 1 (FAIL).
#   MODE library:  A without the library, B through it. Any difference is a
#                  library bug (the library must not change what the driver
#                  answers), except in the facts of KIT_FACTS_UNPROMISED,
#                  what this driver happens to do where the documentation
#                  promises less (listed, not failed): the alignment of
#                  allocations (promised: 256 bytes; the library places
#                  blocks on the device's texture alignment, docs/design.md
#                  "Placement", so a GPU whose own allocations start on
#                  coarser boundaries shows here).
#   MODE emulator: A the GPU, B the emulated driver. A difference is a reading
#                  of the emulator to fix (docs/emulator.md); a fact the
#                  emulator answers "absent" (it lacks the call) is listed
#                  apart, as not emulated, and fails too.
KIT_FACTS_UNPROMISED="alloc_alignment async_alignment"
kit_facts_compare() {
    local mode=$1 a=$2 b=$3 la lb f
    if [ "$mode" = library ]; then la="without the library" lb="with the library"
    else la=gpu lb=emulator; fi
    for f in "$a" "$b"; do
        if ! kit_facts_complete "$f"; then
            echo "FAIL the run $([ "$f" = "$a" ] && echo "$la" || echo "$lb") is incomplete (no \"facts: N\" line matching its fact lines): $(tail -n 1 "$f" 2>/dev/null)"
            return 1
        fi
    done
    awk -v mode="$mode" -v la="$la" -v lb="$lb" -v unpromised=" $KIT_FACTS_UNPROMISED " '
        function take(line, file,   name, value) {
            if (line !~ /^fact [A-Za-z0-9_]+: /) return
            name = substr(line, 6); sub(/:.*/, "", name)
            value = substr(line, length(name) + 8)
            if (!((name) in seen)) { seen[name] = 1; order[++n] = name }
            val[file, name] = value
        }
        FNR == 1 { file++ }
        { take($0, file) }
        END {
            for (i = 1; i <= n; i++) {
                k = order[i]
                x = ((1, k) in val) ? val[1, k] : "missing"
                y = ((2, k) in val) ? val[2, k] : "missing"
                if (x == y) continue
                if (mode == "library" && index(unpromised, " " k " ")) {
                    info = info sep3 k ": " la " " x ", " lb " " y; sep3 = "; "; continue
                }
                if (mode == "emulator" && y == "absent") { absent = absent sep2 k " (gpu " x ")"; sep2 = ", "; na++ }
                else { diff = diff sep1 k ": " la " " x ", " lb " " y; sep1 = "; "; nd++ }
            }
            if (!nd && !na) {
                if (mode == "library" && info != "")
                    printf "PASS %d facts, the same lines %s and %s but what the driver does not promise: %s\n", n, la, lb, info
                else if (mode == "library") printf "PASS %d facts, the same lines %s and %s\n", n, la, lb
                else printf "PASS %d facts, the emulated driver answers every one as the GPU\n", n
                exit 0
            }
            if (mode == "library") {
                printf "FAIL the library changed %d of %d facts (a library bug to fix): %s%s\n", nd, n, diff,
                       info != "" ? "; not promised by the driver: " info : ""
                exit 1
            }
            out = "FAIL "
            if (nd) out = out sprintf("%d of %d facts differ, the emulator'"'"'s reading must be fixed (docs/emulator.md): %s", nd, n, diff)
            if (nd && na) out = out "; "
            if (na) out = out sprintf("not emulated (%d, the emulator lacks the call): %s", na, absent)
            print out
            exit 1
        }' "$a" "$b"
}
