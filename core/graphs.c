/*
 * core/graphs.c: graph exec records (graphs.h). For each update it decides
 * whether it would leave the exec exactly as it is:
 *   - skip_identical (skip_temp, skip_profiled): such an update is answered
 *     here (success, CU_GRAPH_EXEC_UPDATE_SUCCESS in the result info) and the
 *     driver is not called;
 *   - count_would_skip (always_update): it is forwarded and counted as
 *     would_skip for its exec.
 * Anything else goes to the observer (which may accept it without the
 * driver), else to the driver, counted with its reason (stats.h); after a
 * successful forward the record becomes the new description, after a failed
 * one it stays (the driver left the exec unchanged).
 *
 * Record states:
 *   unsupported  the exec holds a node the library does not model, a
 *                device-updatable kernel node, or was instantiated for device
 *                launch: every update is forwarded (unsupported_node); sticky.
 *   fixed        the exec holds state no description carries (a node was
 *                disabled with cuGraphNodeSetEnabled, whose effect across
 *                updates the library does not model): every update is
 *                forwarded (exec_modified); sticky.
 *   stale        the exec's content is not known: changed by a call the
 *                library does not model (exec_modified), first seen at an
 *                update (untracked_exec), not describable (not_comparable),
 *                or described before a module unload (its functions' handles
 *                may be reused). Updates are forwarded with that reason; a
 *                successful whole-graph update that could be described makes
 *                the record current again.
 * Exec nodes are named, as CUDA names them, by the node handles of the graph
 * the exec was instantiated from (`map`). When that graph is destroyed the
 * map goes (cuGraphDestroy), and a destroyed node leaves it
 * (cuGraphDestroyNode): per-node updates naming them are forwarded, so the
 * program gets the driver's error, never a success the driver would refuse.
 *
 * Locks (in this order):
 *   table_lock   the record table (uthash by CUgraphExec). Held for a lookup
 *                (and the reference it takes) and an add / remove only.
 *                `refs` is atomic: taken under table_lock by a lookup, dropped
 *                without it. The table holds one reference while the record
 *                is in it; whoever drops the last one frees the record.
 *   rec->lock    one per record: everything else in it, and the observer's
 *                state. Held while building, comparing and forwarding an
 *                update or a launch of that exec, so two threads using one
 *                exec are serialized in call order, as the driver orders them.
 * Inside rec->lock fingerprint.c may take its cache lock and memory.c's
 * registry lock; stats.c's lock is taken for counting. No lock of this file
 * is held across a call that can wait on the device.
 */
#include "graphs.h"

#include "driver.h"
#include "contexts.h"
#include "log.h"
#include "memory.h"
#include "util.h"
#include "vmm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int table_oom;    /* set by uthash on a failed add (table_lock held) */
#define uthash_nonfatal_oom(elt) (table_oom = 1)
#include "hash.h"

typedef enum { REC_CURRENT, REC_STALE } rec_state;

typedef struct sg_grec {
    CUgraphExec exec;            /* key (table_lock) */
    UT_hash_handle hh;           /* table_lock */
    int refs;                    /* atomic (see Locks above) */
    pthread_mutex_t lock;        /* guards the fields below */
    CUcontext ctx;
    rec_state state;
    sg_reason stale_reason;
    int unsupported;             /* sticky */
    int fixed;                   /* sticky */
    int logged;                  /* the unsupported line was logged */
    sg_fp fp;                    /* what the program asked the exec to hold (state current) */
    sg_fp next;                  /* the candidate of an update (buffers reused) */
    sg_fp_scratch scratch;
    CUgraph graph;               /* the graph it was instantiated from (map valid while set) */
    sg_fp_map map;               /* its node handles -> indices */
    CUgraphNode *nodes;          /* its node handles in fp order (NULL: none) */
    size_t nnodes;
    sg_fp_node node;             /* the candidate of a per-node update */
    void *pol;                   /* the observer's state, NULL if none */
    struct sg_exec *stat;        /* the exec's counters (stats.c) */
} sg_grec;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_grec *table;
static sg_caps caps;
static const sg_exec_observer *obs;

static void rec_free(sg_grec *r)
{
    if (r->pol && obs) obs->destroyed(r->pol, 0);
    pthread_mutex_destroy(&r->lock);
    sg_fp_free(&r->fp);
    sg_fp_free(&r->next);
    sg_fp_scratch_free(&r->scratch);
    sg_fp_map_free(&r->map);
    sg_fp_node_free(&r->node);
    free(r->nodes);
    free(r);
}

