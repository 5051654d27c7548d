/*
 * emu_exec_update.c: changing a graph exec of the emulated CUDA driver: the
 * per-node set-params calls (cuGraphExec*NodeSetParams, cuGraphExecNodeSetParams),
 * cuGraphExecChildGraphNodeSetParams, the event nodes' exec setters,
 * enabling and disabling nodes, and
 * cuGraphExecUpdate (_v2 and the legacy one: topology, node types, the
 * allowed parameter changes and the kernel attribute rules checked, child
 * graphs recursively, CUgraphExecUpdateResultInfo filled).
 *
 * Locks: exec->lock (emu_graph.h) around every change of an exec's nodes.
 */
#include "emu_graph.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ exec set params */

static int exec_node_cmp(const void *a, const void *b)
{
    uint64_t x = ((const exec_node *)a)->serial, y = ((const exec_node *)b)->serial;
    return x < y ? -1 : x > y;
}

/* The exec node named by hNode: a live node of the exec's original graph
 * that was in it at instantiation (by graph uid and node serial: not by
 * address, which a later node may reuse, nor by position, which shifts when
 * an earlier node is destroyed). */
static exec_node *exec_find(CUgraphExec e, CUgraphNode h)
{
    if (!emu_node_ok(h) || h->graph->uid != e->graph_uid) return NULL;
    exec_node key = { .serial = h->serial };
    return bsearch(&key, e->nodes, e->n, sizeof *e->nodes, exec_node_cmp);
}

/* Replaces an exec node's parameters with *p (consumed) if the documented
 * rules allow it; CUDA_ERROR_INVALID_VALUE otherwise. */
static CUresult exec_set(CUgraphExec e, CUgraphNode h, emu_nparams *p)
{
    exec_node *x = emu_exec_ok(e) ? exec_find(e, h) : NULL;
    if (!x || x->p.type != p->type || emu_nparams_change_check(&x->p, p, 1) != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        emu_nparams_free(p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&e->lock);
    emu_nparams old = x->p;
    memcpy(p->attr, old.attr, sizeof p->attr);   /* set-params keeps the attributes */
    x->p = *p;
    pthread_mutex_unlock(&e->lock);
    emu_stat_nodes(1, !emu_nparams_same(&old, p));
    emu_nparams_free(&old);
    return CUDA_SUCCESS;
}

static CUresult exec_kernel_set(CUgraphExec e, CUgraphNode h, const kin *k)
{
    emu_nparams p;
    if (!emu_exec_ok(e) || !exec_find(e, h)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_nparams_kernel(&p, k, NULL);
    return r != CUDA_SUCCESS ? r : exec_set(e, h, &p);
}

EMU_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    kin k = KIN_OF(nodeParams);
    return exec_kernel_set(hGraphExec, hNode, &k);
}

EMU_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                      const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    kin k = KIN_OF(nodeParams);
    k.kern = nodeParams->kern;
    k.kctx = nodeParams->ctx;
    return exec_kernel_set(hGraphExec, hNode, &k);
}

EMU_EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    EMU_ENTRY_INIT();
    emu_nparams p;
    if (!emu_exec_ok(hGraphExec) || !exec_find(hGraphExec, hNode)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_nparams_memcpy(&p, copyParams, ctx);
    return r != CUDA_SUCCESS ? r : exec_set(hGraphExec, hNode, &p);
}

EMU_EXPORT CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    EMU_ENTRY_INIT();
    emu_nparams p;
    if (!emu_exec_ok(hGraphExec) || !exec_find(hGraphExec, hNode)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_nparams_memset(&p, memsetParams, ctx);
    return r != CUDA_SUCCESS ? r : exec_set(hGraphExec, hNode, &p);
}

EMU_EXPORT CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                 const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    emu_nparams p;
    if (!emu_exec_ok(hGraphExec) || !exec_find(hGraphExec, hNode)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_nparams_host(&p, nodeParams);
    return r != CUDA_SUCCESS ? r : exec_set(hGraphExec, hNode, &p);
}

/* Enabling and disabling exec nodes: kernel, memcpy and memset nodes only,
 * as documented; a disabled node is an empty node in later launches. */
