/*
 * emu_capture.c: stream capture in the emulated CUDA driver: begin (every
 * ELF variant), end, status queries, cuStreamUpdateCaptureDependencies, the
 * per-thread capture interaction mode, the unsafe-call rules
 * (emu_capture_check_unsafe, emu_capture_check_ctx), recording stream work as
 * nodes (emu_capture_add; cuMemAllocAsync / cuMemFreeAsync make memory
 * nodes) and cross-stream fork/join through events (emu_capture_event_record
 * / emu_capture_event_wait); emu_capture_invalidate and
 * emu_capture_event_forget for the stream files.
 *
 * External event records and waits (CU_EVENT_RECORD_EXTERNAL,
 * CU_EVENT_WAIT_EXTERNAL) add event record / wait nodes (emu_capture_add).
 *
 * Emulation limits: capturing cuGraphLaunch/cuGraphUpload (a child graph in
 * CUDA) invalidates the capture with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; a
 * capturing stream that waits (without CU_EVENT_WAIT_EXTERNAL) on an event
 * not recorded in a capture in progress gets
 * CUDA_ERROR_STREAM_CAPTURE_ISOLATION and its capture is invalidated.
 *
 * Locks: emu_cap_lock guards the capture registry (captures, the list of
 * captures in progress), every struct emu_capture and its per-stream
 * dependency sets, the `cap` field of every event, and the graph changes
 * made by capture (nodes added by emu_capture_add). It is taken before any
 * stream-internal lock (emu_stream_set_capture) and never held while waiting
 * on a stream. The calling thread's capture mode and thread id are
 * thread-local.
 */
#include "emu_graph.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================== capture */

typedef struct cap_stream {
    emu_stream *s;
    CUgraphNode *deps;              /* the next node on s depends on these */
    CUgraphEdgeData *edata;         /* parallel to deps */
    size_t n, cap, cap_e;
} cap_stream;

struct emu_capture {
    uint64_t id;
    CUstreamCaptureMode mode;
    uint64_t thread;                /* thread id (thread-local counter) that began it */
    CUgraph graph;
    int own_graph;                  /* 0 for cuStreamBeginCaptureToGraph */
    int invalidated;
    emu_stream *origin;
    cap_stream *streams;            /* origin first, then streams that joined */
    size_t nstreams, cap_streams;
    struct emu_capture *next;
};

struct emu_capture_event {
    uint64_t capture_id;            /* the capture it was recorded in */
    size_t n;
    CUgraphNode deps[];             /* the recording stream's dependency set */
};

/* Recursive: a capture's end may free its graph (cap_terminate), whose
 * conditional bodies may be captured into (emu_capture_graph_gone). */
pthread_mutex_t emu_cap_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static struct emu_capture *captures;     /* in progress */
static atomic_int ncaptures;             /* fast path for emu_capture_check_unsafe */
static uint64_t capture_ids;             /* emu_cap_lock */

static __thread CUstreamCaptureMode tls_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static __thread uint64_t tls_thread_id;
static atomic_ulong thread_ids;

static uint64_t self_thread(void)
{
    if (!tls_thread_id) tls_thread_id = atomic_fetch_add(&thread_ids, 1) + 1;
    return tls_thread_id;
}

static struct emu_capture *capture_by_id(uint64_t id)
{
    for (struct emu_capture *c = captures; c; c = c->next)
        if (c->id == id) return c;
    return NULL;
}

static cap_stream *cap_find(struct emu_capture *c, emu_stream *s)
{
    for (size_t i = 0; i < c->nstreams; i++)
        if (c->streams[i].s == s) return &c->streams[i];
    return NULL;
}

/* Replaces (add == 0) or extends (add == 1, skipping duplicates) cs's
 * dependency set. Returns 0 on allocation failure. */
