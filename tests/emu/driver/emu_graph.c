/*
 * emu_graph.c: stream capture, graphs, nodes, graph execs, instantiate,
 * update and launch for the emulated CUDA driver.
 *
 * Responsible for:
 *   - stream capture: begin (every ELF variant), end, status queries, the
 *     per-thread capture interaction mode, the unsafe-call rules
 *     (emu_capture_check_unsafe), recording stream work as nodes
 *     (emu_capture_add) and cross-stream fork/join through events
 *     (emu_capture_event_record / emu_capture_event_wait);
 *   - graphs and their kernel, memcpy, memset, host, empty, memory
 *     allocation and memory free nodes (explicit, or captured from
 *     cuMemAllocAsync / cuMemFreeAsync), edges; a graph with memory nodes
 *     has one exec at a time and cannot be cloned; each launch allocates its
 *     allocation nodes' memory (emu_gmem_*, emu_mem.c) when it is queued and
 *     its free nodes release it when they run;
 *   - graph execs: instantiate (every variant), per-node set params, update
 *     (cuGraphExecUpdate_v2 and the legacy one), upload, launch, destroy;
 *   - kernel node attributes (cuGraphKernelNodeGetAttribute / SetAttribute):
 *     the ids CUDA documents as valid for graph nodes, stored per node with
 *     CUDA's defaults (all zero except memSyncDomainMap.remote = 1), carried
 *     by instantiate, cuGraphExecUpdate and clone like the rest of a node's
 *     state and kept by the set-params calls (graph and exec). They have no
 *     effect on how the emulation runs a kernel; other ids give
 *     CUDA_ERROR_INVALID_VALUE.
 *
 * Model:
 *   - A node keeps its own copy of its parameters (kernel arguments packed by
 *     emu_args_pack). Nodes are numbered in creation order; an exec pairs its
 *     nodes with the original graph's nodes by that number, and an exec node
 *     is named by the original graph's node handle, as in CUDA.
 *   - cuGraphLaunch queues ONE emu_work that runs the nodes in a topological
 *     order fixed at instantiation. The work carries a deep snapshot of the
 *     exec's parameters taken at launch, so later set-params or update calls
 *     never affect a launch already queued, and cuGraphExecDestroy can free
 *     the exec at once (in-flight launches only use their snapshots, which are
 *     freed when they complete). Launches of one exec are serialised across
 *     streams by a chain of launch tokens: each launch waits for the previous
 *     one to finish ("only one instance of hGraphExec may be executing").
 *   - The work records every device range its nodes can touch (kernel
 *     argument words, memcpy and memset operands).
 *
 * Emulation limits (documented deviations):
 *   - Capturing cuGraphLaunch/cuGraphUpload (a child graph in CUDA) is not
 *     supported: the capture is invalidated and the call returns
 *     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
 *   - Edge data is stored and reported but every edge is a full dependency.
 *   - CUkernel-based kernel nodes (func NULL, kern set) are rejected with
 *     CUDA_ERROR_INVALID_VALUE.
 *   - The owning context of a kernel function is taken from emu_func_ctx()
 *     when emu_stream.c provides it, else from the context current when the
 *     node was made (or the capturing stream's context).
 *   - A capturing stream that waits on an event not recorded in a capture in
 *     progress gets CUDA_ERROR_STREAM_CAPTURE_ISOLATION and its capture is
 *     invalidated (a CU_EVENT_WAIT_EXTERNAL wait during capture is refused
 *     by emu_stream.c with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: external
 *     event nodes are not emulated).
 *
 * emu_capture_invalidate and emu_capture_event_forget (emu_internal.h) are
 * defined here for emu_stream.c.
 *
 * Locks:
 *   - cap_lock guards the capture registry (captures, the list of captures in
 *     progress), every struct emu_capture and its per-stream dependency sets,
 *     the `cap` field of every event, and the graph changes made by capture
 *     (nodes added by emu_capture_add). It is taken before any stream-internal
 *     lock (emu_stream_set_capture) and never held while waiting on a stream.
 *   - A graph (CUgraph and its nodes) is not thread-safe, as in CUDA: callers
 *     serialise their use of one graph.
 *   - exec->lock guards an exec's node parameters and its last launch token,
 *     so a launch takes a consistent snapshot while another thread sets
 *     parameters.
 *   - tok_lock/tok_cond guard every launch token's refcount and done flag.
 *   - The calling thread's capture mode and thread id are thread-local.
 */
#include "emu_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ================================================================ helpers */

/* Ensures `arr` (a pointer variable) has room for `need` elements; `cap` is
 * its capacity variable. Evaluates to 0 on allocation failure (arr intact). */
static size_t grow_size(size_t cap, size_t need)
{
    size_t n = cap ? cap * 2 : 4;
    while (n < need) n *= 2;
    return n;
}
#define GROW(arr, cap, need) __extension__ ({                               \
    int ok_ = 1;                                                            \
    if ((need) > (cap)) {                                                   \
        size_t n_ = grow_size((cap), (need));                               \
        void *p_ = realloc((arr), n_ * sizeof *(arr));                      \
        if (p_) { (arr) = p_; (cap) = n_; } else ok_ = 0;                   \
    }                                                                       \
    ok_; })

static int edge_data_is_default(const CUgraphEdgeData *e)
{
    static const CUgraphEdgeData zero;
    return memcmp(e, &zero, sizeof zero) == 0;
}

/* ============================================================ node params */

/* Kernel node attribute ids are below this (CU_LAUNCH_ATTRIBUTE_*). */
#define EMU_NODE_ATTR_IDS 17

/* Whether `id` is an attribute CUDA documents as valid for graph nodes. */
static int node_attr_valid(CUkernelNodeAttrID id)
{
    switch ((int)id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
        return 1;
    default:
        return 0;
    }
}

/* The parameters of one node, owned (kernel arguments included). */
typedef struct emu_nparams {
    CUgraphNodeType type;
    CUcontext ctx;                  /* KERNEL: function's context; MEMCPY/MEMSET: node context */
    emu_args *args;                 /* KERNEL */
    emu_launch launch;              /* KERNEL */
    CUDA_MEMCPY3D copy;             /* MEMCPY */
    CUDA_MEMSET_NODE_PARAMS set;    /* MEMSET */
    CUDA_HOST_NODE_PARAMS host;     /* HOST */
    CUkernelNodeAttrValue attr[EMU_NODE_ATTR_IDS]; /* KERNEL: attributes by id */
    CUdeviceptr mem_ptr;            /* MEM_ALLOC: its allocation (one reference); MEM_FREE: what it frees */
    size_t mem_bytes;               /* MEM_ALLOC */
    CUmemPoolProps mem_props;       /* MEM_ALLOC, as given */
    CUmemAccessDesc mem_access[8];  /* MEM_ALLOC: access descriptors, as given */
    size_t mem_naccess;
    uint64_t mem_gen;               /* MEM_FREE in a launch: the incarnation it frees (0: none) */
} emu_nparams;

/* Kernel node input, whichever struct version it came in. */
typedef struct kin {
    CUfunction func;
    CUkernel kern;
    emu_launch launch;
    void **kernelParams, **extra;
} kin;

#define KIN_OF(p) ((kin){ .func = (p)->func,                                          \
    .launch = { { (p)->gridDimX, (p)->gridDimY, (p)->gridDimZ },                        \
                { (p)->blockDimX, (p)->blockDimY, (p)->blockDimZ }, (p)->sharedMemBytes }, \
    .kernelParams = (p)->kernelParams, .extra = (p)->extra })

/* Fills any CUDA_KERNEL_NODE_PARAMS version from a kernel node's parameters:
 * kernelParams points into the node's own argument storage, extra is NULL. */
#define KOUT(out, np) do {                                                      \
    (out)->func = (np)->args->func;                                             \
    (out)->gridDimX = (np)->launch.grid.x; (out)->gridDimY = (np)->launch.grid.y; \
    (out)->gridDimZ = (np)->launch.grid.z;                                      \
    (out)->blockDimX = (np)->launch.block.x; (out)->blockDimY = (np)->launch.block.y; \
    (out)->blockDimZ = (np)->launch.block.z;                                    \
    (out)->sharedMemBytes = (np)->launch.shared_bytes;                          \
    (out)->kernelParams = (np)->args->params;                                   \
    (out)->extra = NULL;                                                        \
} while (0)

