#!/usr/bin/env bash
# tests/harness/test_build.sh: the build's own rules.
#   - sub-makefiles are included with `include` (a missing one is an error),
#     `-include` only for the generated .d files;
#   - the build records what it was made with ($BUILD/flags.<hash>): make run
#     again with those variables finds everything up to date;
#   - another SAN makes make remake the files by their rules: `make -n` with
#     it lists the recompilation, and changes nothing (before, the Makefile
#     deleted $BUILD while reading itself, even under -n);
#   - the policy list ($BUILD/policies, `make print-policies`) is core/config.h's.
. "$(dirname "$0")/../lib.sh"
normal_build_only "the build's rules" "it tests make, not the code it builds"

for mk in "$SRC/Makefile" "$SRC"/*/*.mk "$SRC"/tests/*/*.mk; do
    bad=$(grep -n '^ *-include' "$mk" | grep -v '\.d\b')
    check_eq "${mk#"$SRC/"}: no -include but of .d files" "$bad" ""
done

mapfile -t made_with < <(grep -hE '^[A-Z_]+=' "$BUILD"/flags.* 2>/dev/null)
# Where the build cannot run (a carried build/ on a machine without the
# toolchain's headers, such as the real-GPU kit's), the make checks are skipped.
cuda_home=$(sed -n 's/^CUDA_HOME=//p' "$BUILD"/flags.* 2>/dev/null)
if [ ! -f "${cuda_home:-/usr/local/cuda}/include/cuda.h" ] || [ ! -f /usr/include/uthash.h ]; then
    skip "make with the recorded flags, make -n with another SAN, make print-policies" \
        "no cuda.h in ${cuda_home:-/usr/local/cuda} or no uthash.h here: the build cannot run"
    done_testing
    exit
fi
check_eq "one flags stamp in $BUILD" "$(ls "$BUILD"/flags.* 2>/dev/null | wc -l)" 1
lib=$BUILD/libstablegraph.so
mk() { make --no-print-directory -C "$SRC" BUILD="$BUILD" "$@"; }
mk -q "${made_with[@]}" "$lib" >"$TMP/q.out" 2>&1
check_eq "make with the recorded flags: the library is up to date" "$?" 0

other=thread
grep -q thread "$BUILD/san.cfg" 2>/dev/null && other=address
# What make owns in $BUILD: everything but the two directories the running
# suite writes to (test-logs: logs and tables; test-cache: the model's
# checksums). Other tests run beside this one and must write nowhere else.
build_state() {
    (cd "$BUILD" && find . \( -path ./test-logs -o -path ./test-cache \) -prune -o \
        \( -newer "$lib" -o -name 'flags.*' \) -print | sort | md5sum)
}
before=$(build_state)
touch -r "$lib" "$TMP/lib-time"
mk -n "${made_with[@]}" SAN=$other "$lib" >"$TMP/n.out" 2>&1
check "make -n SAN=$other: would recompile the library's objects with -fsanitize=$other" \
    grep -q -- "-fsanitize=$other .* -c -o .*/obj/core/" "$TMP/n.out"
check "make -n SAN=$other: would relink the library" grep -q -- "-o $lib " "$TMP/n.out"
check_eq "make -n SAN=$other: nothing in $BUILD changed" \
    "$(build_state)" "$before"
check "make -n SAN=$other: the library is untouched" test ! "$lib" -nt "$TMP/lib-time" -a ! "$lib" -ot "$TMP/lib-time"
mk -q "${made_with[@]}" "$lib" >/dev/null 2>&1
check_eq "then, with the recorded flags: still up to date" "$?" 0

check_eq "make print-policies prints \$BUILD/policies" "$(mk -s "${made_with[@]}" print-policies)" \
    "$(cat "$BUILD/policies")"
want=$(sed -n '/define SG_POLICY_LIST/,/[^\\]$/p' "$SRC/core/config.h" | grep -o '"[a-z_]*"' | tr -d '"' | xargs)
check_eq "the policies are core/config.h's SG_POLICY_LIST" "$(cat "$BUILD/policies")" "$want"
done_testing
