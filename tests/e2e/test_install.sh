#!/usr/bin/env bash
# tests/e2e/test_install.sh: `make install PREFIX=... DESTDIR=...` puts the
# library, the wrapper and the README where the README says, and the
# installed wrapper finds the installed library (not the build tree's) and
# runs a workload with it on the emulated driver.
. "$(dirname "$0")/../lib.sh"
dest=$TMP/dest
# make as the build was made (the compiler, flags and SAN its stamp records):
# other flags would make make rebuild the build directory under the tests.
mapfile -t made_with < <(grep -hE '^[A-Z_]+=' "$BUILD"/flags.* 2>/dev/null)
check "the build's flags are recorded (${#made_with[@]} variables)" [ "${#made_with[@]}" -ge 4 ]
lib_before=$(stat -c %Y.%s "$BUILD/libstablegraph.so")
make -s -C "$SRC" BUILD="$BUILD" "${made_with[@]}" install DESTDIR="$dest" \
    PREFIX=/opt/sg >"$TMP/install.log" 2>&1
check "make install succeeds" [ $? -eq 0 ]
check_eq "make install remade nothing" "$(stat -c %Y.%s "$BUILD/libstablegraph.so")" "$lib_before"
check "library installed" test -f "$dest/opt/sg/lib/stablegraph/libstablegraph.so"
check "wrapper installed and executable" test -x "$dest/opt/sg/bin/stablegraph-run"
check "README installed" test -f "$dest/opt/sg/share/doc/stablegraph/README.md"
# The installed wrapper, away from the source tree: it must pick lib/stablegraph/.
out=$(cd "$TMP" && LD_LIBRARY_PATH="$EMU_LIB" "$dest/opt/sg/bin/stablegraph-run" --report "$TMP/r.json" -- \
      sh -c 'echo "$LD_PRELOAD"; exec "$0" --steps 3' "$BUILD/workloads/rotating_inputs")
check_eq "installed wrapper preloads the installed library" "$(echo "$out" | head -1)" \
    "$(readlink -f "$dest/opt/sg/lib/stablegraph/libstablegraph.so")"
LD_LIBRARY_PATH="$EMU_LIB" "$BUILD/workloads/rotating_inputs" --steps 3 >"$TMP/base.out" 2>&1
check_baseline rotating_inputs "$TMP/base.out" $?
check_sum "workload under the installed library: same checksum" "$(sum_in <<<"$out")" "$(sum_in "$TMP/base.out")"
check_eq "report written (default policy)" "$(json_get "$TMP/r.json" policy)" skip_profiled
done_testing