static CUcontext func_ctx(CUfunction f, CUcontext fallback)
{
    CUcontext c = emu_func_ctx(f);
    return c ? c : fallback;
}

/* NULL means the current context. */
static CUresult ctx_resolve(CUcontext c, CUcontext *out)
{
    if (!c) return emu_ctx_require(out);
    if (!emu_handle_ok(c, EMU_K_CTX) || c->destroyed) return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

static void nparams_free(emu_nparams *p)
{
    free(p->args);
    p->args = NULL;
    if (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && p->mem_ptr) emu_gmem_ref(p->mem_ptr, -1);
    p->mem_ptr = 0;
}

/* Deep copy; returns 0 on allocation failure. */
static int nparams_copy(emu_nparams *dst, const emu_nparams *src)
{
    *dst = *src;
    if (src->args && !(dst->args = emu_args_clone(src->args))) return 0;
    if (src->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) emu_gmem_ref(src->mem_ptr, 1);
    return 1;
}

/* An allocation node of graph graph_uid: checks the parameters as documented
 * (cuGraphAddMemAllocNode: pinned device memory, no handle types, at most one
 * access descriptor per device) and reserves the allocation's address, which
 * *out gets. */
static CUresult nparams_memalloc(emu_nparams *np, const CUDA_MEM_ALLOC_NODE_PARAMS *in, uint64_t graph_uid,
                                 CUdeviceptr *out)
{
    if (!in || !in->bytesize || in->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        in->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        in->poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
        in->accessDescCount > (size_t)emu_device_count() || (in->accessDescCount && !in->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    int dev = in->poolProps.location.id;
    if (dev < 0 || dev >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    memset(np, 0, sizeof *np);
    CUresult r = emu_gmem_create(in->bytesize, dev, graph_uid, &np->mem_ptr);
    if (r != CUDA_SUCCESS) return r;
    np->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    np->mem_bytes = in->bytesize;
    np->mem_props = in->poolProps;
    np->mem_naccess = in->accessDescCount;
    if (in->accessDescCount) memcpy(np->mem_access, in->accessDescs, in->accessDescCount * sizeof *in->accessDescs);
    *out = np->mem_ptr;
    return CUDA_SUCCESS;
}

/* A free node: cuGraphAddMemFreeNode "will return CUDA_ERROR_INVALID_VALUE if
 * the user attempts to free an allocation twice in the same graph, an
 * address that was not returned by an allocation node, an invalid address";
 * and an allocation has at most one free node in any graph. */
static CUresult nparams_memfree(emu_nparams *np, CUdeviceptr p)
{
    uint64_t freed_in = 0;
    if (!emu_gmem_info(p, NULL, &freed_in) || freed_in) return CUDA_ERROR_INVALID_VALUE;
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    np->mem_ptr = p;
    return CUDA_SUCCESS;
}

/* ctx: the context the function belongs to if known (capture passes the
 * stream's), NULL for the current one. */
static CUresult nparams_kernel(emu_nparams *np, const kin *k, CUcontext ctx)
{
    if (!k->func) return CUDA_ERROR_INVALID_VALUE;  /* CUkernel nodes: not emulated */
    const emu_launch *l = &k->launch;
    if (!l->grid.x || !l->grid.y || !l->grid.z || !l->block.x || !l->block.y || !l->block.z)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r;
    if (!ctx && (r = emu_ctx_require(&ctx)) != CUDA_SUCCESS) return r;
    emu_args *a;
    if ((r = emu_args_pack(k->func, k->kernelParams, k->extra, &a)) != CUDA_SUCCESS) return r;
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_KERNEL;
    np->args = a;
    np->launch = *l;
    np->ctx = func_ctx(k->func, ctx);
    np->attr[CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP].memSyncDomainMap.remote = 1;
    return CUDA_SUCCESS;
}

static CUresult nparams_memcpy(emu_nparams *np, const CUDA_MEMCPY3D *c, CUcontext ctx)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    CUresult r;
    if ((r = ctx_resolve(ctx, &ctx)) != CUDA_SUCCESS) return r;
    if ((r = emu_memcpy3d_check(c)) != CUDA_SUCCESS) return r;
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_MEMCPY;
    np->copy = *c;
    np->ctx = ctx;
    return CUDA_SUCCESS;
}

static CUresult nparams_memset(emu_nparams *np, const CUDA_MEMSET_NODE_PARAMS *s, CUcontext ctx)
{
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    CUresult r;
    if ((r = ctx_resolve(ctx, &ctx)) != CUDA_SUCCESS) return r;
    if ((r = emu_memset_check(s)) != CUDA_SUCCESS) return r;
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_MEMSET;
    np->set = *s;
    np->ctx = ctx;
    return CUDA_SUCCESS;
}

static CUresult nparams_host(emu_nparams *np, const CUDA_HOST_NODE_PARAMS *h)
{
    if (!h || !h->fn) return CUDA_ERROR_INVALID_VALUE;
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_HOST;
    np->host = *h;
    return CUDA_SUCCESS;
}

static void nparams_empty(emu_nparams *np)
{
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_EMPTY;
}

/* From the tagged union of cuGraphAddNode / cuGraphNodeSetParams /
 * cuGraphExecNodeSetParams. */
/* graph_uid: the graph the node is added to; 0 for the set-params calls. */
static CUresult nparams_generic(emu_nparams *np, CUgraphNodeParams *p, uint64_t graph_uid)
{
    if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2)
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        kin k = KIN_OF(&p->kernel);
        k.kern = p->kernel.kern;
        return nparams_kernel(np, &k, NULL);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (p->memcpy.flags || p->memcpy.reserved) return CUDA_ERROR_INVALID_VALUE;
        return nparams_memcpy(np, &p->memcpy.copyParams, p->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS_v2 *m = &p->memset;
        CUDA_MEMSET_NODE_PARAMS s = { .dst = m->dst, .pitch = m->pitch, .value = m->value,
                                      .elementSize = m->elementSize, .width = m->width,
                                      .height = m->height };
        return nparams_memset(np, &s, m->ctx);
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
        CUDA_HOST_NODE_PARAMS h = { .fn = p->host.fn, .userData = p->host.userData };
        return nparams_host(np, &h);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
        nparams_empty(np);
        return CUDA_SUCCESS;
    /* Memory nodes can be added, never set ("API unsupported"). */
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
        if (!graph_uid) return CUDA_ERROR_NOT_SUPPORTED;
        CUDA_MEM_ALLOC_NODE_PARAMS a = { .poolProps = p->alloc.poolProps, .accessDescs = p->alloc.accessDescs,
                                         .accessDescCount = p->alloc.accessDescCount,
                                         .bytesize = p->alloc.bytesize };
        return nparams_memalloc(np, &a, graph_uid, &p->alloc.dptr);
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return graph_uid ? nparams_memfree(np, p->free.dptr) : CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* Device of a context, -1 if none. */
static int ctx_device(CUcontext c) { return c ? c->device : -1; }

static int is_1d_copy(const CUDA_MEMCPY3D *c) { return c->Height <= 1 && c->Depth <= 1; }
static int is_1d_set(const CUDA_MEMSET_NODE_PARAMS *s) { return s->height <= 1; }

/* A device operand that must stay device memory reachable by the node's
 * device (its context and mapping "cannot change"). */
static int operand_ok(CUmemorytype t, CUdeviceptr p, size_t n, int dev)
{
    if (t != CU_MEMORYTYPE_DEVICE) return 1;
    emu_range r;
    return emu_mem_find(p, &r) && emu_mem_accessible(p, n ? n : 1, dev);
}

/* Whether an exec node may change from `old` to `nw` (same type), as
 * cuGraphExecUpdate (exec_set == 0) or the per-node exec set-params calls
 * (exec_set == 1) allow. Returns the update result code. */
static CUgraphExecUpdateResult change_check(const emu_nparams *old, const emu_nparams *nw, int exec_set)
{
    switch (old->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        if (old->ctx != nw->ctx) return CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE;
        return CU_GRAPH_EXEC_UPDATE_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        const CUDA_MEMCPY3D *a = &old->copy, *b = &nw->copy;
        if (a->srcMemoryType != b->srcMemoryType || a->dstMemoryType != b->dstMemoryType)
            return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        /* The node's checks again, memory may have changed since it was made:
         * an operand that now runs past its allocation is refused. */
        if (emu_memcpy3d_check(b) != CUDA_SUCCESS) return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        if (exec_set && (!is_1d_copy(a) || !is_1d_copy(b) || !b->WidthInBytes))
            return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        int dev = ctx_device(old->ctx);
        size_t n = b->WidthInBytes;
        if (!operand_ok(b->srcMemoryType, b->srcDevice + b->srcXInBytes, n, dev) ||
            !operand_ok(b->dstMemoryType, b->dstDevice + b->dstXInBytes, n, dev))
            return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        return CU_GRAPH_EXEC_UPDATE_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS *a = &old->set, *b = &nw->set;
        if (!b->width || emu_memset_check(b) != CUDA_SUCCESS) return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        if (!is_1d_set(a) || !is_1d_set(b)) {
            /* 2D: only address and value may change. */
            if (a->width != b->width || a->height != b->height || a->pitch != b->pitch ||
                a->elementSize != b->elementSize)
                return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        }
        if (!operand_ok(CU_MEMORYTYPE_DEVICE, b->dst, b->width * b->elementSize, ctx_device(old->ctx)))
            return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        return CU_GRAPH_EXEC_UPDATE_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:      /* an allocation's address and size are fixed */
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return old->mem_ptr == nw->mem_ptr && old->mem_bytes == nw->mem_bytes
                   ? CU_GRAPH_EXEC_UPDATE_SUCCESS : CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    default:
        return CU_GRAPH_EXEC_UPDATE_SUCCESS;  /* host, empty: unrestricted */
    }
}

/* ================================================================= graphs */

typedef struct emu_edge { CUgraphNode from, to; CUgraphEdgeData data; } emu_edge;

struct CUgraphNode_st {
    CUgraph graph;
    size_t index;                   /* creation order in the graph */
    emu_nparams p;
    CUgraphNode *deps;              /* incoming edges, in the order added */
    size_t ndeps, cap_deps;
};

struct CUgraph_st {
    uint64_t uid;                   /* unique over the process: names the graph in execs */
    CUgraphNode *nodes;
    size_t n, cap;
    emu_edge *edges;                /* every edge, in the order added */
    size_t nedges, cap_edges;
    struct emu_capture *capture;    /* capture in progress into this graph (cap_lock) */
    int mem_execs;                  /* live execs of it while it has memory nodes (at most 1) */
};

static atomic_ulong graph_uids;

static int graph_ok(CUgraph g) { return g && emu_handle_ok(g, EMU_K_GRAPH); }

/* 1 if g has an allocation or free node. */
static int graph_has_mem(CUgraph g)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->nodes[i]->p.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || g->nodes[i]->p.type == CU_GRAPH_NODE_TYPE_MEM_FREE)
            return 1;
    return 0;
}
static int node_ok(CUgraphNode n) { return n && emu_handle_ok(n, EMU_K_NODE); }

static CUgraph graph_new(void)
{
    CUgraph g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->uid = atomic_fetch_add(&graph_uids, 1) + 1;
    emu_handle_add(g, EMU_K_GRAPH);
    return g;
}

static void graph_free(CUgraph g)
{
    for (size_t i = 0; i < g->n; i++) {
        CUgraphNode nd = g->nodes[i];
        emu_handle_del(nd);
        if (nd->p.type == CU_GRAPH_NODE_TYPE_MEM_FREE) emu_gmem_set_freed_in(nd->p.mem_ptr, g->uid, 0);
        nparams_free(&nd->p);
        free(nd->deps);
        free(nd);
    }
    emu_handle_del(g);
    free(g->nodes);
    free(g->edges);
    free(g);
}

static int node_has_dep(CUgraphNode to, CUgraphNode from)
{
    for (size_t i = 0; i < to->ndeps; i++)
        if (to->deps[i] == from) return 1;
    return 0;
}

/* Adds the edge from -> to (validated by the caller); 0 on allocation failure. */
static int edge_add(CUgraph g, CUgraphNode from, CUgraphNode to, const CUgraphEdgeData *data)
{
    if (!GROW(g->edges, g->cap_edges, g->nedges + 1) ||
        !GROW(to->deps, to->cap_deps, to->ndeps + 1))
        return 0;
    emu_edge *e = &g->edges[g->nedges++];
    e->from = from;
    e->to = to;
    memset(&e->data, 0, sizeof e->data);
    if (data) e->data = *data;
    to->deps[to->ndeps++] = from;
    return 1;
}

/* Validates a dependency list for a new node of g: live nodes of g, no
 * duplicates, edge data with zeroed reserved bytes and to_port. */
static CUresult deps_check(CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data, size_t n)
{
    if (n && !deps) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        if (!node_ok(deps[i]) || deps[i]->graph != g) return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i]) return CUDA_ERROR_INVALID_VALUE;
        if (data) {
            const CUgraphEdgeData *e = &data[i];
            for (size_t k = 0; k < sizeof e->reserved; k++)
                if (e->reserved[k]) return CUDA_ERROR_INVALID_VALUE;
            if (e->to_port || e->type > CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC)
                return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

/* Adds a node owning *p (on success only; on failure the caller still owns
 * it). */
static CUresult node_add(CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data,
                         size_t n, emu_nparams *p, CUgraphNode *out)
{
    CUresult r = deps_check(g, deps, data, n);
    if (r != CUDA_SUCCESS) return r;
    CUgraphNode nd = calloc(1, sizeof *nd);
    if (!nd || !GROW(g->nodes, g->cap, g->n + 1) ||
        !GROW(g->edges, g->cap_edges, g->nedges + n) ||
        !GROW(nd->deps, nd->cap_deps, n)) {
        if (nd) free(nd->deps);
        free(nd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    nd->graph = g;
    nd->index = g->n;
    nd->p = *p;
    g->nodes[g->n++] = nd;
    for (size_t i = 0; i < n; i++) edge_add(g, deps[i], nd, data ? &data[i] : NULL); /* room reserved */
    emu_handle_add(nd, EMU_K_NODE);
    if (p->type == CU_GRAPH_NODE_TYPE_MEM_FREE) emu_gmem_set_freed_in(p->mem_ptr, g->uid, 1);
    if (out) *out = nd;
    return CUDA_SUCCESS;
}

/* The shared tail of every cuGraphAdd*Node: validates the graph and output,
 * builds nothing itself; p is freed on failure. */
static CUresult node_add_api(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                             const CUgraphEdgeData *data, size_t n, emu_nparams *p)
{
    CUresult r = node_add(g, deps, data, n, p, out);
    if (r != CUDA_SUCCESS) nparams_free(p);
    return r;
}

#define CHECK_GRAPH_OUT(out, g) do {                                        \
    if (!(out) || !graph_ok(g)) return CUDA_ERROR_INVALID_VALUE;            \
} while (0)

/* Replaces a graph node's parameters (same type required); a kernel node
 * keeps its attributes. */
static CUresult node_set(CUgraphNode nd, emu_nparams *p)
{
    if (nd->p.type != p->type) { nparams_free(p); return CUDA_ERROR_INVALID_VALUE; }
    memcpy(p->attr, nd->p.attr, sizeof p->attr);
    nparams_free(&nd->p);
    nd->p = *p;
    return CUDA_SUCCESS;
}

/* Fills `out` (capacity *num) from `src` (count n) as the graph queries do:
 * NULL out gives the count; extra entries are NULLed; *num gets the count
 * actually returned. */
static void fill_nodes(CUgraphNode *out, size_t *num, const CUgraphNode *src, size_t n)
{
    if (!out) { *num = n; return; }
    size_t i;
    for (i = 0; i < *num && i < n; i++) out[i] = src[i];
    for (size_t j = i; j < *num; j++) out[j] = NULL;
    *num = i;
}

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

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_capture *captures;     /* in progress */
static atomic_int ncaptures;             /* fast path for emu_capture_check_unsafe */
static uint64_t capture_ids;             /* cap_lock */

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
    if (!GROW(cs->deps, cs->cap, base + n) ||
        !GROW(cs->edata, cs->cap_e, base + n))
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
    if (!GROW(c->streams, c->cap_streams, c->nstreams + 1)) return NULL;
    cap_stream *cs = &c->streams[c->nstreams];
    memset(cs, 0, sizeof *cs);
    cs->s = s;
    if (!cs_set_deps(cs, deps, edata, n, 0)) { free(cs->deps); free(cs->edata); return NULL; }
    c->nstreams++;
    emu_stream_set_capture(s, c);
    return cs;
}

/* Ends c: every stream leaves capture, c leaves the registry and is freed;
 * the graph is destroyed when destroy_graph and c owns it. cap_lock held. */
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
    c->graph->capture = NULL;
    if (destroy_graph && c->own_graph) graph_free(c->graph);
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
    pthread_mutex_lock(&cap_lock);
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
    pthread_mutex_unlock(&cap_lock);
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
    pthread_mutex_lock(&cap_lock);
    for (struct emu_capture *c = captures; c; c = c->next) {
        for (size_t i = 0; i < c->nstreams; i++) {
            emu_stream *s = c->streams[i].s;
            if (emu_stream_ctx(s) != ctx || (blocking_only && !emu_stream_blocking(s))) continue;
            c->invalidated = 1;
            bad = 1;
            break;
        }
    }
    pthread_mutex_unlock(&cap_lock);
    return bad ? err : CUDA_SUCCESS;
}

/* Same source: "It is invalid to synchronize or query the execution status
 * of ... a captured event". */
int emu_capture_event_busy(CUevent ev)
{
    if (atomic_load(&ncaptures) == 0) return 0;
    pthread_mutex_lock(&cap_lock);
    struct emu_capture *c = ev->cap ? capture_by_id(ev->cap->capture_id) : NULL;
    if (c) c->invalidated = 1;
    pthread_mutex_unlock(&cap_lock);
    return c != NULL;
}

CUresult emu_capture_add(emu_stream *s, const emu_capture_op *op)
{
    emu_nparams np;
    CUresult r;
    pthread_mutex_lock(&cap_lock);
    struct emu_capture *c = emu_stream_capture(s);
    cap_stream *cs = c ? cap_find(c, s) : NULL;
    if (!cs) { r = CUDA_ERROR_ILLEGAL_STATE; goto out; }
    if (c->invalidated) { r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; goto out; }
    CUcontext ctx = emu_stream_ctx(s);
    switch (op->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_KERNEL;
        np.launch = op->launch;
        np.ctx = func_ctx(op->args->func, ctx);
        r = (np.args = emu_args_clone(op->args)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        break;
    case CU_GRAPH_NODE_TYPE_MEMCPY: r = nparams_memcpy(&np, op->copy, ctx); break;
    case CU_GRAPH_NODE_TYPE_MEMSET: r = nparams_memset(&np, op->set, ctx); break;
    case CU_GRAPH_NODE_TYPE_HOST:   r = nparams_host(&np, op->host); break;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
        /* The pool's properties: the device's default pool. */
        CUDA_MEM_ALLOC_NODE_PARAMS a = { .poolProps = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                        .location = { CU_MEM_LOCATION_TYPE_DEVICE, op->mem_dev } },
                                         .bytesize = op->mem_bytes };
        CUdeviceptr p = 0;
        if (!op->mem_out) r = CUDA_ERROR_INVALID_VALUE;
        else if ((r = nparams_memalloc(&np, &a, c->graph->uid, &p)) == CUDA_SUCCESS) *op->mem_out = p;
        break;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        /* Not a graph allocation (or already freed by a graph): an invalid
         * operation during capture, which invalidates it. */
        if ((r = nparams_memfree(&np, op->mem_ptr)) != CUDA_SUCCESS) c->invalidated = 1;
        break;
    default:                        r = CUDA_ERROR_NOT_SUPPORTED; break;
    }
    if (r != CUDA_SUCCESS) goto out;
    CUgraphNode nd;
    if ((r = node_add(c->graph, cs->deps, cs->edata, cs->n, &np, &nd)) != CUDA_SUCCESS) {
        nparams_free(&np);
        goto out;
    }
    cs_set_deps(cs, &nd, NULL, 1, 0);  /* room for one always exists after node_add's deps */
out:
    pthread_mutex_unlock(&cap_lock);
    return r;
}

CUresult emu_capture_event_record(emu_stream *s, CUevent ev)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&cap_lock);
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
    pthread_mutex_unlock(&cap_lock);
    return r;
}

