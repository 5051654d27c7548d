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
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
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
                p->generations ? "generations" : "plain", p->positions, p->varying_positions,
                p->varying_scalar_bytes);
        out_fmt(o, "\"aliased_slots\": %u, \"generations_allowed\": %u, "
                   "\"update_ns_per_step\": %llu, \"remap_ns_per_step\": %llu, \"why\": ",
                p->aliased_slots, p->generations_allowed, p->update_ns_per_step,
                p->remap_ns_per_step);
        out_str(o, p->why ? p->why : "");
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
    OUT_LIT(&o, "\n  },\n  \"execs_folded\": {");
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

int sg_report_write_file(const char *path, const char *policy, const char *policy_requested,
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