static void rec_put(sg_grec *r)
{
    if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) rec_free(r);
}

/* Removes exec's record from the table, if any; table_lock held. */
static void rec_remove_locked(CUgraphExec exec)
{
    sg_grec *r;
    HASH_FIND_PTR(table, &exec, r);
    if (r) {
        HASH_DEL(table, r);
        rec_put(r);
    }
}

/* Adds a fresh record for exec (replacing any) and returns it with a
 * reference for the caller; NULL if out of memory. A record first seen at an
 * update starts stale (untracked_exec). table_lock held. */
static sg_grec *rec_add_locked(CUgraphExec exec)
{
    sg_grec *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->exec = exec;
    r->refs = 2;
    r->state = REC_STALE;
    r->stale_reason = SG_REASON_UNTRACKED_EXEC;
    pthread_mutex_init(&r->lock, NULL);
    rec_remove_locked(exec);
    table_oom = 0;
    HASH_ADD_PTR(table, exec, r);
    if (table_oom) {
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
    }
    return r;
}

/* The record of exec with a reference for the caller; made (stale) if
 * unknown and make is set; NULL if none or out of memory. */
static sg_grec *rec_get(CUgraphExec exec, int make)
{
    sg_grec *r;
    pthread_mutex_lock(&table_lock);
    HASH_FIND_PTR(table, &exec, r);
    if (r) __atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
    else if (make) r = rec_add_locked(exec);
    pthread_mutex_unlock(&table_lock);
    return r;
}

/* The view the observer gets (r->lock held). */
static sg_exec_view view_of(const sg_grec *r)
{
    return (sg_exec_view){ .exec = r->exec, .ctx = r->ctx,
                           .L = r->state == REC_CURRENT ? &r->fp : NULL,
                           .nodes = r->graph ? r->nodes : NULL,
                           .fixed = r->fixed || r->unsupported };
}

static void make_stale(sg_grec *r, sg_reason why)
{
    r->state = REC_STALE;
    r->stale_reason = why;
}

/* ------------------------------------------------------------ accounting */

static CUgraphExec exec_of(const sg_call *c)
{
    return c->kind == SG_CALL_UPDATE_NODE ? c->u.node_update.exec : c->u.update.exec;
}

/* Forwards an update; the record takes the new state on success and the
 * observer hears of it. node: the index of a per-node update's node (-1 if
 * the record does not know it); built: the new state is described (r->next
 * for a whole graph, r->node for a node). */
static CUresult forward_update(sg_grec *r, const sg_call *c, sg_reason reason, long node,
                               int built)
{
    int whole = c->kind == SG_CALL_UPDATE_GRAPH;
    SG_TOTAL_ADD(updates_forwarded, 1);
    sg_exec_update(exec_of(c), 1, reason);
    uint64_t t0 = r && r->pol ? sg_now_ns() : 0;
    CUresult rc = c->forward(c->args);
    if (!r || rc != CUDA_SUCCESS) return rc;
    if (!r->unsupported && !r->fixed) {
        if (whole && built) {
            sg_fp_swap(&r->fp, &r->next);
            r->state = REC_CURRENT;
        } else if (whole || (r->state == REC_CURRENT &&
                             (!built || node < 0 || sg_fp_node_copy(&r->fp.nodes[node], &r->node) != 0))) {
            make_stale(r, SG_REASON_NOT_COMPARABLE);
        }
    }
    if (r->pol) {
        sg_exec_view x = view_of(r);
        obs->forwarded(r->pol, &x, whole ? -1 : node >= 0 ? node : -2, sg_now_ns() - t0);
    }
    return rc;
}

/* Answers an update without the driver, as the driver would have. */
static CUresult answer_success(const sg_call *c, int counted_as_skip)
{
    if (counted_as_skip) {
        SG_TOTAL_ADD(updates_skipped, 1);
        sg_exec_update(exec_of(c), 0, SG_REASON_POLICY);
    }
    if (c->kind == SG_CALL_UPDATE_GRAPH) {
        if (c->u.update.info) {
            c->u.update.info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
            c->u.update.info->errorNode = NULL;
            c->u.update.info->errorFromNode = NULL;
        } else {
            *c->u.update.error_node = NULL;
            *c->u.update.result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
        }
    }
    return CUDA_SUCCESS;
}

