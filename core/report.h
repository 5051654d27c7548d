/*
 * core/report.h: the report. The JSON writer, the write at exit and the
 * human summary (the STABLEGRAPH_REPORT template is core/pathtmpl.h).
 *
 * No locks of its own: the writer reads counters (atomics) and walks the
 * exec table through sg_exec_foreach (which takes exec_lock).
 *
 * JSON layout:
 *   { "version": 1, "pid": N, "policy": "...", "policy_requested": "...",
 *     "config_errors": N,
 *     "hooks":  { "<ELF name>": {"calls": N, "resolved": N}, ... },
 *     "totals": { "launches": N, "updates_seen": N, "updates_forwarded": N,
 *                 "updates_skipped": N, "bytes_requested": N, "bytes_mapped": N },
 *     "library_driver_calls": { "<ELF name>": N, ... },   (calls the library itself made)
 *     "execs_folded": { "execs": N, "launches": N, ... (SG_EXEC_COUNTS_LIST),
 *                       "forwarded_reasons": { ... } },   (destroyed execs not listed)
 *     "execs": [ { "id": N, "nodes": N|null, "destroyed": bool, "launches": N,
 *                  "updates_seen": N, "updates_forwarded": N, "updates_skipped": N,
 *                  "would_skip": N, "would_skip_profiled": N,
 *                  "forwarded_reasons": { "topology": N, ... },
 *                  "profile": { ... } (skip_profiled's decision, once made) }, ... ] }
 *   "execs" lists the live execs and the SG_EXEC_KEEP most interesting
 *   destroyed ones (stats.h); every count of the other destroyed execs is
 *   in "execs_folded", so a count summed over "execs" plus the same count
 *   of "execs_folded" covers every exec.
 */
#ifndef SG_REPORT_H
#define SG_REPORT_H

#include <stddef.h>

#include "config.h"
#include "pathtmpl.h"   /* the template that names the report file */

/* Writes the JSON report to fd. Returns 0, or -1 on a write error. */
int sg_report_write_fd(int fd, const char *policy, const char *policy_requested,
                       int config_errors);

/* Writes the report to `path` atomically: a temporary file in the same
 * directory (O_CREAT|O_EXCL|O_NOFOLLOW), then rename(2); into the process's
 * descriptor that path names ("-": stdout) if it is unchanged (above). Returns 0, or -1
 * after logging why (the temporary file is removed; `path` is untouched). */
int sg_report_write_file(const char *path, const char *policy, const char *policy_requested,
                         int config_errors);

/* At start-up: if path ("-", /dev/stdout, /dev/fd/N, ...) names a
 * descriptor of the process, notes what it names (procio.h). At exit the
 * report goes into that descriptor only if it still names the same file:
 * one the program closed, or replaced by a file of its own, gets no report
 * (an error says why). */
void sg_report_note_start(const char *path);

/* Logs a short human summary at info level. */
void sg_report_summary(const char *policy);

#endif /* SG_REPORT_H */
