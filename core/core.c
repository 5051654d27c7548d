/*
 * core/core.c: the router, the root of core/: it routes each hooked call to
 * the module that owns it, and nobody calls it but interpose/ (and
 * process.c at start-up):
 *   memory (allocation, free, address queries, copies and memsets, memory
 *     info, stream destruction)            -> memory.c (placement)
 *   legacy IPC: opening and closing a handle -> ipc.c (cuIpcGetMemHandle of
 *                                             placed memory: memory.c, then ipc.c)
 *   contexts (destroy, primary retain / release / reset)
 *                                          -> contexts.c (the one teardown)
 *   captures (begin, end), and what stream operations and explicit graph
 *     calls add to graphs                  -> capture.c, rec_graph.c
 *                                             (record.h), then as above
 *   graph execs and graphs (instantiate, launch, updates, exec setters,
 *     destruction, module unloads)         -> graphs.c (observed by
 *                                             profiled.c under skip_profiled)
 * Everything else is forwarded unchanged.
 */
#include "core.h"

#include "capture.h"
#include "contexts.h"
#include "driver.h"
#include "fingerprint.h"
#include "graphs.h"
#include "ipc.h"
#include "memory.h"
#include "profiled.h"
#include "record.h"
#include "slots.h"
#include "stats.h"
#include "vmm.h"

sg_caps sg_core_init(const sg_config *cfg)
{
    sg_caps caps = sg_policy_caps(cfg);
    sg_slots_init();
    sg_mem_init(&caps);
    sg_rec_init(1, cfg->audit_records);
    sg_graph_init(&caps, sg_prof_init(&caps));
    return caps;
}

/* A call that may end memory the library did not place (an IPC close: memory
 * opened from a process without the library; a context's teardown: its
 * memory), counted after it returned (memory.h, sg_mem_foreign_gone). */
static CUresult ending(const sg_call *c, CUresult (*call)(const sg_call *))
{
    CUresult rc = call(c);
    sg_mem_foreign_gone(0);
    return rc;
}

/* What a call does without the recorder. */
static CUresult route(const sg_call *c)
{
    CUresult rc;
    switch (c->kind) {
    case SG_CALL_ALLOC:
    case SG_CALL_DEV_ALLOC:
    case SG_CALL_CTX_CREATE:
    case SG_CALL_FREE:
    case SG_CALL_POOL_SET:
    case SG_CALL_KERNEL_LOOKUP:
    case SG_CALL_CTX_SWITCH:
    case SG_CALL_FOREIGN_FREE:
        return sg_mem_call(c);
    case SG_CALL_KERNEL:
        /* an uncaptured launch the launch filter sent here (memory.h); a
         * captured one only adds its node */
        if (sg_capture_active()) break;
        return sg_mem_call(c);
    case SG_CALL_ADDR_RANGE:
    case SG_CALL_PTR_ATTR:
    case SG_CALL_PTR_ATTRS:
    case SG_CALL_PTR_SET:
    case SG_CALL_IPC_HANDLE:
    case SG_CALL_RETAIN_HANDLE:
    case SG_CALL_MEM_ACCESS:
    case SG_CALL_MEM_INFO:
    case SG_CALL_POOL_ATTR:
    case SG_CALL_MEMOP:
        return sg_mem_query(c);
    case SG_CALL_STREAM_DESTROY: {
        sg_graph_stream_gone(c->u.stream.stream);   /* before the stream goes */
        int origin = sg_rec_stream_gone(c->u.stream.stream);
        rc = sg_mem_call(c);
        if (origin && rc == CUDA_SUCCESS) sg_capture_abandoned();
        return rc;
    }
    case SG_CALL_IPC_OPEN:
        return sg_ipc_call(c);
    case SG_CALL_IPC_CLOSE:
        return ending(c, sg_ipc_call);
    case SG_CALL_CTX_DESTROY:
    case SG_CALL_PRIMARY_DROP:
        sg_rec_ctx_may_go();
        sg_launch_filter_forget();
        return ending(c, sg_ctx_call);
    case SG_CALL_PRIMARY_RETAIN:
        /* the first retain activates the context, which takes device memory:
         * on CUDA_ERROR_OUT_OF_MEMORY (documented) the arenas give back what
         * they hold and it is made once more (the failed retain left the
         * context inactive; round 21) */
        return sg_ctx_primary_retained(c, sg_mem_retry(c, c->forward(c->args)));
    case SG_CALL_GRAPH_DESTROY:
        sg_rec_graph_gone(c->u.graph.graph);   /* before the driver frees the value (record.h) */
        return sg_graph_call(c);
    case SG_CALL_MODULE_UNLOAD:
        /* its kernels' handle values may come back for kernels never loaded
         * in any context (round 25) */
        rc = sg_graph_call(c);
        if (rc == CUDA_SUCCESS) sg_launch_filter_forget();
        return rc;
    case SG_CALL_GRAPH_UOBJ:
    case SG_CALL_GRAPH_CLONE:
    case SG_CALL_NODE_DESTROY:
    case SG_CALL_INSTANTIATE:
    case SG_CALL_LAUNCH:
    case SG_CALL_UPLOAD:
    case SG_CALL_UPDATE_GRAPH:
    case SG_CALL_UPDATE_NODE:
    case SG_CALL_EXEC_ENABLE:
    case SG_CALL_EXEC_DIRTY:
    case SG_CALL_EXEC_DESTROY:
        return sg_graph_call(c);
    case SG_CALL_CAPTURE_BEGIN:
    case SG_CALL_CAPTURE_END:
    case SG_CALL_FORWARD:
        break;
    }
    return c->forward(c->args);
}

