/*
 * core/core.h: the entry point from interpose/ into core/.
 *
 * interpose/ starts core/ once (sg_process_start, process.h), fills the
 * driver table (sg_driver_set, driver.h), then hands each hooked call over
 * as an sg_call (call.h); core/ returns what the program gets.
 *
 * Thread safety: sg_core_init() runs once, before any sg_core_call(); the
 * state it sets is then read-only. sg_core_call() is thread-safe (each
 * module documents its locks).
 */
#ifndef SG_CORE_H
#define SG_CORE_H

#include <cuda.h>

#include "call.h"
#include "config.h"
#include "policy.h"

/* Turns the configuration into capabilities (policy.h) and hands them to
 * every module. Returns the capabilities. */
sg_caps sg_core_init(const sg_config *cfg);

/* Handles one call; returns what the program gets. */
CUresult sg_core_call(const sg_call *c);

/* Fork handlers of every module, in lock order: 0 prepare, 1 parent, 2 child. */
void sg_core_atfork(int phase);

/* Forgets everything the modules hold (unit tests). */
void sg_core_reset(void);

#endif /* SG_CORE_H */
