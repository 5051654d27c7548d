/*
 * core/report.c: the JSON writer, the write at exit and the summary.
 *
 * The writer formats into a fixed buffer and flushes with write(2), so
 * writing the report allocates nothing (it runs at exit, possibly while
 * another thread is inside malloc). No locks of its own (see report.h).
 */
#include "report.h"

#include "driver.h"
#include "log.h"
#include "procio.h"
#include "record.h"
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- writer */

typedef struct sg_out {
    int fd;
    int err;
    size_t len;
    char buf[4096];
} sg_out;

static void out_flush(sg_out *o)
{
    size_t off = 0;
    while (off < o->len && !o->err) {
        ssize_t w = write(o->fd, o->buf + off, o->len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) {   /* a descriptor the program made non-blocking */
            struct pollfd p = { .fd = o->fd, .events = POLLOUT };
            if (poll(&p, 1, -1) >= 0 || errno == EINTR) continue;
        }
        if (w <= 0) o->err = 1; else off += (size_t)w;
    }
    o->len = 0;
}

static void out_raw(sg_out *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (o->len == sizeof o->buf) out_flush(o);
        o->buf[o->len++] = s[i];
    }
}

#define OUT_LIT(o, lit) out_raw((o), (lit), sizeof(lit) - 1)

static void out_fmt(sg_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_fmt(sg_out *o, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) out_raw(o, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string with the escapes JSON requires. */
static void out_str(sg_out *o, const char *s)
{
    OUT_LIT(o, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            out_raw(o, e, 2);
        } else if (c < 0x20) {
            out_fmt(o, "\\u%04x", c);
        } else {
            out_raw(o, (const char *)&c, 1);
        }
    }
    OUT_LIT(o, "\"");
}

/* "key": value-prefix, with a comma unless first. */
static void out_key(sg_out *o, int *first, const char *key)
{
    if (!*first) OUT_LIT(o, ",");
    *first = 0;
    OUT_LIT(o, "\n    ");
    out_str(o, key);
    OUT_LIT(o, ": ");
}

typedef struct { sg_out *o; int first; } sg_exec_out;

/* "forwarded_reasons": {...} */
static void out_reasons(sg_out *o, const unsigned long *reasons)
{
    OUT_LIT(o, "\"forwarded_reasons\": {");
    for (int r = 0; r < SG_REASON_COUNT; r++)
        out_fmt(o, "%s\"%s\": %lu", r ? ", " : "", sg_reason_names[r], reasons[r]);
    OUT_LIT(o, "}");
}

/* The decision's reason; while renting, what the forwarded updates have
 * cost so far against the variants' price; once bought, when. */
static void out_why(sg_out *o, const sg_exec_profile *p)
{
    char buf[512];
    const char *why = p->why ? p->why : "";
    if (p->renting)
        snprintf(buf, sizeof buf, "renting: forwarded %.1f of %.1f us (%s)", p->forwarded_ns / 1e3,
                 p->variant_ns / 1e3, why);
    else if (p->bought_at)
        snprintf(buf, sizeof buf, "%s; bought at launch %lu: forwarded %.1f of %.1f us", why,
                 p->bought_at, p->forwarded_ns / 1e3, p->variant_ns / 1e3);
    else
        snprintf(buf, sizeof buf, "%s", why);
    out_str(o, buf);
}

/* The purchase of variants (core/prof_rent.c). break_even_launch: the launch
 * at which they were bought, or while renting the one at which the updates
 * forwarded at the rate seen so far will have cost as much (null: none
 * forwarded yet). */
static void out_purchase(sg_out *o, const sg_exec_profile *p)
{
    if (!p->renting && !p->bought_at) return;
    out_fmt(o, ", \"purchase\": {\"variant_ns\": %llu, \"variants_priced\": %u, "
               "\"forwarded_ns\": %llu, \"rented_updates\": %lu, \"cost_times\": \"%s\", "
               "\"decided_at_launch\": %lu, ",
            p->variant_ns, p->variants_priced, p->forwarded_ns, p->rented_updates,
            p->measured ? "measured" : "table", p->decided_at);
    if (p->bought_at) {
        out_fmt(o, "\"bought_at_launch\": %lu, \"break_even_launch\": %lu}", p->bought_at,
                p->bought_at);
    } else if (p->forwarded_ns && p->rent_launch >= p->decided_at) {
        unsigned long long span = p->rent_launch - p->decided_at + 1;
        unsigned long long left = p->variant_ns - p->forwarded_ns;
        out_fmt(o, "\"bought_at_launch\": null, \"break_even_launch\": %llu}",
                p->rent_launch + (left * span + p->forwarded_ns - 1) / p->forwarded_ns + 1);
    } else {
        OUT_LIT(o, "\"bought_at_launch\": null, \"break_even_launch\": null}");
    }
}

static void out_exec(const sg_exec_info *e, void *ctx)
{
    sg_exec_out *x = ctx;
    sg_out *o = x->o;
    if (!x->first) OUT_LIT(o, ",");
    x->first = 0;
    out_fmt(o, "\n    {\"id\": %lu, ", e->id);
    if (e->nodes_known) out_fmt(o, "\"nodes\": %zu, ", e->nodes);
    else out_fmt(o, "\"nodes\": null, ");
    out_fmt(o, "\"destroyed\": %s, \"launches\": %lu, \"updates_seen\": %lu, "
               "\"updates_forwarded\": %lu, \"updates_skipped\": %lu, \"would_skip\": %lu, "
               "\"would_skip_profiled\": %lu, ",
            e->destroyed ? "true" : "false", e->launches, e->updates_seen,
            e->updates_forwarded, e->updates_skipped, e->would_skip, e->would_skip_profiled);
    out_reasons(o, e->reasons);
    const sg_exec_profile *p = &e->profile;
    if (p->decided) {
        out_fmt(o, ", \"profile\": {\"mode\": \"%s\", \"positions\": %u, "
                   "\"varying_positions\": %u, \"varying_scalar_bytes\": %u, ",
                p->generations ? "generations" : p->renting ? "renting" : "plain", p->positions,
                p->varying_positions,
                p->varying_scalar_bytes);
        out_fmt(o, "\"aliased_slots\": %u, \"generations_allowed\": %u, "
                   "\"update_ns_per_step\": %llu, \"remap_ns_per_step\": %llu, \"why\": ",
                p->aliased_slots, p->generations_allowed, p->update_ns_per_step,
                p->remap_ns_per_step);
        out_why(o, p);
        if (p->variant_host_bytes)
            out_fmt(o, ", \"variant_host_bytes\": %llu, \"variant_memory_free\": %llu",
                    p->variant_host_bytes, p->variant_memory_free);
        out_purchase(o, p);
        out_fmt(o, ", \"variants\": %lu, \"demotions\": %lu, \"library_updates\": %lu}",
                e->variants, e->demotions, e->library_updates);
    }
    OUT_LIT(o, "}");
}

int sg_report_write_fd(int fd, const char *policy, const char *policy_requested,
                       int config_errors)
{
    sg_out o = { .fd = fd };
    int first;
    out_fmt(&o, "{\n  \"version\": 1,\n  \"pid\": %ld,\n  \"policy\": ", (long)getpid());
    out_str(&o, policy);
    OUT_LIT(&o, ",\n  \"policy_requested\": ");
    out_str(&o, policy_requested);
    out_fmt(&o, ",\n  \"config_errors\": %d,\n  \"hooks\": {", config_errors);
    first = 1;
    for (size_t i = 0; i < sg_stats_hook_count(); i++) {
        sg_hook_counter c = sg_stats_hook(i);
        out_key(&o, &first, sg_stats_hook_name(i));
        out_fmt(&o, "{\"calls\": %lu, \"resolved\": %lu}", c.calls, c.resolved);
    }
    OUT_LIT(&o, "\n  },\n  \"totals\": {");
    sg_totals t = sg_stats_totals();
    first = 1;
#define SG_TOTAL_OUT_(n) out_key(&o, &first, #n); out_fmt(&o, "%lu", t.n);
    SG_TOTALS_LIST(SG_TOTAL_OUT_)
    OUT_LIT(&o, "\n  },\n  \"library_driver_calls\": {");
    first = 1;
    for (int i = 0; i < SG_DRIVER_COUNT; i++) {
        out_key(&o, &first, sg_driver_names[i]);
        out_fmt(&o, "%lu", __atomic_load_n(&sg_driver_calls[i], __ATOMIC_RELAXED));
    }
    /* how update decisions described graphs: records, or reading back (why) */
    unsigned long rb[SG_READBACK_COUNT];
    sg_rec_readback_counts(rb);
    out_fmt(&o, "\n  },\n  \"graph_descriptions\": {\"recorded\": %lu, \"read_back\": {", sg_rec_used());
    for (int i = 0; i < SG_READBACK_COUNT; i++)
        out_fmt(&o, "%s\"%s\": %lu", i ? ", " : "", sg_readback_names[i], rb[i]);
    unsigned long audited, mismatches;
    sg_rec_audit_counts(&audited, &mismatches);
    out_fmt(&o, "}, \"audited\": %lu, \"audit_mismatches\": %lu", audited, mismatches);
    OUT_LIT(&o, "},\n  \"execs_folded\": {");
    sg_exec_info f;
    out_fmt(&o, "\"execs\": %lu, ", sg_exec_folded(&f));
#define SG_COUNT_OUT_(n) out_fmt(&o, "\"" #n "\": %lu, ", f.n);
    SG_EXEC_COUNTS_LIST(SG_COUNT_OUT_)
    out_reasons(&o, f.reasons);
    OUT_LIT(&o, "},\n  \"execs\": [");
    sg_exec_out x = { &o, 1 };
    sg_exec_foreach(out_exec, &x);
    OUT_LIT(&o, "\n  ]\n}\n");
    out_flush(&o);
    return o.err ? -1 : 0;
}

/* ---------------------------------------------------------------- where the report goes */

/* The atomic write: a temporary file beside path, then rename(2) over it
 * (path is replaced, never followed: a link there is replaced too). */
static int write_replacing(const char *path, const char *policy, const char *policy_requested,
                           int config_errors)
{
    char tmp[SG_CONFIG_VALUE_MAX * 4 + 64];
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%d", path, (long)getpid(), attempt);
        if (n < 0 || (size_t)n >= sizeof tmp) {
            SG_ERROR("report path too long: %s", path);
            return -1;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        SG_ERROR("cannot create the report %s: %s", tmp, strerror(errno));
        return -1;
    }
    int rc = sg_report_write_fd(fd, policy, policy_requested, config_errors);
    if (close(fd) != 0) rc = -1;
    if (rc == 0 && rename(tmp, path) != 0) rc = -1;
    if (rc != 0) {
        SG_ERROR("cannot write the report %s: %s", path, strerror(errno));
        unlink(tmp);
    }
    return rc;
}

/* Writes the report into fd, which is not a regular file the library
 * replaces (a pipe, FIFO, terminal, character device, or the program's own
 * descriptor). SIGPIPE is held meanwhile (procio.h), so a reader that went
 * away gives an error instead of killing the program at exit. */
static int write_through(int fd, const char *what, const char *policy,
                         const char *policy_requested, int config_errors)
{
    sg_sigpipe_guard g;
    sg_sigpipe_hold(&g);
    int rc = sg_report_write_fd(fd, policy, policy_requested, config_errors);
    int err = errno;
    sg_sigpipe_release(&g);
    if (rc != 0) SG_ERROR("cannot write the report to %s: %s", what, strerror(err));
    return rc;
}

/* The descriptor a name of the process's own descriptors stands for:
 * /dev/stdin, /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N,
 * /proc/thread-self/fd/N or /proc/<our pid>/fd/N. -1 for any other path. */
static int own_fd_name(const char *p)
{
    static const char *const std_names[] = { "/dev/stdin", "/dev/stdout", "/dev/stderr" };
    char self[48];
    for (int i = 0; i < 3; i++)
        if (strcmp(p, std_names[i]) == 0) return i;
    snprintf(self, sizeof self, "/proc/%ld/fd/", (long)getpid());
    const char *const dirs[] = { "/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/", self };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        size_t n = strlen(dirs[i]);
        if (strncmp(p, dirs[i], n) != 0 || p[n] < '0' || p[n] > '9') continue;
        char *end;
        long fd = strtol(p + n, &end, 10);
        return *end == '\0' && fd <= 1 << 20 ? (int)fd : -1;
    }
    return -1;
}