static int cs_set_deps(cap_stream *cs, const CUgraphNode *deps, const CUgraphEdgeData *edata,
                       size_t n, int add)
{
    size_t base = add ? cs->n : 0;
    if (!EMU_GROW(cs->deps, cs->cap, base + n) ||
        !EMU_GROW(cs->edata, cs->cap_e, base + n))
        return 0;
    size_t k = base;
    for (size_t i = 0; i < n; i++) {
        int dup = 0;
        for (size_t j = 0; j < k; j++) dup |= cs->deps[j] == deps[i];
        if (dup) continue;
        cs->deps[k] = deps[i];
        if (edata) cs->edata[k] = edata[i];
        else memset(&cs->edata[k], 0, sizeof cs->edata[k]);
        k++;
    }
    cs->n = k;
    return 1;
}

/* Makes s take part in c with the given dependency set. */
static cap_stream *cap_join(struct emu_capture *c, emu_stream *s, const CUgraphNode *deps,
                            const CUgraphEdgeData *edata, size_t n)
{
    if (!EMU_GROW(c->streams, c->cap_streams, c->nstreams + 1)) return NULL;
    cap_stream *cs = &c->streams[c->nstreams];
    memset(cs, 0, sizeof *cs);
    cs->s = s;
    if (!cs_set_deps(cs, deps, edata, n, 0)) { free(cs->deps); free(cs->edata); return NULL; }
    c->nstreams++;
    emu_stream_set_capture(s, c);
    return cs;
}

/* Ends c: every stream leaves capture, c leaves the registry and is freed;
 * the graph is destroyed when destroy_graph and c owns it. emu_cap_lock held. */
static void cap_terminate(struct emu_capture *c, int destroy_graph)
{
    for (struct emu_capture **pp = &captures; *pp; pp = &(*pp)->next)
        if (*pp == c) { *pp = c->next; break; }
    atomic_fetch_sub(&ncaptures, 1);
    for (size_t i = 0; i < c->nstreams; i++) {
        emu_stream_set_capture(c->streams[i].s, NULL);
        free(c->streams[i].deps);
        free(c->streams[i].edata);
    }
    free(c->streams);
    if (c->graph) c->graph->capture = NULL;            /* NULL: the graph went (emu_capture_graph_gone) */
    if (destroy_graph && c->own_graph && c->graph) emu_graph_free(c->graph);
    free(c);
}

/* 1 if every stream that joined c is joined back into the origin: all its
 * pending nodes are ancestors of (or are) the origin's pending nodes. */
static int cap_joined(struct emu_capture *c)
{
    CUgraph g = c->graph;
    if (c->nstreams <= 1) return 1;
    unsigned char *seen = calloc(g->n ? g->n : 1, 1);
    CUgraphNode *stack = malloc((g->n ? g->n : 1) * sizeof *stack);
    if (!seen || !stack) { free(seen); free(stack); return 1; }
    size_t top = 0;
    const cap_stream *o = &c->streams[0];
    for (size_t i = 0; i < o->n; i++)
        if (!seen[o->deps[i]->index]) { seen[o->deps[i]->index] = 1; stack[top++] = o->deps[i]; }
    while (top) {
        CUgraphNode nd = stack[--top];
        for (size_t i = 0; i < nd->ndeps; i++)
            if (!seen[nd->deps[i]->index]) { seen[nd->deps[i]->index] = 1; stack[top++] = nd->deps[i]; }
    }
    int ok = 1;
    for (size_t k = 1; k < c->nstreams && ok; k++)
        for (size_t i = 0; i < c->streams[k].n; i++)
            if (!seen[c->streams[k].deps[i]->index]) { ok = 0; break; }
    free(seen);
    free(stack);
    return ok;
}

/* The documented modes (cuThreadExchangeStreamCaptureMode): a capture
 * offends if it was begun on this thread and not RELAXED, or if it is GLOBAL
 * on another thread and this thread's mode is GLOBAL. A THREAD_LOCAL caller
 * ignores other threads' captures; a RELAXED caller is never refused. Every
 * offending capture is invalidated. */
