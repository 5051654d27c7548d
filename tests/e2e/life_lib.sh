# tests/e2e/life_lib.sh: helpers shared by test_lifecycle.sh and
# test_bad_handles.sh (source it after tests/lib.sh). A program is run
# without the library, checked against what it must do (its exit status and
# the checksums of its work, from a model of that work), then with the
# library under every policy, and each run must match the first: exit
# status, stdout (every driver result and checksum the program prints), and
# the number of complete reports written.
LIB=$BUILD/libstablegraph.so
. "$SRC/tests/lib/policies.sh"
LIMIT=${LIFECYCLE_TIMEOUT:-60}

# life_sum LABEL WORDS COUNT: the line life_checksum() (life_common.c) prints
# for a buffer of WORDS 32-bit words, zeroed, then incremented COUNT times
# (inc_u32 kernels x launches): "LABEL checksum: <hex>", FNV-1a over the
# bytes with the program's offset basis 1469598103934665603.
life_sum() {
    python3 - "$@" <<'PY'
import struct, sys
label, words, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
h = 1469598103934665603
for b in struct.pack("<%dI" % words, *([count] * words)):
    h = ((h ^ b) * 1099511628211) & (2**64 - 1)
print("%s checksum: %016x" % (label, h))
PY
}

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

# scenario NAME REPORTS [--status N] [--sum LABEL WORDS COUNT]... [VAR=VALUE...] -- CMD...:
# the baseline, which must exit N (default 0) and print exactly the
# checksum lines of the --sum options, in order (life_sum); then each policy.
# A test may define `expected_output POLICY` (a filter from the baseline's
# stdout to what that policy must print) for differences the library
# documents; without it every policy must print exactly the baseline.
scenario() {
    local name=$1 reports=$2 status=0 want="" base_rc; shift 2
    while :; do
        case $1 in
        --status) status=$2; shift 2 ;;
        --sum) want+="$(life_sum "$2" "$3" "$4")"$'\n'; shift 4 ;;
        *) break ;;
        esac
    done
    run "$name.base" LD_LIBRARY_PATH="$EMU_LIB" "$@"
    base_rc=$(cat "$TMP/$name.base.rc")
    check_eq "$name: exit status without the library" "$base_rc" "$status"
    if [ -n "$want" ]; then
        check_eq "$name: checksums without the library are the model's" \
            "$(grep 'checksum:' "$TMP/$name.base.out")" "${want%$'\n'}"
    else
        check "$name: no checksum without the library" [ -z "$(grep 'checksum:' "$TMP/$name.base.out")" ]
    fi
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