void emu_capture_event_forget(CUevent ev)
{
    pthread_mutex_lock(&cap_lock);
    free(ev->cap);
    ev->cap = NULL;
    pthread_mutex_unlock(&cap_lock);
}

int emu_capture_event_wait(emu_stream *s, CUevent ev, CUresult *res)
{
    pthread_mutex_lock(&cap_lock);
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
    pthread_mutex_unlock(&cap_lock);
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
        if (!graph_ok(g)) return CUDA_ERROR_INVALID_VALUE;
        if ((r = deps_check(g, deps, edata, n)) != CUDA_SUCCESS) return r;
    }
    struct emu_capture *c = calloc(1, sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&cap_lock);
    if (emu_stream_capture(s)) { r = CUDA_ERROR_ILLEGAL_STATE; goto fail; }
    if (g && g->capture) { r = CUDA_ERROR_INVALID_VALUE; goto fail; }
    c->own_graph = !g;
    if (!g && !(g = graph_new())) { r = CUDA_ERROR_OUT_OF_MEMORY; goto fail; }
    c->graph = g;
    c->mode = mode;
    c->thread = self_thread();
    c->origin = s;
    if (!cap_join(c, s, deps, edata, n)) {
        if (c->own_graph) graph_free(g);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    c->id = ++capture_ids;
    g->capture = c;
    c->next = captures;
    captures = c;
    atomic_fetch_add(&ncaptures, 1);
    pthread_mutex_unlock(&cap_lock);
    return CUDA_SUCCESS;
fail:
    pthread_mutex_unlock(&cap_lock);
    free(c);
    return r;
}

