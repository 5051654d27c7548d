/*
 * core/log.c: the non-allocating logger (see log.h). The level and the
 * output descriptor are set once at start-up; per-site counters are atomics.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SG_LOG_LINE_MAX 1024

static sg_log_level log_level = SG_LOG_DEFAULT;
static int log_fd = 2;
static __thread int log_busy;

int sg_log_enabled(sg_log_level level)
{
    return level <= __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

static void log_v(sg_log_level level, const char *suffix, const char *fmt, va_list ap)
{
    char buf[SG_LOG_LINE_MAX];
    if (log_busy) return;
    log_busy = 1;
    int saved_errno = errno;
    int n = snprintf(buf, sizeof buf, "stablegraph: %s: ", sg_log_level_name(level));
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2) len = sizeof buf - 2;
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\n", suffix);
    if (len > sizeof buf - 1) len = sizeof buf - 1;
    ssize_t w = write(log_fd, buf, len);
    (void)w;
    errno = saved_errno;
    log_busy = 0;
}

void sg_log(sg_log_level level, const char *fmt, ...)
{
    va_list ap;
    if (!sg_log_enabled(level)) return;
    va_start(ap, fmt);
    log_v(level, "", fmt, ap);
    va_end(ap);
}

void sg_log_capped(unsigned *site_count, unsigned cap, sg_log_level level, const char *fmt, ...)
{
    va_list ap;
    unsigned n = __atomic_fetch_add(site_count, 1, __ATOMIC_RELAXED);
    if (n >= cap || !sg_log_enabled(level)) return;
    va_start(ap, fmt);
    log_v(level, n + 1 == cap && cap > 1 ? " (further messages like this are suppressed)" : "",
          fmt, ap);
    va_end(ap);
}

void sg_log_init(sg_log_level level, const char *path)
{
    __atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
    if (!path || !*path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        sg_log(SG_LOG_ERROR, "cannot open %s=%s (%s); logging to stderr", SG_ENV_LOG_FILE,
               path, strerror(errno));
        return;
    }
    log_fd = fd;
}