/* Sticky errors. A kernel that faults leaves its context (cuda.h:
 * CUDA_ERROR_ASSERT, "The context cannot be used anymore, and must be
 * destroyed") or the whole process (CUDA_ERROR_ILLEGAL_ADDRESS and the
 * others below: "any further CUDA work will return the same error")
 * failing every later call with that code. The library answers some calls
 * itself (a placed allocation or free, a query of placed memory, a skipped
 * update), and those must fail as the driver's would; the library cannot
 * know the context's state without asking. So once any call returned such
 * a code (sg_sticky_seen, driver.h, never cleared: a program that recovers from an assert
 * by a context teardown pays one driver query per hooked call from then
 * on), every hooked call that core/ may answer first asks the driver about
 * the current context (cuMemGetInfo: no side effect, allowed in every
 * capture mode) and returns its sticky error, changing nothing, as the
 * driver's own call would. Context teardown and retain are not asked (the
 * driver lets them through: they are the way out of an assert), nor context
 * creation (a new context is another way out). Test:
 * tests/e2e/adv_sticky.c (round 16). */
static CUresult sticky_probe(const sg_call *c)
{
    switch (c->kind) {
    case SG_CALL_FORWARD:           /* the driver answers these itself */
    case SG_CALL_FOREIGN_FREE:
    case SG_CALL_GRAPH_UOBJ:
    case SG_CALL_GRAPH_CLONE:
    case SG_CALL_POOL_ATTR:         /* (forwarded first; a figure added on success only) */
    case SG_CALL_CTX_CREATE:
    case SG_CALL_CTX_DESTROY:
    case SG_CALL_CTX_SWITCH:
    case SG_CALL_PRIMARY_RETAIN:
    case SG_CALL_PRIMARY_DROP:
        return CUDA_SUCCESS;
    default:
        break;
    }
    size_t fr, total;
    CUresult rc = sg_drv.cuMemGetInfo_v2 ? SG_DRIVER_CALL(cuMemGetInfo_v2, &fr, &total) : CUDA_SUCCESS;
    return sg_cu_sticky(rc) ? rc : CUDA_SUCCESS;
}

/* Every call but a graph launch. */
static __attribute__((noinline)) CUresult core_call_other(const sg_call *c)
{
    if (__builtin_expect(__atomic_load_n(&sg_sticky_seen, __ATOMIC_RELAXED), 0)) {
        CUresult rc = sticky_probe(c);
        if (rc != CUDA_SUCCESS) return rc;
    }
    switch (c->kind) {
    case SG_CALL_CAPTURE_BEGIN:
    case SG_CALL_CAPTURE_END:
    case SG_CALL_KERNEL:
        return sg_cu_note(sg_rec_call(c, route));
    default:
        if (c->gb && c->gb->kind == SG_GB_GRAPH_CREATE) {
            /* a new graph: a user-object mark its value holds is a dead
             * embedded graph's (graph_uobj.c) */
            CUresult rc = sg_rec_call(c, route);
            if (rc == CUDA_SUCCESS) sg_graph_uobj_born(*c->gb->u.graph_out);
            return sg_cu_note(rc);
        }
        return sg_cu_note(c->gb ? sg_rec_call(c, route) : route(c));
    }
}

CUresult sg_core_call(const sg_call *c)
{
    /* the hottest call (every step of a graph program) first, a tail call
     * with no frame: no recorder facet (SG_LAUNCH sets none), and no sticky
     * probe (a launch always reaches the driver, which answers a sticky
     * error itself; graphs.c notes it) */
    if (c->kind == SG_CALL_LAUNCH) return sg_graph_launch(c);
    return core_call_other(c);
}

/* The global locks, taken in the order of docs/locking.md: the exec
 * records' table, the slots', the contexts' table, the recorder's, memory's
 * registry, the IPC tables (never nested with another), the fingerprint
 * cache, the statistics. */
void sg_core_atfork(int phase)
{
    if (phase == 0) {
        sg_graph_atfork(0);
        sg_slots_atfork(0);
        sg_ctx_atfork(0);
        sg_rec_atfork(0);
        sg_mem_atfork(0);
        sg_ipc_atfork(0);
        sg_fp_cache_atfork(0);
        sg_stats_atfork_prepare();
        return;
    }
    if (phase == 1) sg_stats_atfork_parent();
    else sg_stats_atfork_child();
    sg_fp_cache_atfork(phase);
    sg_ipc_atfork(phase);
    sg_mem_atfork(phase);
    sg_rec_atfork(phase);
    sg_ctx_atfork(phase);
    sg_slots_atfork(phase);
    sg_graph_atfork(phase);
}

void sg_core_reset(void)
{
    sg_graph_reset();
    sg_slots_reset();
    sg_mem_reset();
    sg_ipc_reset();
    sg_fp_cache_reset();
    sg_capture_reset();
    sg_stats_reset();
}
