#!/usr/bin/env bash
# tests/e2e/test_wrapper.sh: scripts/stablegraph-run. Option validation (exit
# 2 with usage), LD_PRELOAD appended, exit status passed through, the report
# per rank, and its accepted values matching core/config.h. Issue 14: a
# library it cannot add (a path with a space or ':', installed or given by
# STABLEGRAPH_LIB; missing; not loadable) stops it with status 2 and a
# message naming the path and the reason, before COMMAND runs; a COMMAND
# after '--' that starts with '-' runs as a command (127 when missing); the
# setuid warning comes exactly when the loader ignores LD_PRELOAD (checked
# against the loader: the library is, or is not, mapped in the program).
# LD_PRELOAD already holding the library: the same file is not added twice,
# another copy is refused (status 2). Under an MPI launcher inside a Slurm
# job (a stale SLURM_PROCID shared by the ranks) %r is the MPI rank, so each
# rank writes its own report (a stand-in launcher).
. "$(dirname "$0")/../lib.sh"
normal_build_only "the wrapper script" "it tests scripts/stablegraph-run; the library it loads runs instrumented in the other tests"
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
for word in --policy --report --log --strict STABLEGRAPH_LOG_FILE STABLEGRAPH_LIB srun mpirun torchrun \
            %r %p %h setuid; do
    check "--help mentions $word" grep -q -- "$word" "$TMP/help"
done

"$RUN" -- sh -c 'exit 7'
check_eq "exit status passed through" "$?" 7
out=$(LD_PRELOAD=/nonexistent-other.so "$RUN" --policy off -- sh -c 'echo "$LD_PRELOAD|$STABLEGRAPH_POLICY"' 2>/dev/null)
check_eq "LD_PRELOAD appended, policy exported" "$out" "/nonexistent-other.so:$(readlink -f "$STABLEGRAPH_LIB")|off"

# Same accepted values as core/config.h: the policies as the build lists
# them (tests/lib/policies.sh), the log levels from SG_LOG_LIST.
. "$SRC/tests/lib/policies.sh"
LOG_LEVELS=$(sed -n "/define SG_LOG_LIST/,/[^\\\\]\$/p" "$SRC/core/config.h" | grep -o 'X([A-Z_]*, "[a-z_]*")' \
             | sed 's/.*"\(.*\)")/\1/' | tr '\n' ' ' | sed 's/ $//')
for var in POLICIES LOG_LEVELS; do
    got=$(sed -n "s/^$var=\"\(.*\)\"/\1/p" "$RUN")
    check_eq "wrapper $var match core/config.h" "$got" "${!var}"
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

# ---------------------------------------------------------------- a library it cannot add
# refused NAME [VAR=VALUE...] -- WRAPPER: WRAPPER (with the variables) must
# exit 2 with a message naming $want_path and $want_why, and not run the
# command (which would create $TMP/ran).
refused() {
    local name=$1; shift
    rm -f "$TMP/ran"
    env "$@" sh -c 'touch "$0/ran"' "$TMP" >"$TMP/$name.out" 2>"$TMP/$name.err"
    check_eq "$name: exit status 2" "$?" 2
    check "$name: the command did not run" [ ! -e "$TMP/ran" ]
    check "$name: the message names the path" grep -qF -- "$want_path" "$TMP/$name.err"
    check "$name: the message says why" grep -qF -- "$want_why" "$TMP/$name.err"
}
for dir in "with space" "co:lon"; do
    mkdir -p "$TMP/$dir"
    cp "$STABLEGRAPH_LIB" "$TMP/$dir/libstablegraph.so"
    want_path="$TMP/$dir/libstablegraph.so" want_why="space or ':'"
    refused "STABLEGRAPH_LIB in '$dir'" STABLEGRAPH_LIB="$want_path" "$RUN" --
    # installed there: bin/stablegraph-run and lib/stablegraph/libstablegraph.so
    mkdir -p "$TMP/$dir/bin" "$TMP/$dir/lib/stablegraph"
    cp "$RUN" "$TMP/$dir/bin/"
    cp "$STABLEGRAPH_LIB" "$TMP/$dir/lib/stablegraph/"
    want_path="$TMP/$dir/lib/stablegraph/libstablegraph.so"
    refused "installed in '$dir'" -u STABLEGRAPH_LIB "$TMP/$dir/bin/stablegraph-run" --
