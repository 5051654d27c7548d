/*
 * core/core.c: the policy layer's entry point. Routes each hooked call that
 * interpose/ hands over to the part of core/ that owns it:
 *   memory calls (allocation, free, address queries, IPC, context teardown)
 *     -> sg_mem_call (memory.c: placement in the persistent reservation);
 *   graph calls (instantiate, launch, updates, exec changes and destruction)
 *     -> sg_graph_call (graphs.c: exec records, update skipping, counts;
 *        profiled.c under skip_profiled).
 * It also wires the context-teardown notification from memory.c to graphs.c
 * and slots.c.
 * Everything else is forwarded unchanged.
 * State set by sg_core_init() and sg_core_set_driver() is read-only afterwards
 * (see core.h).
 */
#include "core.h"

#include "graphs.h"
#include "log.h"
#include "memory.h"
#include "slots.h"
#include "stats.h"

sg_driver sg_drv;
#define SG_DRIVER_NAME_(name, ret, params) #name,
const char *const sg_driver_names[SG_DRIVER_COUNT] = { SG_DRIVER_LIST(SG_DRIVER_NAME_) };
unsigned long sg_driver_calls[SG_DRIVER_COUNT];

static sg_policy policy = SG_POLICY_DEFAULT;

sg_policy sg_core_policy(void) { return policy; }

void sg_core_set_driver(const sg_driver *drv)
{
    sg_drv = *drv;
}

/* A context was destroyed: the graph records and the slots of its execs go
 * before its memory arena does (memory.c calls this first). */
static void ctx_gone(CUcontext ctx)
{
    sg_graph_ctx_gone(ctx);
    sg_slots_ctx_teardown(ctx);
}

void sg_core_init(const sg_config *cfg)
{
    sg_mem_on_ctx_gone(ctx_gone);
    policy = cfg->policy;
    sg_mem_init(cfg);
    sg_graph_init(cfg);
}

CUresult sg_core_call(const sg_call *c)
{
    switch (c->kind) {
    case SG_CALL_ALLOC:
    case SG_CALL_FREE:
    case SG_CALL_ADDR_RANGE:
    case SG_CALL_PTR_ATTR:
    case SG_CALL_PTR_ATTRS:
    case SG_CALL_IPC_HANDLE:
    case SG_CALL_CTX_DESTROY:
    case SG_CALL_PRIMARY_RETAIN:
    case SG_CALL_PRIMARY_DROP:
        return sg_mem_call(c);
    case SG_CALL_INSTANTIATE:
    case SG_CALL_LAUNCH:
    case SG_CALL_UPDATE_GRAPH:
    case SG_CALL_UPDATE_KERNEL:
    case SG_CALL_UPDATE_NODE:
    case SG_CALL_EXEC_DIRTY:
    case SG_CALL_EXEC_DESTROY:
        return sg_graph_call(c);
    case SG_CALL_FORWARD:
        break;
    }
    return c->forward(c->args);
}