/* Flushes f unless another thread keeps its lock for FLUSH_WAIT_MS (one
 * blocked in fgets on a pipe holds it for good). Nonzero if it was flushed. */
#define FLUSH_WAIT_MS 100
static int flush_if_free(FILE *f)
{
    for (int ms = 0; ms <= FLUSH_WAIT_MS; ms++) {
        if (ftrylockfile(f) == 0) {
            fflush_unlocked(f);
            funlockfile(f);
            return 1;
        }
        const struct timespec ms1 = { 0, 1000000 };
        nanosleep(&ms1, NULL);
    }
    return 0;
}

/* Writes to the process's descriptor fd (what "-" and /dev/stdout name):
 * straight into it, at its own offset, after the program's buffered output
 * on stdout and stderr. Not fflush(NULL), which takes every stream's lock:
 * at exit, while another thread waited in fgets() on a pipe, it waited for
 * that stream forever (tests/e2e/adv_exit.c, stdio_wait); a stream whose
 * lock stays taken is not flushed (glibc's exit flushes it after the
 * report, without its lock). */
static int write_own_fd(int fd, const char *path, const char *policy,
                        const char *policy_requested, int config_errors)
{
    if (!sg_fd_unchanged(fd)) {
        SG_ERROR("not writing the report to %s: descriptor %d %s", path, fd,
                 fcntl(fd, F_GETFD) < 0 ? "is closed"
                 : "names another file than when the program started (the program closed it "
                   "and opened a file of its own there, or put one there with dup2)");
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) {
        SG_ERROR("cannot write the report to %s: descriptor %d is %s", path, fd,
                 flags < 0 ? "closed" : "read-only");
        return -1;
    }
    FILE *const std[] = { stdout, stderr };
    for (int i = 0; i < 2; i++)
        if (!flush_if_free(std[i]))
            SG_WARN("%s is locked by another thread: the report to %s may come before its "
                    "buffered output", i ? "stderr" : "stdout", path);
    return write_through(fd, path, policy, policy_requested, config_errors);
}

