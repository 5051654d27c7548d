/*
 * core/graph_update.c: the update decisions of the exec records (graphs.h):
 * for a whole-graph update (cuGraphExecUpdate either version) or a per-node
 * one (the exec setters of kernel, memcpy and memset nodes, and
 * cuGraphExecNodeSetParams), whether it would leave the exec as it is
 * (answered here under skip_identical), whether the observer accepts it
 * without the driver, or else forwarded with its reason; and the driver's
 * range checks of memset / memcpy nodes over placed memory. Runs with the
 * record's lock held (graphs.c's header).
 */
#include "graph_internal.h"

#include "driver.h"
#include "memory.h"
#include "record.h"
#include "util.h"
#include "vmm.h"

#include <stdlib.h>
#include <string.h>

/* `built` of a whole-graph update: 0 not described, 1 described in r->next,
 * BUILT_SAME the same as r->fp (a record said so; r->next not filled),
 * BUILT_DELTA described by r->delta (the nodes that differ from r->fp). */
enum { BUILT_SAME = 2, BUILT_DELTA = 3 };

/* The exec's record takes the new state of a whole-graph update. */
static void take_update(sg_grec *r, int built)
{
    if (built == BUILT_SAME) return;              /* the exec holds what it held */
    if (built == BUILT_DELTA) {
        if (sg_fp_delta_apply(&r->fp, &r->delta) != 0) sg_grec_make_stale(r, SG_REASON_NOT_COMPARABLE);
        return;
    }
    sg_grec_take_next(r);
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
            take_update(r, built);
        } else if (whole || (r->state == REC_CURRENT &&
                             (!built || node < 0 || sg_fp_node_copy(&r->fp.nodes[node], &r->node) != 0))) {
            sg_grec_make_stale(r, SG_REASON_NOT_COMPARABLE);
        }
    }
    if (r->pol) {
        sg_exec_view x = sg_grec_view(r);
        sg_graph_obs->forwarded(r->pol, &x, whole ? -1 : node >= 0 ? node : -2, sg_now_ns() - t0);
    }
    return rc;
}

/* An update the library refuses itself, as the driver would without it (a
 * range over placed memory): counted with the skipped ones, the updates
 * answered without the driver (docs/report.md). */
