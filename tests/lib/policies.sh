# tests/lib/policies.sh: POLICIES, the values STABLEGRAPH_POLICY accepts, in
# core/config.h's order (SG_POLICY_LIST). The build writes them to
# $BUILD/policies (`make print-policies` prints them), so that scripts and
# tests name the policies from the one list the library is built from.
# Source it after tests/lib.sh. A missing or empty list is a failure, never
# an empty loop that would test nothing.
POLICIES=$(cat "$BUILD/policies" 2>/dev/null)
if [ -z "$POLICIES" ]; then
    not_ok "the policy list $BUILD/policies (written by make)"
    done_testing
    exit 1
fi
