#!/usr/bin/env bash
# tests/harness/test_unit_links.sh: each unit test links exactly the core/
# objects it needs (tests/unit/unit.mk). From the objects themselves (nm),
# the closure of a test is the core/ objects defining what its own object
# calls, then what those call, and so on (a symbol the test defines, a fake,
# is not looked for in core/); the test's list must be that closure: an
# object more is a test linking what it does not test, an object less would
# not link. A unit test without a list is a failure too.
. "$(dirname "$0")/../lib.sh"
normal_build_only "the unit tests' link lists" "it reads the build's objects"
lists=$BUILD/tests/unit/link-lists
check "the link lists are built ($lists)" test -s "$lists"

# The judge prints one "ok|not ok <TAB> name <TAB> diagnostic" line a case.
while IFS=$'\t' read -r verdict name why; do
    if [ "$verdict" = ok ]; then ok "$name"; else not_ok "$name"; diag "$why"; fi
done < <(python3 - "$BUILD" "$lists" "$SRC" <<'PY'
import glob, os, subprocess, sys

build, lists, src = sys.argv[1:4]

def symbols(obj):
    """(defined, undefined) global symbols of an object file."""
    defined, undefined = set(), set()
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "U":
            undefined.add(f[1])
        elif len(f) == 3 and f[1] in "TDBRVWGSC":
            defined.add(f[2])
    return defined, undefined

core = {os.path.basename(o)[:-2]: symbols(o) for o in glob.glob(build + "/obj/core/*.o")}
definer = {}
for name, (defined, _) in core.items():
    for s in defined:
        definer.setdefault(s, name)

def closure(test_obj):
    own, todo = symbols(test_obj)
    need, seen = set(), set()
    todo = set(todo)
    while todo:
        s = todo.pop()
        if s in seen or s in own:
            continue
        seen.add(s)
        o = definer.get(s)
        if o and o not in need:
            need.add(o)
            todo |= core[o][1]
    return need

def tap(good, msg, diag=()):
    print("%s\t%s\t%s" % ("ok" if good else "not ok", msg, "; ".join(diag)))

listed = {}
for line in open(lists):
    name, objs = line.split(":", 1)
    listed[name.strip()] = set(objs.split())
tests = sorted(os.path.basename(c)[:-2] for c in glob.glob(src + "/tests/unit/test_*.c"))
tap(len(core) > 0 and len(tests) > 0, "core objects (%d) and unit tests (%d) found" % (len(core), len(tests)))
for t in tests:
    if t not in listed:
        tap(False, "%s: has a link list" % t)
        continue
    need = closure("%s/obj/tests/unit/%s.o" % (build, t))
    extra, missing = sorted(listed[t] - need), sorted(need - listed[t])
    tap(not extra and not missing, "%s links exactly what it needs (%d core objects of %d)"
        % (t, len(need), len(core)),
        (["more than needed: " + " ".join(extra)] if extra else []) +
        (["missing: " + " ".join(missing)] if missing else []))
# The lists of tests still mention only objects core/ has.
gone = sorted({o for objs in listed.values() for o in objs} - set(core))
tap(not gone, "every listed object is a core/ object", ["not in core/: " + " ".join(gone)] if gone else [])
PY
)
done_testing
