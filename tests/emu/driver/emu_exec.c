/*
 * emu_exec.c: graph execs of the emulated CUDA driver: instantiate (every
 * variant), upload, launch, destroy, and their teardown with their context.
 *
 * cuGraphLaunch queues ONE emu_work that runs the nodes in a topological
 * order fixed at instantiation (a child graph node's instance runs its nodes
 * in its place, in its own order: launch_snap); a launch with event record
 * or wait nodes queues a chain of works in one piece instead, the event
 * nodes' markers and waits between the segments of nodes (launch_chain).
 * The work carries a deep snapshot of the exec's parameters taken at
 * launch, so later set-params or update calls never affect a launch already
 * queued, and cuGraphExecDestroy can free the
 * exec at once (in-flight launches only use their snapshots, which are freed
 * when they complete). Launches of one exec are serialised across streams by
 * a chain of launch tokens: each launch waits for the previous one to finish
 * ("only one instance of hGraphExec may be executing"). The work records
 * every device range its nodes can touch (kernel argument words, memcpy and
 * memset operands). Each launch allocates its allocation nodes' memory
 * (emu_gmem_*, emu_mem.c) when it is queued; its free nodes release it when
 * they run.
 *
 * Locks: exec->lock guards an exec's node parameters and its last launch
 * token, so a launch takes a consistent snapshot while another thread sets
 * parameters; tok_lock/tok_cond guard every launch token's refcount and done
 * flag. tok_lock is a leaf: a launch's completion takes it under its
 * stream's lock (emu_work.complete).
 */
#include "emu_graph.h"

#include <stdio.h>
#include <string.h>

/* ================================================================= execs */

/* Launch tokens (launch_token, emu_graph.h): refcount and done flag. */
static pthread_mutex_t tok_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tok_cond = PTHREAD_COND_INITIALIZER;

/* emu_leaf_locks_fork's part here (the token lock). */
void emu_exec_tok_fork(int phase)
{
    if (phase == 0) {
        pthread_mutex_lock(&tok_lock);
        return;
    }
    if (phase == 2) pthread_cond_init(&tok_cond, NULL);   /* its waiters are gone */
    pthread_mutex_unlock(&tok_lock);
}

static void token_put(launch_token *t)
{
    if (!t) return;
    pthread_mutex_lock(&tok_lock);
    int last = --t->refs == 0;
    pthread_mutex_unlock(&tok_lock);
    if (last) free(t);
}

static void token_finish(launch_token *t)
{
    if (!t) return;
    pthread_mutex_lock(&tok_lock);
    t->done = 1;
    pthread_cond_broadcast(&tok_cond);
    pthread_mutex_unlock(&tok_lock);
}

static void token_wait(launch_token *t)
{
    if (!t) return;
    pthread_mutex_lock(&tok_lock);
    while (!t->done) pthread_cond_wait(&tok_cond, &tok_lock);
    pthread_mutex_unlock(&tok_lock);
}

int emu_exec_ok(CUgraphExec e) { return e && emu_handle_ok(e, EMU_K_EXEC); }

static void exec_free(CUgraphExec e)
{
    if (e->has_mem && emu_graph_ok(e->src) && e->src->uid == e->graph_uid) e->src->mem_execs--;
    for (size_t i = 0; i < e->n; i++) {
        emu_nparams_free(&e->nodes[i].p);
        free(e->nodes[i].deps);
        free(e->nodes[i].edata);
        for (unsigned b = 0; b < e->nodes[i].nsub; b++)
            if (e->nodes[i].sub[b]) exec_free(e->nodes[i].sub[b]);
        free(e->nodes[i].sub);
    }
    token_put(e->last);
    emu_urefs_drop(&e->urefs);      /* a launch still queued holds its own (launch_refs) */
    emu_charge_give(e->charge_dev, e->charge);   /* (nothing if none was taken) */
    pthread_mutex_destroy(&e->lock);
    free(e->nodes);
    free(e->order);
    emu_handle_mem_put(EMU_K_EXEC, e);   /* the next exec (or nested exec) gets the value */
}

/* Kahn's algorithm, lowest index first. Returns 0 on a cycle and sets
 * *cycle_node to a node on or behind it. */