done
# The way out the message gives: a link without those characters.
mkdir "$TMP/link"
ln -s "$TMP/with space/libstablegraph.so" "$TMP/link/libstablegraph.so"
STABLEGRAPH_LIB=$TMP/link/libstablegraph.so emu "$RUN" --report "$TMP/via-link.json" -- \
    "$BUILD/tests/e2e/resolve_paths" direct >/dev/null 2>&1
check "a link without spaces to that library: loaded, the report written" \
    [ "$(json_get "$TMP/via-link.json" hooks.cuInit.calls 2>/dev/null)" = 1 ]

want_path=$TMP/missing.so want_why="no such file"
refused "missing STABLEGRAPH_LIB" STABLEGRAPH_LIB="$want_path" "$RUN" --
echo "not a shared object" >"$TMP/text.so"
want_path=$TMP/text.so want_why="the loader cannot load it"
refused "unloadable STABLEGRAPH_LIB" STABLEGRAPH_LIB="$want_path" "$RUN" --
check "unloadable STABLEGRAPH_LIB: the loader's reason is quoted" \
    grep -q "cannot load it (.*text.so.*)" "$TMP/unloadable STABLEGRAPH_LIB.err"
mkdir "$TMP/dir.so"
want_path=$TMP/dir.so want_why="not a regular file"
refused "a folder as STABLEGRAPH_LIB" STABLEGRAPH_LIB="$want_path" "$RUN" --
# A relative STABLEGRAPH_LIB is made absolute, so that a process in another
# folder finds it too.
out=$(cd "$(dirname "$STABLEGRAPH_LIB")" && STABLEGRAPH_LIB=./libstablegraph.so "$RUN" -- \
      sh -c 'cd / && echo "$LD_PRELOAD"')
check_eq "a relative STABLEGRAPH_LIB: made absolute" "$out" "$(dirname "$STABLEGRAPH_LIB")/./libstablegraph.so"

# The space/':' refusal gives its way out (the message's last words were lost).
check "a path with a space: the message says to link it elsewhere" \
    grep -qF "set STABLEGRAPH_LIB to a link without them" "$TMP/STABLEGRAPH_LIB in 'with space'.err"