static void count_refusal(const sg_call *c)
{
    SG_TOTAL_ADD(updates_skipped, 1);
    sg_exec_update(exec_of(c), 0, SG_REASON_POLICY);
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

/* The driver's range check of a memset / memcpy node (a per-node update's,
 * or a graph's): CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE for a range over
 * placed memory the driver would refuse without the library, or (with
 * `ask`) SG_FOREIGN_UNSURE for an operand in memory the library did not
 * place that the driver does not show whole (memory.h). */
static CUresult node_range_check(const sg_fp_node *n, int ask)
{
    if (n->k.type == CU_GRAPH_NODE_TYPE_MEMSET && n->len >= sizeof(CUDA_MEMSET_NODE_PARAMS))
        return sg_mem_check_memset((const CUDA_MEMSET_NODE_PARAMS *)(const void *)n->pay, ask);
    if (n->k.type == CU_GRAPH_NODE_TYPE_MEMCPY && n->len >= sizeof(CUDA_MEMCPY3D))
        return sg_mem_check_memcpy((const CUDA_MEMCPY3D *)(const void *)n->pay, ask);
    return CUDA_SUCCESS;
}

/* Whether an answer about the foreign operands (memory the library did not
 * place) of r's exec must be asked of the driver: some foreign memory ended
 * (sg_mem_foreign_gen, memory.h) since the driver last accepted, or the
 * library last checked, what the exec holds (r->fgen: that generation + 1;
 * 0: never). Without an end, an operand the driver accepted once is still
 * whole. */
static int foreign_ask(const sg_grec *r, uint64_t gen)
{
    return gen != 0 && (gen == SG_FOREIGN_ALWAYS || r->fgen != gen + 1);
}

static int child_range_bad(CUgraph cg, int depth);

/* The driver's range check of a per-node update's memset / memcpy
 * parameters (described into *scratch), made whether or not the record
 * knows the node or the exec: over placed memory the driver, seeing the
 * reservation mapped, would accept a freed operand that it refuses without
 * the library (CUDA_ERROR_INVALID_VALUE either way: a node the exec does not
 * have, or of another type, is refused with the same code); a child graph
 * (the generic setter's) is read through the driver. Kernel parameters are
 * not described here (the driver checks no range of them). */
static CUresult setter_range_check(sg_fp_node *scratch, const sg_call *c, int ask)
{
    sg_node_params_kind k = c->u.node_update.kind;
    const void *p = c->u.node_update.params;
    if (!p || k == SG_NODE_KERNEL || k == SG_NODE_KERNEL_V1) return CUDA_SUCCESS;
    if (k == SG_NODE_GENERIC) {
        const CUgraphNodeParams *g = p;
        if (g->type == CU_GRAPH_NODE_TYPE_GRAPH)
            return child_range_bad(g->graph.graph, 0) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
        if (g->type != CU_GRAPH_NODE_TYPE_MEMSET && g->type != CU_GRAPH_NODE_TYPE_MEMCPY) return CUDA_SUCCESS;
    }
    if (sg_fp_params_desc(scratch, k, p, c->u.node_update.ctx, NULL) != 0) return CUDA_SUCCESS;
    return node_range_check(scratch, ask);
}

/* The first memset / memcpy node of fp with the delta d applied (d NULL:
 * fp itself) whose range the driver would refuse over placed memory, or
 * (with `ask`) whose foreign operand the driver does not show whole
 * (*foreign set then), or -1. */
static long bad_range_delta(const sg_fp *fp, const sg_fp_delta *d, int ask, int *foreign)
{
    size_t k = 0, nd = d ? d->n : 0;
    *foreign = 0;
    for (size_t i = 0; i < fp->n; i++) {
        const sg_fp_node *n = &fp->nodes[i];
        if (k < nd && d->idx[k] == i) n = &d->nodes[k++];
        CUresult rc = n->k.state == SG_FP_OK ? node_range_check(n, ask) : CUDA_SUCCESS;
        if (rc != CUDA_SUCCESS) {
            *foreign = rc == SG_FOREIGN_UNSURE;
            return (long)i;
        }
    }
    return -1;
}

/* Whether graph node nd (of a child graph) is a memset / memcpy node whose
 * range the driver would refuse over placed memory, or a child graph node
 * whose graph holds one (read through the driver; 0 where it cannot say). */
static int node_range_bad(CUgraphNode nd, int depth)
{
    CUgraphNodeType t;
    if (SG_DRIVER_CALL(cuGraphNodeGetType, nd, &t) != CUDA_SUCCESS) return 0;
    if (t == CU_GRAPH_NODE_TYPE_MEMSET) {
        CUDA_MEMSET_NODE_PARAMS m;
        return sg_drv.cuGraphMemsetNodeGetParams &&
               SG_DRIVER_CALL(cuGraphMemsetNodeGetParams, nd, &m) == CUDA_SUCCESS &&
               sg_mem_check_memset(&m, 0) != CUDA_SUCCESS;
    }
    if (t == CU_GRAPH_NODE_TYPE_MEMCPY) {
        CUDA_MEMCPY3D m;
        return sg_drv.cuGraphMemcpyNodeGetParams &&
               SG_DRIVER_CALL(cuGraphMemcpyNodeGetParams, nd, &m) == CUDA_SUCCESS &&
               sg_mem_check_memcpy(&m, 0) != CUDA_SUCCESS;
    }
    CUgraph cg;
    return t == CU_GRAPH_NODE_TYPE_GRAPH && sg_drv.cuGraphChildGraphNodeGetGraph &&
           SG_DRIVER_CALL(cuGraphChildGraphNodeGetGraph, nd, &cg) == CUDA_SUCCESS && child_range_bad(cg, depth + 1);
}

/* Whether child graph cg holds such a node (nested child graphs to a depth
 * of 16; the driver checks a child graph's nodes as an update's, recursively). */
static int child_range_bad(CUgraph cg, int depth)
{
    size_t n = 0;
    if (depth > 16 || SG_DRIVER_CALL(cuGraphGetNodes, cg, NULL, &n) != CUDA_SUCCESS || !n) return 0;
    CUgraphNode *v = malloc(n * sizeof *v);
    int bad = 0;
    if (v && SG_DRIVER_CALL(cuGraphGetNodes, cg, v, &n) == CUDA_SUCCESS)
        for (size_t i = 0; i < n && !bad; i++) bad = node_range_bad(v[i], depth);
    free(v);
    return bad;
}

int sg_graph_child_range_bad(CUgraph g) { return child_range_bad(g, 0); }

/* The first child graph node of g (described by r->next) before index
 * `before` (-1: anywhere) whose graph holds a range the driver would refuse
 * over placed memory, or -1. A record does not look into child graphs: g is
 * read back for the handles (as bad_node does), only when r->next has a
 * child graph node there (such an update is forwarded anyway: the exec, or
 * the graph, holds a node type the library does not model). The driver
 * names the child graph node for a refusal inside its graph. */
static long bad_child_node(sg_grec *r, CUgraph g, long before)
{
    /* a child graph node is a node type the library does not model: every
     * description that holds one says so (unsupported), and the common
     * update, which holds none, scans no node here */
    if (!r->next.unsupported) return -1;
    size_t end = before < 0 ? r->next.n : (size_t)before, k;
    for (k = 0; k < end && r->next.nodes[k].k.type != CU_GRAPH_NODE_TYPE_GRAPH; k++) {}
    if (k == end) return -1;
    if (r->next.origin == SG_FP_RECORDED && sg_fp_build(&r->next, g, &r->scratch, NULL) != 0) return -1;
    for (end = end < r->next.n ? end : r->next.n; k < end; k++)
        if (r->next.nodes[k].k.type == CU_GRAPH_NODE_TYPE_GRAPH && node_range_bad(r->scratch.nodes[k], 0))
            return (long)k;
    return -1;
}

/* The handle, in graph g, of the node r->next describes at index bad: a
 * record does not know the handles of captured nodes, so g is read back
 * (this happens only for an update the driver refuses; a record and a
 * read-back both order nodes by creation). NULL if unknown. */
static CUgraphNode bad_node(sg_grec *r, CUgraph g, long bad)
{
    if (r->next.origin == SG_FP_RECORDED && sg_fp_build(&r->next, g, &r->scratch, NULL) != 0) return NULL;
    return bad >= 0 && (size_t)bad < r->next.n ? r->scratch.nodes[bad] : NULL;
}

/* An update of r's exec to r->next (built) whose node `bad` names a range
 * the driver would refuse over placed memory (where the driver, seeing the
 * reservation mapped, would accept it): which node the driver's refusal
 * names without the library. cuGraphExecUpdate checks the topology (node
 * count, edges) before any node, then each node in order, its type before
 * its parameters (the order the emulated driver follows; the docs list the
 * topology conditions first and name one error node). Returns the index of
 * the node to refuse (PARAMETERS_CHANGED), or -1 to forward: the topology
 * or an earlier node's type changed, which the driver refuses alike with
 * or without placement. What is compared holds in a current record
 * whatever else made the exec's updates go to the driver (a node type the
 * library does not model, device launch, an exec setter it does not model,
 * a module unloaded): no update or setter the driver accepts changes a
 * node count, an edge, a node type, a memcpy's memory types or a memset's
 * dimensions between 1D and 2D. A stale record, or edges listed otherwise
 * by a record and a read-back: bad itself, the earlier nodes cannot be
 * judged (docs/design.md "The outcome of an update"). */
static long refusal_at(sg_grec *r, long bad)
{
    if (r->state != REC_CURRENT) return bad;
    const sg_fp *a = &r->fp, *b = &r->next;
    if (a->n != b->n || a->nedges != b->nedges) return -1;
    if (!sg_bytes_eq(a->edges, b->edges, a->nedges * sizeof *a->edges))
        return a->origin == b->origin ? -1 : bad;   /* a record and a read-back may list edges
                                                     * in other orders: not judged */
    for (long j = 0; j < bad; j++) {
        if (a->nodes[j].k.type != b->nodes[j].k.type) return -1;
        if (sg_fp_update_refused(&a->nodes[j], &b->nodes[j])) return j;
    }
    return bad;
}

/* The driver's answer to an update with a parameter it refuses. */
static CUresult refuse_update(const sg_call *c, CUgraphNode node)
{
    count_refusal(c);
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

/* The update as the observer sees it: the new state of a whole graph (in
 * r->next, or as the nodes that differ in r->delta) or of node `node` (in
 * r->node), where built says it is described. */
static sg_update update_of(sg_grec *r, const sg_call *c, long node, int built)
{
    int whole = node < 0;
    return (sg_update){ .next = whole && built && built != BUILT_DELTA ? &r->next : NULL,
                        .delta = whole && built == BUILT_DELTA ? &r->delta : NULL,
                        .node = node, .desc = !whole && built ? &r->node : NULL, .call = c };
}

/* An update the record cannot answer: the observer may; else to the driver. */
static CUresult decide(sg_grec *r, const sg_call *c, int reason, long node, int built)
{
    if (reason < 0) {                           /* identical */
        if (sg_graph_caps.skip_identical && outs_ok(c)) return answer_success(c, 1);
        if (sg_graph_caps.count_would_skip) {
            sg_exec_would_skip(exec_of(c));
            if (r->pol) sg_exec_event(exec_of(c), SG_EXEC_EV_WOULD_SKIP_PROFILED);
        }
        return forward_update(r, c, sg_graph_caps.skip_identical ? SG_REASON_NOT_COMPARABLE : SG_REASON_POLICY,
                              node, built);
    }
    if (r->pol && built && outs_ok(c) && reason != SG_REASON_FOREIGN_MEMORY) {
        sg_exec_view x = sg_grec_view(r);
        sg_update u = update_of(r, c, node, built);
        int a = sg_graph_obs->accept(r->pol, &x, &u);
        if (a < 0) return forward_update(r, c, (sg_reason)reason, node, built);   /* observing only */
        if (a > 0) {
            if (node < 0) take_update(r, built);
            else if (sg_fp_node_copy(&r->fp.nodes[node], &r->node) != 0)
                sg_grec_make_stale(r, SG_REASON_NOT_COMPARABLE);   /* cannot happen: same length */
            x = sg_grec_view(r);
            sg_graph_obs->accepted(r->pol, &x);
            return answer_success(c, 1);
        }
    }
    if (r->pol) {
        sg_exec_view x = sg_grec_view(r);
        sg_update u = update_of(r, c, node, built);
        CUresult rc = sg_graph_obs->before_forward(r->pol, &x, &u);
        if (rc != CUDA_SUCCESS) return rc;
    }
    return forward_update(r, c, (sg_reason)reason, node, built);
}

CUresult sg_graph_update(const sg_call *c)
{
    SG_TOTAL_ADD(updates_seen, 1);
    sg_grec *r = sg_grec_get(c->u.update.exec, 1);
    if (!r) {
        SG_TOTAL_ADD(updates_forwarded, 1);
        sg_exec_update(c->u.update.exec, 1, SG_REASON_UNTRACKED_EXEC);
        return c->forward(c->args);
    }
    sg_lock_take(&r->lock);
    sg_fp_cache_enter();
    CUgraph g = c->u.update.graph;
    int reason = forced_reason(r), built = 0, rreason = -1, foreign = 0;
    /* taken before any driver call: an end of foreign memory after it makes
     * the next update ask again */
    uint64_t fgen = sg_mem_foreign_gen();
    int ask = foreign_ask(r, fgen);
    /* The common case, a record to compare with what the exec holds: one
     * pass finds the nodes that differ (none: identical), and only those
     * are copied. Anything else (a memset / memcpy range the driver would
     * now refuse included) takes the general path below. */
    if (reason < 0 && sg_rec_delta(g, &r->fp, &r->delta, &rreason) == SG_READBACK_NONE &&
        r->delta.valid && bad_range_delta(&r->fp, &r->delta, ask, &foreign) < 0) {
        built = r->delta.n ? BUILT_DELTA : BUILT_SAME;
        reason = rreason;
    } else {
        sg_readback why = sg_rec_fetch(g, &r->next, NULL);
        built = why == SG_READBACK_NONE;
        if (!built) {
            sg_rec_count_readback(why);
            built = sg_fp_build(&r->next, g, &r->scratch, r->state == REC_CURRENT ? &r->fp : NULL) == 0;
        }
        if (reason < 0) reason = built ? sg_fp_compare(&r->fp, &r->next) : SG_REASON_NOT_COMPARABLE;
    }
    /* a range the driver would refuse without the library, where no
     * earlier refusal of the driver's comes first (refusal_at); the first
     * such node a foreign operand the driver does not show whole: the
     * driver judges it, and the placed operands after it, which it would
     * refuse first (round 41) */
    long bad = built == 1 ? bad_range_delta(&r->next, NULL, ask, &foreign) : -1;
    long child = built == 1 ? bad_child_node(r, g, bad) : -1;
    if (child >= 0) bad = child, foreign = 0;
    if (bad >= 0 && foreign) {
        bad = -1;
        reason = SG_REASON_FOREIGN_MEMORY;
    }
    if (bad >= 0) bad = refusal_at(r, bad);
    int desc = built > 1 ? built : built && !r->next.unsupported;
    CUresult rc;
    if (bad >= 0) {
        rc = refuse_update(c, bad_node(r, g, bad));
    } else if (r->uobj || sg_graph_uobj_held(g)) {
        /* "the references in the new source graph are cloned and replace the
         * references in the target graph": only the driver can, even for an
         * update that changes nothing else (graph_uobj.c) */
        rc = sg_grec_uobj_hold(r);
        if (rc == CUDA_SUCCESS) rc = forward_update(r, c, SG_REASON_USER_OBJECTS, -1, desc);
    } else {
        rc = decide(r, c, reason, -1, desc);
    }
    if (rc == CUDA_SUCCESS && built == 1 && r->next.unsupported) {
        /* forwarded: the exec now holds a node type the library does not model */
        r->fp.unsupported = 1;
    }
    /* accepted by the driver, or answered here with every foreign operand
     * whole (asked, or no end since it last was): true as of fgen */
    if (rc == CUDA_SUCCESS && fgen != SG_FOREIGN_ALWAYS) r->fgen = fgen + 1;
    if (rc == CUDA_SUCCESS) sg_grec_check_supported(r);
    sg_fp_cache_leave();
    sg_lock_drop(&r->lock);
    sg_grec_put(r);
    sg_vmm_unrelax();
    return rc;
}

CUresult sg_graph_update_node(const sg_call *c)
{
    SG_TOTAL_ADD(updates_seen, 1);
    sg_grec *r = sg_grec_get(c->u.node_update.exec, 1);
    if (!r) {
        SG_TOTAL_ADD(updates_forwarded, 1);
        sg_exec_update(c->u.node_update.exec, 1, SG_REASON_UNTRACKED_EXEC);
        return c->forward(c->args);
    }
    sg_lock_take(&r->lock);
    sg_fp_cache_enter();
    long i = sg_grec_node_index(r, c->u.node_update.node);
    if (i >= 0 && (size_t)i >= r->fp.n) i = -1;
    int desc = -1, reason = forced_reason(r);
    /* a setter's foreign operands are asked of the driver as an update's
     * are: a setter the library answers (identical, or changing only
     * pointers into its memory) names the foreign operands the exec's node
     * holds, whole when r->fgen is current */
    CUresult rc = setter_range_check(&r->node, c, foreign_ask(r, sg_mem_foreign_gen()));
    int unsure = rc == SG_FOREIGN_UNSURE;
    if (unsure) rc = CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS) {
        /* refused here, whatever the record knows (below) */
    } else if (reason < 0 && i < 0) {
        /* a node the exec does not have (or whose graph is gone): the driver's verdict */
        reason = r->graph ? SG_REASON_NOT_COMPARABLE : SG_REASON_UNTRACKED_EXEC;
    } else if (reason < 0) {
        sg_fp_node *rec = &r->fp.nodes[i];
        desc = sg_fp_params_desc(&r->node, c->u.node_update.kind, c->u.node_update.params,
                                 c->u.node_update.ctx, rec->pi);
        if (desc == 1) reason = SG_REASON_UNSUPPORTED_NODE;
        else if (desc < 0) reason = SG_REASON_NOT_COMPARABLE;
        else if ((rc = node_range_check(&r->node, 0)) == CUDA_SUCCESS) {
            /* a per-node update leaves the attributes (and what they made of the node) alone */
            r->node.k.attr_mask = rec->k.attr_mask;
            memcpy(r->node.k.attrs, rec->k.attrs, sizeof rec->k.attrs);
            if (rec->k.state != SG_FP_OK && r->node.k.state == SG_FP_OK) r->node.k.state = rec->k.state;
            reason = sg_fp_setter_refused(rec, &r->node) ? SG_REASON_NOT_COMPARABLE
                                                         : sg_fp_node_compare(rec, &r->node, 1);
        }
    }
    /* a foreign operand the driver does not show whole: the driver's verdict
     * (round 41), the record kept current where the node is described */
    if (unsure && rc == CUDA_SUCCESS && (reason < 0 || desc == 0)) reason = SG_REASON_FOREIGN_MEMORY;
    if (rc != CUDA_SUCCESS) count_refusal(c);
    if (rc == CUDA_SUCCESS) {
        int built = desc == 0 && i >= 0 && r->node.k.state == SG_FP_OK;
        rc = decide(r, c, reason, i, built);
        /* a setter of a node type the library does not model changed it */
        if (rc == CUDA_SUCCESS && desc == 1 && r->state == REC_STALE)
            r->stale_reason = SG_REASON_EXEC_MODIFIED;
    }
    sg_fp_cache_leave();
    sg_lock_drop(&r->lock);
    sg_grec_put(r);
    sg_vmm_unrelax();
    return rc;
}

