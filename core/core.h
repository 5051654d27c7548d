/*
 * core/core.h: the entry point from interpose/ into core/.
 *
 * Each hooked call that core/ should see arrives as one sg_call: what kind of
 * operation it is, the arguments core/ cares about, and a forward function
 * that performs the original call on the real driver (the exact variant the
 * program called, with its original arguments). core/ decides whether and
 * when to forward, observes, and returns the CUresult the program gets.
 *
 * Policies: off (interpose/ forwards without calling core/), always_update
 * (forward everything; count launches, updates, and what the other policies
 * would have skipped), skip_temp (memory.c places allocations, graphs.c skips
 * identical updates), skip_profiled (skip_temp plus profiled.c: exec variants
 * and aliasing of caller buffers into slots.c's stable slots).
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
    SG_CALL_ALLOC,         /* dptr_out, bytes; async: stream, pool */
    SG_CALL_FREE,          /* dptr; async: stream */
    SG_CALL_ADDR_RANGE,    /* base_out, size_out, dptr */
    SG_CALL_PTR_ATTR,      /* attr_data, attr, dptr */
    SG_CALL_PTR_ATTRS,     /* nattrs, attrs, attr_datas, dptr */
    SG_CALL_IPC_HANDLE,    /* ipc_out, dptr */
    SG_CALL_CTX_DESTROY,   /* ctx */
    SG_CALL_PRIMARY_RETAIN,/* ctx_out, device: tells which context is a device's primary one */
    SG_CALL_PRIMARY_DROP,  /* device (cuDevicePrimaryCtxRelease / Reset) */
    SG_CALL_INSTANTIATE,   /* exec_out, graph */
    SG_CALL_LAUNCH,        /* exec, stream */
    SG_CALL_UPDATE_GRAPH,  /* exec, graph; result_info (v2) or error_node_out + update_result_out */
    SG_CALL_UPDATE_KERNEL, /* exec, node; kparams (v2) or kparams_v1 */
    SG_CALL_UPDATE_NODE,   /* exec, node, nparams */
    SG_CALL_EXEC_DIRTY,    /* exec: changed by a call core/ does not model */
    SG_CALL_EXEC_DESTROY,  /* exec */
} sg_call_kind;

typedef struct sg_call {
    unsigned hook;                            /* hook index, for log lines */
    sg_call_kind kind;
    CUresult (*forward)(const void *args);    /* the original call */
    const void *args;                         /* its arguments, for forward */
    int per_thread;                           /* the _ptsz/_ptds flavour: NULL stream = per-thread stream */
    int async;                                /* ALLOC/FREE: the stream-ordered variant */
    /* memory */
    CUdeviceptr *dptr_out;
    CUdeviceptr dptr;
    size_t bytes;
    CUstream stream;
    CUmemoryPool pool;
    CUdeviceptr *base_out;
    size_t *size_out;
    void *attr_data;
    CUpointer_attribute attr;
    unsigned nattrs;
    CUpointer_attribute *attrs;
    void **attr_datas;
    CUipcMemHandle *ipc_out;
    CUcontext ctx;
    CUcontext *ctx_out;
    CUdevice device;
    /* graphs */
    CUgraphExec exec;
    CUgraphExec *exec_out;
    CUgraph graph;
    CUgraphExecUpdateResultInfo *result_info;
    CUgraphNode *error_node_out;
    CUgraphExecUpdateResult *update_result_out;
    CUgraphNode node;
    const CUDA_KERNEL_NODE_PARAMS *kparams;
    const CUDA_KERNEL_NODE_PARAMS_v1 *kparams_v1;
    CUgraphNodeParams *nparams;
} sg_call;

/* The policy in force (set by sg_core_init). */
sg_policy sg_core_policy(void);

/* Sets the policy (logs at start-up what it means). Call once, before any
 * sg_core_call(). */
void sg_core_init(const sg_config *cfg);

/* Sets the driver table (copied). Call once, before any sg_core_call(). */
void sg_core_set_driver(const sg_driver *drv);

/* Handles one call; returns what the program gets. */
CUresult sg_core_call(const sg_call *c);

#endif /* SG_CORE_H */