static int topo_order(CUgraph g, size_t *order, CUgraphNode *cycle_node)
{
    size_t n = g->n, done = 0;
    size_t *indeg = calloc(n ? n : 1, sizeof *indeg);
    unsigned char *placed = calloc(n ? n : 1, 1);
    if (!indeg || !placed) { free(indeg); free(placed); return -1; }
    for (size_t i = 0; i < n; i++) indeg[i] = g->nodes[i]->ndeps;
    while (done < n) {
        size_t pick = n;
        for (size_t i = 0; i < n; i++)
            if (!placed[i] && indeg[i] == 0) { pick = i; break; }
        if (pick == n) break;
        placed[pick] = 1;
        order[done++] = pick;
        for (size_t k = 0; k < g->nedges; k++)
            if (g->edges[k].from == g->nodes[pick]) indeg[g->edges[k].to->index]--;
    }
    if (done < n) {
        for (size_t i = 0; i < n; i++)
            if (!placed[i]) { *cycle_node = g->nodes[i]; break; }
    }
    free(indeg);
    free(placed);
    return done == n;
}

#define INSTANTIATE_KNOWN_FLAGS (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | \
    CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | \
    CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

/* Device-launch restrictions ("The graph can only contain kernel nodes,
 * memcpy nodes, memset nodes, and child graph nodes", on a single context,
 * at least one kernel, memcpy or memset node), a child graph's nodes
 * included; returns the failing result and node. */
static CUgraphInstantiateResult device_launch_nodes(CUgraph g, CUgraphNode *err, CUcontext *ctx, int *useful)
{
    for (size_t i = 0; i < g->n; i++) {
        const emu_nparams *p = &g->nodes[i]->p;
        if (p->type == CU_GRAPH_NODE_TYPE_GRAPH) {
            CUgraphInstantiateResult r = device_launch_nodes(p->child, err, ctx, useful);
            if (r != CUDA_GRAPH_INSTANTIATE_SUCCESS) return r;
            continue;
        }
        if (p->type != CU_GRAPH_NODE_TYPE_KERNEL && p->type != CU_GRAPH_NODE_TYPE_MEMCPY &&
            p->type != CU_GRAPH_NODE_TYPE_MEMSET) {
            *err = g->nodes[i];
            return CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
        }
        if (*ctx && p->ctx != *ctx) { *err = g->nodes[i]; return CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED; }
        *ctx = p->ctx;
        *useful = 1;
    }
    return CUDA_GRAPH_INSTANTIATE_SUCCESS;
}

static CUgraphInstantiateResult device_launch_check(CUgraph g, CUgraphNode *err)
{
    int useful = 0;
    CUcontext ctx = NULL;
    CUgraphInstantiateResult r = device_launch_nodes(g, err, &ctx, &useful);
    if (r == CUDA_GRAPH_INSTANTIATE_SUCCESS && !useful) return CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
    return r;
}

static CUgraphExec exec_alloc(cuuint64_t flags)
{
    CUgraphExec e = emu_handle_mem_get(EMU_K_EXEC, sizeof *e);
    pthread_mutex_init(&e->lock, NULL);
    e->flags = flags;
    return e;
}

/* Builds e's nodes from g's; a child graph node gets the instance of its
 * embedded graph, a nested exec with e's flags. Returns CUDA_SUCCESS,
 * CUDA_ERROR_OUT_OF_MEMORY, or CUDA_ERROR_INVALID_VALUE with *result
 * INVALID_STRUCTURE and *err_node set on a cycle (in g or a child graph); e
 * can be freed (exec_free) whatever it returns. */