CUresult emu_capture_check_unsafe(const char *call)
{
    if (atomic_load(&ncaptures) == 0) return CUDA_SUCCESS;
    CUstreamCaptureMode mode = tls_mode;
    if (mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
    uint64_t self = self_thread();
    int bad = 0;
    pthread_mutex_lock(&emu_cap_lock);
    for (struct emu_capture *c = captures; c; c = c->next) {
        int offends = c->thread == self ? c->mode != CU_STREAM_CAPTURE_MODE_RELAXED
                                        : mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                                          c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
        if (!offends) continue;
        if (!c->invalidated && emu_cfg.verbose)
            emu_log("%s during stream capture %llu invalidates it", call, (unsigned long long)c->id);
        c->invalidated = 1;
        bad = 1;
    }
    pthread_mutex_unlock(&emu_cap_lock);
    return bad ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* CUDA Programming Guide, "Prohibited and Unhandled Operations" and
 * "Invalidation" (docs.nvidia.com/cuda/cuda-c-programming-guide, stream
 * capture): "It is also invalid to query the execution status of or
 * synchronize a broader handle which encompasses an active stream capture,
 * such as a device or context handle"; "When any stream in the same context
 * is being captured, and it was not created with cudaStreamNonBlocking, any
 * attempted use of the legacy stream is invalid"; "When an invalid operation
 * is attempted during stream capture, any associated capture graphs are
 * invalidated." */
CUresult emu_capture_check_ctx(CUcontext ctx, int blocking_only, CUresult err)
{
    if (atomic_load(&ncaptures) == 0) return CUDA_SUCCESS;
    int bad = 0;
    pthread_mutex_lock(&emu_cap_lock);
    for (struct emu_capture *c = captures; c; c = c->next) {
        for (size_t i = 0; i < c->nstreams; i++) {
            emu_stream *s = c->streams[i].s;
            if (emu_stream_ctx(s) != ctx || (blocking_only && !emu_stream_blocking(s))) continue;
            c->invalidated = 1;
            bad = 1;
            break;
        }
    }
    pthread_mutex_unlock(&emu_cap_lock);
    return bad ? err : CUDA_SUCCESS;
}

/* Whether a blocking stream of ctx (one not created with
 * CU_STREAM_NON_BLOCKING, or a per-thread default stream) takes part in a
 * capture in progress (emu_cap_lock held). Invalidates nothing. */
static int blocking_capture_locked(CUcontext ctx)
{
    for (struct emu_capture *c = captures; c; c = c->next)
        for (size_t i = 0; i < c->nstreams; i++) {
            emu_stream *s = c->streams[i].s;
            if (emu_stream_ctx(s) == ctx && emu_stream_blocking(s)) return 1;
        }
    return 0;
}

/* Same source: "It is invalid to synchronize or query the execution status
 * of ... a captured event". */
int emu_capture_event_busy(CUevent ev)
{
    if (atomic_load(&ncaptures) == 0) return 0;
    pthread_mutex_lock(&emu_cap_lock);
    struct emu_capture *c = ev->cap ? capture_by_id(ev->cap->capture_id) : NULL;
    if (c) c->invalidated = 1;
    pthread_mutex_unlock(&emu_cap_lock);
    return c != NULL;
}

/* A batch of n copies on cs (emu_cap_lock held): n memcpy nodes on cs's
 * last nodes, which they replace together; all parameters are checked
 * before the first node is added. */
static CUresult capture_add_batch(struct emu_capture *c, cap_stream *cs, const CUDA_MEMCPY3D *copies,
                                  size_t n, CUcontext ctx)
{
    CUresult r = CUDA_SUCCESS;
    if (!n) return CUDA_SUCCESS;
    emu_nparams *np = calloc(n, sizeof *np);
    CUgraphNode *nd = calloc(n, sizeof *nd);
    size_t made = 0, added = 0;
    if (!np || !nd) r = CUDA_ERROR_OUT_OF_MEMORY;
    for (; r == CUDA_SUCCESS && made < n; made++)
        if ((r = emu_nparams_memcpy(&np[made], &copies[made], ctx)) != CUDA_SUCCESS) break;
    for (; r == CUDA_SUCCESS && added < n; added++)
        if ((r = emu_graph_node_add(c->graph, cs->deps, cs->edata, cs->n, &np[added], &nd[added])) != CUDA_SUCCESS)
            break;
    if (r == CUDA_SUCCESS && !cs_set_deps(cs, nd, NULL, n, 0)) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS && added) c->invalidated = 1;   /* part of the batch is in the graph */
    for (size_t i = added; i < made; i++) emu_nparams_free(&np[i]);
    free(np);
    free(nd);
    return r;
}

CUresult emu_capture_add(emu_stream *s, const emu_capture_op *op)
{
    emu_nparams np;
    CUresult r;
    pthread_mutex_lock(&emu_cap_lock);
    struct emu_capture *c = emu_stream_capture(s);
    cap_stream *cs = c ? cap_find(c, s) : NULL;
    if (!cs) { r = CUDA_ERROR_ILLEGAL_STATE; goto out; }
    if (c->invalidated) { r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; goto out; }
    CUcontext ctx = emu_stream_ctx(s);
    /* A capture into a conditional body (or a child graph's embedded graph):
     * "Allowed node types are kernel nodes, empty nodes, child graphs,
     * memsets, memcopies, and conditionals"; graph memory nodes are refused
     * when added explicitly (emu_graph_node_add). Captured, the operation is
     * an invalid one during capture: refused, and the capture invalidated
     * ("When an invalid operation is attempted during stream capture, any
     * associated capture graphs are invalidated"); the code is the
     * emulator's choice (not documented). Nothing is allocated. */
    if (c->graph->owner && (op->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || op->type == CU_GRAPH_NODE_TYPE_MEM_FREE)) {
        c->invalidated = 1;
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        goto out;
    }
    if (op->type == CU_GRAPH_NODE_TYPE_MEMCPY && !op->copy) {
        r = capture_add_batch(c, cs, op->copies, op->ncopies, ctx);
        goto out;
    }
    switch (op->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_KERNEL;
        np.launch = op->launch;
        np.ctx = emu_nparams_func_ctx(op->args->func, ctx);
        emu_stream_node_attrs(s, np.attr);       /* the stream's, as the driver does, */
        emu_launch_attrs_apply(np.attr, op->attrs, op->nattrs);   /* then the launch's */
        r = (np.args = emu_args_clone(op->args)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        break;
    case CU_GRAPH_NODE_TYPE_MEMCPY: r = emu_nparams_memcpy(&np, op->copy, ctx); break;
    case CU_GRAPH_NODE_TYPE_MEMSET: r = emu_nparams_memset(&np, op->set, ctx); break;
    case CU_GRAPH_NODE_TYPE_HOST:   r = emu_nparams_host(&np, op->host); break;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
        /* The pool's properties (pinned memory of its device, its access
         * from other devices); the memory is the graph's, not the pool's. */
        CUmemAccessDesc acc[8];
        CUDA_MEM_ALLOC_NODE_PARAMS a = { .poolProps = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                        .location = { CU_MEM_LOCATION_TYPE_DEVICE, op->mem_dev } },
                                         .bytesize = op->mem_bytes, .accessDescs = acc };
        a.accessDescCount = op->mem_pool ? emu_pool_access_descs(op->mem_pool, acc, 8) : 0;
        CUdeviceptr p = 0;
        if (!op->mem_out) r = CUDA_ERROR_INVALID_VALUE;
        else if ((r = emu_nparams_memalloc(&np, &a, c->graph->uid, &p)) == CUDA_SUCCESS) *op->mem_out = p;
        break;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        /* Not a graph allocation (or already freed by a graph): an invalid
         * operation during capture, which invalidates it. */
        if ((r = emu_nparams_memfree(&np, op->mem_ptr)) != CUDA_SUCCESS) c->invalidated = 1;
        break;
    /* External event record / wait (emu_event.c): "Event is captured in the
     * graph as an external event node when performing stream capture." */
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: r = emu_nparams_event(&np, op->type, op->event); break;
    /* Stream memory operations (emu_copy.c): one batch memory operation node. */
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: r = emu_nparams_memops(&np, op->memops, op->nmemops, 0, ctx); break;
    /* External semaphore signals and waits (emu_ext.c): one node each call. */
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
        r = emu_nparams_extsem(&np, op->type, op->sems, op->sem_params, op->nsems);
        break;
    default:                        r = CUDA_ERROR_NOT_SUPPORTED; break;
    }
    if (r != CUDA_SUCCESS) goto out;
    /* A programmatic launch (emu_launch_programmatic): its edges from kernel
     * nodes are programmatic ones (CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,
     * CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC), the others full ones. */
    const CUgraphEdgeData *edata = cs->edata;
    CUgraphEdgeData *pdata = NULL;
    if (op->type == CU_GRAPH_NODE_TYPE_KERNEL && emu_launch_programmatic(op->attrs, op->nattrs) && cs->n) {
        if (!(pdata = malloc(cs->n * sizeof *pdata))) {
            emu_nparams_free(&np);
            r = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        for (size_t i = 0; i < cs->n; i++) {
            pdata[i] = cs->edata[i];
            if (cs->deps[i]->p.type == CU_GRAPH_NODE_TYPE_KERNEL) {
                pdata[i].from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
                pdata[i].type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
            }
        }
        edata = pdata;
    }
    CUgraphNode nd;
    r = emu_graph_node_add(c->graph, cs->deps, edata, cs->n, &np, &nd);
    free(pdata);
    if (r != CUDA_SUCCESS) {
        emu_nparams_free(&np);
        goto out;
    }
    cs_set_deps(cs, &nd, NULL, 1, 0);  /* room for one always exists after node_add's deps */
out:
    pthread_mutex_unlock(&emu_cap_lock);
    return r;
}

CUresult emu_capture_event_record(emu_stream *s, CUevent ev)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&emu_cap_lock);
    struct emu_capture *c = emu_stream_capture(s);
    cap_stream *cs = c ? cap_find(c, s) : NULL;
    if (!cs) r = CUDA_ERROR_ILLEGAL_STATE;
    else if (c->invalidated) r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else {
        struct emu_capture_event *ce = malloc(sizeof *ce + cs->n * sizeof ce->deps[0]);
        if (!ce) r = CUDA_ERROR_OUT_OF_MEMORY;
        else {
            ce->capture_id = c->id;
            ce->n = cs->n;
            if (cs->n) memcpy(ce->deps, cs->deps, cs->n * sizeof ce->deps[0]);
            free(ev->cap);
            ev->cap = ce;
        }
    }
    pthread_mutex_unlock(&emu_cap_lock);
    return r;
}

