#!/usr/bin/env bash
# tests/e2e/test_files.sh: files the library must never replace, follow or
# block on (issue 14, "Files").
#   Report (STABLEGRAPH_REPORT): "-", /dev/stdout and a link to
#   /proc/self/fd/1 write into the program's standard output, after its own
#   output; a FIFO (with a reader) and a character device are written
#   straight through and stay what they were; a FIFO without a reader is
#   refused with a message, without blocking; a link of this user is
#   followed to a FIFO, another user's link never is; a reader that went
#   away costs a message, not the program's exit status (SIGPIPE).
#   Log (STABLEGRAPH_LOG_FILE): not created by a process that logs nothing;
#   a FIFO (with or without a reader) and a link at the path are refused
#   with a message on stderr, without blocking, and the lines go to stderr;
#   a regular file is appended to.
# In every case the program's exit status and checksum are those it has
# without the library, and nothing waits longer than the test's timeout.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/wl_lib.sh"
WL_LIMIT=30   # a run that blocks is stopped (status 124)
cd "$TMP" || exit 1   # a library that took "-" for a file name would write it here

# report_after_output FILE: FILE holds the program's lines, then one JSON report.
report_after_output() {
    python3 - "$1" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
head, sep, tail = text.partition("\n{")
assert sep and "checksum:" in head, "no report after the program's output"
assert json.loads("{" + tail)["version"] == 1
PY
}
is_json_report() { [ "$(json_get "$1" version 2>/dev/null)" = 1 ]; }
# reader FIFO OUT: a reader on FIFO copying into OUT until a writer has come
# and gone (its pid in $reader_pid). It has the FIFO open when this returns
# (opened without blocking, so that it counts as a reader at once).
reader() {
    rm -f "$TMP/reader.ready"
    python3 - "$1" "$2" "$TMP/reader.ready" <<'PY' &
import os, select, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
out = open(sys.argv[2], "wb")
open(sys.argv[3], "w").close()
p = select.poll()
p.register(fd, select.POLLIN)
while True:
    p.poll()                    # data, or the last writer gone (not before the first came)
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        continue
    if not data:
        break
    out.write(data)
PY
    reader_pid=$!
    local i
    for i in $(seq 1 100); do [ -e "$TMP/reader.ready" ] && break; sleep 0.1; done
}
# stop_reader: waits for the reader (2 s at most: when no writer came, it
# would wait for ever) and ends it.
stop_reader() {
    local i
    for i in $(seq 1 20); do kill -0 "$reader_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$reader_pid" 2>/dev/null
    wait "$reader_pid" 2>/dev/null
}

# ---------------------------------------------------------------- report to standard output
wl dash STABLEGRAPH_REPORT=-
same_as_without dash
check "-: the report follows the program's output on stdout" report_after_output "$TMP/dash.out"

ln -s /proc/self/fd/1 "$TMP/stdout-link"
wl fdlink STABLEGRAPH_REPORT="$TMP/stdout-link"
same_as_without fdlink
check "a link to /proc/self/fd/1: the report goes to stdout" report_after_output "$TMP/fdlink.out"
check "a link to /proc/self/fd/1: still a link" [ -L "$TMP/stdout-link" ]

# /dev/stdout itself, in a mount namespace of its own with a fresh /dev, so
# that a library that replaced it could not harm this machine.
if unshare -m true 2>/dev/null; then
    timeout "$WL_LIMIT" unshare -m bash -c \
        'mount -t tmpfs tmpfs /dev && ln -s /proc/self/fd/1 /dev/stdout && "$@"; rc=$?
         [ -L /dev/stdout ] && echo "still a link" >&2; exit $rc' _ \
        env LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$EMU_LIB" STABLEGRAPH_REPORT=/dev/stdout \
        "$WL" "${WL_ARGS[@]}" >"$TMP/devstdout.out" 2>"$TMP/devstdout.err"
    echo $? >"$TMP/devstdout.rc"
    same_as_without devstdout
    check "/dev/stdout: the report goes to stdout" report_after_output "$TMP/devstdout.out"
    check "/dev/stdout: still a link" err_has devstdout "still a link"
else
    skip "/dev/stdout" "cannot unshare the mount namespace"
fi

# A reader that went away: the write fails, the program's status does not.
python3 - "$LIB" "$EMU_LIB" "$WL" "${WL_ARGS[@]}" >"$TMP/gone.out" 2>"$TMP/gone.err" <<'PY'
import os, subprocess, sys
lib, emu, prog = sys.argv[1:4]
r, w = os.pipe()
os.close(r)
env = dict(os.environ, LD_PRELOAD=lib, LD_LIBRARY_PATH=emu, STABLEGRAPH_REPORT="/dev/fd/%d" % w)
p = subprocess.run([prog] + sys.argv[4:], env=env, pass_fds=(w,), timeout=60)
sys.exit(p.returncode)
PY
echo $? >"$TMP/gone.rc"
same_as_without gone
check "a reader that went away: said (not killed by SIGPIPE)" err_has gone "Broken pipe"