static CUresult exec_enable(CUgraphExec e, CUgraphNode h, int set, unsigned *value)
{
    if (!emu_exec_ok(e)) return CUDA_ERROR_INVALID_VALUE;
    exec_node *x = exec_find(e, h);
    if (!x) return CUDA_ERROR_INVALID_VALUE;
    CUgraphNodeType t = x->p.type;
    if (t != CU_GRAPH_NODE_TYPE_KERNEL && t != CU_GRAPH_NODE_TYPE_MEMCPY && t != CU_GRAPH_NODE_TYPE_MEMSET)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&e->lock);
    if (set) x->disabled = !*value;
    else *value = !x->disabled;
    pthread_mutex_unlock(&e->lock);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int isEnabled)
{
    EMU_ENTRY_INIT();
    return exec_enable(hGraphExec, hNode, 1, &isEnabled);
}

EMU_EXPORT CUresult cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int *isEnabled)
{
    EMU_ENTRY_INIT();
    if (!isEnabled) return CUDA_ERROR_INVALID_VALUE;
    return exec_enable(hGraphExec, hNode, 0, isEnabled);
}

/* cuGraphExecEventRecordNodeSetEvent, cuGraphExecEventWaitNodeSetEvent:
 * "The modifications only affect future launches of hGraphExec. Already
 * enqueued or running launches of hGraphExec are not affected by this call.
 * hNode is also not modified by this call." Any event may be set ("event
 * wait: Unrestricted", "event record: Unrestricted"); a node of another type
 * or an event that is not one: CUDA_ERROR_INVALID_VALUE (the documented
 * results are CUDA_SUCCESS and CUDA_ERROR_INVALID_VALUE). */
static CUresult exec_event_set(CUgraphExec e, CUgraphNode h, CUgraphNodeType type, CUevent ev)
{
    emu_nparams p;
    exec_node *x = emu_exec_ok(e) ? exec_find(e, h) : NULL;
    if (!x || x->p.type != type || emu_nparams_event(&p, type, ev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    return exec_set(e, h, &p);
}

EMU_EXPORT CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event)
{
    EMU_ENTRY_INIT();
    return exec_event_set(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}

EMU_EXPORT CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event)
{
    EMU_ENTRY_INIT();
    return exec_event_set(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}

/* External semaphore nodes: "Changing nodeParams->numExtSems is not
 * supported" (emu_nparams_change_check); a node of another type, or
 * parameters the stream call would refuse: CUDA_ERROR_INVALID_VALUE. */
static CUresult exec_extsem_set(CUgraphExec e, CUgraphNode h, CUgraphNodeType type,
                                const CUexternalSemaphore *sems, const void *params, unsigned n)
{
    emu_nparams p;
    exec_node *x = emu_exec_ok(e) ? exec_find(e, h) : NULL;
    if (!x || x->p.type != type) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_nparams_extsem(&p, type, sems, params, n);
    return r != CUDA_SUCCESS ? CUDA_ERROR_INVALID_VALUE : exec_set(e, h, &p);
}

EMU_EXPORT CUresult cuGraphExecExternalSemaphoresSignalNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    return exec_extsem_set(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL, nodeParams->extSemArray,
                           nodeParams->paramsArray, nodeParams->numExtSems);
}

EMU_EXPORT CUresult cuGraphExecExternalSemaphoresWaitNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_EXT_SEM_WAIT_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    return exec_extsem_set(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT, nodeParams->extSemArray,
                           nodeParams->paramsArray, nodeParams->numExtSems);
}

/* The fields that may change: emu_nparams_change_check. */
EMU_EXPORT CUresult cuGraphExecBatchMemOpNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                       const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    emu_nparams p;
    exec_node *x = emu_exec_ok(hGraphExec) ? exec_find(hGraphExec, hNode) : NULL;
    if (!x || !nodeParams || x->p.type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_nparams_memops(&p, nodeParams->paramArray, nodeParams->count, nodeParams->flags, nodeParams->ctx);
    return r != CUDA_SUCCESS ? CUDA_ERROR_INVALID_VALUE : exec_set(hGraphExec, hNode, &p);
}

/* --------------------------------------------------------------- update */

/* The documented attribute rules of a whole-graph update of a kernel node:
 * a cooperative node stays cooperative (and a plain one plain), and an exec
 * instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY keeps each
 * node's priority. */
