/*
 * core/process.h: the process's life with the library: start-up, fork, exit.
 *
 * Start-up (sg_process_start, once): reads every STABLEGRAPH_* variable,
 * sets up logging, reports bad values (and, with STABLEGRAPH_STRICT=1, exits
 * with status 2 before main), turns the policy into capabilities, starts
 * every module, and registers the exit report. The fork handlers of every
 * module's global locks (core.h) are registered once the driver is loaded
 * (sg_process_driver_loaded: they must run before the driver's). Exit: the JSON report
 * (STABLEGRAPH_REPORT) and the info summary, written only by a process that
 * reached the driver through the library (a hook was called or handed out),
 * so a shell or launcher that merely inherited LD_PRELOAD never overwrites
 * the report of the process that did. A forked child starts from zero
 * counts and writes a report only if the path has %p.
 *
 * Thread safety: sg_process_start runs under interpose/'s once-guard; what
 * it sets is read-only afterwards, except report_enabled (written in the
 * fork child).
 */
#ifndef SG_PROCESS_H
#define SG_PROCESS_H

#include <stddef.h>

#include "config.h"
#include "stats.h"

/* Starts the library. hook_names / counters: interpose/'s hook table (the
 * report's "hooks" and the "did this process use the driver" test). Returns
 * 1 if core/ wants to see calls, 0 if every call is to be forwarded
 * unchanged (policy off, or a bad configuration). */
int sg_process_start(sg_getenv_fn getenv_fn, const char *const *hook_names,
                     sg_hook_counter *counters, size_t nhooks);

/* Registers the fork handlers of core/'s locks. Called once, by interpose/,
 * right after it loaded the driver (or found it loaded), so that they run
 * before the fork handlers the driver registered when it was loaded. */
void sg_process_driver_loaded(void);

#endif /* SG_PROCESS_H */