static CUresult capture_end(CUstream h, int per_thread, CUgraph *out)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    emu_stream *s;
    CUresult r = capture_stream(h, per_thread, &s);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&cap_lock);
    struct emu_capture *c = emu_stream_capture(s);
    if (!c) {
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
    pthread_mutex_unlock(&cap_lock);
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
    pthread_mutex_lock(&cap_lock);
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
                if (!edge_data_is_default(&cs->edata[i])) r = CUDA_ERROR_LOSSY_QUERY;
    }
    pthread_mutex_unlock(&cap_lock);
    return r;
}

void emu_capture_invalidate(emu_stream *s)
{
    pthread_mutex_lock(&cap_lock);
    struct emu_capture *c = emu_stream_capture(s);
    if (c) c->invalidated = 1;
    pthread_mutex_unlock(&cap_lock);
}

void emu_capture_stream_gone(emu_stream *s)
{
    pthread_mutex_lock(&cap_lock);
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
    pthread_mutex_unlock(&cap_lock);
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
    pthread_mutex_lock(&cap_lock);
    struct emu_capture *c = emu_stream_capture(s);
    cap_stream *cs = c ? cap_find(c, s) : NULL;
    if (!cs) r = CUDA_ERROR_ILLEGAL_STATE;
    else if (c->invalidated) r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if ((r = deps_check(c->graph, deps, edata, n)) == CUDA_SUCCESS &&
             !cs_set_deps(cs, deps, edata, n, flags == CU_STREAM_ADD_CAPTURE_DEPENDENCIES))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&cap_lock);
    return r;
}

/* Graph launch or upload on a capturing stream: not emulated. Returns 1 (and
 * invalidates the capture) if s is capturing. */
static int capture_refuse(emu_stream *s)
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

/* ============================================================= graph API */

