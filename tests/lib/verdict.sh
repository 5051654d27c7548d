# tests/lib/verdict.sh: the verdict on one test from its TAP output and exit
# status; tests/run.sh sources it (and so may any other runner of the
# suite's tests, so that they judge alike).
#
# verdict LOG RC: LOG holds the test's output, RC is its exit status. Sets
#   v_pass, v_skip, v_fail   cases passed, skipped, failed
#   v_result                 PASS (nothing failed, at least one case passed),
#                            SKIP (nothing failed, every case skipped) or FAIL
# Cases are TAP lines: "ok ..." passes, "ok ... # SKIP reason" (any case)
# is skipped, "not ok ..." fails. On top of its own failures a test fails,
# with one more "not ok" line appended to LOG saying why, when
#   - it printed no case at all;
#   - it exited non-zero without printing a failure (a crash, a timeout, an
#     error of its own);
#   - it printed no plan ("1..N"), or its plans do not add up to the cases
#     printed (it stopped early, or skipped some silently). A test made of
#     several TAP streams (a program that runs itself again) prints one plan
#     per stream; they are added up.
verdict() {
    local log=$1 rc=$2 planned ran why=()
    v_skip=$(grep -ciE '^ok .*#[[:space:]]*skip' "$log")
    v_pass=$(( $(grep -c '^ok ' "$log") - v_skip ))
    v_fail=$(grep -c '^not ok ' "$log")
    ran=$((v_pass + v_skip + v_fail))
    planned=$(sed -n 's/^1\.\.\([0-9][0-9]*\)\( *#.*\)\{0,1\}$/\1/p' "$log" | paste -sd+ -)
    [ "$rc" -eq 0 ] || [ "$v_fail" -gt 0 ] || why+=("exited with status $rc without reporting a failure")
    if [ "$ran" -eq 0 ]; then why+=("the test ran no case")
    elif [ -z "$planned" ]; then why+=("no plan line (1..N): the test did not finish")
    elif [ "$((planned))" -ne "$ran" ]; then why+=("planned $((planned)) cases, printed $ran")
    fi
    if [ "${#why[@]}" -gt 0 ]; then
        local IFS=';'
        echo "not ok - (tests/run.sh) ${why[*]}" | sed 's/;/; /g' >>"$log"
        v_fail=$((v_fail + 1))
    fi
    if [ "$v_fail" -gt 0 ]; then v_result=FAIL
    elif [ "$v_pass" -gt 0 ]; then v_result=PASS
    else v_result=SKIP
    fi
}
