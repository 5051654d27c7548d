/*
 * core/log.c: the non-allocating logger (see log.h). The level and the log
 * file's name are set once at start-up; the file is opened for each line
 * and closed after it, so the library holds no descriptor of the process
 * between lines (a program that closes every descriptor it did not open,
 * or lowers RLIMIT_NOFILE to what it opens itself, never finds the log on a
 * number it counts on). Stderr is written only while descriptor 2 names
 * what it named at start-up (procio.h). log_said (atomic) records that the
 * reason the file cannot be opened was said.
 */
#include "log.h"
#include "procio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SG_LOG_LINE_MAX 1024

static sg_log_level log_level = SG_LOG_DEFAULT;
static char log_path[SG_CONFIG_VALUE_MAX + 1];   /* "" = stderr; set by sg_log_init */
static int log_said;
static __thread int log_busy;

/* Writes buf into fd with SIGPIPE held (a pipe whose reader is gone gives
 * an error, not the program's death), restarting after a signal; into
 * stderr only while descriptor 2 is the stderr the process started with: a
 * program that started with it closed, or closed it and opened a file of
 * its own there, never gets the library's lines in its file. */
static void log_write(int fd, const char *buf, size_t len)
{
    if (fd == 2 && !sg_fd_unchanged(2)) return;
    sg_sigpipe_guard g;
    sg_sigpipe_hold(&g);
    while (len) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        buf += w;
        len -= (size_t)w;
    }
    sg_sigpipe_release(&g);
}

/* Opens the log file for one line: appending, created if missing, never
 * through a symbolic link at its last component, never a FIFO (opening one
 * without a reader would block; writing into one could block every hook),
 * without blocking, on a number above 2 (never one of the standard
 * descriptors a program started without). -1 if it cannot be: the line
 * goes to stderr, and the first time a line there says why. */
static int log_open(void)
{
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
                            O_CLOEXEC, 0644);
    const char *why = NULL;
    struct stat st;
    if (fd < 0)
        why = errno == ELOOP ? "a symbolic link, not followed"
              : errno == ENXIO ? "a FIFO without a reader" : strerror(errno);
    else if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)))
        why = "not a regular file or a character device";
    else if (fcntl(fd, F_SETFL, O_APPEND) != 0)
        why = strerror(errno);
    if (!why && (fd = sg_fd_above_std(fd)) < 0) why = strerror(errno);
    if (!why) return fd;
    if (fd >= 0) close(fd);
    if (!__atomic_exchange_n(&log_said, 1, __ATOMIC_RELAXED)) {
        char buf[SG_LOG_LINE_MAX];
        int n = snprintf(buf, sizeof buf, "stablegraph: error: cannot log to %s=%s (%s); the "
                         "lines that cannot be written there go to stderr\n", SG_ENV_LOG_FILE,
                         log_path, why);
        log_write(2, buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    }
    return -1;
}

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
    int fd = log_path[0] ? log_open() : -1;
    log_write(fd >= 0 ? fd : 2, buf, len);
    if (fd >= 0) close(fd);
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
    sg_fd_note(2);
    if (!path || !*path || strlen(path) >= sizeof log_path) return;
    memcpy(log_path, path, strlen(path) + 1);
}
