#!/usr/bin/env bash
# tests/fuzz/test_wrapper_props.sh: property test of scripts/stablegraph-run's
# option parsing. A fixed-seed generator builds a few hundred option vectors
# (valid and invalid options, missing values, hostile values: shell syntax,
# printf formats, globs, newlines, option-like words, 5000-byte values, bytes
# that are not UTF-8) and a model of the documented grammar predicts each
# outcome. Checked for every vector:
#   - a bad vector exits 2, prints "stablegraph-run: ..." and the usage on
#     stderr, quotes the offending word verbatim, and runs nothing;
#   - -h/--help exits 0 with the usage on stdout and runs nothing;
#   - otherwise COMMAND runs with exactly the ARGS given (options after it
#     are its own), its exit status comes back (127 for a missing command,
#     also one that starts with '-' after '--'),
#     LD_PRELOAD is the previous value plus ':' and the library, the library
#     appearing once, STABLEGRAPH_* hold the last value given (inherited ones
#     stay), and the rest of the environment is unchanged;
#   - no value is ever executed (marker files never appear) and the working
#     directory stays empty.
# The library, and the preloads already set, are stand-ins (links to the libc
# every process already has), so this tests the wrapper alone, whatever state
# the real library is in.
. "$(dirname "$0")/../lib.sh"
# The wrapper alone is tested, with stand-ins for the library: nothing a
# sanitizer instruments runs here, so a sanitizer build (whose CI stage has
# less time) leaves it to the normal build.
normal_build_only "wrapper option vectors" "no instrumented code runs here"
RUN=$SRC/scripts/stablegraph-run
. "$SRC/tests/lib/policies.sh"
libc=$(ldd /bin/sh | awk '/libc\.so/{print $3; exit}')
mkdir -p "$TMP/lib" "$TMP/cwd" "$TMP/out"
for l in libstablegraph libother liba libb; do ln -s "$libc" "$TMP/lib/$l.so"; done
cat >"$TMP/probe" <<'PROBE'
#!/bin/sh
for a in "$@"; do printf '%s\0' "$a"; done >"$PROBE_OUT.args"
env -0 >"$PROBE_OUT.env"
exit "$1"
PROBE
chmod +x "$TMP/probe"

# The Python side prints "ok NAME" or "not_ok NAME" lines, and diagnostics.
while IFS= read -r line; do
    case $line in
    "ok "*) ok "${line#ok }" ;;
    "not_ok "*) not_ok "${line#not_ok }" ;;
    *) echo "$line" ;;
    esac
