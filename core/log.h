/*
 * core/log.h: the logger. Every line starts with "stablegraph: ".
 *
 * Formatting happens in a stack buffer and goes out with one write(2): no
 * allocation, usable from any hook and at exit. A thread-local guard drops a
 * message logged while the same thread is already logging. Errors and
 * warnings are capped per call site (SG_LOG_CAP lines, then one line saying
 * further ones are suppressed).
 *
 * Globals: the level and the log file's name are written once by
 * sg_log_init() before any hook runs concurrently, then only read. The file
 * is opened for each line logged and closed after it (a process that logs
 * nothing never creates it; between lines the library holds no descriptor);
 * stderr is written only while descriptor 2 names what it named at
 * start-up, with SIGPIPE held (procio.h).
 */
#ifndef SG_LOG_H
#define SG_LOG_H

#include "config.h"

#define SG_LOG_CAP 20

/* Sets the threshold and the destination (path NULL or "" = stderr), and
 * notes what descriptor 2 names now (the stderr the library may write). The
 * file is opened for each line: appending, never through a symbolic link at
 * its last component, never a FIFO, never blocking, never on descriptors
 * 0-2; a line that cannot be written there goes to stderr, after one line
 * saying why. */
void sg_log_init(sg_log_level level, const char *path);

/* Nonzero if messages at `level` are printed. */
int sg_log_enabled(sg_log_level level);

/* Prints one line (a newline is added). */
void sg_log(sg_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints one line unless *site_count has reached `cap` (then, once, a line
 * saying further messages from this place are suppressed). */
void sg_log_capped(unsigned *site_count, unsigned cap, sg_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define SG_LOG_AT_CAP_(level, cap, ...)                                       \
    do {                                                                      \
        static unsigned sg_site_count_;                                       \
        if (sg_log_enabled(level))                                            \
            sg_log_capped(&sg_site_count_, (cap), (level), __VA_ARGS__);      \
    } while (0)

#define SG_ERROR(...) SG_LOG_AT_CAP_(SG_LOG_ERROR, SG_LOG_CAP, __VA_ARGS__)
#define SG_WARN(...)  SG_LOG_AT_CAP_(SG_LOG_WARN, SG_LOG_CAP, __VA_ARGS__)
#define SG_INFO(...)                                                          \
    do { if (sg_log_enabled(SG_LOG_INFO)) sg_log(SG_LOG_INFO, __VA_ARGS__); } while (0)
#define SG_DEBUG(...)                                                         \
    do { if (sg_log_enabled(SG_LOG_DEBUG)) sg_log(SG_LOG_DEBUG, __VA_ARGS__); } while (0)
/* A debug line printed the first time this place is reached only. */
#define SG_DEBUG_ONCE(...) SG_LOG_AT_CAP_(SG_LOG_DEBUG, 1, __VA_ARGS__)

#endif /* SG_LOG_H */