void emu_capture_event_forget(CUevent ev)
{
    pthread_mutex_lock(&emu_cap_lock);
    free(ev->cap);
    ev->cap = NULL;
    pthread_mutex_unlock(&emu_cap_lock);
}

int emu_capture_event_wait(emu_stream *s, CUevent ev, CUresult *res)
{
    pthread_mutex_lock(&emu_cap_lock);
    struct emu_capture *mine = emu_stream_capture(s);
    struct emu_capture *theirs = ev->cap ? capture_by_id(ev->cap->capture_id) : NULL;
    int handled = 1;
    CUresult r = CUDA_SUCCESS;
    if (!theirs) {
        /* An event from outside any capture in progress. */
        if (!mine) handled = 0;
        else { mine->invalidated = 1; r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION; }
    } else if (mine && mine != theirs) {
        mine->invalidated = theirs->invalidated = 1;
        r = CUDA_ERROR_STREAM_CAPTURE_MERGE;
    } else if (theirs->invalidated) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (mine) {
        cap_stream *cs = cap_find(mine, s);
        if (!cs_set_deps(cs, ev->cap->deps, NULL, ev->cap->n, 1)) r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (!cap_join(theirs, s, ev->cap->deps, NULL, ev->cap->n)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&emu_cap_lock);
    if (handled && res) *res = r;
    return handled;
}

static int mode_ok(CUstreamCaptureMode m)
{
    return m == CU_STREAM_CAPTURE_MODE_GLOBAL || m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ||
           m == CU_STREAM_CAPTURE_MODE_RELAXED;
}

/* Resolves a stream argument for capture calls; the legacy stream cannot
 * capture. */
static CUresult capture_stream(CUstream h, int per_thread, emu_stream **out)
{
    CUresult r = emu_stream_get(h, per_thread, out);
    if (r != CUDA_SUCCESS) return r;
    CUcontext ctx = emu_stream_ctx(*out);
    if (ctx && ctx->legacy == *out) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return CUDA_SUCCESS;
}

/* Begins capture on h into g (a new graph when g is NULL). */
static CUresult capture_begin(CUstream h, int per_thread, CUstreamCaptureMode mode, CUgraph g,
                              const CUgraphNode *deps, const CUgraphEdgeData *edata, size_t n)
{
    if (!mode_ok(mode)) return CUDA_ERROR_INVALID_VALUE;
    emu_stream *s;
    CUresult r = capture_stream(h, per_thread, &s);
    if (r != CUDA_SUCCESS) return r;
    if (g) {
        if (!emu_graph_ok(g)) return CUDA_ERROR_INVALID_VALUE;
        if ((r = emu_graph_deps_check(g, deps, edata, n)) != CUDA_SUCCESS) return r;
    }
    struct emu_capture *c = calloc(1, sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&emu_cap_lock);
    if (emu_stream_capture(s)) { r = CUDA_ERROR_ILLEGAL_STATE; goto fail; }
    if (g && g->capture) { r = CUDA_ERROR_INVALID_VALUE; goto fail; }
    c->own_graph = !g;
    if (!g && !(g = emu_graph_new())) { r = CUDA_ERROR_OUT_OF_MEMORY; goto fail; }
    c->graph = g;
    c->mode = mode;
    c->thread = self_thread();
    c->origin = s;
    if (!cap_join(c, s, deps, edata, n)) {
        if (c->own_graph) emu_graph_free(g);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    c->id = ++capture_ids;
    g->capture = c;
    c->next = captures;
    captures = c;
    atomic_fetch_add(&ncaptures, 1);
    pthread_mutex_unlock(&emu_cap_lock);
    return CUDA_SUCCESS;
fail:
    pthread_mutex_unlock(&emu_cap_lock);
    free(c);
    return r;
}

/* phGraph may be NULL for a capture into an existing graph (the program
 * has the graph): the CUDA samples' capturedWhileGraph ends the capture of
 * a conditional body with cudaStreamEndCapture(bodyStream, nullptr) and
 * checks for success. A capture into a graph of its own needs it. */
static CUresult capture_end(CUstream h, int per_thread, CUgraph *phGraph)
{
    CUgraph dummy;
    CUgraph *out = phGraph ? phGraph : &dummy;
    emu_stream *s;
    CUresult r = capture_stream(h, per_thread, &s);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&emu_cap_lock);
    struct emu_capture *c = emu_stream_capture(s);
    if (c && !phGraph && c->own_graph) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (!c) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else if (c->origin != s) {
        c->invalidated = 1;
        r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    } else if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && c->thread != self_thread()) {
        r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    } else if (c->invalidated) {
        *out = NULL;
        cap_terminate(c, 1);
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (!cap_joined(c)) {
        *out = NULL;
        cap_terminate(c, 1);
        r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    } else {
        *out = c->graph;
        cap_terminate(c, 0);
    }
    pthread_mutex_unlock(&emu_cap_lock);
    return r;
}

/* Status, id, graph and dependency set of the capture on h. */
static CUresult capture_info(CUstream h, int per_thread, CUstreamCaptureStatus *status,
                             cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edata, size_t *n)
{
    if (!status || (edata && !deps)) return CUDA_ERROR_INVALID_VALUE;
    emu_stream *s;
    CUresult r = emu_stream_get(h, per_thread, &s);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&emu_cap_lock);
    /* cuStreamIsCapturing: "if this is called on CU_STREAM_LEGACY (the "null
     * stream") while a blocking stream in the same context is capturing, it
     * will return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and *captureStatus is
     * unspecified after the call. The blocking stream capture is not
     * invalidated." cuStreamGetCaptureInfo: the same. */
    CUcontext ctx = emu_stream_ctx(s);
    if (ctx && ctx->legacy == s && blocking_capture_locked(ctx)) {
        pthread_mutex_unlock(&emu_cap_lock);
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    struct emu_capture *c = emu_stream_capture(s);
    cap_stream *cs = c ? cap_find(c, s) : NULL;
    if (!cs) {
        *status = CU_STREAM_CAPTURE_STATUS_NONE;
    } else if (c->invalidated) {
        *status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        if (id) *id = c->id;
    } else {
        *status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (id) *id = c->id;
        if (graph) *graph = c->graph;
        if (deps) *deps = cs->deps;
        if (edata) *edata = cs->edata;
        if (n) *n = cs->n;
        if (deps && !edata)
            for (size_t i = 0; i < cs->n; i++)
                if (!emu_edge_data_is_default(&cs->edata[i])) r = CUDA_ERROR_LOSSY_QUERY;
    }
    pthread_mutex_unlock(&emu_cap_lock);
    return r;
}

/* Graph g is being freed (emu_graph_free): a capture still in progress
 * into it (a conditional body or child graph freed with its parent: the
 * parent's own capture ended invalidated, which frees it, or the parent was
 * destroyed) can add nothing any more. The documentation does not say what
 * a driver does then: loud (a violation), the capture invalidated and
 * detached from the graph; its end reports it invalidated. */
void emu_capture_graph_gone(CUgraph g)
{
    pthread_mutex_lock(&emu_cap_lock);
    struct emu_capture *c = g->capture;
    if (c) {
        emu_violation("emu_graph_free", "graph %p goes while stream capture %llu is in progress into it",
                      (void *)g, (unsigned long long)c->id);
        c->invalidated = 1;
        c->graph = NULL;
        g->capture = NULL;
    }
    pthread_mutex_unlock(&emu_cap_lock);
}

/* 1 if a capture is in progress into g or into a graph embedded in it
 * (a conditional body or child graph, at any depth). emu_cap_lock held. */
static int capturing_within_locked(CUgraph g)
{
    if (g->capture) return 1;
    for (size_t i = 0; i < g->n; i++) {
        const emu_nparams *p = &g->nodes[i]->p;
        if (p->child && capturing_within_locked(p->child)) return 1;
        for (unsigned b = 0; p->cond_body && b < p->cond_size; b++)
            if (capturing_within_locked(p->cond_body[b])) return 1;
    }
    return 0;
}

int emu_capture_within(CUgraph g)
{
    pthread_mutex_lock(&emu_cap_lock);
    int r = capturing_within_locked(g);
    pthread_mutex_unlock(&emu_cap_lock);
    return r;
}

void emu_capture_invalidate(emu_stream *s)
{
    pthread_mutex_lock(&emu_cap_lock);
    struct emu_capture *c = emu_stream_capture(s);
    if (c) c->invalidated = 1;
    pthread_mutex_unlock(&emu_cap_lock);
}

void emu_capture_stream_gone(emu_stream *s)
{
    pthread_mutex_lock(&emu_cap_lock);
    struct emu_capture *c = emu_stream_capture(s);
    cap_stream *cs = c ? cap_find(c, s) : NULL;
    if (cs && c->origin == s) {
        cap_terminate(c, 1);            /* nobody can end it any more */
    } else if (cs) {
        c->invalidated = 1;
        free(cs->deps);
        free(cs->edata);
        *cs = c->streams[--c->nstreams];
        emu_stream_set_capture(s, NULL);
    }
    pthread_mutex_unlock(&emu_cap_lock);
}

/* cuStreamUpdateCaptureDependencies: adds to or replaces the dependency set
 * of the capturing stream h. */
static CUresult capture_update_deps(CUstream h, int per_thread, CUgraphNode *deps,
                                    const CUgraphEdgeData *edata, size_t n, unsigned flags)
{
    if (flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES || (n && !deps)) return CUDA_ERROR_INVALID_VALUE;
    emu_stream *s;
    CUresult r = emu_stream_get(h, per_thread, &s);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&emu_cap_lock);
    struct emu_capture *c = emu_stream_capture(s);
    cap_stream *cs = c ? cap_find(c, s) : NULL;
    if (!cs) r = CUDA_ERROR_ILLEGAL_STATE;
    else if (c->invalidated) r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if ((r = emu_graph_deps_check(c->graph, deps, edata, n)) == CUDA_SUCCESS &&
             !cs_set_deps(cs, deps, edata, n, flags == CU_STREAM_ADD_CAPTURE_DEPENDENCIES))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&emu_cap_lock);
    return r;
}