static int attrs_may_change(CUgraphExec e, const emu_nparams *old, const emu_nparams *nw)
{
    if (!old->attr[CU_LAUNCH_ATTRIBUTE_COOPERATIVE].cooperative !=
        !nw->attr[CU_LAUNCH_ATTRIBUTE_COOPERATIVE].cooperative)
        return 0;
    return !(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY) ||
           old->attr[CU_LAUNCH_ATTRIBUTE_PRIORITY].priority == nw->attr[CU_LAUNCH_ATTRIBUTE_PRIORITY].priority;
}

static int device_updatable(const emu_nparams *p)
{
    return p->type == CU_GRAPH_NODE_TYPE_KERNEL &&
           p->attr[CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE].deviceUpdatableKernelNode.deviceUpdatable;
}

/* An exec node and the graph node whose parameters an update gives it. */
typedef struct upd_pair { exec_node *x; const emu_nparams *np; } upd_pair;

/* "hGraph has more exit nodes than [hGraphExec], in which case
 * resultInfo->errorNode is set to one of the exit nodes in hGraph" (checked
 * after the node count, before the dependencies): that node (the exit nodes
 * of both paired in node order, the first of g's left over: the one after
 * as many as e has), or NULL when g has no more exit nodes than e. The
 * nodes of g and e have the same count. An exit node is one no other node
 * depends on. */
static CUgraphNode more_exits(CUgraphExec e, CUgraph g)
{
    size_t n = g->n, ge = 0, ee = 0;
    unsigned char *gd = calloc(n ? n : 1, 1), *ed = calloc(n ? n : 1, 1);
    CUgraphNode out = NULL;
    if (!gd || !ed) goto done;     /* (out of memory: the dependency checks decide) */
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < g->nodes[i]->ndeps; k++) gd[g->nodes[i]->deps[k]->index] = 1;
        for (size_t k = 0; k < e->nodes[i].ndeps; k++) ed[e->nodes[i].deps[k]] = 1;
    }
    for (size_t i = 0; i < n; i++) {
        ge += !gd[i];
        ee += !ed[i];
    }
    for (size_t i = 0, k = 0; ge > ee && i < n && !out; i++)
        if (!gd[i] && k++ == ee) out = g->nodes[i];
done:
    free(gd);
    free(ed);
    return out;
}

/* Checks that g can update e (topology, node types, parameter changes), a
 * child graph node's instance against its embedded graph recursively ("The
 * topology of childGraph, as well as the node insertion order, must match";
 * "restrictions apply recursively"), and fills *info for a refusal: a
 * refusal inside a child graph names the child graph node of g. Appends each
 * other node pair to v (room for emu_exec_nodes(e): each exec node is paired
 * at most once). */
