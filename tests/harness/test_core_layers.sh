#!/usr/bin/env bash
# tests/harness/test_core_layers.sh: the structure issue 12 asks for, checked
# on the objects the build made (nm) and on the sources:
#   - no circle of calls between the object files of core/;
#   - core/ calls nothing of interpose/ (interpose/ calls core/, not back);
#   - core/ does not use libdl (no dlopen/dlsym/dlvsym);
#   - no file of core/ over 650 lines, no function over 80 lines.
. "$(dirname "$0")/../lib.sh"
normal_build_only "the layers of core/ and interpose/" "it reads the build's objects and sources"
OBJ=$BUILD/obj
if [ ! -d "$OBJ/core" ] || [ ! -d "$OBJ/interpose" ]; then
    not_ok "objects of core/ and interpose/ in $OBJ (run make first)"
    done_testing
fi
python3 - "$OBJ" "$SRC" <<'PY' > "$TMP/out"
import glob, os, re, subprocess, sys
obj, src = sys.argv[1:]
def syms(o):
    d, u = set(), set()
    for line in subprocess.run(["nm", o], capture_output=True, text=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDBRC": d.add(p[2])
        elif len(p) == 2 and p[0] == "U": u.add(p[1])
    return d, u
core = {os.path.basename(o)[:-2]: syms(o) for o in glob.glob(f"{obj}/core/*.o")}
ip = {os.path.basename(o)[:-2]: syms(o) for o in glob.glob(f"{obj}/interpose/*.o")}
owner = {s: n for n, (d, _) in core.items() for s in d}
g = {n: {owner[s] for s in u if s in owner and owner[s] != n} for n, (_, u) in core.items()}
# strongly connected components (Tarjan)
idx, low, st, on, comps, c = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in g[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        comps.append(comp)
for v in g:
    if v not in idx: sc(v)
cycles = [sorted(x) for x in comps if len(x) > 1]
print("cycles", "; ".join(" ".join(x) for x in cycles) or "none")
ipdefs = {s for d, _ in ip.values() for s in d}
back = sorted({f"{n}:{s}" for n, (_, u) in core.items() for s in u if s in ipdefs})
print("core_to_interpose", " ".join(back) or "none")
dl = sorted({f"{n}:{s}" for n, (_, u) in core.items() for s in u if s in ("dlopen", "dlsym", "dlvsym", "dlclose")})
print("libdl", " ".join(dl) or "none")
long_files = []
long_funcs = []
for f in sorted(glob.glob(f"{src}/core/*.c")):
    lines = open(f).read().split("\n")
    if len(lines) > 650: long_files.append(f"{os.path.basename(f)}={len(lines)}")
    i = 0
    while i < len(lines):
        if re.match(r"^[A-Za-z_].*[^;]$", lines[i]) and not lines[i].startswith(("#", "typedef", "struct", "enum", "static const", "const")):
            j = i
            while j < len(lines) and lines[j] != "{" and not lines[j].endswith(";") and j - i < 6: j += 1
            if j < len(lines) and lines[j] == "{":
                k = j
                while k < len(lines) and lines[k] != "}": k += 1
                if k - j + 1 > 80: long_funcs.append(f"{os.path.basename(f)}:{i + 1}")
                i = k
        i += 1
print("long_files", " ".join(long_files) or "none")
print("long_functions", " ".join(long_funcs) or "none")
PY
while read -r what rest; do
    case $what in
    cycles) check_eq "no circle of calls between core/'s object files" "$rest" none ;;
    core_to_interpose) check_eq "core/ calls nothing of interpose/" "$rest" none ;;
    libdl) check_eq "core/ does not use libdl" "$rest" none ;;
    long_files) check_eq "no file of core/ over 650 lines" "$rest" none ;;
    long_functions) check_eq "no function of core/ over 80 lines" "$rest" none ;;
    esac
done < "$TMP/out"
done_testing
