#!/usr/bin/env python3
"""tests/lib/checksum.py: the checksum a workload printed, and the one the
independent model (tests/workloads/wl_reference.py) gives for the same run.
tests/lib/checksum.sh uses it from the shell, tests/e2e/fault_matrix.py
imports it.

A workload's output has exactly one line "checksum: <16 lowercase hex
digits>"; output with none, with several, or with a "checksum:" line that is
not exactly that has no checksum (parse() gives None). Its first line names
the run: "NAME: steps=S nodes=N elems=E ..." (wl_common.c), which is what the
model is asked about.

The model is pure Python and slow on big runs: its answers are kept in
$BUILD/test-cache/wl-model/<hash of wl_reference.py>/, one file per run
shape, so a shape is computed once per build directory and model version.

Command line:
  checksum.py model FILE   prints the model's checksum of the run whose output
                           is FILE; exit 3 when the model does not know the
                           workload, 2 when FILE names no run.
"""
import hashlib
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_DIR = os.path.join(HERE, "..", "workloads")
sys.path.insert(0, MODEL_DIR)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import wl_reference  # noqa: E402  (the independent model)

CHECKSUM = re.compile(r"^checksum:.*$", re.M)
WELL_FORMED = re.compile(r"checksum: [0-9a-f]{16}")
RUN_LINE = re.compile(r"^([a-z_]+): steps=(\d+) nodes=(\d+) elems=(\d+)\b", re.M)


def parse(text):
    """The checksum of a workload's output, or None (see the module's text)."""
    lines = CHECKSUM.findall(text)
    if len(lines) != 1 or not WELL_FORMED.fullmatch(lines[0]):
        return None
    return lines[0].split()[1]


def run_shape(text):
    """(name, steps, nodes, elems) of the run whose output is text, or None."""
    m = RUN_LINE.search(text)
    return (m.group(1),) + tuple(int(x) for x in m.groups()[1:]) if m else None


def _cache_dir():
    with open(wl_reference.__file__, "rb") as f:
        version = hashlib.sha256(f.read()).hexdigest()[:16]
    build = os.environ.get("BUILD") or os.path.join(HERE, "..", "..", "build")
    return os.path.join(build, "test-cache", "wl-model", version)


def model(name, steps, nodes, elems):
    """The model's checksum of workload `name` at that shape; None when the
    model does not know the workload."""
    try:
        wl_reference.model(name, 1, 2, 1)  # tiny: does the model know it?
    except SystemExit:
        return None
    d = _cache_dir()
    path = os.path.join(d, "%s-%d-%d-%d" % (name, steps, nodes, elems))
    try:
        with open(path) as f:
            got = f.read().strip()
        if re.fullmatch(r"[0-9a-f]{16}", got):
            return got
    except OSError:
        pass
    got = wl_reference.model(name, steps, nodes, elems)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d)
    with os.fdopen(fd, "w") as f:
        f.write(got + "\n")
    os.replace(tmp, path)
    return got


def model_for_output(text):
    """The model's checksum for the run whose output is text; None when the
    output names no run or the model does not know the workload."""
    shape = run_shape(text)
    return model(*shape) if shape else None


def main(argv):
    if len(argv) != 3 or argv[1] != "model":
        sys.exit(__doc__)
    with open(argv[2], errors="replace") as f:
        shape = run_shape(f.read())
    if not shape:
        print("%s names no workload run (NAME: steps=S nodes=N elems=E)" % argv[2])
        return 2
    got = model(*shape)
    if got is None:
        print("the model does not know the workload %s" % shape[0])
        return 3
    print(got)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
