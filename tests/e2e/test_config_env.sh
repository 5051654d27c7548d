#!/usr/bin/env bash
# tests/e2e/test_config_env.sh: each STABLEGRAPH_* variable with a bad value,
# with and without STABLEGRAPH_STRICT=1. Without: one message naming the
# variable, the value and the accepted values, the program runs normally and
# the library runs as "off". With: exit status 2 before main.
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
PROG=$BUILD/tests/e2e/resolve_paths   # prints "got ..." lines from main

for bad in STABLEGRAPH_POLICY=fastest STABLEGRAPH_LOG=loud STABLEGRAPH_LOG_FILE= \
           STABLEGRAPH_REPORT=/tmp/x%y STABLEGRAPH_STRICT=yes; do
    var=${bad%%=*} val=${bad#*=}
    rep=$TMP/rep.json; rm -f "$rep"
    # STABLEGRAPH_REPORT must stay usable to see the policy, unless it is the bad one
    envs=("$bad"); [ "$var" != STABLEGRAPH_REPORT ] && envs+=("STABLEGRAPH_REPORT=$rep")
    out=$(env "${envs[@]}" LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" "$PROG" direct 2>"$TMP/err")
    rc=$?
    check_eq "$var bad: program runs (status)" "$rc" 0
    check "$var bad: main ran" grep -q '^got direct cuInit' <<<"$out"
    check_eq "$var bad: exactly one complaint about it" "$(grep -c "^stablegraph: error: $var=\"$val\" is not valid" "$TMP/err")" 1
    check "$var bad: the message lists accepted values" grep -q "accepted: " "$TMP/err"
    [ "$var" != STABLEGRAPH_REPORT ] && check_eq "$var bad: runs as off" "$(json_get "$rep" policy)" off
    if [ "$var" != STABLEGRAPH_STRICT ]; then
        out=$(env "$bad" STABLEGRAPH_STRICT=1 LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" "$PROG" direct 2>"$TMP/err")
        rc=$?
        check_eq "$var bad, strict: exit status 2" "$rc" 2
        check_eq "$var bad, strict: main never ran" "$out" ""
        check "$var bad, strict: says why" grep -q "STABLEGRAPH_STRICT=1: exiting with status 2" "$TMP/err"
    fi
done

# An overlong value is rejected.
long=$(printf '%02000d' 0)
err=$(STABLEGRAPH_LOG_FILE=/tmp/$long LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" "$PROG" direct 2>&1 >/dev/null)
check "overlong value rejected" grep -q 'STABLEGRAPH_LOG_FILE=.*too long' <<<"$err"

# Good values: quiet, and the report says what was asked.
rep=$TMP/good.json
err=$(STABLEGRAPH_POLICY=skip_temp STABLEGRAPH_LOG=warn STABLEGRAPH_REPORT=$rep STABLEGRAPH_STRICT=1 \
      LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" "$PROG" direct 2>&1 >/dev/null)
check_eq "skip_temp accepted" "$(json_get "$rep" policy)" skip_temp
check_eq "skip_temp: no start-up warning" "$err" ""
rep=$TMP/prof.json
err=$(STABLEGRAPH_POLICY=skip_profiled STABLEGRAPH_PROFILE_STEPS=5 STABLEGRAPH_ALIAS=never \
      STABLEGRAPH_ALIAS_MIN_BYTES=64K STABLEGRAPH_MAX_GENERATIONS=2 STABLEGRAPH_VARIANT_MEMORY=1G STABLEGRAPH_HEADROOM=64M STABLEGRAPH_STRICT=1 \
      STABLEGRAPH_REPORT=$rep LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" "$PROG" direct 2>&1 >/dev/null)
check_eq "skip_profiled and its variables accepted" "$(json_get "$rep" policy)" skip_profiled
check_eq "skip_profiled: no start-up warning (aliasing is implemented)" "$err" ""
# A cost table (STABLEGRAPH_COSTS): the shipped one is accepted; one that
# cannot be read, or is malformed, is a configuration error naming the file
# and line (policy off; with STABLEGRAPH_STRICT=1, exit status 2).
rep=$TMP/costs.json
err=$(STABLEGRAPH_COSTS=$SRC/core/costs.tsv STABLEGRAPH_COST_TIMES=table STABLEGRAPH_STRICT=1 \
      STABLEGRAPH_REPORT=$rep LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" "$PROG" direct 2>&1 >/dev/null)
check_eq "STABLEGRAPH_COSTS: the shipped table accepted" "$(json_get "$rep" policy)" skip_profiled
check_eq "STABLEGRAPH_COSTS: no start-up warning" "$err" ""
printf 'query range 0.03,0.1,0.3 x\ncuGraphInstantiateWithFlags node cheap x\n' >"$TMP/bad.tsv"
err=$(STABLEGRAPH_COSTS=$TMP/bad.tsv STABLEGRAPH_REPORT=$rep LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" \
      "$PROG" direct 2>&1 >/dev/null)
check "STABLEGRAPH_COSTS malformed: file, line and what is wrong" \
    grep -q "^stablegraph: error: STABLEGRAPH_COSTS: not a cost table: $TMP/bad.tsv:2: US must be" <<<"$err"
check_eq "STABLEGRAPH_COSTS malformed: policy off" "$(json_get "$rep" policy)" off
STABLEGRAPH_COSTS=$TMP/missing.tsv STABLEGRAPH_STRICT=1 LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" \
    "$PROG" direct >/dev/null 2>&1
check_eq "STABLEGRAPH_COSTS missing, strict: exit status 2" "$?" 2
for bad in STABLEGRAPH_PROFILE_STEPS=0 STABLEGRAPH_ALIAS=maybe STABLEGRAPH_ALIAS_MIN_BYTES=1X \
           STABLEGRAPH_MAX_GENERATIONS=17 STABLEGRAPH_COST_TIMES=both STABLEGRAPH_VARIANT_MEMORY=lots \
           STABLEGRAPH_HEADROOM=-5; do
    err=$(env "$bad" STABLEGRAPH_POLICY=skip_profiled LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" "$PROG" direct 2>&1 >/dev/null)
    check "${bad%%=*} bad: rejected with the accepted values" grep -q "^stablegraph: error: ${bad%%=*}=\"${bad#*=}\" is not valid.*accepted: " <<<"$err"
done

# The log file receives the lines; info level prints the summary at exit.
STABLEGRAPH_LOG=info STABLEGRAPH_LOG_FILE=$TMP/log LD_PRELOAD=$LIB LD_LIBRARY_PATH="$EMU_LIB" "$PROG" direct >/dev/null 2>&1
check "log file: start-up line (default policy skip_profiled)" grep -q '^stablegraph: info: loaded: policy skip_profiled' "$TMP/log"
check "log file: summary at exit" grep -q '^stablegraph: info: summary: policy skip_profiled' "$TMP/log"
done_testing