EMU_EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    EMU_ENTRY_INIT();
    if (!phGraph || flags) return CUDA_ERROR_INVALID_VALUE;
    CUgraph g = graph_new();
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = g;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    EMU_ENTRY_INIT();
    if (!graph_ok(hGraph)) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cap_lock);
    int capturing = hGraph->capture != NULL;
    pthread_mutex_unlock(&cap_lock);
    if (capturing) return CUDA_ERROR_INVALID_VALUE;  /* "all operations other than destroy" */
    graph_free(hGraph);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphClone, originalGraph);
    /* "Cloning is not supported for graphs which contain memory allocation
     * nodes, memory free nodes, or conditional nodes." */
    if (graph_has_mem(originalGraph)) return CUDA_ERROR_NOT_SUPPORTED;
    CUgraph g = graph_new();
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    CUgraph o = originalGraph;
    for (size_t i = 0; i < o->n; i++) {
        emu_nparams p;
        if (!nparams_copy(&p, &o->nodes[i]->p) ||
            node_add(g, NULL, NULL, 0, &p, NULL) != CUDA_SUCCESS) {
            nparams_free(&p);
            graph_free(g);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    for (size_t i = 0; i < o->nedges; i++) {
        const emu_edge *e = &o->edges[i];
        if (!edge_add(g, g->nodes[e->from->index], g->nodes[e->to->index], &e->data)) {
            graph_free(g);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    *phGraphClone = g;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode, CUgraph hClonedGraph)
{
    EMU_ENTRY_INIT();
    if (!phNode || !node_ok(hOriginalNode) || !graph_ok(hClonedGraph) ||
        hOriginalNode->index >= hClonedGraph->n)
        return CUDA_ERROR_INVALID_VALUE;
    *phNode = hClonedGraph->nodes[hOriginalNode->index];
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ node adding */

static CUresult add_kernel(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n, const kin *k)
{
    CHECK_GRAPH_OUT(out, g);
    emu_nparams p;
    CUresult r = nparams_kernel(&p, k, NULL);
    return r != CUDA_SUCCESS ? r : node_add_api(out, g, deps, NULL, n, &p);
}

EMU_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    kin k = KIN_OF(nodeParams);
    return add_kernel(phGraphNode, hGraph, dependencies, numDependencies, &k);
}

EMU_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                            size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    kin k = KIN_OF(nodeParams);
    k.kern = nodeParams->kern;
    return add_kernel(phGraphNode, hGraph, dependencies, numDependencies, &k);
}

EMU_EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    CUresult r = nparams_memcpy(&p, copyParams, ctx);
    return r != CUDA_SUCCESS ? r : node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

EMU_EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                         CUcontext ctx)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    CUresult r = nparams_memset(&p, memsetParams, ctx);
    return r != CUDA_SUCCESS ? r : node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

EMU_EXPORT CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                       size_t numDependencies, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    CUresult r = nparams_host(&p, nodeParams);
    return r != CUDA_SUCCESS ? r : node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

EMU_EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                        size_t numDependencies)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    nparams_empty(&p);
    return node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

static CUresult add_generic(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data,
                            size_t n, CUgraphNodeParams *params)
{
    CHECK_GRAPH_OUT(out, g);
    emu_nparams p;
    CUresult r = nparams_generic(&p, params, g->uid);
    return r != CUDA_SUCCESS ? r : node_add_api(out, g, deps, data, n, &p);
}

EMU_EXPORT CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    EMU_ENTRY_INIT();
    return add_generic(phGraphNode, hGraph, dependencies, NULL, numDependencies, nodeParams);
}

EMU_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                      const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                      CUgraphNodeParams *nodeParams)
{
    EMU_ENTRY_INIT();
    return add_generic(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
}

/* ------------------------------------------------------ node get/set params */

/* A live node of the given type, else CUDA_ERROR_INVALID_VALUE. */
static CUresult node_of(CUgraphNode nd, CUgraphNodeType type)
{
    return node_ok(nd) && nd->p.type == type ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EMU_EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams || node_of(hNode, CU_GRAPH_NODE_TYPE_KERNEL)) return CUDA_ERROR_INVALID_VALUE;
    KOUT(nodeParams, &hNode->p);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams || node_of(hNode, CU_GRAPH_NODE_TYPE_KERNEL)) return CUDA_ERROR_INVALID_VALUE;
    KOUT(nodeParams, &hNode->p);
    nodeParams->kern = NULL;
    nodeParams->ctx = hNode->p.ctx;
    return CUDA_SUCCESS;
}

static CUresult kernel_set(CUgraphNode nd, const kin *k)
{
    if (node_of(nd, CU_GRAPH_NODE_TYPE_KERNEL)) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    CUresult r = nparams_kernel(&p, k, NULL);
    return r != CUDA_SUCCESS ? r : node_set(nd, &p);
}

EMU_EXPORT CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    kin k = KIN_OF(nodeParams);
    return kernel_set(hNode, &k);
}

EMU_EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    kin k = KIN_OF(nodeParams);
    k.kern = nodeParams->kern;
    return kernel_set(hNode, &k);
}

EMU_EXPORT CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams || node_of(hNode, CU_GRAPH_NODE_TYPE_MEMCPY)) return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = hNode->p.copy;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
    EMU_ENTRY_INIT();
    if (node_of(hNode, CU_GRAPH_NODE_TYPE_MEMCPY)) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    CUresult r = nparams_memcpy(&p, nodeParams, hNode->p.ctx);
    return r != CUDA_SUCCESS ? r : node_set(hNode, &p);
}

EMU_EXPORT CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams || node_of(hNode, CU_GRAPH_NODE_TYPE_MEMSET)) return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = hNode->p.set;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphMemsetNodeSetParams(CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (node_of(hNode, CU_GRAPH_NODE_TYPE_MEMSET)) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    CUresult r = nparams_memset(&p, nodeParams, hNode->p.ctx);
    return r != CUDA_SUCCESS ? r : node_set(hNode, &p);
}

EMU_EXPORT CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams || node_of(hNode, CU_GRAPH_NODE_TYPE_HOST)) return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = hNode->p.host;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (node_of(hNode, CU_GRAPH_NODE_TYPE_HOST)) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    CUresult r = nparams_host(&p, nodeParams);
    return r != CUDA_SUCCESS ? r : node_set(hNode, &p);
}

EMU_EXPORT CUresult cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!node_ok(hNode) || !nodeParams) return CUDA_ERROR_INVALID_VALUE;
    if (nodeParams->type != hNode->p.type) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    CUresult r = nparams_generic(&p, nodeParams, 0);
    return r != CUDA_SUCCESS ? r : node_set(hNode, &p);
}

/* -------------------------------------------------------- memory nodes */

EMU_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                           size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    CUdeviceptr dptr = 0;
    CUresult r = deps_check(hGraph, dependencies, NULL, numDependencies);
    if (r == CUDA_SUCCESS) r = nparams_memalloc(&p, nodeParams, hGraph->uid, &dptr);
    if (r == CUDA_SUCCESS) r = node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
    if (r == CUDA_SUCCESS) nodeParams->dptr = dptr;
    return r;
}

/* The pool properties and access descriptors returned are the node's own. */
EMU_EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    EMU_ENTRY_INIT();
    if (!params_out || node_of(hNode, CU_GRAPH_NODE_TYPE_MEM_ALLOC)) return CUDA_ERROR_INVALID_VALUE;
    params_out->poolProps = hNode->p.mem_props;
    params_out->accessDescs = hNode->p.mem_naccess ? hNode->p.mem_access : NULL;
    params_out->accessDescCount = hNode->p.mem_naccess;
    params_out->bytesize = hNode->p.mem_bytes;
    params_out->dptr = hNode->p.mem_ptr;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                          size_t numDependencies, CUdeviceptr dptr)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    CUresult r = nparams_memfree(&p, dptr);
    return r != CUDA_SUCCESS ? r : node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

EMU_EXPORT CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
    EMU_ENTRY_INIT();
    if (!dptr_out || node_of(hNode, CU_GRAPH_NODE_TYPE_MEM_FREE)) return CUDA_ERROR_INVALID_VALUE;
    *dptr_out = hNode->p.mem_ptr;
    return CUDA_SUCCESS;
}

/* Graph memory is charged while allocated and given back when freed, so no
 * unused memory is cached for graphs: nothing to trim. */
EMU_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    EMU_ENTRY_INIT();
    return device >= 0 && device < emu_device_count() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* USED and RESERVED are the same here (no cache): the bytes graph
 * allocations hold on the device now, and their high watermark. */
