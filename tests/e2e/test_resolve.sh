#!/usr/bin/env bash
# tests/e2e/test_resolve.sh: every hooked entry point, obtained through every
# path a program uses (direct link, dlsym on a dlopen handle, RTLD_DEFAULT,
# RTLD_NEXT from a second library and from the program, cuGetProcAddress_v2
# with flags 0 and 2 at the versions the CUDA 13 runtime asks for, legacy
# cuGetProcAddress), is our wrapper for exactly the variant the driver hands
# out without the library, and each call is counted under that variant in the
# report ("calls"; "resolved" for dlsym and cuGetProcAddress hand-outs).
# Names we do not hook come back exactly as without the library.
. "$(dirname "$0")/../lib.sh"
LIB=$BUILD/libstablegraph.so
PROG=$BUILD/tests/e2e/resolve_paths

# verify PATH BASE.out LIB.out REPORT: prints one "ok"/"FAIL ..." line per check.
verify() {
    python3 - "$@" <<'PY'
import json, sys, collections
path, base_f, lib_f, rep_f = sys.argv[1:]
def got(f):
    return [l.split()[2:] for l in open(f) if l.startswith("got ")]
base, lib = got(base_f), got(lib_f)
rep = json.load(open(rep_f))["hooks"]
fails = []
if len(base) != len(lib) or not base:
    fails.append("different number of lookups: %d vs %d" % (len(base), len(lib)))
for b, l in zip(base, lib):
    asked = b[0]
    if path == "unhooked" or b[2] == "null":
        if b != l: fails.append("%s: %s without the library, %s with it" % (asked, b, l))
        continue
    if l[2] != b[2] or l[3] != "lib" or b[3] != "driver":
        fails.append("%s: driver gave %s, library gave %s" % (asked, b[2:4], l[2:4]))
calls = collections.Counter(l.split()[1] for l in open(lib_f) if l.startswith("call "))
handed = collections.Counter(l[2] for l in lib if len(l) > 3 and l[3] == "lib")
if path.startswith("gpa"):   # the program called the resolver once per lookup
    calls["cuGetProcAddress" if path == "gpa_legacy" else "cuGetProcAddress_v2"] += len(lib)
if path == "unhooked":
    calls["cuGetProcAddress_v2"] += sum(1 for l in lib if l[0].startswith("gpa:"))
for name, c in rep.items():
    if c["calls"] != calls.get(name, 0):
        fails.append("%s: report counts %d calls, the program made %d" % (name, c["calls"], calls.get(name, 0)))
    want = 0 if path == "direct" else handed.get(name, 0)
    if c["resolved"] != want:
        fails.append("%s: report counts %d hand-outs, the program got %d" % (name, c["resolved"], want))
print("\n".join(fails) if fails else "ok")
PY
}

for path in direct dlopen default next_lib next_exe gpa gpa_legacy unhooked; do
    emu "$PROG" "$path" >"$TMP/$path.base" 2>&1
    check "$path: runs without the library" [ $? -eq 0 ]
    STABLEGRAPH_REPORT=$TMP/$path.json LD_PRELOAD=$LIB emu "$PROG" "$path" >"$TMP/$path.lib" 2>&1
    check "$path: runs with the library" [ $? -eq 0 ]
    result=$(verify "$path" "$TMP/$path.base" "$TMP/$path.lib" "$TMP/$path.json" 2>&1)
    check_eq "$path: exact variants handed out and counted" "$result" "ok"
done

# The variants the CUDA 13 runtime depends on, spelled out.
for want in "cuGraphLaunch@10000/2 -> cuGraphLaunch_ptsz lib" \
            "cuStreamBeginCapture@10010/2 -> cuStreamBeginCapture_v2_ptsz lib" \
            "cuStreamBeginCapture@10000/0 -> cuStreamBeginCapture lib" \
            "cuGraphExecUpdate@12000/0 -> cuGraphExecUpdate_v2 lib" \
            "cuMemAlloc@3020/0 -> cuMemAlloc_v2 lib" \
            "cuGraphInstantiate@11000/0 -> cuGraphInstantiate_v2 lib" \
            "cuGraphInstantiateWithParams@12000/2 -> cuGraphInstantiateWithParams_ptsz lib"; do
    check "gpa: $want" grep -q "^got gpa $want" "$TMP/gpa.lib"
done

# Exports are exactly the hooks of hooks.def plus dlsym.
want=$( { echo dlsym; sed -n 's/^SG_\(HOOK\|RESOLVER\)(\([A-Za-z0-9_]*\),.*/\2/p' "$SRC/interpose/hooks.def"; } | sort)
got=$(nm -D --defined-only "$LIB" | awk '{print $3}' | sed 's/@.*//' | sort)
check_eq "exports are exactly the hook list and dlsym" "$got" "$want"
done_testing