/* Whether the out-pointers let an update be answered here: the driver
 * returns CUDA_ERROR_INVALID_VALUE for a NULL resultInfo (v2) or a NULL
 * hErrorNode_out / updateResult_out (legacy), so those calls are forwarded
 * for the driver to say so. */
static int outs_ok(const sg_call *c)
{
    if (c->kind != SG_CALL_UPDATE_GRAPH) return 1;
    return c->u.update.info || (c->u.update.error_node && c->u.update.result);
}

/* Marks r unsupported if its fingerprint or the exec's flags say so, and
 * logs it once. r->lock held. */
static void check_supported(sg_grec *r)
{
    cuuint64_t flags = 0;
    if (r->fp.unsupported) r->unsupported = 1;
    if (sg_drv.cuGraphExecGetFlags &&
        SG_DRIVER_CALL(cuGraphExecGetFlags, r->exec, &flags) == CUDA_SUCCESS &&
        (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
        r->unsupported = 1;
    if (r->unsupported && !r->logged) {
        r->logged = 1;
        SG_INFO("graph exec %p holds a node the library does not model (host, child graph, "
                "event, memory, conditional, batch memop, external semaphore or "
                "device-updatable kernel node) or was instantiated for device launch: "
                "its updates always go to the driver", (void *)r->exec);
    }
}

/* ------------------------------------------------------------ calls */

/* Number of nodes of `graph`, through the driver; 0 with *known = 0 if it
 * cannot be asked. */
static size_t graph_node_count(CUgraph graph, int *known)
{
    size_t n = 0;
    *known = sg_drv.cuGraphGetNodes && SG_DRIVER_CALL(cuGraphGetNodes, graph, NULL, &n) ==
                                           CUDA_SUCCESS;
    return *known ? n : 0;
}

/* Keeps the instantiation graph's node handles (r->lock held). */
static void keep_nodes(sg_grec *r, CUgraph graph)
{
    size_t n = r->fp.n;
    CUgraphNode *v = malloc((n ? n : 1) * sizeof *v);
    if (!v || sg_fp_map_build(&r->map, r->scratch.nodes, n) != 0) {
        free(v);
        return;
    }
    if (n) memcpy(v, r->scratch.nodes, n * sizeof *v);
    free(r->nodes);
    r->nodes = v;
    r->nnodes = n;
    r->graph = graph;
}

static CUresult instantiate(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && sg_mem_trim() > 0) rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS || !c->u.inst.out) return rc;
    CUgraphExec exec = *c->u.inst.out;
    CUgraph graph = c->u.inst.graph;
    pthread_mutex_lock(&table_lock);
    sg_grec *r = rec_add_locked(exec);
    pthread_mutex_unlock(&table_lock);
    int known = 0;
    size_t nodes = 0;
    if (r) {
        pthread_mutex_lock(&r->lock);
        if (sg_drv.cuCtxGetCurrent) SG_DRIVER_CALL(cuCtxGetCurrent, &r->ctx);
        sg_fp_cache_enter();
        if (sg_fp_build(&r->fp, graph, &r->scratch, NULL) == 0) {
            r->state = REC_CURRENT;
            keep_nodes(r, graph);
            nodes = r->fp.n;
            known = 1;
        } else {
            make_stale(r, SG_REASON_NOT_COMPARABLE);
        }
        sg_fp_cache_leave();
        check_supported(r);
        pthread_mutex_unlock(&r->lock);
    } else {
        SG_WARN("out of memory: the updates of graph exec %p will always go to the driver",
                (void *)exec);
    }
    if (!known) nodes = graph_node_count(graph, &known);
    /* sg_exec_created retires an entry the handle had before: the record's
     * shortcut is taken after it, so that it names the new one. */
    if (sg_exec_created(exec, nodes, known) != 0)
        SG_WARN("out of memory: graph exec %p is not counted", (void *)exec);
    if (r) {
        pthread_mutex_lock(&r->lock);
        r->stat = sg_exec_entry(exec);
        if (obs && !r->unsupported) {
            sg_exec_view x = view_of(r);
            r->pol = obs->created(&x, graph);
        }
        pthread_mutex_unlock(&r->lock);
        rec_put(r);
    }
    sg_vmm_unrelax();
    return rc;
}

/* The first memset / memcpy node of fp whose range the driver would refuse
 * over placed memory, or -1. */
