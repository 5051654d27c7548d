/*
 * core/core.c: the policy layer. Decides what happens to each hooked call
 * and keeps the per-exec accounting. Today every policy forwards every call;
 * always_update (and, for now, skip_temp and skip_profiled) also observe.
 * State set by sg_core_init() and sg_core_set_driver() is read-only afterwards (see core.h).
 */
#include "core.h"

#include "log.h"
#include "stats.h"

#include <string.h>

sg_driver sg_drv;
#define SG_DRIVER_NAME_(name, ret, params) #name,
const char *const sg_driver_names[SG_DRIVER_COUNT] = { SG_DRIVER_LIST(SG_DRIVER_NAME_) };
unsigned long sg_driver_calls[SG_DRIVER_COUNT];

static sg_policy policy = SG_POLICY_DEFAULT;

void sg_core_set_driver(const sg_driver *drv)
{
    sg_drv = *drv;
}

void sg_core_init(const sg_config *cfg)
{
    policy = cfg->policy;
    if (policy == SG_POLICY_SKIP_TEMP || policy == SG_POLICY_SKIP_PROFILED)
        SG_WARN("policy %s is not implemented yet: running as always_update "
                "(every call forwarded and observed)", sg_policy_name(policy));
}

/* Number of nodes of `graph`, through the driver; 0 with *known = 0 if it
 * cannot be asked. */
static size_t graph_node_count(CUgraph graph, int *known)
{
    size_t n = 0;
    *known = sg_drv.cuGraphGetNodes && SG_DRIVER_CALL(cuGraphGetNodes, graph, NULL, &n)
                                            == CUDA_SUCCESS;
    return *known ? n : 0;
}

CUresult sg_core_call(const sg_call *c)
{
    CUresult rc;
    int known;
    switch (c->kind) {
    case SG_CALL_ALLOC:
        rc = c->forward(c->args);
        if (rc == CUDA_SUCCESS) SG_TOTAL_ADD(bytes_requested, c->bytes);
        return rc;
    case SG_CALL_INSTANTIATE:
        rc = c->forward(c->args);
        if (rc == CUDA_SUCCESS && c->exec_out) {
            size_t nodes = graph_node_count(c->graph, &known);
            if (sg_exec_created(*c->exec_out, nodes, known) != 0)
                SG_WARN("out of memory: graph exec %p is not tracked", (void *)*c->exec_out);
        }
        return rc;
    case SG_CALL_LAUNCH:
        rc = c->forward(c->args);
        if (rc == CUDA_SUCCESS) {
            SG_TOTAL_ADD(launches, 1);
            sg_exec_launched(c->exec);
        }
        return rc;
    case SG_CALL_UPDATE:
        /* Every policy implemented so far forwards updates. */
        SG_TOTAL_ADD(updates_seen, 1);
        SG_TOTAL_ADD(updates_forwarded, 1);
        sg_exec_update(c->exec, 1, SG_REASON_POLICY);
        return c->forward(c->args);
    case SG_CALL_EXEC_DESTROY:
        rc = c->forward(c->args);
        if (rc == CUDA_SUCCESS) sg_exec_destroyed(c->exec);
        return rc;
    case SG_CALL_FORWARD:
        break;
    }
    return c->forward(c->args);
}
