# tests/e2e/life_lib.sh: helpers shared by test_lifecycle.sh and
# test_bad_handles.sh (source it after tests/lib.sh). A program is run
# without the library, then with it under every policy, and each run must
# match the first: exit status, stdout (every driver result and checksum the
# program prints), and the number of complete reports written.
LIB=$BUILD/libstablegraph.so
POLICIES="off always_update skip_temp skip_profiled"
LIMIT=${LIFECYCLE_TIMEOUT:-60}

# run NAME [VAR=VALUE...] -- CMD...: stdout, stderr and status into
# $TMP/NAME.{out,err,rc}, under a timeout.
run() {
    local name=$1; shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" timeout -k 5 "$LIMIT" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}

# scenario NAME REPORTS [VAR=VALUE...] -- CMD...: baseline, then each policy.
# A test may define `expected_output POLICY` (a filter from the baseline's
# stdout to what that policy must print) for differences the library
# documents; without it every policy must print exactly the baseline.
scenario() {
    local name=$1 reports=$2; shift 2
    run "$name.base" LD_LIBRARY_PATH="$EMU_LIB" "$@"
    local base_rc
    base_rc=$(cat "$TMP/$name.base.rc")
    check "$name: runs without the library (status $base_rc)" [ "$base_rc" -lt 124 ]
    for p in $POLICIES; do
        local t=$name.$p dir=$TMP/rep/$name.$p
        mkdir -p "$dir"
        run "$t" LD_LIBRARY_PATH="$EMU_LIB" LD_PRELOAD="$LIB" STABLEGRAPH_POLICY="$p" \
            STABLEGRAPH_REPORT="$dir/r-%p.json" "$@"
        check_eq "$t: exit status as without the library" "$(cat "$TMP/$t.rc")" "$base_rc"
        if declare -F expected_output >/dev/null; then
            expected_output "$p" <"$TMP/$name.base.out" >"$TMP/$t.want"
        else
            cp "$TMP/$name.base.out" "$TMP/$t.want"
        fi
        if cmp -s "$TMP/$t.want" "$TMP/$t.out"; then
            ok "$t: same driver results and checksums"
        else
            not_ok "$t: same driver results and checksums"
            diff "$TMP/$t.want" "$TMP/$t.out" | head -5 | sed 's/^/#   /'
        fi
        local n=0 bad=0 f
        for f in "$dir"/r-*.json; do
            [ -e "$f" ] || continue
            n=$((n + 1))
            [ "$(json_get "$f" version 2>/dev/null)" = 1 ] || bad=$((bad + 1))
        done
        check_eq "$t: $reports report(s), complete" "$n/$bad" "$reports/0"
    done
}