static CUgraphExecUpdateResult update_check(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *info,
                                            upd_pair *v, size_t *nv)
{
    info->errorNode = info->errorFromNode = NULL;
    if (g->n != e->n) return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    if ((info->errorNode = more_exits(e, g))) return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    /* Topology first: dependency counts and endpoints, paired by edge order. */
    for (size_t i = 0; i < g->n; i++) {
        CUgraphNode nd = g->nodes[i];
        const exec_node *x = &e->nodes[i];
        info->errorNode = nd;
        if (nd->ndeps != x->ndeps) return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        for (size_t k = 0; k < nd->ndeps; k++)
            if (nd->deps[k]->index != x->deps[k]) {
                info->errorFromNode = nd->deps[k];
                return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            }
    }
    /* Then the edges' data (ports, type): the docs ask for a "topologically
     * identical graph" and name no rule of their own for edge data; the
     * strict reading: an edge whose data changed (a programmatic edge made
     * a full one, or the reverse) changes the topology, named by its ends. */
    for (size_t i = 0; i < g->nedges; i++) {
        const emu_edge *ed = &g->edges[i];
        const exec_node *x = &e->nodes[ed->to->index];
        if (memcmp(&x->edata[emu_node_dep_pos(ed->to, ed->from)], &ed->data, sizeof ed->data) != 0) {
            info->errorNode = ed->to;
            info->errorFromNode = ed->from;
            return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        }
    }
    for (size_t i = 0; i < g->n; i++) {
        const emu_nparams *np = &g->nodes[i]->p, *old = &e->nodes[i].p;
        CUgraphExecUpdateResult res;
        info->errorNode = g->nodes[i];
        if (np->type != old->type) return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        /* A conditional node's own parameters first (its type and number of
         * bodies pair the bodies), then each body against its instance as a
         * child graph's ("Changing parameters of nodes within the
         * conditional body graph is subject to the rules above"). */
        int cond = np->type == CU_GRAPH_NODE_TYPE_CONDITIONAL;
        if (cond && (res = emu_nparams_change_check(old, np, 0)) != CU_GRAPH_EXEC_UPDATE_SUCCESS) return res;
        if (np->type == CU_GRAPH_NODE_TYPE_GRAPH || cond) {
            for (unsigned b = 0; b < e->nodes[i].nsub; b++) {
                res = update_check(e->nodes[i].sub[b], cond ? np->cond_body[b] : np->child, info, v, nv);
                if (res != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
                    info->errorNode = g->nodes[i];
                    info->errorFromNode = NULL;
                    return res;
                }
            }
            if (!cond) continue;
            info->errorNode = g->nodes[i];
            v[(*nv)++] = (upd_pair){ &e->nodes[i], np };
            continue;
        }
        /* "Neither hGraph nor hGraphExec may contain device-updatable kernel
         * nodes"; the docs name no result for it: NOT_SUPPORTED ("something
         * about a node is unsupported, like the node's ... configuration"). */
        if (device_updatable(np) || device_updatable(old)) return CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
        if ((res = emu_nparams_change_check(old, np, 0)) != CU_GRAPH_EXEC_UPDATE_SUCCESS) return res;
        if (np->type == CU_GRAPH_NODE_TYPE_KERNEL && !attrs_may_change(e, old, np))
            return CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED;
        v[(*nv)++] = (upd_pair){ &e->nodes[i], np };
    }
    info->errorNode = NULL;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

/* The user-object references an update from g gives e and its nested
 * instances ("the references in the new source graph are cloned and replace
 * the references in the target graph"): staged before the exec's lock is
 * taken, swapped in under it, the old ones released after it (a launch
 * still queued holds its own: emu_exec.c, launch_refs). */
typedef struct urefs_stage { CUgraphExec *x; emu_urefs *r; size_t n, cap; } urefs_stage;

static void urefs_take(urefs_stage *st, CUgraphExec e, CUgraph g)
{
    if (!EMU_GROW(st->x, st->cap, st->n + 1) ||
        !(st->r = realloc(st->r, st->cap * sizeof *st->r))) {
        emu_log("out of host memory (user object references)");
        abort();
    }
    st->x[st->n] = e;
    memset(&st->r[st->n], 0, sizeof *st->r);
    emu_urefs_copy(&st->r[st->n++], &g->urefs);
    for (size_t i = 0; i < e->n && i < g->n; i++)   /* paired by index, as update_check */
        for (unsigned b = 0; b < e->nodes[i].nsub; b++) {
            /* a child graph's instance (sub[0]) or a conditional node's body b */
            const emu_nparams *p = &g->nodes[i]->p;
            CUgraph src = p->type == CU_GRAPH_NODE_TYPE_GRAPH ? p->child
                          : p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && b < p->cond_size ? p->cond_body[b]
                                                                                        : NULL;
            if (e->nodes[i].sub[b] && src) urefs_take(st, e->nodes[i].sub[b], src);
        }
}

static void urefs_swap(urefs_stage *st)
{
    for (size_t i = 0; i < st->n; i++) {
        emu_urefs t = st->x[i]->urefs;
        st->x[i]->urefs = st->r[i];
        st->r[i] = t;
    }
}

static void urefs_stage_drop(urefs_stage *st)
{
    for (size_t i = 0; i < st->n; i++) emu_urefs_drop(&st->r[i]);
    free(st->x);
    free(st->r);
}

/* Updates e (top itself, or an instance of a child graph in top) from g if
 * update_check allows it: every paired exec node gets a copy of its graph
 * node's parameters, under top's lock; CUDA_ERROR_OUT_OF_MEMORY changes
 * nothing. */
static CUresult update_from(CUgraphExec top, CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *info)
{
    size_t cap = emu_exec_nodes(e), n = 0;
    upd_pair *v = malloc((cap ? cap : 1) * sizeof *v);
    emu_nparams *fresh = calloc(cap ? cap : 1, sizeof *fresh);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_ERROR;
    if (!v || !fresh) goto out;
    if ((res = update_check(e, g, info, v, &n)) != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (!emu_nparams_copy(&fresh[i], v[i].np)) {
            for (size_t j = 0; j <= i; j++) emu_nparams_free(&fresh[j]);
            res = CU_GRAPH_EXEC_UPDATE_ERROR;
            goto out;
        }
    unsigned long changed = 0;
    urefs_stage st = { 0 };
    urefs_take(&st, e, g);
    pthread_mutex_lock(&top->lock);
    for (size_t i = 0; i < n; i++) {
        emu_nparams old = v[i].x->p;
        changed += !emu_nparams_same(&old, &fresh[i]);
        v[i].x->p = fresh[i];
        fresh[i] = old;
    }
    urefs_swap(&st);
    pthread_mutex_unlock(&top->lock);
    urefs_stage_drop(&st);
    emu_stat_nodes(n, changed);
    for (size_t i = 0; i < n; i++) emu_nparams_free(&fresh[i]);
    r = CUDA_SUCCESS;
out:
    info->result = res;
    free(v);
    free(fresh);
    return r;
}

static CUresult exec_update(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *info)
{
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
    info->errorNode = info->errorFromNode = NULL;
    if (!emu_exec_ok(e) || !emu_graph_ok(g)) return CUDA_ERROR_INVALID_VALUE;
    /* A graph captured into (or holding a body or child graph captured
     * into) is not instantiable until the capture ends; an update from it
     * is refused likewise (CU_GRAPH_EXEC_UPDATE_ERROR, the emulator's
     * reading: nothing is documented). */
    if (emu_capture_within(g)) return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    return update_from(e, e, g, info);
}

/* cuGraphExecChildGraphNodeSetParams: "Updates the work represented by hNode
 * in hGraphExec as though the nodes contained in hNode's graph had the
 * parameters contained in childGraph's nodes at instantiation. hNode must
 * remain in the graph which was used to instantiate hGraphExec. Changed edges
 * to and from hNode are ignored." The cuGraphExecUpdate rules decide; any
 * refusal is CUDA_ERROR_INVALID_VALUE (the documented return values). */
static CUresult exec_child_set(CUgraphExec e, CUgraphNode h, CUgraph child)
{
    exec_node *x = emu_exec_ok(e) ? exec_find(e, h) : NULL;
    if (!x || x->p.type != CU_GRAPH_NODE_TYPE_GRAPH || !emu_graph_ok(child)) return CUDA_ERROR_INVALID_VALUE;
    CUgraphExecUpdateResultInfo info;
    CUresult r = update_from(e, x->sub[0], child, &info);
    return r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE ? CUDA_ERROR_INVALID_VALUE : r;
}

EMU_EXPORT CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
    EMU_ENTRY_INIT();
    emu_nparams p;
    if (!nodeParams || !emu_exec_ok(hGraphExec) || !exec_find(hGraphExec, hNode)) return CUDA_ERROR_INVALID_VALUE;
    if (nodeParams->type != hNode->p.type) return CUDA_ERROR_INVALID_VALUE;
    /* child graph: "Topology must match and restrictions apply recursively" */
    if (nodeParams->type == CU_GRAPH_NODE_TYPE_GRAPH) return exec_child_set(hGraphExec, hNode, nodeParams->graph.graph);
    CUresult r = emu_nparams_generic(&p, nodeParams, 0);
    return r != CUDA_SUCCESS ? r : exec_set(hGraphExec, hNode, &p);
}

EMU_EXPORT CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraph childGraph)
{
    EMU_ENTRY_INIT();
    return exec_child_set(hGraphExec, hNode, childGraph);
}

EMU_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
    EMU_ENTRY_INIT();
    if (!resultInfo) return CUDA_ERROR_INVALID_VALUE;
    return exec_update(hGraphExec, hGraph, resultInfo);
}

EMU_EXPORT CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                      CUgraphExecUpdateResult *updateResult_out)
{
    EMU_ENTRY_INIT();
    if (!hErrorNode_out || !updateResult_out) return CUDA_ERROR_INVALID_VALUE;
    CUgraphExecUpdateResultInfo info;
    CUresult r = exec_update(hGraphExec, hGraph, &info);
    *hErrorNode_out = info.errorNode;
    *updateResult_out = info.result;
    return r;
}