static long bad_range_node(const sg_fp *fp)
{
    for (size_t i = 0; i < fp->n; i++) {
        const sg_fp_node *n = &fp->nodes[i];
        if (n->k.state != SG_FP_OK) continue;
        if (n->k.type == CU_GRAPH_NODE_TYPE_MEMSET && n->len >= sizeof(CUDA_MEMSET_NODE_PARAMS) &&
            sg_mem_check_memset((const CUDA_MEMSET_NODE_PARAMS *)(const void *)n->pay) != CUDA_SUCCESS)
            return (long)i;
        if (n->k.type == CU_GRAPH_NODE_TYPE_MEMCPY && n->len >= sizeof(CUDA_MEMCPY3D) &&
            sg_mem_check_memcpy((const CUDA_MEMCPY3D *)(const void *)n->pay) != CUDA_SUCCESS)
            return (long)i;
    }
    return -1;
}

/* The driver's answer to an update with a parameter it refuses. */
static CUresult refuse_update(const sg_call *c, CUgraphNode node)
{
    if (c->u.update.info) {
        c->u.update.info->result = CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        c->u.update.info->errorNode = node;
        c->u.update.info->errorFromNode = NULL;
    } else {
        if (!c->u.update.error_node || !c->u.update.result) return CUDA_ERROR_INVALID_VALUE;
        *c->u.update.error_node = node;
        *c->u.update.result = CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    }
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
}

/* Why r's state must be forwarded whatever the update is, or -1. */
static int forced_reason(const sg_grec *r)
{
    if (r->unsupported) return SG_REASON_UNSUPPORTED_NODE;
    if (r->fixed) return SG_REASON_EXEC_MODIFIED;
    if (r->state == REC_STALE) return r->stale_reason;
    if (r->fp.epoch != sg_fp_epoch()) return SG_REASON_NOT_COMPARABLE;   /* a module was unloaded */
    return -1;
}

/* An update the record cannot answer: the observer may; else to the driver. */
static CUresult decide(sg_grec *r, const sg_call *c, int reason, long node, int built)
{
    if (reason < 0) {                           /* identical */
        if (caps.skip_identical && outs_ok(c)) return answer_success(c, 1);
        if (caps.count_would_skip) {
            sg_exec_would_skip(exec_of(c));
            if (r->pol) sg_exec_event(exec_of(c), SG_EXEC_EV_WOULD_SKIP_PROFILED);
        }
        return forward_update(r, c, caps.skip_identical ? SG_REASON_NOT_COMPARABLE : SG_REASON_POLICY,
                              node, built);
    }
    if (r->pol && built && outs_ok(c)) {
        sg_exec_view x = view_of(r);
        sg_update u = { .next = node < 0 ? &r->next : NULL, .node = node,
                        .desc = node < 0 ? NULL : &r->node, .call = c };
        int a = obs->accept(r->pol, &x, &u);
        if (a < 0) return forward_update(r, c, (sg_reason)reason, node, built);   /* observing only */
        if (a > 0) {
            if (node < 0) sg_fp_swap(&r->fp, &r->next);
            else if (sg_fp_node_copy(&r->fp.nodes[node], &r->node) != 0)
                make_stale(r, SG_REASON_NOT_COMPARABLE);   /* cannot happen: same length */
            x = view_of(r);
            obs->accepted(r->pol, &x);
            return answer_success(c, 1);
        }
    }
    if (r->pol) {
        sg_exec_view x = view_of(r);
        sg_update u = { .next = node < 0 && built ? &r->next : NULL, .node = node,
                        .desc = node >= 0 && built ? &r->node : NULL, .call = c };
        CUresult rc = obs->before_forward(r->pol, &x, &u);
        if (rc != CUDA_SUCCESS) return rc;
    }
    return forward_update(r, c, (sg_reason)reason, node, built);
}

