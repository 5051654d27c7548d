# tests/e2e/wl_lib.sh: a small workload run with the library and compared
# with its run without it, for the tests of files and settings
# (test_files.sh, test_report_security.sh). Source it after tests/lib.sh.
#   $LIB, $WL, WL_ARGS   the library, the workload and its arguments
#   base_sum             the checksum of the run without the library (checked
#                        here: status 0, the model's checksum)
#   WL_AS                a prefix command (e.g. setpriv ...) to run as another user
#   WL_LIMIT             seconds a run may take (then status 124; default 60)
LIB=$BUILD/libstablegraph.so
WL=$BUILD/workloads/rotating_inputs
WL_ARGS=(--steps 2)

emu "$WL" "${WL_ARGS[@]}" >"$TMP/base.out" 2>&1
check_baseline "${WL##*/}" "$TMP/base.out" $?
base_sum=$(sum_in "$TMP/base.out")

# wl NAME [VAR=VALUE...]: runs the workload with the library and the given
# variables (through env, so values are passed as they are); stdout and
# stderr in $TMP/NAME.out and $TMP/NAME.err, status in $TMP/NAME.rc.
wl() {
    local name=$1; shift
    # shellcheck disable=SC2086
    timeout "${WL_LIMIT:-60}" ${WL_AS:-} env LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$EMU_LIB" "$@" \
        "$WL" "${WL_ARGS[@]}" >"$TMP/$name.out" 2>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}
# same_as_without NAME: exit status (0) and checksum as without the library.
same_as_without() {
    check_eq "$1: exit status as without the library" "$(cat "$TMP/$1.rc")" 0
    check_sum "$1: checksum as without the library" "$(sum_in "$TMP/$1.out")" "$base_sum"
}
# err_has NAME STRING: STRING appears literally in NAME's stderr.
err_has() { grep -qF -- "$2" "$TMP/$1.err"; }
