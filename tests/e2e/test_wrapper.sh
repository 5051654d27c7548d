#!/usr/bin/env bash
# tests/e2e/test_wrapper.sh: scripts/stablegraph-run. Option validation (exit
# 2 with usage), LD_PRELOAD appended, exit status passed through, the report
# per rank, the setuid warning, and its accepted values matching
# core/config.h.
. "$(dirname "$0")/../lib.sh"
RUN=$SRC/scripts/stablegraph-run
export STABLEGRAPH_LIB=$BUILD/libstablegraph.so

for bad in "--policy fast true" "--log loud true" "--bogus true" "--policy" "--report '' true" ""; do
    eval "set -- $bad"
    "$RUN" "$@" >"$TMP/out" 2>"$TMP/err"
    check_eq "bad options '$bad': exit status 2" "$?" 2
    check "bad options '$bad': usage printed" grep -q '^Usage: stablegraph-run' "$TMP/err"
done
"$RUN" --help >"$TMP/help"
check_eq "--help exits 0" "$?" 0
for word in --policy --report --log --strict STABLEGRAPH_LOG_FILE srun mpirun torchrun %r %p %h setuid; do
    check "--help mentions $word" grep -q -- "$word" "$TMP/help"
done

"$RUN" -- sh -c 'exit 7'
check_eq "exit status passed through" "$?" 7
out=$(LD_PRELOAD=/nonexistent-other.so "$RUN" --policy off -- sh -c 'echo "$LD_PRELOAD|$STABLEGRAPH_POLICY"' 2>/dev/null)
check_eq "LD_PRELOAD appended, policy exported" "$out" "/nonexistent-other.so:$(readlink -f "$STABLEGRAPH_LIB")|off"

# Same accepted values as core/config.h.
for list in POLICY LOG; do
    want=$(sed -n "/define SG_${list}_LIST/,/[^\\\\]\$/p" "$SRC/core/config.h" | grep -o 'X([A-Z_]*, "[a-z_]*")' \
           | sed 's/.*"\(.*\)")/\1/' | tr '\n' ' ' | sed 's/ $//')
    var=$([ $list = POLICY ] && echo POLICIES || echo LOG_LEVELS)
    got=$(sed -n "s/^$var=\"\(.*\)\"/\1/p" "$RUN")
    check_eq "wrapper $var match core/config.h" "$got" "$want"
done

# One report per rank; a launcher shell in between writes none.
for r in 0 1; do
    RANK=$r emu "$RUN" --report "$TMP/rep-%r.json" --strict -- sh -c "$BUILD/tests/e2e/resolve_paths direct >/dev/null"
done
check "report for rank 0" [ -f "$TMP/rep-0.json" ]
check "report for rank 1" [ -f "$TMP/rep-1.json" ]
check_eq "the report counts the program's calls" "$(json_get "$TMP/rep-1.json" hooks.cuInit.calls)" 1
SLURM_PROCID=5 emu "$RUN" --report "$TMP/slurm-%r-%p.json" -- "$BUILD/tests/e2e/resolve_paths" direct >/dev/null
check "rank from SLURM_PROCID" compgen -G "$TMP/slurm-5-*.json"

# A setuid program is named.
cp /bin/true "$TMP/suid-true" && chmod u+s "$TMP/suid-true"
err=$("$RUN" -- "$TMP/suid-true" 2>&1)
check "setuid command: warned" grep -q 'setuid/setgid' <<<"$err"
done_testing