EMU_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    EMU_ENTRY_INIT();
    if (device < 0 || device >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    uint64_t cur = 0, high = 0;
    emu_gmem_graph_attr(device, 1, 1, &cur, &high);
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: memcpy(value, &cur, sizeof cur); return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: memcpy(value, &high, sizeof high); return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Only the high watermarks, and only to 0 (a reset to the current value). */
EMU_EXPORT CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    EMU_ENTRY_INIT();
    if (device < 0 || device >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    uint64_t v;
    if (!value || (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&v, value, sizeof v);
    if (v) return CUDA_ERROR_INVALID_VALUE;
    emu_gmem_graph_attr(device, 0, 2, NULL, NULL);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                                  CUkernelNodeAttrValue *value_out)
{
    EMU_ENTRY_INIT();
    if (!value_out || node_of(hNode, CU_GRAPH_NODE_TYPE_KERNEL) || !node_attr_valid(attr))
        return CUDA_ERROR_INVALID_VALUE;
    *value_out = hNode->p.attr[attr];
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphKernelNodeSetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                                  const CUkernelNodeAttrValue *value)
{
    EMU_ENTRY_INIT();
    if (!value || node_of(hNode, CU_GRAPH_NODE_TYPE_KERNEL) || !node_attr_valid(attr))
        return CUDA_ERROR_INVALID_VALUE;
    if (attr == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) {
        /* 0 or 1, and a device-updatable node cannot opt out */
        int want = value->deviceUpdatableKernelNode.deviceUpdatable;
        if ((want != 0 && want != 1) ||
            (!want && hNode->p.attr[attr].deviceUpdatableKernelNode.deviceUpdatable))
            return CUDA_ERROR_INVALID_VALUE;
    }
    hNode->p.attr[attr] = *value;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    EMU_ENTRY_INIT();
    if (!type || !node_ok(hNode)) return CUDA_ERROR_INVALID_VALUE;
    *type = hNode->p.type;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ structure */

EMU_EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    EMU_ENTRY_INIT();
    if (!numNodes || !graph_ok(hGraph)) return CUDA_ERROR_INVALID_VALUE;
    fill_nodes(nodes, numNodes, hGraph->nodes, hGraph->n);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
    EMU_ENTRY_INIT();
    if (!numRootNodes || !graph_ok(hGraph)) return CUDA_ERROR_INVALID_VALUE;
    CUgraphNode *roots = malloc((hGraph->n ? hGraph->n : 1) * sizeof *roots);
    if (!roots) return CUDA_ERROR_OUT_OF_MEMORY;
    size_t k = 0;
    for (size_t i = 0; i < hGraph->n; i++)
        if (!hGraph->nodes[i]->ndeps) roots[k++] = hGraph->nodes[i];
    fill_nodes(rootNodes, numRootNodes, roots, k);
    free(roots);
    return CUDA_SUCCESS;
}

static CUresult get_edges(CUgraph g, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *data, size_t *num)
{
    if (!num || !graph_ok(g) || (!from) != (!to) || (data && !from)) return CUDA_ERROR_INVALID_VALUE;
    if (!from) { *num = g->nedges; return CUDA_SUCCESS; }
    size_t i;
    for (i = 0; i < *num && i < g->nedges; i++) {
        if (!data && !edge_data_is_default(&g->edges[i].data)) return CUDA_ERROR_LOSSY_QUERY;
        from[i] = g->edges[i].from;
        to[i] = g->edges[i].to;
        if (data) data[i] = g->edges[i].data;
    }
    for (size_t j = i; j < *num; j++) {
        from[j] = to[j] = NULL;
        if (data) memset(&data[j], 0, sizeof data[j]);
    }
    *num = i;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges)
{
    EMU_ENTRY_INIT();
    return get_edges(hGraph, from, to, NULL, numEdges);
}

EMU_EXPORT CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                       CUgraphEdgeData *edgeData, size_t *numEdges)
{
    EMU_ENTRY_INIT();
    return get_edges(hGraph, from, to, edgeData, numEdges);
}

/* Incoming (dependents == 0) or outgoing (1) edges of a node. */
static CUresult node_edges(CUgraphNode nd, int dependents, CUgraphNode *out, CUgraphEdgeData *data, size_t *num)
{
    if (!num || !node_ok(nd) || (data && !out)) return CUDA_ERROR_INVALID_VALUE;
    CUgraph g = nd->graph;
    size_t k = 0, cap = *num;
    for (size_t i = 0; i < g->nedges; i++) {
        const emu_edge *e = &g->edges[i];
        if ((dependents ? e->from : e->to) != nd) continue;
        if (out && k < cap) {
            if (!data && !edge_data_is_default(&e->data)) return CUDA_ERROR_LOSSY_QUERY;
            out[k] = dependents ? e->to : e->from;
            if (data) data[k] = e->data;
        }
        k++;
    }
    if (!out) { *num = k; return CUDA_SUCCESS; }
    for (size_t j = k; j < cap; j++) {
        out[j] = NULL;
        if (data) memset(&data[j], 0, sizeof data[j]);
    }
    *num = k < cap ? k : cap;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies, size_t *numDependencies)
{
    EMU_ENTRY_INIT();
    return node_edges(hNode, 0, dependencies, NULL, numDependencies);
}

EMU_EXPORT CUresult cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies,
                                                  CUgraphEdgeData *edgeData, size_t *numDependencies)
{
    EMU_ENTRY_INIT();
    return node_edges(hNode, 0, dependencies, edgeData, numDependencies);
}

EMU_EXPORT CUresult cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                                 size_t *numDependentNodes)
{
    EMU_ENTRY_INIT();
    return node_edges(hNode, 1, dependentNodes, NULL, numDependentNodes);
}

EMU_EXPORT CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                                    CUgraphEdgeData *edgeData, size_t *numDependentNodes)
{
    EMU_ENTRY_INIT();
    return node_edges(hNode, 1, dependentNodes, edgeData, numDependentNodes);
}

static CUresult add_deps(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                         const CUgraphEdgeData *data, size_t n)
{
    if (!graph_ok(g)) return CUDA_ERROR_INVALID_VALUE;
    if (!n) return CUDA_SUCCESS;
    if (!from || !to) return CUDA_ERROR_INVALID_VALUE;
    /* Validate everything first: a failing call changes nothing. */
    for (size_t i = 0; i < n; i++) {
        if (!node_ok(from[i]) || !node_ok(to[i]) || from[i]->graph != g || to[i]->graph != g ||
            from[i] == to[i] || node_has_dep(to[i], from[i]))
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (from[j] == from[i] && to[j] == to[i]) return CUDA_ERROR_INVALID_VALUE;
        if (data && deps_check(g, &from[i], &data[i], 1) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    }
    if (!GROW(g->edges, g->cap_edges, g->nedges + n)) return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++)
        if (!GROW(to[i]->deps, to[i]->cap_deps, to[i]->ndeps + n))
            return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) edge_add(g, from[i], to[i], data ? &data[i] : NULL);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                           size_t numDependencies)
{
    EMU_ENTRY_INIT();
    return add_deps(hGraph, from, to, NULL, numDependencies);
}

EMU_EXPORT CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                              const CUgraphEdgeData *edgeData, size_t numDependencies)
{
    EMU_ENTRY_INIT();
    return add_deps(hGraph, from, to, edgeData, numDependencies);
}

/* ================================================================= execs */

typedef struct exec_node {
    CUgraphNode orig;               /* the original graph's node (names it; never dereferenced
                                       without a handle check) */
    emu_nparams p;
    size_t ndeps;
    size_t *deps;                   /* indices of its dependencies, in edge order */
    int disabled;                   /* cuGraphNodeSetEnabled(…, 0); guarded by the exec's lock */
} exec_node;

/* Completion of one launch; launches of an exec wait for the previous one. */
typedef struct launch_token { int refs; int done; } launch_token;
static pthread_mutex_t tok_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tok_cond = PTHREAD_COND_INITIALIZER;

