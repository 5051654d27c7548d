/*
 * core/graphs.c: the graph calls (graphs.h): instantiation (a record per
 * exec, graph_records.c), launches, exec destroy and what makes a record
 * change (graph or node destroyed, module unloaded, stream gone, context
 * teardown). Updates go to graph_update.c, which decides whether each one
 * would leave the exec exactly as it is:
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
 *   uobj         the exec was instantiated or updated from a graph holding
 *                user-object references (graph_uobj.c): every whole-graph
 *                update is forwarded (user_objects), for the driver to
 *                replace the exec's references; the observer stays out
 *                (variants and clones would hold references); sticky.
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
 * Locks: graph_records.c (the table, and one lock per record, held while an
 * update or launch of that exec is decided and forwarded). No lock of these
 * files is held across a call that can wait on the device.
 */
#include "graph_internal.h"

#include "driver.h"
#include "contexts.h"
#include "log.h"
#include "memory.h"
#include "record.h"
#include "util.h"
#include "vmm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

/* The exec's first description, from the graph's record when there is one
 * (with the node handles it knows; others are learned when a per-node update
 * needs them), else read back (r->lock held). */
static void describe(sg_grec *r, CUgraph graph)
{
    CUgraphNode *handles = NULL;
    sg_readback why = sg_rec_fetch(graph, &r->fp, &handles);
    if (why == SG_READBACK_NONE) {
        r->state = REC_CURRENT;
        sg_grec_set_graph(r, graph);
        if (handles) (void)sg_grec_set_nodes(r, graph, handles, r->fp.n);
        free(handles);
        return;
    }
    sg_rec_count_readback(why);
    if (sg_fp_build(&r->fp, graph, &r->scratch, NULL) == 0) {
        r->state = REC_CURRENT;
        /* The exec's node handles are kept only for a graph the library saw
         * made (cuGraphCreate, a capture, cuGraphClone: it has a record,
         * spoiled or not), whose end it sees (cuGraphDestroy forgets them).
         * A graph without one may be a child graph node's embedded graph
         * (cuGraphChildGraphNodeGetGraph), which dies with its parent, no
         * call naming it: the driver then gives its value and its nodes' to
         * new graphs and nodes, and a handle kept here would take a new node
         * for one of the exec's (a setter answered for a node the exec does
         * not have, round 40). Its per-node updates go to the driver. */
        if (why != SG_READBACK_NOT_RECORDED) (void)sg_grec_set_nodes(r, graph, r->scratch.nodes, r->fp.n);
    } else {
        sg_grec_make_stale(r, SG_REASON_NOT_COMPARABLE);
    }
}

static CUresult instantiate(const sg_call *c)
{
    CUresult rc = sg_mem_retry(c, c->forward(c->args));
    if (rc != CUDA_SUCCESS || !c->u.inst.out) return rc;
    CUgraphExec exec = *c->u.inst.out;
    CUgraph graph = c->u.inst.graph;
    sg_grec *r = sg_grec_add(exec);
    int known = 0;
    size_t nodes = 0;
    if (r) {
        sg_lock_take(&r->lock);
        if (sg_drv.cuCtxGetCurrent && SG_DRIVER_CALL(cuCtxGetCurrent, &r->ctx) == CUDA_SUCCESS)
            r->ctx = sg_ctx_owner(r->ctx, CU_STREAM_LEGACY, 0);   /* a converted context's: the primary */
        sg_fp_cache_enter();
        describe(r, graph);
        if (r->state == REC_CURRENT) {
            nodes = r->fp.n;
            known = 1;
        }
        sg_fp_cache_leave();
        sg_grec_check_supported(r);
        sg_lock_drop(&r->lock);
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
        sg_lock_take(&r->lock);
        r->stat = sg_exec_entry(exec);
        if (sg_graph_obs && !r->unsupported) {
            sg_exec_view x = sg_grec_view(r);
            r->pol = sg_graph_obs->created(&x, graph);
        }
        /* the exec holds the graph's user-object references (the observer,
         * just made, has nothing to give up) */
        if (sg_graph_uobj_held(graph)) (void)sg_grec_uobj_hold(r);
        sg_lock_drop(&r->lock);
        sg_grec_put(r);
    }
    sg_vmm_unrelax();
    return rc;
}

/* cuGraphNodeSetEnabled and the setters of node types the library does not
 * model: the observer brings the program's exec to L first (fix), then the
 * call changes state no record describes. */
