/*
 * core/log.c: the non-allocating logger (see log.h). The level and the log
 * file's name are set once at start-up; the file is opened at the first
 * line logged, and opened again if its descriptor no longer names it
 * (log_state, an atomic, says whether an open is under way; log_fd and the
 * file's identity are atomics written only by the thread that opens it);
 * per-site counters are atomics.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SG_LOG_LINE_MAX 1024

static sg_log_level log_level = SG_LOG_DEFAULT;
static char log_path[SG_CONFIG_VALUE_MAX + 1];   /* "" = stderr; set by sg_log_init */
/* LOG_CLOSED until the first line; then the pid of the process whose thread
 * is opening the file; LOG_OPEN once log_fd is set (release). A forked child
 * that finds its parent's pid there (the opening thread did not come along)
 * opens the file itself. */
enum { LOG_OPEN = -1, LOG_CLOSED = 0 };
static int log_state = LOG_OPEN;
static int log_fd = 2;
/* The device and inode of the file opened at log_fd; log_ino 0: log_fd is
 * the program's stderr (no file, or it could not be opened). */
static dev_t log_dev;
static ino_t log_ino;
static __thread int log_busy;

/* Opens the log file (recording its identity in log_dev and log_ino):
 * appending, created if missing, never through a
 * symbolic link at its last component, never a FIFO (opening one without a
 * reader would block; writing into one could block every hook), without
 * blocking. On failure the log goes to stderr, with one line saying why. */
static int log_open(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
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
    if (!why) {
        __atomic_store_n(&log_dev, st.st_dev, __ATOMIC_RELAXED);
        __atomic_store_n(&log_ino, st.st_ino, __ATOMIC_RELAXED);
        return fd;
    }
    __atomic_store_n(&log_ino, 0, __ATOMIC_RELAXED);
    if (fd >= 0) close(fd);
    char buf[SG_LOG_LINE_MAX];
    int n = snprintf(buf, sizeof buf, "stablegraph: error: cannot log to %s=%s (%s); logging "
                     "to stderr\n", SG_ENV_LOG_FILE, path, why);
    ssize_t w = write(2, buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    (void)w;
    return 2;
}

/* Nonzero if log_fd is the file log_open opened, or the program's stderr.
 * A program may close every descriptor it did not open itself (a daemon,
 * close_range(3, ~0U, 0) before exec) and get the log's number back for a file
 * of its own: the log's lines would be written into it. */
static int log_fd_is_ours(void)
{
    struct stat st;
    ino_t ino = __atomic_load_n(&log_ino, __ATOMIC_RELAXED);
    if (!ino) return 1;
    return fstat(__atomic_load_n(&log_fd, __ATOMIC_RELAXED), &st) == 0 && st.st_ino == ino &&
           st.st_dev == __atomic_load_n(&log_dev, __ATOMIC_RELAXED);
}

/* The descriptor to log to, opening the file on first use, and again if the
 * program closed it (the old number is left alone: it is not ours anymore). */
static int log_out(void)
{
    int state;
    for (;;) {
        state = __atomic_load_n(&log_state, __ATOMIC_ACQUIRE);
        if (state == LOG_OPEN) {
            if (log_fd_is_ours()) break;
            /* another thread may have opened it again since: checked below */
        }
        int me = (int)getpid();
        if (state != me &&
            __atomic_compare_exchange_n(&log_state, &state, me, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_ACQUIRE)) {
            if (state != LOG_OPEN || !log_fd_is_ours())
                __atomic_store_n(&log_fd, log_open(log_path), __ATOMIC_RELAXED);
            __atomic_store_n(&log_state, LOG_OPEN, __ATOMIC_RELEASE);
            break;
        }
        if (state == me) sched_yield();   /* another thread of this process is opening it */
    }
    return __atomic_load_n(&log_fd, __ATOMIC_RELAXED);
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
    ssize_t w = write(log_out(), buf, len);
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
    if (!path || !*path || strlen(path) >= sizeof log_path) return;
    memcpy(log_path, path, strlen(path) + 1);
    __atomic_store_n(&log_state, LOG_CLOSED, __ATOMIC_RELEASE);
}