/* Opens the file at final (not a link, not a regular file, as lstat said in
 * *st) and writes straight into it, without blocking on a FIFO that has no
 * reader. */
static int write_special(const char *final, const struct stat *st, const char *policy,
                         const char *policy_requested, int config_errors)
{
    if (S_ISDIR(st->st_mode) || S_ISBLK(st->st_mode)) {
        SG_ERROR("not writing the report to %s: it is a %s", final,
                 S_ISDIR(st->st_mode) ? "directory" : "block device");
        return -1;
    }
    int fd = open(final, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        SG_ERROR("cannot open %s for the report: %s", final,
                 errno == ENXIO && S_ISFIFO(st->st_mode) ? "no reader on this FIFO"
                                                           : strerror(errno));
        return -1;
    }
    struct stat now;
    int rc = -1;
    if (fstat(fd, &now) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino)
        SG_ERROR("not writing the report to %s: it changed while being opened", final);
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
        SG_ERROR("cannot write the report to %s: %s", final, strerror(errno));
    else
        rc = write_through(fd, final, policy, policy_requested, config_errors);
    close(fd);
    return rc;
}

/* A link the library follows: made by this user or by root (a link someone
 * else planted, e.g. in a shared folder, is never followed). */
static int trusted_link(const struct stat *st)
{
    return st->st_uid == 0 || st->st_uid == geteuid();
}