static CUresult exec_fix(const sg_call *c)
{
    /* a child graph naming a range the driver would refuse without the
     * library (cuGraphExecChildGraphNodeSetParams: CUDA_ERROR_INVALID_VALUE) */
    if (c->u.exec.child && sg_graph_child_range_bad(c->u.exec.child)) return CUDA_ERROR_INVALID_VALUE;
    sg_grec *r = sg_grec_get(c->u.exec.exec, 0);
    if (!r) return c->forward(c->args);
    sg_lock_take(&r->lock);
    CUresult rc = CUDA_SUCCESS;
    if (r->pol) {
        sg_exec_view x = sg_grec_view(r);
        rc = sg_graph_obs->fix(r->pol, &x, NULL);
    }
    if (rc == CUDA_SUCCESS) rc = c->forward(c->args);
    if (rc == CUDA_SUCCESS) {
        if (c->kind == SG_CALL_EXEC_ENABLE) r->fixed = 1;
        else sg_grec_make_stale(r, SG_REASON_EXEC_MODIFIED);
    }
    sg_lock_drop(&r->lock);
    sg_grec_put(r);
    sg_vmm_unrelax();
    return rc;
}

/* The launch of r's exec, r->lock held (by the caller, who also holds
 * `ref` if the record came from the table): the observer launches, then the
 * lock goes and the launch is counted. */
static inline CUresult launch_locked(sg_grec *r, sg_grec *ref, const sg_call *c)
{
    struct sg_exec *stat = r->stat;
    CUresult rc;
    int plain = !r->pol;
    if (!plain) {
        sg_exec_view x = sg_grec_view(r);
        rc = sg_graph_obs->launch(r->pol, &x, c);
    } else {
        rc = c->forward(c->args);
    }
    sg_lock_drop(&r->lock);
    if (ref) sg_grec_put(ref);
    sg_vmm_unrelax();
    /* A launch the driver refused for want of memory, forwarded as the
     * program made it (no observer): a graph's allocation nodes get their
     * physical memory when it is launched or uploaded, which the freed
     * blocks the arenas keep may take; they are given back and the call made
     * again, as an allocation's would be (before, tests/e2e/adv_graphs2.c
     * memnode_pressure: every launch of a graph allocating what the program
     * had freed got CUDA_ERROR_OUT_OF_MEMORY). The record lock is dropped:
     * the trim takes the arenas' and the slots' locks. */
    if (__builtin_expect(rc == CUDA_ERROR_OUT_OF_MEMORY, 0) && plain) rc = sg_mem_retry(c, rc);
    if (rc == CUDA_SUCCESS) {
        SG_TOTAL_ADD(launches, 1);
        if (stat) sg_exec_entry_launched(stat);
        else sg_exec_launched(c->u.launch.exec);
    }
    return sg_cu_note(rc);
}

/* A launch whose record is not in its hot slot (found in the table, with a
 * reference), or that no observer watches (no record needed). */
static __attribute__((noinline)) CUresult launch_cold(const sg_call *c)
{
    sg_grec *r = sg_graph_obs ? sg_grec_get(c->u.launch.exec, 0) : NULL;
    if (r) {
        sg_lock_take(&r->lock);
        return launch_locked(r, r, c);
    }
    CUresult rc = sg_mem_retry(c, c->forward(c->args));
    if (rc == CUDA_SUCCESS) {
        SG_TOTAL_ADD(launches, 1);
        sg_exec_launched(c->u.launch.exec);
    }
    return sg_cu_note(rc);
}

/* A launch: the observer sees it (and may launch a variant instead).
 * The steady state costs no table_lock and no reference: the record is
 * found locked through its hot slot (graph_records.c); its lock (rec->lock)
 * serialises the launch with the exec's updates and other launches, and
 * guards r->stat and the observer's state. The exec's launch counter is the
 * stats entry the record keeps (r->stat: entries are never freed, stats.c),
 * so the statistics' lock and table are not touched either. */
CUresult sg_graph_launch(const sg_call *c)
{
    sg_grec *r;
    if (__builtin_expect(!sg_graph_obs || !(r = sg_grec_lock_hot(c->u.launch.exec)), 0))
        return launch_cold(c);
    return launch_locked(r, NULL, c);
}