static CUresult update_graph(const sg_call *c)
{
    SG_TOTAL_ADD(updates_seen, 1);
    sg_grec *r = rec_get(c->u.update.exec, 1);
    if (!r) {
        SG_TOTAL_ADD(updates_forwarded, 1);
        sg_exec_update(c->u.update.exec, 1, SG_REASON_UNTRACKED_EXEC);
        return c->forward(c->args);
    }
    pthread_mutex_lock(&r->lock);
    sg_fp_cache_enter();
    int built = sg_fp_build(&r->next, c->u.update.graph, &r->scratch,
                            r->state == REC_CURRENT ? &r->fp : NULL) == 0;
    int reason = forced_reason(r);
    if (reason < 0) reason = built ? sg_fp_compare(&r->fp, &r->next) : SG_REASON_NOT_COMPARABLE;
    long bad = built ? bad_range_node(&r->next) : -1;
    CUresult rc = bad >= 0 ? refuse_update(c, r->scratch.nodes[bad])
                           : decide(r, c, reason, -1, built && !r->next.unsupported);
    if (rc == CUDA_SUCCESS && built && r->next.unsupported) {
        /* forwarded: the exec now holds a node type the library does not model */
        r->fp.unsupported = 1;
    }
    if (rc == CUDA_SUCCESS) check_supported(r);
    sg_fp_cache_leave();
    pthread_mutex_unlock(&r->lock);
    rec_put(r);
    sg_vmm_unrelax();
    return rc;
}

/* Describes the parameters of a per-node update into n. Returns 0, 1 for a
 * node type the library does not model, -1 if they cannot be described. */
static int describe_update(const sg_call *c, sg_fp_node *n, const sg_fp_pinfo *hint)
{
    sg_fp_kin k;
    const void *p = c->u.node_update.params;
    if (!p) return -1;
    switch (c->u.node_update.kind) {
    case SG_NODE_KERNEL:
        k = SG_FP_KIN_V2((const CUDA_KERNEL_NODE_PARAMS *)p);
        return sg_fp_kernel_desc(n, &k, hint) < 0 ? -1 : 0;
    case SG_NODE_KERNEL_V1:
        k = SG_FP_KIN_V1((const CUDA_KERNEL_NODE_PARAMS_v1 *)p);
        return sg_fp_kernel_desc(n, &k, hint) < 0 ? -1 : 0;
    case SG_NODE_MEMCPY:
        return sg_fp_memcpy_desc(n, p, c->u.node_update.ctx);
    case SG_NODE_MEMSET:
        return sg_fp_memset_desc(n, p, c->u.node_update.ctx);
    case SG_NODE_GENERIC:
        break;
    }
    const CUgraphNodeParams *g = p;
    if (g->reserved0[0] || g->reserved0[1] || g->reserved0[2] || g->reserved2) return -1;
    switch (g->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        k = SG_FP_KIN_V2(&g->kernel);
        return sg_fp_kernel_desc(n, &k, hint) < 0 ? -1 : 0;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (g->memcpy.flags || g->memcpy.reserved) return -1;
        return sg_fp_memcpy_desc(n, &g->memcpy.copyParams, g->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS_v2 *m = &g->memset;
        CUDA_MEMSET_NODE_PARAMS s = { .dst = m->dst, .pitch = m->pitch, .value = m->value,
                                      .elementSize = m->elementSize, .width = m->width,
                                      .height = m->height };
        return sg_fp_memset_desc(n, &s, m->ctx);
    }
    default:
        return 1;
    }
}

/* The driver's range check of a per-node memset / memcpy update. */
static CUresult node_range_check(const sg_fp_node *n)
{
    if (n->k.type == CU_GRAPH_NODE_TYPE_MEMSET && n->len >= sizeof(CUDA_MEMSET_NODE_PARAMS))
        return sg_mem_check_memset((const CUDA_MEMSET_NODE_PARAMS *)(const void *)n->pay);
    if (n->k.type == CU_GRAPH_NODE_TYPE_MEMCPY && n->len >= sizeof(CUDA_MEMCPY3D))
        return sg_mem_check_memcpy((const CUDA_MEMCPY3D *)(const void *)n->pay);
    return CUDA_SUCCESS;
}