struct CUgraphExec_st {
    CUgraph src;                    /* the graph it came from (checked against graph_uid) */
    int has_mem;                    /* it has memory nodes: counted in src->mem_execs */
    uint64_t graph_uid;
    cuuint64_t flags;
    size_t n;
    exec_node *nodes;
    size_t *order;                  /* topological order of node indices */
    pthread_mutex_t lock;           /* nodes[].p and last */
    launch_token *last;             /* the latest launch, NULL if none */
};

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

static int exec_ok(CUgraphExec e) { return e && emu_handle_ok(e, EMU_K_EXEC); }

static void exec_free(CUgraphExec e)
{
    if (e->has_mem && graph_ok(e->src) && e->src->uid == e->graph_uid) e->src->mem_execs--;
    for (size_t i = 0; i < e->n; i++) {
        nparams_free(&e->nodes[i].p);
        free(e->nodes[i].deps);
    }
    token_put(e->last);
    pthread_mutex_destroy(&e->lock);
    free(e->nodes);
    free(e->order);
    free(e);
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

/* Device-launch restrictions; returns the failing result and node. */
static CUgraphInstantiateResult device_launch_check(CUgraph g, CUgraphNode *err)
{
    int useful = 0;
    CUcontext ctx = NULL;
    for (size_t i = 0; i < g->n; i++) {
        const emu_nparams *p = &g->nodes[i]->p;
        if (p->type != CU_GRAPH_NODE_TYPE_KERNEL && p->type != CU_GRAPH_NODE_TYPE_MEMCPY &&
            p->type != CU_GRAPH_NODE_TYPE_MEMSET) {
            *err = g->nodes[i];
            return CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
        }
        if (ctx && p->ctx != ctx) { *err = g->nodes[i]; return CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED; }
        ctx = p->ctx;
        useful = 1;
    }
    if (!useful) return CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
    return CUDA_GRAPH_INSTANTIATE_SUCCESS;
}

static CUresult exec_create(CUgraph g, cuuint64_t flags, CUgraphExec *out, CUgraphNode *err_node,
                            CUgraphInstantiateResult *result)
{
    *err_node = NULL;
    *result = CUDA_GRAPH_INSTANTIATE_ERROR;
    if (!out || !graph_ok(g) || (flags & ~(cuuint64_t)INSTANTIATE_KNOWN_FLAGS)) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) &&
        (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) {
        CUgraphInstantiateResult dr = device_launch_check(g, err_node);
        if (dr != CUDA_GRAPH_INSTANTIATE_SUCCESS) { *result = dr; return CUDA_ERROR_INVALID_VALUE; }
    }
    /* "If hGraph contains any allocation or free nodes, there can be at most
     * one executable graph in existence for that graph at a time." */
    int has_mem = graph_has_mem(g);
    if (has_mem && g->mem_execs) return CUDA_ERROR_INVALID_VALUE;
    CUgraphExec e = calloc(1, sizeof *e);
    size_t n = g->n;
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->nodes = calloc(n ? n : 1, sizeof *e->nodes);
    e->order = calloc(n ? n : 1, sizeof *e->order);
    pthread_mutex_init(&e->lock, NULL);
    if (!e->nodes || !e->order) { exec_free(e); return CUDA_ERROR_OUT_OF_MEMORY; }
    int t = topo_order(g, e->order, err_node);
    if (t <= 0) {
        exec_free(e);
        if (t < 0) return CUDA_ERROR_OUT_OF_MEMORY;
        *result = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < n; i++) {
        CUgraphNode nd = g->nodes[i];
        exec_node *x = &e->nodes[i];
        x->orig = nd;
        x->deps = malloc((nd->ndeps ? nd->ndeps : 1) * sizeof *x->deps);
        if (!x->deps || !nparams_copy(&x->p, &nd->p)) { e->n = i + 1; exec_free(e); return CUDA_ERROR_OUT_OF_MEMORY; }
        x->ndeps = nd->ndeps;
        for (size_t k = 0; k < nd->ndeps; k++) x->deps[k] = nd->deps[k]->index;
    }
    e->n = n;
    e->graph_uid = g->uid;
    e->src = g;
    e->has_mem = has_mem;
    g->mem_execs += has_mem;
    e->flags = flags;
    /* The exec belongs to the context of its nodes (else the current one):
     * that context's teardown ends it. */
    CUcontext owner = emu_ctx_current();
    for (size_t i = 0; i < n; i++)
        if (e->nodes[i].p.ctx) { owner = e->nodes[i].p.ctx; break; }
    emu_handle_add_ctx(e, EMU_K_EXEC, owner);
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

typedef struct launch_work {
    emu_work w;
    launch_token *prev, *self;
    size_t n;
    emu_nparams *nodes;             /* in execution order; owned */
} launch_work;

static void launch_run(emu_work *w, emu_stream *s)
{
    launch_work *lw = (launch_work *)w;
    token_wait(lw->prev);
    int dev = ctx_device(emu_stream_ctx(s));
    for (size_t i = 0; i < lw->n; i++) {
        const emu_nparams *p = &lw->nodes[i];
        switch (p->type) {
        case CU_GRAPH_NODE_TYPE_KERNEL: emu_kernel_run(p->args, &p->launch, dev, w->what); break;
        case CU_GRAPH_NODE_TYPE_MEMCPY: emu_memcpy3d_exec(&p->copy); break;
        case CU_GRAPH_NODE_TYPE_MEMSET: emu_memset_exec(&p->set); break;
        case CU_GRAPH_NODE_TYPE_HOST:   p->host.fn(p->host.userData); break;
        case CU_GRAPH_NODE_TYPE_MEM_FREE:
            if (p->mem_gen) emu_mem_free_async_complete(p->mem_ptr, p->mem_gen);
            break;
        default: break;             /* empty; MEM_ALLOC: allocated when the launch was queued */
        }
    }
}

static void launch_release(emu_work *w)
{
    launch_work *lw = (launch_work *)w;
    token_finish(lw->self);
    token_put(lw->self);
    token_put(lw->prev);
    for (size_t i = 0; i < lw->n; i++) nparams_free(&lw->nodes[i]);
    free(lw->nodes);
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

/* Queues one work that runs the exec's nodes (none for an upload) with a
 * snapshot of their parameters, behind the exec's previous launch. */
static CUresult exec_launch(CUgraphExec e, CUstream h, int per_thread, int run_nodes, const char *call)
{
    if (!exec_ok(e)) return CUDA_ERROR_INVALID_VALUE;
    emu_stream *s;
    CUresult r = emu_stream_get(h, per_thread, &s);
    if (r != CUDA_SUCCESS) return r;
    if (capture_refuse(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    launch_work *lw = (launch_work *)emu_work_new(sizeof *lw, call, launch_run);
    launch_token *tok = calloc(1, sizeof *tok);
    size_t n = run_nodes ? e->n : 0;
    emu_nparams *snap = calloc(n ? n : 1, sizeof *snap);
    if (!lw || !tok || !snap) { free(lw); free(tok); free(snap); return CUDA_ERROR_OUT_OF_MEMORY; }
    lw->w.release = launch_release;
    lw->nodes = snap;
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < n; i++) {
        const emu_nparams *p = &e->nodes[e->order[i]].p;
        if (p->type == CU_GRAPH_NODE_TYPE_KERNEL && !emu_args_func_loaded(p->args)) {
            emu_violation(call, "kernel node %zu uses function %p, which is no longer loaded",
                          e->order[i], (void *)p->args->func);
            r = CUDA_ERROR_INVALID_HANDLE;
            break;
        }
        if (e->nodes[e->order[i]].disabled) {
            snap[i].type = CU_GRAPH_NODE_TYPE_EMPTY;    /* a disabled node does nothing */
            lw->n = i + 1;
            continue;
        }
        if (!nparams_copy(&snap[i], p)) { r = CUDA_ERROR_OUT_OF_MEMORY; break; }
        lw->n = i + 1;
        switch (p->type) {
        case CU_GRAPH_NODE_TYPE_KERNEL: emu_work_touch_words(&lw->w, p->args->data, p->args->size); break;
        case CU_GRAPH_NODE_TYPE_MEMCPY: emu_memcpy3d_touch(&lw->w, &p->copy); break;
        case CU_GRAPH_NODE_TYPE_MEMSET: emu_memset_touch(&lw->w, &p->set); break;
        default: break;
        }
    }
    if (r == CUDA_SUCCESS && e->has_mem) r = launch_memory(e, snap, lw->n, call);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_unlock(&e->lock);
        lw->self = tok;
        tok->refs = 1;
        free(lw->w.ranges);         /* never enqueued: the ranges are still ours */
        launch_release(&lw->w);
        return r;
    }
    tok->refs = 2;                  /* the exec's `last` and the work */
    lw->self = tok;
    lw->prev = e->last;             /* the exec's reference moves to the work */
    e->last = tok;
    pthread_mutex_unlock(&e->lock);
    return emu_stream_enqueue(s, &lw->w);
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
    if (!flags || !exec_ok(hGraphExec)) return CUDA_ERROR_INVALID_VALUE;
    *flags = hGraphExec->flags & ~(cuuint64_t)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    EMU_ENTRY_INIT();
    if (!exec_ok(hGraphExec)) return CUDA_ERROR_INVALID_VALUE;
    emu_handle_del(hGraphExec);
    exec_free(hGraphExec);          /* queued launches run from their own snapshots */
    return CUDA_SUCCESS;
}

void emu_graph_ctx_destroyed(CUcontext ctx)
{
    const void **v;
    size_t n = emu_handles_of_ctx(ctx, EMU_K_EXEC, &v);
    for (size_t i = 0; i < n; i++) {
        emu_handle_end(v[i]);
        exec_free((CUgraphExec)(uintptr_t)v[i]);   /* its launches ran: the streams are gone */
    }
    free(v);
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

/* ------------------------------------------------------ exec set params */

/* The exec node named by hNode (a node of the exec's original graph). */
static exec_node *exec_find(CUgraphExec e, CUgraphNode h)
{
    if (!node_ok(h) || h->graph->uid != e->graph_uid || h->index >= e->n || e->nodes[h->index].orig != h)
        return NULL;
    return &e->nodes[h->index];
}

/* Replaces an exec node's parameters with *p (consumed) if the documented
 * rules allow it; CUDA_ERROR_INVALID_VALUE otherwise. */
static CUresult exec_set(CUgraphExec e, CUgraphNode h, emu_nparams *p)
{
    exec_node *x = exec_ok(e) ? exec_find(e, h) : NULL;
    if (!x || x->p.type != p->type || change_check(&x->p, p, 1) != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        nparams_free(p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&e->lock);
    emu_nparams old = x->p;
    memcpy(p->attr, old.attr, sizeof p->attr);   /* set-params keeps the attributes */
    x->p = *p;
    pthread_mutex_unlock(&e->lock);
    nparams_free(&old);
    return CUDA_SUCCESS;
}

static CUresult exec_kernel_set(CUgraphExec e, CUgraphNode h, const kin *k)
{
    emu_nparams p;
    if (!exec_ok(e) || !exec_find(e, h)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = nparams_kernel(&p, k, NULL);
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
    return exec_kernel_set(hGraphExec, hNode, &k);
}

EMU_EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    EMU_ENTRY_INIT();
    emu_nparams p;
    if (!exec_ok(hGraphExec) || !exec_find(hGraphExec, hNode)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = nparams_memcpy(&p, copyParams, ctx);
    return r != CUDA_SUCCESS ? r : exec_set(hGraphExec, hNode, &p);
}

EMU_EXPORT CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    EMU_ENTRY_INIT();
    emu_nparams p;
    if (!exec_ok(hGraphExec) || !exec_find(hGraphExec, hNode)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = nparams_memset(&p, memsetParams, ctx);
    return r != CUDA_SUCCESS ? r : exec_set(hGraphExec, hNode, &p);
}

EMU_EXPORT CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                 const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    emu_nparams p;
    if (!exec_ok(hGraphExec) || !exec_find(hGraphExec, hNode)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = nparams_host(&p, nodeParams);
    return r != CUDA_SUCCESS ? r : exec_set(hGraphExec, hNode, &p);
}

/* Enabling and disabling exec nodes: kernel, memcpy and memset nodes only,
 * as documented; a disabled node is an empty node in later launches. */
static CUresult exec_enable(CUgraphExec e, CUgraphNode h, int set, unsigned *value)
{
    if (!exec_ok(e)) return CUDA_ERROR_INVALID_VALUE;
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

/* Exec updates of node types the emulation never creates (child graphs,
 * events, external semaphores, batch memory operations): the node can only be
 * of another type, which the driver refuses with CUDA_ERROR_INVALID_VALUE. */
static CUresult exec_set_unemulated(CUgraphExec e, CUgraphNode h, const void *params)
{
    if (!exec_ok(e) || !exec_find(e, h) || !params) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_INVALID_VALUE;
}

EMU_EXPORT CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraph childGraph)
{
    EMU_ENTRY_INIT();
    return exec_set_unemulated(hGraphExec, hNode, childGraph);
}

EMU_EXPORT CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event)
{
    EMU_ENTRY_INIT();
    return exec_set_unemulated(hGraphExec, hNode, event);
}

EMU_EXPORT CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event)
{
    EMU_ENTRY_INIT();
    return exec_set_unemulated(hGraphExec, hNode, event);
}

EMU_EXPORT CUresult cuGraphExecExternalSemaphoresSignalNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    return exec_set_unemulated(hGraphExec, hNode, nodeParams);
}

EMU_EXPORT CUresult cuGraphExecExternalSemaphoresWaitNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_EXT_SEM_WAIT_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    return exec_set_unemulated(hGraphExec, hNode, nodeParams);
}

EMU_EXPORT CUresult cuGraphExecBatchMemOpNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                       const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    return exec_set_unemulated(hGraphExec, hNode, nodeParams);
}