/* An upload: the observer forwards it behind the exec's previous launch. */
static CUresult upload(const sg_call *c)
{
    sg_grec *r = sg_graph_obs ? sg_grec_get(c->u.launch.exec, 0) : NULL;
    if (!r) return sg_mem_retry(c, c->forward(c->args));
    sg_lock_take(&r->lock);
    CUresult rc;
    int plain = !(r->pol && sg_graph_obs->upload);
    if (!plain) {
        sg_exec_view x = sg_grec_view(r);
        rc = sg_graph_obs->upload(r->pol, &x, c);
    } else {
        rc = c->forward(c->args);
    }
    sg_lock_drop(&r->lock);
    sg_grec_put(r);
    sg_vmm_unrelax();
    return plain ? sg_mem_retry(c, rc) : rc;
}

/* Destroys the exec; the observer's state (variants) goes with the record.
 * The exec's record and statistics go before the driver frees the handle:
 * once it has, another thread's instantiation may get the value and its
 * record and statistics, which a removal made after would take (its updates
 * then forwarded as untracked_exec, its report entry ended; round 40,
 * windowexec). The driver refuses no destroy of a live exec; one it refuses
 * (a handle that is no exec) has no record. */
static CUresult exec_destroy(const sg_call *c)
{
    sg_exec_destroyed(c->u.exec.exec);
    sg_grec_remove(c->u.exec.exec);
    sg_vmm_unrelax();
    return c->forward(c->args);
}

/* A node was destroyed (r->lock held). One of the exec's named nodes: its
 * graph's handles are given up (per-node updates then go to the driver).
 * While some of the exec's handles are not known (a captured graph, read
 * back only when a per-node update needs it), the node may be one of those:
 * the graph would then read back with its other nodes moved up a place, and
 * a node added since in the place of the exec's last, in the exec's layout
 * when its nodes are alike. Matched position by position, the handles would
 * name the exec's nodes wrongly (an update applied to the wrong node, and a
 * node the exec does not have taken for one it has). Whether the node was
 * the graph's cannot be asked once it is gone, so no handle is learned from
 * that graph any more; the handles already known still name their nodes (a
 * handle names a node, not a place) until a lookup of an unknown one gives
 * them up with the rest (sg_grec_learn_nodes). */
static void forget_node(sg_grec *r, void *u)
{
    if (!r->graph) return;
    if (sg_fp_map_find(&r->map, *(CUgraphNode *)u) >= 0) sg_grec_set_graph(r, NULL);
    else if (!r->nodes || r->nodes_partial || r->nodes_origin != r->fp.origin) r->learn_failed = 1;
}

static void make_all_stale(sg_grec *r, void *u)
{
    (void)u;
    if (r->state == REC_CURRENT) sg_grec_make_stale(r, SG_REASON_NOT_COMPARABLE);
}

/* Before a module unload (sg_exec_observer.content_lost). */
static void content_lost_one(sg_grec *r, void *u)
{
    (void)u;
    if (!r->pol || r->state != REC_CURRENT) return;
    sg_exec_view x = sg_grec_view(r);
    sg_graph_obs->content_lost(r->pol, &x);
}

static void stream_gone_one(sg_grec *r, void *u)
{
    if (!r->pol) return;
    sg_exec_view x = sg_grec_view(r);
    sg_graph_obs->stream_gone(r->pol, &x, *(sg_stream_id *)u);
}

/* The exec records of a context cuCtxDestroy is about to end (contexts.h,
 * sg_ctx_on_take): taken out of the table before the driver frees the
 * handles, so that neither another thread's instantiation on the value of
 * one of its execs (which would recycle the record as a live context's:
 * the observer then destroys its variants and order event in the dead
 * context, values another thread's objects may hold by then) nor this
 * teardown (taking by context value the records of a context made
 * meanwhile on that value) confuses the two. */
typedef struct ctx_recs {
    sg_grec **v;
    size_t n;
} ctx_recs;

static void *ctx_take(CUcontext ctx)
{
    /* the layouts cached go now too: a module another thread loads in a
     * context made on the value while the destroy is in flight, and the
     * captures it records with them, are that context's (after, a bump here
     * made them stale: its graphs read back as module_unloaded) */
    sg_fp_cache_epoch_bump();
    ctx_recs *t = calloc(1, sizeof *t);
    if (!t) return NULL;                   /* taken by value afterwards, as before */
    t->v = sg_grec_take_ctx(ctx, &t->n);
    return t;
}

static void ctx_give_back(void *taken)
{
    ctx_recs *t = taken;
    sg_grec_give_back(t->v, t->n);
    free(t->v);
    free(t);
}

