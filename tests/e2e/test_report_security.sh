#!/usr/bin/env bash
# tests/e2e/test_report_security.sh: writing the report is safe in shared
# folders and no environment value is ever used as a format (issue 6, "Bad
# input and security").
#   - In a sticky world-writable folder: a symbolic link planted at the
#     report path (to a victim file, or dangling), or at the temporary
#     names beside it, is never followed (links to FIFOs, devices and the
#     program's own descriptors: tests/e2e/test_files.sh); another user's file at the report
#     path is never truncated (checked as user nobody when possible); no
#     temporary file is left behind.
#   - %n %s %x in STABLEGRAPH_REPORT, STABLEGRAPH_LOG_FILE, STABLEGRAPH_POLICY,
#     RANK and the host name come out literally (file names, messages).
#   - Overlong values (and paths that expand past the limit or past what the
#     file system takes) are rejected with a message; the program runs on.
# In every case the program's exit status and checksum are those it has
# without the library. fs.protected_symlinks is 0 on the test machines, so a
# plain open(O_TRUNC) would follow the planted links.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/wl_lib.sh"

# is_report FILE: a regular file (not a link) holding a JSON report.
is_report() {
    [ -f "$1" ] && [ ! -L "$1" ] && [ "$(json_get "$1" version 2>/dev/null)" = 1 ]
}
no_temp_left() { [ -z "$(find "$1" -name '*.tmp*' -print -quit)" ]; }

# ---------------------------------------------------------------- shared folder
shared=$TMP/shared
chmod 755 "$TMP"   # so that another user can reach $shared
mkdir -m 1777 "$shared"
victim=$TMP/victim
echo VICTIM >"$victim"

ln -s "$victim" "$shared/linked.json"
wl linked STABLEGRAPH_REPORT="$shared/linked.json"
same_as_without linked
check_eq "link at the report path: the victim is untouched" "$(cat "$victim")" VICTIM
check "link at the report path: replaced by the report" is_report "$shared/linked.json"

ln -s "$TMP/created-through-link" "$shared/dangling.json"
wl dangling STABLEGRAPH_REPORT="$shared/dangling.json"
same_as_without dangling
check "dangling link: nothing created at its target" [ ! -e "$TMP/created-through-link" ]
check "dangling link: replaced by the report" is_report "$shared/dangling.json"

# Links planted at the temporary names (path.tmp.PID.N: the shell's pid is
# the program's, as it execs it).
sh -c 't=$1; shift; for i in 0 1 2; do ln -s "$0" "$t.tmp.$$.$i"; done; exec "$@"' "$victim" "$shared/planted.json" \
    env LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$EMU_LIB" STABLEGRAPH_REPORT="$shared/planted.json" \
    "$WL" "${WL_ARGS[@]}" >"$TMP/planted.out" 2>"$TMP/planted.err"
echo $? >"$TMP/planted.rc"
same_as_without planted
check_eq "links at the temporary names: the victim is untouched" "$(cat "$victim")" VICTIM
check "links at the temporary names: the report is written anyway" is_report "$shared/planted.json"
rm -f "$shared"/planted.json.tmp.*
check "no temporary file left in the shared folder" no_temp_left "$shared"

# Another user's files: run as nobody against root's (world-writable, so a
# plain open(O_TRUNC) would succeed) file and root's link to a victim.
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
if [ "$(id -u)" = 0 ] && "${nobody[@]}" test -x "$WL" -a -r "$LIB" -a -w "$shared" 2>/dev/null; then
    echo OTHER >"$shared/other.json"; chmod 666 "$shared/other.json"
    chmod 666 "$victim"
    ln -s "$victim" "$shared/other-link.json"
    WL_AS="${nobody[*]}" wl other STABLEGRAPH_REPORT="$shared/other.json"
    same_as_without other
    check_eq "another user's file: not truncated" "$(cat "$shared/other.json")" OTHER
    check "another user's file: the failure is said" err_has other "$shared/other.json"
    WL_AS="${nobody[*]}" wl other_link STABLEGRAPH_REPORT="$shared/other-link.json"
    same_as_without other_link
    check_eq "another user's link: the victim is untouched" "$(cat "$victim")" VICTIM
    check "another user's link: still the same link" [ -L "$shared/other-link.json" ]
    check "as another user: no temporary file left" no_temp_left "$shared"
else
    skip "another user's file" "not root, or nobody cannot run $WL"
fi