void sg_report_note_start(const char *path)
{
    int fd = strcmp(path, "-") == 0 ? 1 : own_fd_name(path);
    if (fd >= 0) sg_fd_note(fd);
}

int sg_report_write_file(const char *path, const char *policy, const char *policy_requested,
                         int config_errors)
{
    char cur[PATH_MAX], next[PATH_MAX];
    if (strcmp(path, "-") == 0) return write_own_fd(1, path, policy, policy_requested, config_errors);
    if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur) {
        SG_ERROR("report path too long: %s", path);
        return -1;
    }
    /* Follow the links at the final component, looking at each step. */
    for (int hops = 0; hops <= 40; hops++) {
        int fd = own_fd_name(cur);
        if (fd >= 0) return write_own_fd(fd, path, policy, policy_requested, config_errors);
        struct stat st;
        if (lstat(cur, &st) != 0 || S_ISREG(st.st_mode))
            return write_replacing(path, policy, policy_requested, config_errors);
        if (!S_ISLNK(st.st_mode))
            return write_special(cur, &st, policy, policy_requested, config_errors);
        ssize_t n = readlink(cur, next, sizeof next - 1);
        if (n < 0) return write_replacing(path, policy, policy_requested, config_errors);
        next[n] = '\0';
        if (!trusted_link(&st)) {
            /* replacing it is safe; following it to a device or FIFO is not */
            struct stat target;
            if (stat(cur, &target) != 0 || S_ISREG(target.st_mode))
                return write_replacing(path, policy, policy_requested, config_errors);
            SG_ERROR("not writing the report through %s: a symbolic link owned by uid %ld "
                     "(only links of this user or root are followed)", cur, (long)st.st_uid);
            return -1;
        }
        if (next[0] == '/') {
            memcpy(cur, next, (size_t)n + 1);
        } else {   /* relative to the link's folder */
            char *slash = strrchr(cur, '/');
            size_t dir = slash ? (size_t)(slash - cur) + 1 : 0;
            if (dir + (size_t)n + 1 > sizeof cur) break;
            memmove(cur + dir, next, (size_t)n + 1);
        }
    }
    SG_ERROR("not writing the report to %s: too many symbolic links, or a path too long", path);
    return -1;
}

void sg_report_summary(const char *policy)
{
    sg_totals t = sg_stats_totals();
    unsigned long calls = 0;
    for (size_t i = 0; i < sg_stats_hook_count(); i++) calls += sg_stats_hook(i).calls;
    SG_INFO("summary: policy %s, %lu hooked calls, %zu graph execs, %lu launches, "
            "updates %lu seen / %lu forwarded / %lu skipped (%lu more would be skipped by "
            "skip_temp, %lu by skip_profiled), %lu bytes requested, %lu mapped",
            policy, calls, sg_exec_count(), t.launches, t.updates_seen, t.updates_forwarded,
            t.updates_skipped, sg_exec_would_skip_total(),
            sg_exec_event_total(SG_EXEC_EV_WOULD_SKIP_PROFILED), t.bytes_requested,
            t.bytes_mapped);
}