EMU_EXPORT CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
    EMU_ENTRY_INIT();
    emu_nparams p;
    if (!nodeParams || !exec_ok(hGraphExec) || !exec_find(hGraphExec, hNode)) return CUDA_ERROR_INVALID_VALUE;
    if (nodeParams->type != hNode->p.type) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = nparams_generic(&p, nodeParams, 0);
    return r != CUDA_SUCCESS ? r : exec_set(hGraphExec, hNode, &p);
}

/* --------------------------------------------------------------- update */

/* Checks that g can update e (topology, node types, parameter changes) and
 * fills *info; on success copies every node's parameters into e. */
static CUresult exec_update(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *info)
{
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
    info->errorNode = info->errorFromNode = NULL;
    if (!exec_ok(e) || !graph_ok(g)) return CUDA_ERROR_INVALID_VALUE;
    CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    if (g->n != e->n) {
        res = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        goto fail;
    }
    /* Topology first: dependency counts and endpoints, paired by edge order. */
    for (size_t i = 0; i < g->n; i++) {
        CUgraphNode nd = g->nodes[i];
        const exec_node *x = &e->nodes[i];
        info->errorNode = nd;
        if (nd->ndeps != x->ndeps) { res = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED; goto fail; }
        for (size_t k = 0; k < nd->ndeps; k++)
            if (nd->deps[k]->index != x->deps[k]) {
                info->errorFromNode = nd->deps[k];
                res = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
                goto fail;
            }
    }
    for (size_t i = 0; i < g->n; i++) {
        const emu_nparams *np = &g->nodes[i]->p, *old = &e->nodes[i].p;
        info->errorNode = g->nodes[i];
        if (np->type != old->type) { res = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED; goto fail; }
        if ((res = change_check(old, np, 0)) != CU_GRAPH_EXEC_UPDATE_SUCCESS) goto fail;
    }
    info->errorNode = NULL;
    emu_nparams *fresh = calloc(g->n ? g->n : 1, sizeof *fresh);
    if (!fresh) return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < g->n; i++)
        if (!nparams_copy(&fresh[i], &g->nodes[i]->p)) {
            for (size_t j = 0; j < i; j++) nparams_free(&fresh[j]);
            free(fresh);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < g->n; i++) {
        emu_nparams old = e->nodes[i].p;
        e->nodes[i].p = fresh[i];
        fresh[i] = old;
    }
    pthread_mutex_unlock(&e->lock);
    for (size_t i = 0; i < g->n; i++) nparams_free(&fresh[i]);
    free(fresh);
    info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    return CUDA_SUCCESS;
fail:
    info->result = res;
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
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