/* Graph launch or upload on a capturing stream: not emulated. Returns 1 (and
 * invalidates the capture) if s is capturing. */
int emu_capture_refuse(emu_stream *s)
{
    if (!emu_stream_capture(s)) return 0;
    emu_capture_invalidate(s);
    return 1;
}

/* ----------------------------------------------------------- capture API */

EMU_EXPORT CUresult cuStreamBeginCapture(CUstream hStream)
{
    EMU_ENTRY_INIT();
    return capture_begin(hStream, 0, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, NULL, NULL, 0);
}

EMU_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    EMU_ENTRY_INIT();
    return capture_begin(hStream, 1, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, NULL, NULL, 0);
}

EMU_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    EMU_ENTRY_INIT();
    return capture_begin(hStream, 0, mode, NULL, NULL, NULL, 0);
}

EMU_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    EMU_ENTRY_INIT();
    return capture_begin(hStream, 1, mode, NULL, NULL, NULL, 0);
}

EMU_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
    const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,
    size_t numDependencies, CUstreamCaptureMode mode)
{
    EMU_ENTRY_INIT();
    if (!hGraph) return CUDA_ERROR_INVALID_VALUE;
    return capture_begin(hStream, 0, mode, hGraph, dependencies, dependencyData, numDependencies);
}