static CUresult exec_build(CUgraph g, CUgraphExec e, CUgraphNode *err_node, CUgraphInstantiateResult *result)
{
    size_t n = g->n;
    e->nodes = calloc(n ? n : 1, sizeof *e->nodes);
    e->order = calloc(n ? n : 1, sizeof *e->order);
    if (!e->nodes || !e->order) return CUDA_ERROR_OUT_OF_MEMORY;
    e->n = n;                       /* zeroed nodes free as nothing */
    e->graph_uid = g->uid;
    /* "An instantiated cudaGraphExec_t retains a copy of every reference in
     * the source cudaGraph_t" (a nested instance: its child graph's). */
    emu_urefs_copy(&e->urefs, &g->urefs);
    int t = topo_order(g, e->order, err_node);
    if (t < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (t == 0) {
        *result = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < n; i++) {
        CUgraphNode nd = g->nodes[i];
        exec_node *x = &e->nodes[i];
        x->orig = nd;
        x->serial = nd->serial;
        x->deps = malloc((nd->ndeps ? nd->ndeps : 1) * sizeof *x->deps);
        x->edata = calloc(nd->ndeps ? nd->ndeps : 1, sizeof *x->edata);
        if (!x->deps || !x->edata) return CUDA_ERROR_OUT_OF_MEMORY;
        x->ndeps = nd->ndeps;
        for (size_t k = 0; k < nd->ndeps; k++) x->deps[k] = nd->deps[k]->index;
        if (nd->p.type == CU_GRAPH_NODE_TYPE_GRAPH || nd->p.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            int cond = nd->p.type == CU_GRAPH_NODE_TYPE_CONDITIONAL;
            unsigned ns = cond ? nd->p.cond_size : 1;
            x->p.type = nd->p.type;
            if (cond && !emu_nparams_copy(&x->p, &nd->p))
                return CUDA_ERROR_OUT_OF_MEMORY;    /* its handle, type, size, context (no bodies) */
            if (!(x->sub = calloc(ns, sizeof *x->sub))) return CUDA_ERROR_OUT_OF_MEMORY;
            x->nsub = ns;                           /* exec_free frees the instances made */
            for (unsigned b = 0; b < ns; b++) {
                if (!(x->sub[b] = exec_alloc(e->flags))) return CUDA_ERROR_OUT_OF_MEMORY;
                CUresult r = exec_build(cond ? nd->p.cond_body[b] : nd->p.child, x->sub[b], err_node, result);
                if (r != CUDA_SUCCESS) return r;
            }
        } else if (!emu_nparams_copy(&x->p, &nd->p)) {
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    /* each edge's data, kept for cuGraphExecUpdate's topology check */
    for (size_t i = 0; i < g->nedges; i++) {
        const emu_edge *ed = &g->edges[i];
        e->nodes[ed->to->index].edata[emu_node_dep_pos(ed->to, ed->from)] = ed->data;
    }
    return CUDA_SUCCESS;
}

/* The context of e's first node that has one, child graphs included (NULL: none). */
static CUcontext exec_node_ctx(CUgraphExec e)
{
    for (size_t i = 0; i < e->n; i++) {
        CUcontext c = e->nodes[i].p.type == CU_GRAPH_NODE_TYPE_GRAPH ? exec_node_ctx(e->nodes[i].sub[0])
                                                                      : e->nodes[i].p.ctx;
        if (c) return c;
    }
    return NULL;
}

size_t emu_exec_count(CUgraphExec e)
{
    size_t k = 0;
    for (size_t i = 0; i < e->n; i++)   /* a conditional node is one entry, its bodies under it */
        k += e->nodes[i].p.type == CU_GRAPH_NODE_TYPE_GRAPH ? emu_exec_count(e->nodes[i].sub[0]) : 1;
    return k;
}

size_t emu_exec_nodes(CUgraphExec e)
{
    size_t k = 0;
    for (size_t i = 0; i < e->n; i++) {
        k += e->nodes[i].p.type != CU_GRAPH_NODE_TYPE_GRAPH;
        for (unsigned b = 0; b < e->nodes[i].nsub; b++) k += emu_exec_nodes(e->nodes[i].sub[b]);
    }
    return k;
}

static CUresult exec_create(CUgraph g, cuuint64_t flags, CUgraphExec *out, CUgraphNode *err_node,
                            CUgraphInstantiateResult *result)
{
    *err_node = NULL;
    *result = CUDA_GRAPH_INSTANTIATE_ERROR;
    if (!out || !emu_graph_ok(g) || (flags & ~(cuuint64_t)INSTANTIATE_KNOWN_FLAGS)) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) &&
        (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) {
        CUgraphInstantiateResult dr = device_launch_check(g, err_node);
        if (dr != CUDA_GRAPH_INSTANTIATE_SUCCESS) { *result = dr; return CUDA_ERROR_INVALID_VALUE; }
    }
    /* cuStreamBeginCaptureToGraph: "The graph will not be instantiable until
     * the user calls cuStreamEndCapture", a graph holding a conditional body
     * (or child graph) captured into included. The code is the emulator's
     * choice (none is documented). */
    if (emu_capture_within(g)) {
        *result = CUDA_GRAPH_INSTANTIATE_ERROR;
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* Conditional bodies hold only the node types the documentation allows
     * (emu_cond_body_check); a node outside them is refused as a node the
     * instantiation does not support. */
    if ((*err_node = emu_cond_body_check(g, 0))) {
        *result = CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* One context for a conditional node and every kernel of its bodies
     * (emu_cond_ctx_check): refused as nodes of several contexts (the
     * result's documented sense is device launch's; the emulator's choice,
     * nothing is documented for this rule). */
    if ((*err_node = emu_cond_ctx_check(g))) {
        *result = CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED;
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* "If hGraph contains any allocation or free nodes, there can be at most
     * one executable graph in existence for that graph at a time."; a graph
     * with conditional nodes: "Only one instantiation of the graph may exist
     * at any point in time." */
    int has_mem = emu_graph_has_mem(g) || emu_graph_has_cond(g);
    if (has_mem && g->mem_execs) return CUDA_ERROR_INVALID_VALUE;
    CUgraphExec e = exec_alloc(flags);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = exec_build(g, e, err_node, result);
    if (r != CUDA_SUCCESS) {
        exec_free(e);
        return r;
    }
    e->src = g;
    e->has_mem = has_mem;
    g->mem_execs += has_mem;
    /* The exec belongs to the context of its nodes (else the current one):
     * that context's teardown ends it. */
    CUcontext owner = exec_node_ctx(e);
    emu_handle_add_ctx(e, EMU_K_EXEC, owner ? owner : emu_ctx_current());
    emu_stat_nodes(emu_exec_count(e), 0);
    *out = e;
    *result = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    return CUDA_SUCCESS;
}

/* Writes the legacy instantiate log. */
static void instantiate_log(char *buf, size_t size, CUresult r, CUgraphInstantiateResult res)
{
    if (!buf || !size) return;
    if (r == CUDA_SUCCESS) buf[0] = 0;
    else snprintf(buf, size, "cudaemu: graph instantiation failed (CUresult %d, result %d)", (int)r, (int)res);
}

/* --------------------------------------------------------------- launch */

/* A launch's nodes, or one segment of them (launch_chain): the first
 * segment waits for the previous launch's token (prev), the last finishes
 * this launch's (self); NULL in the others. */
typedef struct launch_work {
    emu_work w;
    launch_token *prev, *self;
    size_t n;
    emu_nparams *nodes;             /* in execution order; owned */
    CUgraphConditionalHandle *conds; /* the first segment: the conditional handles whose */
    size_t nconds, cap_conds;       /* defaults the launch applies first (owned) */
    emu_urefs urefs;                /* the segment that finishes the launch: its exec's
                                     * user-object references, held until it is retired */
} launch_work;

static void run_snapshot(const emu_nparams *v, size_t n, emu_stream *s, int dev, const char *what);

/* Runs body b of conditional node p's snapshot. */
static void run_body(const emu_nparams *p, int b, emu_stream *s, int dev, const char *what)
{
    size_t from = b ? p->body_end[b - 1] : 0;
    run_snapshot(p->body + from, p->body_end[b] - from, s, dev, what);
}

/* Runs nodes v[0..n) of a launch on s (dev: its device); a conditional
 * node runs the body its handle's value picks (emu_cond_pick: IF then or
 * else, SWITCH body[value] or none) once, or, WHILE, "Body executed
 * repeatedly while condition value is non-zero" (the value read before
 * each iteration). */
static void run_snapshot(const emu_nparams *v, size_t n, emu_stream *s, int dev, const char *what)
{
    for (size_t i = 0; i < n && emu_sticky_now(emu_stream_ctx(s)) == CUDA_SUCCESS; i++) {
        const emu_nparams *p = &v[i];
        switch (p->type) {
        case CU_GRAPH_NODE_TYPE_CONDITIONAL:
            if (p->cond_type != CU_GRAPH_COND_TYPE_WHILE) {
                int b = emu_cond_pick(p, emu_cond_value(p->cond));
                if (b >= 0) run_body(p, b, s, dev, what);
            } else {
                while (emu_cond_value(p->cond) && emu_sticky_now(emu_stream_ctx(s)) == CUDA_SUCCESS)
                    run_body(p, 0, s, dev, what);
            }
            break;
        /* a kernel node runs on the device of its function's context, which
         * may be another than the launch stream's (a graph captured across
         * two devices: round 31); its arguments are checked against it */
        case CU_GRAPH_NODE_TYPE_KERNEL:
            emu_kernel_run(p->args, &p->launch, p->ctx ? emu_ctx_device(p->ctx) : dev, what);
            break;
        case CU_GRAPH_NODE_TYPE_MEMCPY: emu_memcpy3d_exec(&p->copy, p->src_gen, p->dst_gen); break;
        case CU_GRAPH_NODE_TYPE_MEMSET: emu_memset_exec(&p->set); break;
        case CU_GRAPH_NODE_TYPE_HOST:   p->host.fn(p->host.userData); break;
        case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:   /* in its context's device, a wait blocking the launch */
            emu_memops_exec(p->memops, p->nmemops, p->ctx ? emu_ctx_device(p->ctx) : dev, what);
            break;
        case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:   /* a wait blocks the launch */
        case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
            emu_extsem_exec(p->type, p->sems, p->sem_params, p->nsems, what);
            break;
        case CU_GRAPH_NODE_TYPE_MEM_FREE:
            if (p->mem_gen) emu_mem_free_async_complete(p->mem_ptr, p->mem_gen);
            break;
        default: break;             /* empty; MEM_ALLOC: allocated when the launch was queued */
        }
    }
}

static void launch_run(emu_work *w, emu_stream *s)
{
    launch_work *lw = (launch_work *)w;
    token_wait(lw->prev);
    /* CU_GRAPH_COND_ASSIGN_DEFAULT: "Default value is applied when graph is
     * launched." */
    for (size_t i = 0; i < lw->nconds; i++) emu_cond_launch_default(lw->conds[i]);
    run_snapshot(lw->nodes, lw->n, s, emu_ctx_device(emu_stream_ctx(s)), w->what);
}

/* The launch's token is finished as the launch completes on its stream (under
 * the stream's lock): a launch of the same exec on another stream can only
 * start once this stream counts this one done, and a fork child never sees
 * one without the other. */
static void launch_complete(emu_work *w)
{
    token_finish(((launch_work *)w)->self);
}

/* Finishes the token too (again, or for a launch that never ran). */
static void launch_release(emu_work *w)
{
    launch_work *lw = (launch_work *)w;
    token_finish(lw->self);
    token_put(lw->self);
    token_put(lw->prev);
    emu_urefs_drop(&lw->urefs);
    for (size_t i = 0; i < lw->n; i++) emu_nparams_free(&lw->nodes[i]);
    free(lw->nodes);
    free(lw->conds);
    free(lw);                       /* w->ranges belong to the stream (freed before release) */
}

/* A launch's graph memory (exec lock held), when the launch is queued:
 * allocates what its allocation nodes allocate (all or none: cuGraphLaunch
 * fails with CUDA_ERROR_INVALID_VALUE if one is still allocated from an
 * earlier launch and the exec was not instantiated with
 * CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, with
 * CUDA_ERROR_OUT_OF_MEMORY beyond the device memory), then marks what its
 * free nodes free: the free node releases that allocation when it runs. */
static CUresult launch_memory(CUgraphExec e, emu_nparams *snap, size_t n, const char *call)
{
    CUdeviceptr *allocs = malloc((n ? n : 1) * sizeof *allocs);
    size_t na = 0;
    if (!allocs) return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++)
        if (snap[i].type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) allocs[na++] = snap[i].mem_ptr;
    CUresult r = emu_gmem_arm(allocs, na, (e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0);
    free(allocs);
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
        if (snap[i].type != CU_GRAPH_NODE_TYPE_MEM_FREE) continue;
        if (!(snap[i].mem_gen = emu_gmem_request_free(snap[i].mem_ptr)))
            emu_violation(call, "free node of 0x%llx: the allocation is not allocated, or already being freed",
                          (unsigned long long)snap[i].mem_ptr);
    }
    return r;
}

/* Appends to snapshot v (*n entries so far) the parameters of e's nodes in
 * e's order, a child graph node's instance in its place, which runs its
 * nodes after the node's dependencies and before its dependents, in its own
 * order, a conditional node with its body's snapshot under it; w gets the
 * ranges they touch (the top-level exec's lock held). */
static CUresult launch_snap(CUgraphExec e, emu_nparams *v, size_t *n, emu_work *w, const char *call)
{
    for (size_t i = 0; i < e->n; i++) {
        const exec_node *x = &e->nodes[e->order[i]];
        const emu_nparams *p = &x->p;
        emu_nparams *s = &v[*n];
        if (p->type == CU_GRAPH_NODE_TYPE_GRAPH) {
            CUresult r = launch_snap(x->sub[0], v, n, w, call);
            if (r != CUDA_SUCCESS) return r;
            continue;
        }
        if (p->type == CU_GRAPH_NODE_TYPE_KERNEL && !emu_args_func_loaded(p->args)) {
            emu_violation(call, "kernel node %zu uses function %p, which is no longer loaded",
                          e->order[i], (void *)p->args->func);
            return CUDA_ERROR_INVALID_HANDLE;
        }
        if ((p->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL || p->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT) &&
            !emu_extsem_live(p->sems, p->nsems)) {
            emu_violation(call, "external semaphore node %zu names a destroyed semaphore", e->order[i]);
            return CUDA_ERROR_INVALID_HANDLE;
        }
        if (x->disabled) {
            s->type = CU_GRAPH_NODE_TYPE_EMPTY;    /* a disabled node does nothing */
            (*n)++;
            continue;
        }
        /* cudaFuncAttributes.maxDynamicSharedSizeBytes: "Any launch must have a
         * dynamic shared memory size smaller than this value": a kernel node's
         * too, against the function's attribute when the graph is launched
         * (the reference does not say whether a node, an instantiation or an
         * update takes it: the strict reading, docs/emulator.md "Programmatic
         * dependent launch and edge data"); refused as a stream launch is. */
        if (p->type == CU_GRAPH_NODE_TYPE_KERNEL && emu_handle_ok(p->args->func, EMU_K_FUNC) &&
            p->launch.shared_bytes > (unsigned)emu_func_attr(p->args->func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES))
            return CUDA_ERROR_INVALID_VALUE;
        if (!emu_nparams_copy(s, p)) {
            emu_nparams_free(s);
            memset(s, 0, sizeof *s);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        (*n)++;
        switch (p->type) {
        case CU_GRAPH_NODE_TYPE_KERNEL: emu_work_touch_words(w, p->args->data, p->args->size); break;
        case CU_GRAPH_NODE_TYPE_MEMCPY: emu_memcpy3d_touch(w, &p->copy); break;
        case CU_GRAPH_NODE_TYPE_MEMSET: emu_memset_touch(w, &p->set); break;
        case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: emu_memops_touch(w, p->memops, p->nmemops); break;
        case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
        case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: emu_extsem_touch(w, p->sems, p->nsems); break;
        case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
            size_t nb = 0;          /* every body: the value is read when the node runs */
            for (unsigned b = 0; b < x->nsub; b++) nb += emu_exec_count(x->sub[b]);
            if (!(s->body = calloc(nb ? nb : 1, sizeof *s->body)) ||
                !(s->body_end = calloc(x->nsub, sizeof *s->body_end)))
                return CUDA_ERROR_OUT_OF_MEMORY;
            for (unsigned b = 0; b < x->nsub; b++) {
                CUresult r = launch_snap(x->sub[b], s->body, &s->nbody, w, call);
                if (r != CUDA_SUCCESS) return r;
                s->body_end[b] = s->nbody;
            }
            break;
        }
        default: break;
        }
    }
    return CUDA_SUCCESS;
}

/* A launch holds a copy of the user-object references of e and its nested
 * instances (the top-level exec's lock held): "When a cudaGraphExec_t is
 * destroyed without being synchronized, the references are retained until
 * the execution is completed", and an update's released ones "are held
 * until the launches have finished executing". */
static void launch_refs(CUgraphExec e, emu_urefs *r)
{
    emu_urefs_copy(r, &e->urefs);
    for (size_t i = 0; i < e->n; i++)
        for (unsigned b = 0; b < e->nodes[i].nsub; b++)
            if (e->nodes[i].sub[b]) launch_refs(e->nodes[i].sub[b], r);
}

static int is_event_node(const emu_nparams *p)
{
    return p->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD || p->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT;
}

/* The event nodes of a launch's snapshot (docs/emulator.md, "Event record
 * and wait nodes"): returns how many, or sets *r to the refusal: an event
 * destroyed since it was set (a violation, CUDA_ERROR_INVALID_HANDLE, as a
 * function no longer loaded), a record node whose event belongs to another
 * context than the launch stream's, or one event in two event nodes of the
 * launch (the order the documentation gives them is not emulated:
 * CUDA_ERROR_NOT_SUPPORTED), a wait node whose event was last recorded in a
 * capture in progress (as cuEventQuery of it: the capture is invalidated,
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED). No exec lock held (the capture
 * lock comes first). */
static size_t launch_events(const launch_work *lw, emu_stream *s, const char *call, CUresult *r)
{
    size_t k = 0;
    for (size_t i = 0; i < lw->n && *r == CUDA_SUCCESS; i++) {
        const emu_nparams *p = &lw->nodes[i];
        if (!is_event_node(p)) continue;
        k++;
        if (!emu_event_live(p->event)) {
            emu_violation(call, "event node (launch position %zu): event %p was destroyed", i, (void *)p->event);
            *r = CUDA_ERROR_INVALID_HANDLE;
        } else if (p->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD && emu_event_ctx(p->event) != emu_stream_ctx(s)) {
            emu_log("%s: event record node of event %p, of another context than the launch stream's: "
                    "not emulated", call, (void *)p->event);
            *r = CUDA_ERROR_NOT_SUPPORTED;
        } else if (p->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT && emu_capture_event_busy(p->event)) {
            *r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        for (size_t j = 0; j < i && *r == CUDA_SUCCESS; j++)
            if (is_event_node(&lw->nodes[j]) && lw->nodes[j].event == p->event) {
                emu_log("%s: event %p in two event nodes of one launch: not emulated", call, (void *)p->event);
                *r = CUDA_ERROR_NOT_SUPPORTED;
            }
    }
    return k;
}

/* A new segment of lw's launch: nodes v[0..n) (moved in), lw's ranges. */
static launch_work *segment_new(const launch_work *lw, emu_nparams *v, size_t n)
{
    launch_work *sg = (launch_work *)emu_work_new(sizeof *sg, lw->w.what, launch_run);
    sg->w.complete = launch_complete;
    sg->w.release = launch_release;
    sg->nodes = emu_xcalloc(n ? n : 1, sizeof *sg->nodes);
    memcpy(sg->nodes, v, n * sizeof *v);
    sg->n = n;
    if (lw->w.nranges) {
        sg->w.ranges = emu_xcalloc(lw->w.nranges, sizeof *sg->w.ranges);
        memcpy(sg->w.ranges, lw->w.ranges, lw->w.nranges * sizeof *sg->w.ranges);
        sg->w.nranges = sg->w.cap_ranges = lw->w.nranges;
    }
    return sg;
}

/* Queues a launch whose snapshot holds k event nodes as one chain: the
 * nodes before the first event node (lw itself, which waits for the
 * previous launch), what cuEventRecord (a record node) or cuStreamWaitEvent
 * (a wait node: for the event's most recent record now) would queue, the
 * nodes up to the next event node, ..., the last segment, which finishes the
 * launch's token. Every segment keeps the launch's ranges in flight. */
static CUresult launch_chain(launch_work *lw, emu_stream *s, size_t k)
{
    emu_nparams *all = lw->nodes;
    size_t total = lw->n, nw = 0, start = 0;
    emu_work **w = emu_xcalloc(2 * k + 1, sizeof *w);
    for (size_t i = 0; i <= total; i++) {
        if (i < total && !is_event_node(&all[i])) continue;
        if (!nw) {                  /* the first segment: lw, with the nodes before i */
            lw->nodes = emu_xcalloc(i ? i : 1, sizeof *lw->nodes);
            memcpy(lw->nodes, all, i * sizeof *all);
            lw->n = i;
            w[nw++] = &lw->w;
        } else {
            w[nw++] = &segment_new(lw, all + start, i - start)->w;
        }
        if (i == total) break;
        emu_work *ev = all[i].type == CU_GRAPH_NODE_TYPE_EVENT_RECORD
                           ? emu_event_mark_work(all[i].event, lw->w.what)
                           : emu_event_wait_work(all[i].event, s, lw->w.what);
        if (ev) w[nw++] = ev;
        emu_nparams_free(&all[i]);
        start = i + 1;
    }
    launch_work *last = (launch_work *)w[nw - 1];   /* a segment: the loop ends with one */
    last->self = lw->self;          /* the launch is done when its last segment is */
    if (last != lw) {
        lw->self = NULL;
        emu_urefs_move(&last->urefs, &lw->urefs);
    }
    free(all);
    CUresult r = emu_event_enqueue_chain(s, w, nw);
    free(w);
    return r;
}

/* Queues one work that runs the exec's nodes (none for an upload) with a
 * snapshot of their parameters, behind the exec's previous launch (a chain
 * of works if it has event nodes: launch_chain). */
static CUresult exec_launch(CUgraphExec e, CUstream h, int per_thread, int run_nodes, const char *call)
{
    if (!emu_exec_ok(e)) return CUDA_ERROR_INVALID_VALUE;
    emu_stream *s;
    CUresult r = emu_stream_get(h, per_thread, &s);
    if (r != CUDA_SUCCESS) return r;
    if (emu_capture_refuse(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    /* Before the launch takes its token and its graph allocations: a launch
     * refused on the legacy stream changes nothing. */
    if ((r = emu_stream_legacy_check(s)) != CUDA_SUCCESS) return r;
    launch_work *lw = (launch_work *)emu_work_new(sizeof *lw, call, launch_run);
    launch_token *tok = calloc(1, sizeof *tok);
    size_t n = run_nodes ? emu_exec_count(e) : 0;
    emu_nparams *snap = calloc(n ? n : 1, sizeof *snap);
    if (!lw || !tok || !snap) { free(lw); free(tok); free(snap); return CUDA_ERROR_OUT_OF_MEMORY; }
    lw->w.complete = launch_complete;
    lw->w.release = launch_release;
    lw->nodes = snap;
    pthread_mutex_lock(&e->lock);
    if (n) r = launch_snap(e, lw->nodes, &lw->n, &lw->w, call);
    if (r == CUDA_SUCCESS && !emu_cond_collect(lw->nodes, lw->n, &lw->conds, &lw->nconds, &lw->cap_conds))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&e->lock);    /* launch_events may take the capture lock, which comes first */
    size_t nev = r == CUDA_SUCCESS ? launch_events(lw, s, call, &r) : 0;
    pthread_mutex_lock(&e->lock);
    /* The exec's own device memory (CUDAEMU_EXEC_BYTES), taken by its first
     * launch or upload; a launch beyond what is left fails with
     * CUDA_ERROR_OUT_OF_MEMORY and changes nothing. */
    int took = 0;
    if (r == CUDA_SUCCESS && !e->charge && emu_cfg.exec_bytes) {
        if (!emu_charge_take(emu_stream_ctx(s)->device, emu_cfg.exec_bytes)) r = CUDA_ERROR_OUT_OF_MEMORY;
        else took = 1;
    }
    if (r == CUDA_SUCCESS && e->has_mem) r = launch_memory(e, snap, lw->n, call);
    if (took && r != CUDA_SUCCESS) emu_charge_give(emu_stream_ctx(s)->device, emu_cfg.exec_bytes);
    if (took && r == CUDA_SUCCESS) {
        e->charge = emu_cfg.exec_bytes;
        e->charge_dev = emu_stream_ctx(s)->device;
    }
    if (r != CUDA_SUCCESS) {
        pthread_mutex_unlock(&e->lock);
        lw->self = tok;
        tok->refs = 1;
        free(lw->w.ranges);         /* never enqueued: the ranges are still ours */
        launch_release(&lw->w);
        return r;
    }
    launch_refs(e, &lw->urefs);
    tok->refs = 2;                  /* the exec's `last` and the work */
    lw->self = tok;
    lw->prev = e->last;             /* the exec's reference moves to the work */
    e->last = tok;
    pthread_mutex_unlock(&e->lock);
    r = nev ? launch_chain(lw, s, nev) : emu_stream_enqueue(s, &lw->w);
    if (r == CUDA_SUCCESS) emu_stat_nodes(n, 0);
    return r;
}

/* -------------------------------------------------------- instantiate API */

EMU_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    EMU_ENTRY_INIT();
    CUgraphNode err;
    CUgraphInstantiateResult res;
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) return CUDA_ERROR_INVALID_VALUE;  /* WithParams only */
    return exec_create(hGraph, flags, phGraphExec, &err, &res);
}

static CUresult instantiate_params(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p, int per_thread)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    CUgraphExec e = NULL;
    CUresult r = exec_create(g, p->flags, &e, &p->hErrNode_out, &p->result_out);
    if (r == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)) {
        r = exec_launch(e, p->hUploadStream, per_thread, 0, "cuGraphInstantiateWithParams");
        if (r != CUDA_SUCCESS) {
            emu_handle_del(e);
            exec_free(e);
            p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
            p->hErrNode_out = NULL;
            return r;
        }
    }
    if (r == CUDA_SUCCESS) *out = e;
    return r;
}

EMU_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    EMU_ENTRY_INIT();
    return instantiate_params(phGraphExec, hGraph, instantiateParams, 0);
}

EMU_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    EMU_ENTRY_INIT();
    return instantiate_params(phGraphExec, hGraph, instantiateParams, 1);
}