/* A context is gone (contexts.h, step 2): the driver destroyed its execs,
 * and unloaded its modules as cuModuleUnload would: their function handles
 * may be handed out again, so the layouts cached for them go. */
static void ctx_teardown(sg_ctx *cx)
{
    size_t n = 0;
    sg_grec **gone;
    ctx_recs *early = cx->early[SG_CTX_PART_GRAPHS];
    if (early) {                           /* (the epoch bumped when taken) */
        gone = early->v, n = early->n;
        free(early);
    } else {
        sg_fp_cache_epoch_bump();
        gone = sg_grec_take_ctx(cx->ctx, &n);
    }
    for (size_t i = 0; i < n; i++) {
        sg_grec *r = gone[i];
        sg_exec_destroyed(r->exec);
        sg_lock_take(&r->lock);
        if (r->pol) sg_graph_obs->destroyed(r->pol, 1);
        r->pol = NULL;
        sg_lock_drop(&r->lock);
        sg_grec_put(r);
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
        return sg_graph_launch(c);
    case SG_CALL_UPLOAD:
        return upload(c);
    case SG_CALL_UPDATE_GRAPH:
        return sg_graph_update(c);
    case SG_CALL_UPDATE_NODE:
        return sg_graph_update_node(c);
    case SG_CALL_EXEC_ENABLE:
    case SG_CALL_EXEC_DIRTY:
        return exec_fix(c);
    case SG_CALL_EXEC_DESTROY:
        return exec_destroy(c);
    case SG_CALL_GRAPH_DESTROY: {
        /* Forgotten before the driver frees the handle: once it has, another
         * thread's cuGraphCreate may get the same value and mark it
         * (cuGraphRetainUserObject) or instantiate from it, and a forget
         * made after would take that graph's mark (its execs' updates then
         * answered by the library: user objects kept or dropped wrongly)
         * or its records' graph. A refused destroy (a graph being captured)
         * gets its mark back; its records only lose their graph (node
         * handles learned no more: a cost). */
        int marked = sg_graph_uobj_forget(c->u.graph.graph);
        sg_grec_forget_graph(c->u.graph.graph);
        rc = c->forward(c->args);
        if (rc != CUDA_SUCCESS && marked) sg_graph_uobj_mark(c->u.graph.graph);
        return rc;
    }
    case SG_CALL_GRAPH_UOBJ:
        rc = c->forward(c->args);
        if (rc == CUDA_SUCCESS) sg_graph_uobj_mark(c->u.graph.graph);
        return rc;
    case SG_CALL_GRAPH_CLONE:
        rc = c->forward(c->args);
        if (rc == CUDA_SUCCESS && c->u.clone.out) sg_graph_uobj_cloned(c->u.clone.orig, *c->u.clone.out);
        return rc;
    case SG_CALL_NODE_DESTROY:
        /* before the driver frees the handle for another thread's next node
         * (which an exec's map would then take for the destroyed one); a
         * refused destroy only costs the maps */
        sg_grec_foreach(forget_node, (void *)&c->u.node.node);
        return c->forward(c->args);
    case SG_CALL_MODULE_UNLOAD:
        if (sg_graph_obs && sg_graph_obs->content_lost) sg_grec_foreach(content_lost_one, NULL);
        rc = c->forward(c->args);
        if (rc == CUDA_SUCCESS) {
            sg_fp_cache_epoch_bump();
            sg_grec_foreach(make_all_stale, NULL);
        }
        return rc;
    default:
        return c->forward(c->args);
    }
}

void sg_graph_stream_gone(CUstream s)
{
    if (!sg_graph_obs || !s) return;
    sg_stream_id id = sg_stream_id_of(s, 0);
    sg_grec_foreach(stream_gone_one, &id);
    sg_vmm_unrelax();
}

void sg_graph_init(const sg_caps *cp, const sg_exec_observer *o)
{
    sg_graph_caps = *cp;
    sg_graph_obs = o;
    sg_ctx_on_teardown(SG_CTX_PART_GRAPHS, ctx_teardown);
    sg_ctx_on_take(SG_CTX_PART_GRAPHS, ctx_take, ctx_give_back);
}

void sg_graph_atfork(int phase)
{
    sg_grec_atfork(phase);
    sg_graph_uobj_atfork(phase);
}

void sg_graph_reset(void)
{
    sg_grec_reset();
    sg_graph_uobj_reset();
}
