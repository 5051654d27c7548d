#!/usr/bin/env bash
# tests/e2e/test_demo.sh: scripts/demo.sh (`make demo`) on the emulated
# driver, small: the table has its three columns and rows, says which driver
# ran, reports equal checksums, labels the time figures as estimates with
# their sources, writes demo.md; a caller's STABLEGRAPH_* settings do not
# reach the runs; a run whose checksum differs, or that fails, makes it exit
# non-zero naming that run; bad settings exit 2.
. "$(dirname "$0")/../lib.sh"
DEMO=$SRC/scripts/demo.sh
export BUILD DEMO_DRIVER=emu DEMO_STEPS=6 DEMO_NODES=32

# demo [VAR=VALUE...]: runs demo.sh into $TMP/out/; sets $rc, $out (stdout), $err.
demo() {
    env "$@" DEMO_OUT="$TMP/out" "$DEMO" >"$TMP/stdout" 2>"$TMP/stderr"
    rc=$?
    out=$(cat "$TMP/stdout"); err=$(cat "$TMP/stderr")
}
# lacks PATTERN TEXT: succeeds if no line of TEXT matches PATTERN (grep).
lacks() { ! grep -q -- "$1" <<<"$2"; }
# cell ROW COLUMN: the cell of the table row whose label is ROW (column 1..3).
cell() {
    awk -F'|' -v row="$1" -v col="$(($2 + 2))" '
        { label = $2; gsub(/^ +| +$/, "", label) }
        label == row { v = $col; gsub(/^ +| +$/, "", v); print v; exit }' <<<"$out"
}

demo STABLEGRAPH_POLICY=off STABLEGRAPH_REPORT="$TMP/stray.json"
check_eq "exits 0" "$rc" 0
[ "$rc" -eq 0 ] || diag "$err"
check "says it runs on the emulated driver" grep -q '^Driver: emulated driver' <<<"$out"
header=$(grep -m1 '^| *| no library' <<<"$out")
check "table header: no library, always_update, default policy" \
    grep -Eq '^\| +\| no library +\| always_update +\| default policy: [a-z_]+ +\|$' <<<"$header"
default=$(sed -n 's/.*| default policy: \([a-z_]*\) .*/\1/p' <<<"$header")
. "$SRC/tests/lib/policies.sh"
a_policy_but_off() { [ -n "$1" ] && [ "$1" != off ] && [[ " $POLICIES " == *" $1 "* ]]; }
check "the default column names a policy ($default), not the caller's STABLEGRAPH_POLICY (off)" \
    a_policy_but_off "$default"
check "the caller's STABLEGRAPH_REPORT is not used" [ ! -e "$TMP/stray.json" ]
for c in 1 2 3; do
    check_eq "column $c: 6 steps" "$(cell steps $c)" 6
    check_eq "column $c: 32 nodes" "$(cell 'kernel nodes per graph' $c)" 32
    check_eq "column $c: 6 graph launches" "$(cell 'graph launches' $c)" 6
done
check_eq "no library: 5 updates reach the driver" "$(cell 'graph updates reaching the driver' 1)" 5
check_eq "always_update: 5 updates reach the driver" "$(cell 'graph updates reaching the driver' 2)" 5
check_eq "no library: no VMM calls" "$(cell 'VMM calls [3]' 1)" "0 (0/0/0/0/0/0)"
check_eq "no library: 4 weights + 6 x (batch + 8 temporaries) allocations" \
    "$(cell 'allocations reaching the driver' 1)" 58
check "no library: a checksum" grep -Eqx '[0-9a-f]{16}' <<<"$(cell checksum 1)"
check_eq "always_update: checksum equal" "$(cell checksum 2)" equal
check_eq "default policy: checksum equal" "$(cell checksum 3)" equal
check "says all checksums are the same" grep -q '^OK: all three runs printed the same checksum' <<<"$out"
for row in 'graph update time avoided (estimate [1])' 'VMM time added (estimate [2])' \
           'driver time avoided, net (estimate [1][2])'; do
    check "row '$row' present" test -n "$(cell "$row" 3)"
done
for src in 'Estimate, not a measurement' 'H200' 'Foundry, arXiv 2604.06664' '36 us per cuGraphExecUpdate' \
           'V100' 'A100' 'cuMemCreate 193 us' 'cuMemMap 1.45 us' 'cuMemSetAccess 36 us' 'cuMemUnmap 25.6 us'; do
    check "footnotes name the source: $src" grep -qF -- "$src" <<<"$out"
done
check "no measured wall time on the emulated driver" lacks "wall time" "$out"
check "demo.md holds the table" grep -qF -- "$header" "$TMP/out/demo.md"
check "each run's report kept" [ -s "$TMP/out/run-always_update.report.json" -a -s "$TMP/out/run-default.report.json" ]

# A policy that places memory: the library's calls show up.
demo DEMO_POLICY=skip_temp
check_eq "DEMO_POLICY=skip_temp: exits 0" "$rc" 0
check "DEMO_POLICY=skip_temp: named in the header" grep -q '| policy: skip_temp ' <<<"$out"
check_eq "skip_temp: no allocation reaches the driver" "$(cell 'allocations reaching the driver' 3)" 0
vmm=$(cell 'VMM calls [3]' 3)
check "skip_temp: the library's VMM calls are counted ($vmm)" [ "${vmm%% *}" -gt 0 ]

# A run whose checksum differs: the fake program changes the work under always_update.
fake=$TMP/fake_train_loop
cat >"$fake" <<FAKE
#!/usr/bin/env bash
if [ "\${STABLEGRAPH_POLICY:-}" = always_update ]; then exec "$BUILD/workloads/train_loop" "\$@" --elems 100; fi
if [ "\${STABLEGRAPH_REPORT:-}" ] && [ -n "\${FAKE_FAIL_DEFAULT:-}" ]; then echo "fake failure" >&2; exit 3; fi
exec "$BUILD/workloads/train_loop" "\$@"
FAKE
chmod +x "$fake"
demo DEMO_PROGRAM="$fake"
check "checksum differs: exits non-zero" [ "$rc" -ne 0 ]
check "checksum differs: the always_update run is named" \
    grep -q "^FAILED: run 'always_update' (always_update): checksum [0-9a-f]* differs" <<<"$out"
check "checksum differs: the row says so" grep -q '^DIFFERS' <<<"$(cell checksum 2)"
check "checksum differs: the default run is not blamed" lacks "^FAILED: run 'default'" "$out"

demo DEMO_PROGRAM="$fake" FAKE_FAIL_DEFAULT=1
check "a failing run: exits non-zero" [ "$rc" -ne 0 ]
check "a failing run: named with its status" grep -q "^FAILED: run 'default' .*exited with status 3" <<<"$out"
check "a failing run: its output shown" grep -q 'fake failure' <<<"$err"

for bad in DEMO_STEPS=0 DEMO_NODES=x DEMO_DRIVER=gpu DEMO_PROGRAM=$TMP/nonexistent; do
    demo "$bad"
    check_eq "$bad: exit status 2" "$rc" 2
    check "$bad: says why" grep -q "^demo: ${bad%%=*}\|^demo: .*not found" <<<"$err"
done
done_testing