static CUresult instantiate_legacy(CUgraphExec *out, CUgraph g, CUgraphNode *err_out, char *log, size_t size)
{
    CUgraphNode err;
    CUgraphInstantiateResult res;
    CUresult r = exec_create(g, 0, out, &err, &res);
    if (err_out) *err_out = err;
    instantiate_log(log, size, r, res);
    return r;
}

EMU_EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize)
{
    EMU_ENTRY_INIT();
    return instantiate_legacy(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

EMU_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                          char *logBuffer, size_t bufferSize)
{
    EMU_ENTRY_INIT();
    return instantiate_legacy(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

EMU_EXPORT CUresult cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags)
{
    EMU_ENTRY_INIT();
    if (!flags || !emu_exec_ok(hGraphExec)) return CUDA_ERROR_INVALID_VALUE;
    *flags = hGraphExec->flags & ~(cuuint64_t)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    EMU_ENTRY_INIT();
    if (!emu_exec_ok(hGraphExec)) return CUDA_ERROR_INVALID_VALUE;
    emu_handle_del(hGraphExec);
    exec_free(hGraphExec);          /* queued launches run from their own snapshots */
    emu_destroy_delay();
    return CUDA_SUCCESS;
}

static void exec_ctx_end(void *h) { exec_free(h); }   /* its launches ran: the streams are gone */

void emu_graph_ctx_destroyed(CUcontext ctx)
{
    emu_handles_end_ctx(ctx, EMU_K_EXEC, exec_ctx_end);
}

EMU_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return exec_launch(hGraphExec, hStream, 0, 1, __func__);
}

EMU_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return exec_launch(hGraphExec, hStream, 1, 1, __func__);
}

EMU_EXPORT CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return exec_launch(hGraphExec, hStream, 0, 0, __func__);
}

EMU_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return exec_launch(hGraphExec, hStream, 1, 0, __func__);
}