static CUresult update_node(const sg_call *c)
{
    SG_TOTAL_ADD(updates_seen, 1);
    sg_grec *r = rec_get(c->u.node_update.exec, 1);
    if (!r) {
        SG_TOTAL_ADD(updates_forwarded, 1);
        sg_exec_update(c->u.node_update.exec, 1, SG_REASON_UNTRACKED_EXEC);
        return c->forward(c->args);
    }
    pthread_mutex_lock(&r->lock);
    sg_fp_cache_enter();
    long i = r->graph ? sg_fp_map_find(&r->map, c->u.node_update.node) : -1;
    if (i >= 0 && (size_t)i >= r->fp.n) i = -1;
    int desc = -1, reason = forced_reason(r);
    CUresult rc = CUDA_SUCCESS;
    if (reason < 0 && i < 0) {
        /* a node the exec does not have (or whose graph is gone): the driver's verdict */
        reason = r->graph ? SG_REASON_NOT_COMPARABLE : SG_REASON_UNTRACKED_EXEC;
    } else if (reason < 0) {
        sg_fp_node *rec = &r->fp.nodes[i];
        desc = describe_update(c, &r->node, rec->pi);
        if (desc == 1) reason = SG_REASON_UNSUPPORTED_NODE;
        else if (desc < 0) reason = SG_REASON_NOT_COMPARABLE;
        else if ((rc = node_range_check(&r->node)) == CUDA_SUCCESS) {
            /* a per-node update leaves the attributes (and what they made of the node) alone */
            r->node.k.attr_mask = rec->k.attr_mask;
            memcpy(r->node.k.attrs, rec->k.attrs, sizeof rec->k.attrs);
            if (rec->k.state != SG_FP_OK && r->node.k.state == SG_FP_OK) r->node.k.state = rec->k.state;
            reason = sg_fp_node_compare(rec, &r->node, 1);
        }
    }
    if (rc == CUDA_SUCCESS) {
        int built = desc == 0 && i >= 0 && r->node.k.state == SG_FP_OK;
        rc = decide(r, c, reason, i, built);
        /* a setter of a node type the library does not model changed it */
        if (rc == CUDA_SUCCESS && desc == 1 && r->state == REC_STALE)
            r->stale_reason = SG_REASON_EXEC_MODIFIED;
    }
    sg_fp_cache_leave();
    pthread_mutex_unlock(&r->lock);
    rec_put(r);
    sg_vmm_unrelax();
    return rc;
}

/* cuGraphNodeSetEnabled and the setters of node types the library does not
 * model: the observer brings the program's exec to L first (fix), then the
 * call changes state no record describes. */
static CUresult exec_fix(const sg_call *c)
{
    sg_grec *r = rec_get(c->u.exec.exec, 0);
    if (!r) return c->forward(c->args);
    pthread_mutex_lock(&r->lock);
    CUresult rc = CUDA_SUCCESS;
    if (r->pol) {
        sg_exec_view x = view_of(r);
        rc = obs->fix(r->pol, &x);
    }
    if (rc == CUDA_SUCCESS) rc = c->forward(c->args);
    if (rc == CUDA_SUCCESS) {
        if (c->kind == SG_CALL_EXEC_ENABLE) r->fixed = 1;
        else make_stale(r, SG_REASON_EXEC_MODIFIED);
    }
    pthread_mutex_unlock(&r->lock);
    rec_put(r);
    sg_vmm_unrelax();
    return rc;
}

/* A launch: the observer sees it (and may launch a variant instead). */
static CUresult launch(const sg_call *c)
{
    sg_grec *r = obs ? rec_get(c->u.launch.exec, 0) : NULL;
    struct sg_exec *stat = NULL;
    CUresult rc;
    if (r) {
        pthread_mutex_lock(&r->lock);
        stat = r->stat;
        if (r->pol) {
            sg_exec_view x = view_of(r);
            rc = obs->launch(r->pol, &x, c);
        } else {
            rc = c->forward(c->args);
        }
        pthread_mutex_unlock(&r->lock);
        rec_put(r);
        sg_vmm_unrelax();
    } else {
        rc = c->forward(c->args);
    }
    if (rc == CUDA_SUCCESS) {
        SG_TOTAL_ADD(launches, 1);
        if (stat) sg_exec_entry_launched(stat);
        else sg_exec_launched(c->u.launch.exec);
    }
    return rc;
}

/* Destroys the exec; the observer's state (variants) goes with the record. */
static CUresult exec_destroy(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS) return rc;
    sg_exec_destroyed(c->u.exec.exec);
    pthread_mutex_lock(&table_lock);
    rec_remove_locked(c->u.exec.exec);
    pthread_mutex_unlock(&table_lock);
    sg_vmm_unrelax();
    return rc;
}

/* Calls fn on every record (each locked in turn, with a reference; the
 * table lock is not held during fn). */