# ---------------------------------------------------------------- LD_PRELOAD holding the library already
# The same file (an outer wrapper; a launcher passing its environment on) is
# not added twice; another copy of it is refused: two copies in one process
# write no report.
out=$("$RUN" -- "$RUN" -- sh -c 'echo "$LD_PRELOAD"')
check_eq "wrapper under the wrapper: the library in LD_PRELOAD once" "$out" "$(readlink -f "$STABLEGRAPH_LIB")"
out=$(LD_PRELOAD="/x/liba.so $TMP/link/../link/libstablegraph.so:" STABLEGRAPH_LIB=$TMP/link/libstablegraph.so \
      "$RUN" -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check_eq "the same library by another path in LD_PRELOAD: not added again" "$out" \
    "/x/liba.so $TMP/link/../link/libstablegraph.so:"
mkdir "$TMP/copy" && cp "$STABLEGRAPH_LIB" "$TMP/copy/libstablegraph.so"
want_path=$TMP/copy/libstablegraph.so want_why="another copy"
refused "another copy in LD_PRELOAD" LD_PRELOAD="/x/liba.so:$want_path" "$RUN" --

# ---------------------------------------------------------------- %r under an MPI launcher inside a Slurm job
# sbatch, then mpirun/mpiexec: every rank inherits the batch step's
# SLURM_PROCID=0; the library's %r takes OMPI_COMM_WORLD_RANK and PMI_RANK
# before it, so the ranks write one report each. A stand-in launcher
# runs N copies with the MPI launcher's variable.
cat >"$TMP/fake-mpirun" <<'EOF'
#!/bin/sh
# fake-mpirun VAR N COMMAND...: N copies of COMMAND, VAR=0..N-1 in each.
var=$1 n=$2; shift 2; i=0
while [ "$i" -lt "$n" ]; do env "$var=$i" "$@" & i=$((i + 1)); done
wait
EOF
chmod +x "$TMP/fake-mpirun"
for var in OMPI_COMM_WORLD_RANK PMI_RANK; do
    SLURM_PROCID=0 emu "$TMP/fake-mpirun" "$var" 3 "$RUN" --report "$TMP/mpi-$var-%r.json" -- \
        "$BUILD/tests/e2e/resolve_paths" direct >/dev/null
    check_eq "sbatch + mpirun ($var, SLURM_PROCID=0): one report per rank" \
        "$(cd "$TMP" && echo mpi-$var-*.json)" "mpi-$var-0.json mpi-$var-1.json mpi-$var-2.json"
done

# ---------------------------------------------------------------- a command that starts with '-'
"$RUN" -- -c env >"$TMP/dash-c.out" 2>"$TMP/dash-c.err"
check_eq "-- -c env: run as a command, missing: status 127" "$?" 127
check_eq "-- -c env: nothing run" "$(cat "$TMP/dash-c.out")" ""
mkdir -p "$TMP/bin"
printf '#!/bin/sh\necho "args=$*"\necho "preload=$LD_PRELOAD"\n' >"$TMP/bin/-dash-cmd"
chmod +x "$TMP/bin/-dash-cmd"
out=$(PATH="$TMP/bin:$PATH" "$RUN" -- -dash-cmd -x y 2>&1)
check_eq "-- -dash-cmd: run as a command, with its arguments and the library" "$out" \
    "$(printf 'args=-x y\npreload=%s' "$STABLEGRAPH_LIB")"

# ---------------------------------------------------------------- setuid: warn exactly when the loader ignores LD_PRELOAD
# suid_case NAME FILE: runs FILE (a copy of cat) on /proc/self/maps through
# the wrapper; says whether it warned and whether the library was mapped.
suid_case() {
    "$RUN" -- "$2" /proc/self/maps >"$TMP/$1.maps" 2>"$TMP/$1.err"
    if grep -q 'libstablegraph' "$TMP/$1.maps"; then loaded=yes; else loaded=no; fi
    if grep -q 'warning: .*LD_PRELOAD' "$TMP/$1.err"; then warned=yes; else warned=no; fi
}
cp /bin/cat "$TMP/cat-mine" && chmod u+s "$TMP/cat-mine"   # set-user-ID to ourselves
suid_case own "$TMP/cat-mine"
check_eq "setuid to the caller: the library is loaded" "$loaded" yes
check_eq "setuid to the caller: no warning" "$warned" no
if [ "$(id -u)" = 0 ] && cp /bin/cat "$TMP/cat-other" && chown 65534 "$TMP/cat-other" &&
   chmod u+s "$TMP/cat-other" && cp /bin/cat "$TMP/cat-group" && chgrp 65534 "$TMP/cat-group" &&
   chmod g+s "$TMP/cat-group"; then
    suid_case other "$TMP/cat-other"
    check_eq "setuid to another user: the library is not loaded" "$loaded" no
    check_eq "setuid to another user: warned" "$warned" yes
    suid_case group "$TMP/cat-group"
    check_eq "setgid to another group: the library is not loaded" "$loaded" no
    check_eq "setgid to another group: warned" "$warned" yes
else
    skip "setuid/setgid to another user" "not root"
fi
done_testing
