#!/usr/bin/env bash
# tests/e2e/test_install.sh: `make install PREFIX=... DESTDIR=...` puts the
# library, the wrapper and the README where the README says, and the
# installed wrapper finds the installed library (not the build tree's) and
# runs a workload with it on the emulated driver.
. "$(dirname "$0")/../lib.sh"
dest=$TMP/dest
# (SAN as the build was made: another SAN would make make start the build over)
make -s -C "$SRC" BUILD="$BUILD" SAN="$(cat "$BUILD/san.cfg" 2>/dev/null)" install DESTDIR="$dest" \
    PREFIX=/opt/sg >"$TMP/install.log" 2>&1
check "make install succeeds" [ $? -eq 0 ]
check "library installed" test -f "$dest/opt/sg/lib/stablegraph/libstablegraph.so"
check "wrapper installed and executable" test -x "$dest/opt/sg/bin/stablegraph-run"
check "README installed" test -f "$dest/opt/sg/share/doc/stablegraph/README.md"
# The installed wrapper, away from the source tree: it must pick lib/stablegraph/.
out=$(cd "$TMP" && LD_LIBRARY_PATH="$EMU_LIB" "$dest/opt/sg/bin/stablegraph-run" --report "$TMP/r.json" -- \
      sh -c 'echo "$LD_PRELOAD"; exec "$0" --steps 3' "$BUILD/workloads/rotating_inputs")
check_eq "installed wrapper preloads the installed library" "$(echo "$out" | head -1)" \
    "$(readlink -f "$dest/opt/sg/lib/stablegraph/libstablegraph.so")"
base=$(LD_LIBRARY_PATH="$EMU_LIB" "$BUILD/workloads/rotating_inputs" --steps 3 | grep checksum)
check_eq "workload under the installed library: same checksum" "$(echo "$out" | grep checksum)" "$base"
check_eq "report written (default policy)" "$(json_get "$TMP/r.json" policy)" skip_profiled
done_testing