EMU_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
    const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,
    size_t numDependencies, CUstreamCaptureMode mode)
{
    EMU_ENTRY_INIT();
    if (!hGraph) return CUDA_ERROR_INVALID_VALUE;
    return capture_begin(hStream, 1, mode, hGraph, dependencies, dependencyData, numDependencies);
}

EMU_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    EMU_ENTRY_INIT();
    return capture_end(hStream, 0, phGraph);
}

EMU_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    EMU_ENTRY_INIT();
    return capture_end(hStream, 1, phGraph);
}

EMU_EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    EMU_ENTRY_INIT();
    return capture_info(hStream, 0, captureStatus, NULL, NULL, NULL, NULL, NULL);
}

EMU_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    EMU_ENTRY_INIT();
    return capture_info(hStream, 1, captureStatus, NULL, NULL, NULL, NULL, NULL);
}

EMU_EXPORT CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out)
{
    EMU_ENTRY_INIT();
    return capture_info(hStream, 0, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

EMU_EXPORT CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                cuuint64_t *id_out)
{
    EMU_ENTRY_INIT();
    return capture_info(hStream, 1, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

EMU_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
    size_t *numDependencies_out)
{
    EMU_ENTRY_INIT();
    return capture_info(hStream, 0, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                        numDependencies_out);
}

EMU_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
    size_t *numDependencies_out)
{
    EMU_ENTRY_INIT();
    return capture_info(hStream, 1, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                        numDependencies_out);
}

EMU_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
    const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    EMU_ENTRY_INIT();
    return capture_info(hStream, 0, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
}

EMU_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
    const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    EMU_ENTRY_INIT();
    return capture_info(hStream, 1, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
}

EMU_EXPORT CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                                      size_t numDependencies, unsigned int flags)
{
    EMU_ENTRY_INIT();
    return capture_update_deps(hStream, 0, dependencies, NULL, numDependencies, flags);
}

EMU_EXPORT CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                           size_t numDependencies, unsigned int flags)
{
    EMU_ENTRY_INIT();
    return capture_update_deps(hStream, 1, dependencies, NULL, numDependencies, flags);
}

EMU_EXPORT CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
    const CUgraphEdgeData *dependencyData, size_t numDependencies, unsigned int flags)
{
    EMU_ENTRY_INIT();
    return capture_update_deps(hStream, 0, dependencies, dependencyData, numDependencies, flags);
}

EMU_EXPORT CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream hStream, CUgraphNode *dependencies,
    const CUgraphEdgeData *dependencyData, size_t numDependencies, unsigned int flags)
{
    EMU_ENTRY_INIT();
    return capture_update_deps(hStream, 1, dependencies, dependencyData, numDependencies, flags);
}

EMU_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    EMU_ENTRY_INIT();
    if (!mode || !mode_ok(*mode)) return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = tls_mode;
    tls_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}