static void foreach_rec(void (*fn)(sg_grec *r, void *u), void *u)
{
    size_t n = 0, cap = 0;
    sg_grec **v = NULL;
    sg_grec *r, *tmp;
    pthread_mutex_lock(&table_lock);
    HASH_ITER(hh, table, r, tmp) {
        if (sg_grow((void **)&v, &cap, n + 1, sizeof *v) != 0) break;
        __atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
        v[n++] = r;
    }
    pthread_mutex_unlock(&table_lock);
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&v[i]->lock);
        fn(v[i], u);
        pthread_mutex_unlock(&v[i]->lock);
        rec_put(v[i]);
    }
    free(v);
}

static void forget_graph(sg_grec *r, void *u)
{
    if (r->graph == *(CUgraph *)u) r->graph = NULL;
}

static void forget_node(sg_grec *r, void *u)
{
    if (r->graph && sg_fp_map_find(&r->map, *(CUgraphNode *)u) >= 0) r->graph = NULL;
}

static void make_all_stale(sg_grec *r, void *u)
{
    (void)u;
    if (r->state == REC_CURRENT) make_stale(r, SG_REASON_NOT_COMPARABLE);
}

static void stream_gone_one(sg_grec *r, void *u)
{
    if (!r->pol) return;
    sg_exec_view x = view_of(r);
    obs->stream_gone(r->pol, &x, *(sg_stream_id *)u);
}

/* A context is gone (contexts.h, step 2): the driver destroyed its execs. */
static void ctx_teardown(sg_ctx *cx)
{
    sg_grec *r, *tmp;
    sg_grec **gone = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&table_lock);
    HASH_ITER(hh, table, r, tmp) {
        if (r->ctx != cx->ctx || sg_grow((void **)&gone, &cap, n + 1, sizeof *gone) != 0) continue;
        HASH_DEL(table, r);            /* the table's reference moves to `gone` */
        gone[n++] = r;
    }
    pthread_mutex_unlock(&table_lock);
    for (size_t i = 0; i < n; i++) {
        r = gone[i];
        sg_exec_destroyed(r->exec);
        pthread_mutex_lock(&r->lock);
        if (r->pol) obs->destroyed(r->pol, 1);
        r->pol = NULL;
        pthread_mutex_unlock(&r->lock);
        rec_put(r);
    }
    free(gone);
}

CUresult sg_graph_call(const sg_call *c)
{
    CUresult rc;
    switch (c->kind) {
    case SG_CALL_INSTANTIATE:
        return instantiate(c);
    case SG_CALL_LAUNCH:
        return launch(c);
    case SG_CALL_UPDATE_GRAPH:
        return update_graph(c);
    case SG_CALL_UPDATE_NODE:
        return update_node(c);
    case SG_CALL_EXEC_ENABLE:
    case SG_CALL_EXEC_DIRTY:
        return exec_fix(c);
    case SG_CALL_EXEC_DESTROY:
        return exec_destroy(c);
    case SG_CALL_GRAPH_DESTROY:
        rc = c->forward(c->args);
        if (rc == CUDA_SUCCESS) foreach_rec(forget_graph, (void *)&c->u.graph.graph);
        return rc;
    case SG_CALL_NODE_DESTROY:
        rc = c->forward(c->args);
        if (rc == CUDA_SUCCESS) foreach_rec(forget_node, (void *)&c->u.node.node);
        return rc;
    case SG_CALL_MODULE_UNLOAD:
        rc = c->forward(c->args);
        if (rc == CUDA_SUCCESS) {
            sg_fp_cache_epoch_bump();
            foreach_rec(make_all_stale, NULL);
        }
        return rc;
    default:
        return c->forward(c->args);
    }
}

void sg_graph_stream_gone(CUstream s)
{
    if (!obs || !s) return;
    sg_stream_id id = sg_stream_id_of(s, 0);
    foreach_rec(stream_gone_one, &id);
    sg_vmm_unrelax();
}

void sg_graph_init(const sg_caps *cp, const sg_exec_observer *o)
{
    caps = *cp;
    obs = o;
    sg_ctx_on_teardown(SG_CTX_PART_GRAPHS, ctx_teardown);
}

void sg_graph_atfork(int phase)
{
    if (phase == 0) pthread_mutex_lock(&table_lock);
    else pthread_mutex_unlock(&table_lock);
}

void sg_graph_reset(void)
{
    sg_grec *r, *tmp;
    pthread_mutex_lock(&table_lock);
    HASH_ITER(hh, table, r, tmp) {
        HASH_DEL(table, r);
        rec_put(r);
    }
    pthread_mutex_unlock(&table_lock);
}