# ---------------------------------------------------------------- formats
fmt=$TMP/fmt
mkdir "$fmt"
wl fmt_escaped STABLEGRAPH_REPORT="$fmt/r-%%n%%s%%x-%p.json"
same_as_without fmt_escaped
check "%% in the report path: the file name is literal" \
    is_report "$fmt/r-%n%s%x-$(json_get "$(ls -d "$fmt"/r-* | head -1)" pid).json"

bad="$fmt/bad-%n%s%x.json"
wl fmt_bad STABLEGRAPH_REPORT="$bad"
same_as_without fmt_bad
check "%n in the report path: rejected, quoted literally" \
    err_has fmt_bad "stablegraph: error: STABLEGRAPH_REPORT=\"$bad\" is not valid"
check "%n in the report path: no file written" [ -z "$(ls "$fmt" | grep -v '^r-')" ]

for v in STABLEGRAPH_POLICY STABLEGRAPH_LOG STABLEGRAPH_STRICT; do
    wl "fmt_$v" "$v=%n%n%s%s%x%p"
    same_as_without "fmt_$v"
    check "$v=%n...: quoted literally" err_has "fmt_$v" "$v=\"%n%n%s%s%x%p\" is not valid"
done

log="$fmt/log-%n%s%x%p.txt"
RANK='%n%s%x/..' wl fmt_log STABLEGRAPH_LOG=info STABLEGRAPH_LOG_FILE="$log" \
    STABLEGRAPH_REPORT="$fmt/%%s%%n-%r.json"
same_as_without fmt_log
check "%n in the log file name: used literally" grep -q '^stablegraph: info: ' "$log"
check "the report template is logged literally" grep -qF "report $fmt/%%s%%n-%r.json" "$log"
check "%n in RANK: literal, '/' replaced" is_report "$fmt/%s%n-%n%s%x_...json"

if unshare -u true 2>/dev/null; then
    unshare -u sh -c 'printf "h%%n%%s/x" >/proc/sys/kernel/hostname && exec "$@"' sh \
        env LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$EMU_LIB" STABLEGRAPH_REPORT="$fmt/host-%h.json" \
        "$WL" "${WL_ARGS[@]}" >"$TMP/fmt_host.out" 2>"$TMP/fmt_host.err"
    echo $? >"$TMP/fmt_host.rc"
    same_as_without fmt_host
    check "%n and '/' in the host name: literal, '/' replaced" is_report "$fmt/host-h%n%s_x.json"
else
    skip "host name with %n" "cannot unshare the UTS namespace"
fi

# ---------------------------------------------------------------- overlong
long1025="$TMP/$(printf 'a%.0s' $(seq 1 1020))"
head64=${long1025:0:64}
for v in STABLEGRAPH_REPORT STABLEGRAPH_LOG_FILE STABLEGRAPH_POLICY; do
    wl "long_$v" "$v=$long1025"
    same_as_without "long_$v"
    check "$v overlong: rejected with a message" \
        err_has "long_$v" "$v=\"$head64...\" is not valid (too long)"
    wl "long_strict_$v" "$v=$long1025" STABLEGRAPH_STRICT=1
    check_eq "$v overlong, strict: exit status 2" "$(cat "$TMP/long_strict_$v.rc")" 2
    check_eq "$v overlong, strict: main never ran" "$(cat "$TMP/long_strict_$v.out")" ""
done
check "overlong report path: no file written" [ ! -e "$long1025" ]

huge=$(head -c 100000 /dev/zero | tr '\0' 'x')   # under the kernel's 128 KiB per string
wl huge STABLEGRAPH_REPORT="$huge"
same_as_without huge
check "a 100000-byte value: rejected with a message" err_has huge 'STABLEGRAPH_REPORT="xxxx'

# Valid templates that expand too far: past the library's limit, or past
# what the file system takes (a 300-byte name).
RANK=$(printf 'r%.0s' $(seq 1 3000)) wl expand_long STABLEGRAPH_REPORT="$TMP/%r%r.json"
same_as_without expand_long
check "expansion past the limit: said, no report" err_has expand_long "too long: no report"
name300=$(printf 'n%.0s' $(seq 1 300))   # over NAME_MAX (255)
wl name_long STABLEGRAPH_REPORT="$TMP/$name300-%p.json"
same_as_without name_long
check "a name the file system refuses: said" err_has name_long "cannot create the report"
check "no temporary file left anywhere" no_temp_left "$TMP"
done_testing
