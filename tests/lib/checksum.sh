# tests/lib/checksum.sh: the one way the shell tests read and compare
# checksums (sourced by tests/lib.sh). The format and the model are those of
# tests/lib/checksum.py: a workload prints exactly one line
# "checksum: <16 lowercase hex digits>"; anything else is no checksum, and
# two missing checksums are never "equal".
#
# sum_in [FILE]       the checksum in FILE (stdin without FILE); prints
#                     nothing and fails when there is none
# check_sum NAME GOT WANT
#                     ok when GOT is a well-formed checksum equal to WANT
# check_baseline NAME FILE RC
#                     the run of a workload without the library, whose output
#                     is FILE and status RC: it exits 0, and its checksum is
#                     the independent model's for the run FILE names (a skip,
#                     said so, for a workload the model does not cover)

sum_in() {
    local lines
    lines=$(grep -a '^checksum:' "${1:-/dev/stdin}" 2>/dev/null)
    [[ $lines =~ ^checksum:\ ([0-9a-f]{16})$ ]] || return 1
    echo "${BASH_REMATCH[1]}"
}

check_sum() {
    if [[ $2 =~ ^[0-9a-f]{16}$ ]] && [ "$2" = "$3" ]; then
        ok "$1"
    else
        not_ok "$1"
        diag "got:  ${2:-(no checksum)}" "want: ${3:-(no checksum)}"
    fi
}

check_baseline() {
    local name=$1 file=$2 rc=$3 want status
    check_eq "$name: exits 0 without the library" "$rc" 0
    [ "$rc" = 0 ] || diag "$(tail -n 3 "$file")"
    want=$(python3 "$SRC/tests/lib/checksum.py" model "$file")
    status=$?
    case $status in
    0) check_sum "$name: checksum without the library is the model's" "$(sum_in "$file")" "$want" ;;
    3) check "$name: prints a checksum without the library" test -n "$(sum_in "$file")"
       skip "$name: checksum without the library is the model's" "$want (tests/workloads/wl_reference.py)" ;;
    *) not_ok "$name: checksum without the library is the model's"
       diag "$want" "$(head -3 "$file")" ;;
    esac
}