done < <(cd "$TMP/cwd" && python3 - "$RUN" "$TMP" "${WRAPPER_PROPS_N:-300}" "$POLICIES" <<'PY'
import os, random, subprocess, sys

run, tmp, nvec = sys.argv[1].encode(), sys.argv[2], int(sys.argv[3])
lib = (tmp + "/lib/libstablegraph.so").encode()
probe = (tmp + "/probe").encode()
POLICIES = sys.argv[4].encode().split()  # tests/lib/policies.sh
LEVELS = [b"error", b"warn", b"info", b"debug"]
USAGE = b"Usage: stablegraph-run"
rng = random.Random(0x5EED6)

def nasty(i):
    mark = ("%s/pwned-%d" % (tmp, i)).encode()
    return rng.choice([
        b"", b" ", b"%n%s%x%d", b"$(touch " + mark + b")", b"`touch " + mark + b"`",
        b";touch " + mark, b"|touch " + mark, b"&& touch " + mark, b"*", b"?", b"-", b"--",
        b"-h", b"--policy", b"--strict", b"a\nb", b"\t", b"'", b'"', b"\\", b"~", b"$HOME",
        b"${IFS}", b"x" * 5000, b"\xff\xfe", b"%%", b"%p", b"off ", b" off", b"OFF",
        b"always_update\n", b"sg-%r-%h.json", b"/tmp/x y/r.json", b"-e", b"\\n\\c"])

def option(i):
    kind = rng.randrange(10)
    if kind < 2: return [b"--policy", rng.choice(POLICIES) if rng.random() < 0.7 else nasty(i)]
    if kind < 4: return [b"--log", rng.choice(LEVELS) if rng.random() < 0.7 else nasty(i)]
    if kind < 6: return [b"--report", b"r-%p.json" if rng.random() < 0.4 else nasty(i)]
    if kind < 8: return [b"--strict"]
    if kind < 9: return [rng.choice([b"--polic", b"-x", b"--policy=off", b"---", b"-", b"--STRICT",
                                     b"--report=", b"-hh", b"--help=1"])]
    return [rng.choice([b"-h", b"--help"])] if rng.random() < 0.3 else [b"--strict"]

def vector(i):
    argv = []
    for _ in range(rng.randrange(5)): argv += option(i)
    r = rng.random()
    if r < 0.05: argv.append(rng.choice([b"--policy", b"--log", b"--report"]))   # value missing
    elif r < 0.10: pass                                                          # no COMMAND
    else:
        if rng.random() < 0.5: argv.append(b"--")
        if r < 0.15: argv.append(rng.choice([b"/nonexistent/cmd", b"", b"-c", b"-missing-cmd"]))
        else: argv += [probe, str(rng.randrange(256)).encode()]
        argv += [nasty(i) if rng.random() < 0.5 else option(i)[0] for _ in range(rng.randrange(4))]
    env = {k: v for k, v in os.environb.items()
           if not k.startswith(b"STABLEGRAPH_") and k != b"LD_PRELOAD"}
    env[b"STABLEGRAPH_LIB"] = lib
    env[b"PROBE_OUT"] = ("%s/out/%d" % (tmp, i)).encode()
    pre = rng.choice([None, b"", (tmp + "/lib/libother.so").encode(),
                      ("%s/lib/liba.so:%s/lib/libb.so" % (tmp, tmp)).encode()])
    if pre is not None: env[b"LD_PRELOAD"] = pre
    if rng.random() < 0.3: env[b"STABLEGRAPH_POLICY"] = b"skip_temp"
    if rng.random() < 0.2: env[b"STABLEGRAPH_REPORT"] = b"inherited.json"
    return argv, env

def model(argv):
    """("bad", word) | ("help",) | ("run", {var: value}, command_and_args)"""
    sets, i = {}, 0
    while i < len(argv):
        a = argv[i]
        if a in (b"--policy", b"--log", b"--report"):
            if i + 1 >= len(argv): return ("bad", a)
            v = argv[i + 1]
            if a == b"--policy" and v not in POLICIES: return ("bad", v)
            if a == b"--log" and v not in LEVELS: return ("bad", v)
            if a == b"--report" and v == b"": return ("bad", a)
            sets[{b"--policy": b"STABLEGRAPH_POLICY", b"--log": b"STABLEGRAPH_LOG",
                  b"--report": b"STABLEGRAPH_REPORT"}[a]] = v
            i += 2
        elif a == b"--strict": sets[b"STABLEGRAPH_STRICT"] = b"1"; i += 1
        elif a in (b"-h", b"--help"): return ("help",)
        elif a == b"--": i += 1; break
        elif a.startswith(b"-"): return ("bad", a)
        else: break
    if i >= len(argv): return ("bad", b"no COMMAND")
    return ("run", sets, argv[i:])

def read_nul(path):
    with open(path, "rb") as f: data = f.read()
    return data.split(b"\0")[:-1]

fails = {}
def fail(prop, i, argv, why):
    fails.setdefault(prop, []).append("vector %d %r: %s" % (i, argv[:8], why))

PROPS = ["bad vectors: exit 2, message and usage on stderr, nothing run",
         "bad vectors: the offending word quoted verbatim",
         "help: exit 0, usage on stdout, nothing run",
         "COMMAND's exit status passed through (127 when missing)",
         "COMMAND gets exactly its ARGS",
         "LD_PRELOAD: previous value kept, library appended exactly once",
         "STABLEGRAPH_* hold the last option value, inherited ones stay",
         "the rest of the environment unchanged"]
counts = {"bad": 0, "help": 0, "run": 0}
for i in range(nvec):
    argv, env = vector(i)
    want = model(argv)
    counts[want[0]] += 1
    out = env[b"PROBE_OUT"].decode()
    p = subprocess.run([run] + argv, env=env, capture_output=True, timeout=30)
    ran = os.path.exists(out + ".args")
    if want[0] == "bad":
        if p.returncode != 2 or not p.stderr.startswith(b"stablegraph-run: ") \
                or USAGE not in p.stderr or ran:
            fail(PROPS[0], i, argv, "status %d, ran %s, stderr %r" % (p.returncode, ran, p.stderr[:200]))
        if want[1] != b"no COMMAND" and want[1] not in p.stderr.split(b"\n" + USAGE)[0]:
            fail(PROPS[1], i, argv, "stderr %r lacks %r" % (p.stderr[:200], want[1][:60]))
        continue
    if want[0] == "help":
        if p.returncode != 0 or not p.stdout.startswith(USAGE) or ran:
            fail(PROPS[2], i, argv, "status %d, ran %s" % (p.returncode, ran))
        continue
    sets, cmd = want[1], want[2]
    if cmd[0] != probe:
        if p.returncode != 127 or ran:
            fail(PROPS[3], i, argv, "missing command: status %d, ran %s" % (p.returncode, ran))
        continue
    if p.returncode != int(cmd[1]) or not ran:
        fail(PROPS[3], i, argv, "status %d, want %s, ran %s" % (p.returncode, cmd[1], ran))
        continue
    args = read_nul(out + ".args")
    if args != cmd[1:]:
        fail(PROPS[4], i, argv, "args %r" % args[:8])
    got = dict(kv.split(b"=", 1) for kv in read_nul(out + ".env"))
    pre = env.get(b"LD_PRELOAD")
    want_pre = (pre + b":" if pre else b"") + lib
    if got.get(b"LD_PRELOAD") != want_pre or got[b"LD_PRELOAD"].split(b":").count(lib) != 1:
        fail(PROPS[5], i, argv, "LD_PRELOAD %r" % got.get(b"LD_PRELOAD"))
    for var in (b"STABLEGRAPH_POLICY", b"STABLEGRAPH_LOG", b"STABLEGRAPH_REPORT", b"STABLEGRAPH_STRICT"):
        if got.get(var) != sets.get(var, env.get(var)):
            fail(PROPS[6], i, argv, "%s=%r" % (var, got.get(var)))
    ignore = {b"LD_PRELOAD", b"PWD", b"OLDPWD", b"SHLVL", b"_"}
    rest_got = {k: v for k, v in got.items() if k not in ignore and k not in sets}
    rest_want = {k: v for k, v in env.items() if k not in ignore and k not in sets}
    if rest_got != rest_want:
        fail(PROPS[7], i, argv, "differs in %r" % sorted(set(rest_got.items()) ^ set(rest_want.items()))[:4])

print("#   %d vectors: %d bad, %d help, %d run" % (nvec, counts["bad"], counts["help"], counts["run"]))
for prop in PROPS:
    for why in fails.get(prop, [])[:5]: print("#   " + why.replace("\n", "\\n"))
    print(("not_ok " if prop in fails else "ok ") + prop)
# Enough of each kind, so every property above was exercised.
print(("ok " if min(counts.values()) >= 10 else "not_ok ") + "every kind of vector generated (>= 10 each)")
marks = [f for f in os.listdir(tmp) if f.startswith("pwned-")]
print(("not_ok " if marks else "ok ") + "no option value executed (no marker file)")
print(("not_ok " if os.listdir(".") else "ok ") + "the working directory stays empty")
PY
)
check "the property run finished" [ "$_tap_n" -ge 11 ]
done_testing