# ---------------------------------------------------------------- FIFOs and devices
mkfifo "$TMP/fifo"
reader "$TMP/fifo" "$TMP/fifo.got"
wl fifo STABLEGRAPH_REPORT="$TMP/fifo"
stop_reader
same_as_without fifo
check "a FIFO with a reader: the reader gets the report" is_json_report "$TMP/fifo.got"
check "a FIFO with a reader: still a FIFO" [ -p "$TMP/fifo" ]

wl fifo_alone STABLEGRAPH_REPORT="$TMP/fifo"
same_as_without fifo_alone
check "a FIFO without a reader: refused, said" err_has fifo_alone "$TMP/fifo for the report: no reader"
check "a FIFO without a reader: still a FIFO" [ -p "$TMP/fifo" ]

if mknod "$TMP/null" c 1 3 2>/dev/null; then
    wl chardev STABLEGRAPH_REPORT="$TMP/null"
    same_as_without chardev
    check "a character device: still one" [ -c "$TMP/null" ]
    check "a character device: written without complaint" [ ! -s "$TMP/chardev.err" ]
else
    skip "a character device" "cannot mknod"
fi

ln -s "$TMP/fifo" "$TMP/fifo-link"
reader "$TMP/fifo" "$TMP/fifo-link.got"
wl fifo_link STABLEGRAPH_REPORT="$TMP/fifo-link"
stop_reader
same_as_without fifo_link
check "this user's link to a FIFO: followed, the reader gets the report" \
    is_json_report "$TMP/fifo-link.got"
check "this user's link to a FIFO: still a link" [ -L "$TMP/fifo-link" ]

# Another user's link in a shared folder is not followed to a FIFO.
shared=$TMP/shared
mkdir -m 1777 "$shared"
ln -s "$TMP/fifo" "$shared/planted.json"
if chown -h 65534 "$shared/planted.json" 2>/dev/null; then
    reader "$TMP/fifo" "$TMP/planted.got"
    wl planted STABLEGRAPH_REPORT="$shared/planted.json"
    stop_reader
    same_as_without planted
    check "another user's link to a FIFO: not followed" [ ! -s "$TMP/planted.got" ]
    check "another user's link to a FIFO: left as it is" \
        [ -L "$shared/planted.json" -a "$(readlink "$shared/planted.json")" = "$TMP/fifo" ]
    check "another user's link to a FIFO: said" err_has planted "owned by uid 65534"
else
    skip "another user's link" "not root"
fi

# ---------------------------------------------------------------- the log file
LD_PRELOAD="$LIB" STABLEGRAPH_LOG_FILE="$TMP/never.log" timeout "$WL_LIMIT" /bin/true
check "a process that logs nothing does not create the log file" [ ! -e "$TMP/never.log" ]

wl log_fifo STABLEGRAPH_LOG=info STABLEGRAPH_LOG_FILE="$TMP/fifo"
same_as_without log_fifo
check "log to a FIFO without a reader: refused on stderr" \
    err_has log_fifo "cannot log to STABLEGRAPH_LOG_FILE=$TMP/fifo"
check "log to a FIFO without a reader: the lines go to stderr" err_has log_fifo "stablegraph: info: "

reader "$TMP/fifo" "$TMP/log_fifo_reader.got"
wl log_fifo_reader STABLEGRAPH_LOG=info STABLEGRAPH_LOG_FILE="$TMP/fifo"
stop_reader
same_as_without log_fifo_reader
check "log to a FIFO with a reader: refused on stderr" \
    err_has log_fifo_reader "cannot log to STABLEGRAPH_LOG_FILE=$TMP/fifo"
check "log to a FIFO with a reader: nothing written into it" [ ! -s "$TMP/log_fifo_reader.got" ]

echo VICTIM >"$TMP/victim"
ln -s "$TMP/victim" "$TMP/log-link"
wl log_link STABLEGRAPH_LOG=info STABLEGRAPH_LOG_FILE="$TMP/log-link"
same_as_without log_link
check_eq "log through a link: the target is untouched" "$(cat "$TMP/victim")" VICTIM
check "log through a link: refused on stderr" err_has log_link "a symbolic link, not followed"
check "log through a link: the lines go to stderr" err_has log_link "stablegraph: info: "

echo "an earlier line" >"$TMP/append.log"
wl log_append STABLEGRAPH_LOG=info STABLEGRAPH_LOG_FILE="$TMP/append.log"
same_as_without log_append
check_eq "a regular log file: earlier lines kept" "$(head -1 "$TMP/append.log")" "an earlier line"
check "a regular log file: the lines appended" grep -q '^stablegraph: info: summary' "$TMP/append.log"
check "a regular log file: nothing on stderr" [ ! -s "$TMP/log_append.err" ]
done_testing
