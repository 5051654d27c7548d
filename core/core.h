/*
 * core/core.h: the entry point from interpose/ into core/.
 *
 * Each hooked call that core/ should see arrives as one sg_call: what kind of
 * operation it is, the arguments core/ cares about, and a forward function
 * that performs the original call on the real driver (the exact variant the
 * program called, with its original arguments). core/ decides whether and
 * when to forward, observes, and returns the CUresult the program gets.
 *
 * Policies today: off (interpose/ forwards without calling core/),
 * always_update (forward everything, count launches and updates per exec);
 * skip_temp and skip_profiled behave as always_update (later issues build
 * them) and sg_core_init() logs that at start-up.
 *
 * Thread safety: sg_core_init() and sg_core_set_driver() run once, before any
 * sg_core_call(); the state they set is then read-only. sg_core_call() is thread-safe (see
 * stats.h for the locks it takes).
 */
#ifndef SG_CORE_H
#define SG_CORE_H

#include <cuda.h>
#include <stddef.h>

#include "config.h"
#include "driver.h"

typedef enum {
    SG_CALL_FORWARD,       /* no observation: forward */
    SG_CALL_ALLOC,         /* bytes */
    SG_CALL_INSTANTIATE,   /* exec_out, graph */
    SG_CALL_LAUNCH,        /* exec */
    SG_CALL_UPDATE,        /* exec */
    SG_CALL_EXEC_DESTROY,  /* exec */
} sg_call_kind;

typedef struct sg_call {
    unsigned hook;                            /* hook index, for log lines */
    sg_call_kind kind;
    CUresult (*forward)(const void *args);    /* the original call */
    const void *args;                         /* its arguments, for forward */
    CUgraphExec exec;
    CUgraphExec *exec_out;
    CUgraph graph;
    size_t bytes;
} sg_call;

/* Sets the policy (logs at start-up what it means). Call once, before any
 * sg_core_call(). */
void sg_core_init(const sg_config *cfg);

/* Sets the driver table (copied). Call once, before any sg_core_call(). */
void sg_core_set_driver(const sg_driver *drv);

/* Handles one call; returns what the program gets. */
CUresult sg_core_call(const sg_call *c);

#endif /* SG_CORE_H */
