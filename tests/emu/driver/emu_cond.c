/*
 * emu_cond.c: conditional nodes' handles (cuGraphConditionalHandleCreate),
 * the value a kernel sets (cudaemu_set_conditional, the emulated kernels'
 * cudaGraphSetConditional), and a conditional node's parameters
 * (CU_GRAPH_NODE_TYPE_CONDITIONAL through cuGraphAddNode: IF with one body
 * graph or two, WHILE with one, SWITCH with `size`) and which body a value
 * picks. docs/emulator.md, "Conditional nodes".
 *
 * A handle is a number (its index + 1, never reused) naming a record of its
 * graph, context, default value, flags and current value. Its value is one
 * per handle: "Only one instantiation of the graph may exist at any point
 * in time", so one per exec as in CUDA.
 *
 * Locks: cond_lock guards the table (its growth); a value is read and
 * written atomically.
 */
#include "emu_graph.h"

#include <stdatomic.h>
#include <string.h>

typedef struct cond_rec {
    uint64_t graph_uid;             /* the graph it was created for */
    CUcontext ctx;
    unsigned dflt, flags;
    atomic_uint value;
} cond_rec;

static pthread_mutex_t cond_lock = PTHREAD_MUTEX_INITIALIZER;
static cond_rec **cond_tab;         /* records are never freed (handles are never reused) */
static size_t cond_n, cond_cap;

static cond_rec *cond_get(CUgraphConditionalHandle h)
{
    pthread_mutex_lock(&cond_lock);
    cond_rec *c = h && h <= cond_n ? cond_tab[h - 1] : NULL;
    pthread_mutex_unlock(&cond_lock);
    return c;
}

/* "flags - Currently must be CU_GRAPH_COND_ASSIGN_DEFAULT or 0."
 * "defaultLaunchValue - Optional initial value for the conditional variable.
 * Applied at the beginning of each graph execution if
 * CU_GRAPH_COND_ASSIGN_DEFAULT is set in flags." Without the flag the value
 * starts as the default too and then keeps what was last set. */
EMU_EXPORT CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out, CUgraph hGraph,
                                                   CUcontext ctx, unsigned int defaultLaunchValue,
                                                   unsigned int flags)
{
    EMU_ENTRY_INIT();
    if (!pHandle_out || !emu_graph_ok(hGraph) || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_ctx_resolve(&ctx);
    if (r != CUDA_SUCCESS) return r;
    cond_rec *c = calloc(1, sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    while (hGraph->owner) hGraph = hGraph->owner->graph;   /* "this graph or one of its children" */
    c->graph_uid = hGraph->uid;
    c->ctx = ctx;
    c->dflt = defaultLaunchValue;
    c->flags = flags;
    atomic_init(&c->value, defaultLaunchValue);
    pthread_mutex_lock(&cond_lock);
    if (!EMU_GROW(cond_tab, cond_cap, cond_n + 1)) {
        pthread_mutex_unlock(&cond_lock);
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    cond_tab[cond_n++] = c;
    *pHandle_out = cond_n;
    pthread_mutex_unlock(&cond_lock);
    return CUDA_SUCCESS;
}

/* cudaGraphSetConditional(handle, value), "called from device code": the
 * emulated kernels call this. An unknown handle aborts (a kernel writing
 * through a bad handle has no error code to return). */
EMU_EXPORT void cudaemu_set_conditional(unsigned long long handle, unsigned int value)
{
    cond_rec *c = cond_get(handle);
    if (!c) {
        emu_log("cudaemu_set_conditional: %llu is not a conditional handle", handle);
        abort();
    }
    atomic_store(&c->value, value);
}

unsigned emu_cond_value(CUgraphConditionalHandle h)
{
    cond_rec *c = cond_get(h);
    return c ? atomic_load(&c->value) : 0;
}

void emu_cond_launch_default(CUgraphConditionalHandle h)
{
    cond_rec *c = cond_get(h);
    if (c && (c->flags & CU_GRAPH_COND_ASSIGN_DEFAULT)) atomic_store(&c->value, c->dflt);
}

/* 1 if g has a conditional node. */
int emu_graph_has_cond(CUgraph g)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->nodes[i]->p.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) return 1;
    return 0;
}

/* A conditional node added to g. "Handles must be created in advance of
 * creating the node"; "The conditional handle must be associated with a
 * conditional node in this graph or one of its children"; ctx: "Must match
 * context used to create the handle and all body nodes"; size: "Allowed
 * values are 1 for CU_GRAPH_COND_TYPE_WHILE, 1 or 2 for CU_GRAPH_COND_TYPE_IF,
 * or any value greater than zero for CU_GRAPH_COND_TYPE_SWITCH". The `size`
 * body graphs are made here and returned in phGraph_out[0..size) ("CUDA-owned
 * array populated with conditional node child graphs during creation of the
 * node"); the node owns them. */
CUresult emu_nparams_cond(emu_nparams *np, CUDA_CONDITIONAL_NODE_PARAMS *in, CUgraph g)
{
    cond_rec *c = cond_get(in->handle);
    CUcontext ctx = in->ctx;
    if (!c || !in->phGraph_out || emu_ctx_resolve(&ctx) != CUDA_SUCCESS || ctx != c->ctx)
        return CUDA_ERROR_INVALID_VALUE;
    while (g->owner) g = g->owner->graph;
    if (c->graph_uid != g->uid) return CUDA_ERROR_INVALID_VALUE;
    switch (in->type) {
    case CU_GRAPH_COND_TYPE_IF:     if (in->size != 1 && in->size != 2) return CUDA_ERROR_INVALID_VALUE; break;
    case CU_GRAPH_COND_TYPE_WHILE:  if (in->size != 1) return CUDA_ERROR_INVALID_VALUE; break;
    case CU_GRAPH_COND_TYPE_SWITCH: if (!in->size) return CUDA_ERROR_INVALID_VALUE; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np->ctx = ctx;
    np->cond = in->handle;
    np->cond_type = in->type;
    if (!(np->cond_body = calloc(in->size, sizeof *np->cond_body))) return CUDA_ERROR_OUT_OF_MEMORY;
    np->cond_size = in->size;       /* emu_nparams_free frees the bodies made so far */
    for (unsigned i = 0; i < in->size; i++)
        if (!(np->cond_body[i] = emu_graph_new())) {
            emu_nparams_free(np);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    memcpy(in->phGraph_out, np->cond_body, in->size * sizeof *np->cond_body);
    return CUDA_SUCCESS;
}

/* The body a conditional node p runs once for `value`, or -1 for none: IF
 * "phGraph_out[0] is executed when the condition is non-zero. If size == 2,
 * phGraph_out[1] will be executed when the condition is zero."; SWITCH
 * "phGraph_out[n] is executed when the condition is equal to n. If the
 * condition >= size, no body graph is executed." (WHILE: body 0 while
 * non-zero, run_snapshot's loop.) */
int emu_cond_pick(const emu_nparams *p, unsigned value)
{
    switch (p->cond_type) {
    case CU_GRAPH_COND_TYPE_IF:     return value ? 0 : p->cond_size == 2 ? 1 : -1;
    case CU_GRAPH_COND_TYPE_SWITCH: return value < p->cond_size ? (int)value : -1;
    default:                        return value ? 0 : -1;
    }
}

/* "Allowed node types are kernel nodes, empty nodes, child graphs, memsets,
 * memcopies, and conditionals. This applies recursively to child graphs and
 * conditional bodies." Checks the bodies of g's conditional nodes (body: g is
 * one, or is inside one); returns the first node that breaks it, or NULL. */
CUgraphNode emu_cond_body_check(CUgraph g, int body)
{
    for (size_t i = 0; i < g->n; i++) {
        CUgraphNode nd = g->nodes[i];
        switch (nd->p.type) {
        case CU_GRAPH_NODE_TYPE_KERNEL: case CU_GRAPH_NODE_TYPE_EMPTY:
        case CU_GRAPH_NODE_TYPE_MEMSET: case CU_GRAPH_NODE_TYPE_MEMCPY:
            break;
        case CU_GRAPH_NODE_TYPE_GRAPH: {
            CUgraphNode bad = emu_cond_body_check(nd->p.child, body);
            if (bad) return bad;
            break;
        }
        case CU_GRAPH_NODE_TYPE_CONDITIONAL:
            for (unsigned b = 0; b < nd->p.cond_size; b++) {
                CUgraphNode bad = emu_cond_body_check(nd->p.cond_body[b], 1);
                if (bad) return bad;
            }
            break;
        default:
            if (body) return nd;
        }
    }
    return NULL;
}

/* The first kernel node in g (bodies, child graphs and nested conditional
 * bodies included) whose context is not ctx, or NULL. */
static CUgraphNode kernel_ctx_other(CUgraph g, CUcontext ctx)
{
    for (size_t i = 0; i < g->n; i++) {
        const emu_nparams *p = &g->nodes[i]->p;
        if (p->type == CU_GRAPH_NODE_TYPE_KERNEL && p->ctx != ctx) return g->nodes[i];
        CUgraphNode bad = p->child ? kernel_ctx_other(p->child, ctx) : NULL;
        for (unsigned b = 0; !bad && p->cond_body && b < p->cond_size; b++)
            bad = kernel_ctx_other(p->cond_body[b], ctx);
        if (bad) return bad;
    }
    return NULL;
}

/* CUDA_CONDITIONAL_NODE_PARAMS: "All kernels, including kernels in nested
 * conditionals or child graphs at any level, must belong to the same CUDA
 * context"; ctx: "Must match context used to create the handle and all body
 * nodes". Kernels only are checked (the list names them; a memset or copy
 * node's context is where it runs, which a body filled by the explicit API
 * may set otherwise). A body filled by capture on a stream of another
 * context, or by a kernel of another context's module, breaks it. Returns
 * the first kernel node of g's conditional bodies (any depth) whose
 * context is not its conditional node's, or NULL. */
CUgraphNode emu_cond_ctx_check(CUgraph g)
{
    for (size_t i = 0; i < g->n; i++) {
        const emu_nparams *p = &g->nodes[i]->p;
        CUgraphNode bad = p->child ? emu_cond_ctx_check(p->child) : NULL;
        for (unsigned b = 0; !bad && p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && b < p->cond_size; b++)
            bad = kernel_ctx_other(p->cond_body[b], p->ctx);
        if (bad) return bad;
    }
    return NULL;
}

/* The handles of a launch snapshot's conditional nodes, all bodies included,
 * appended to *out (grown; *n of them). Returns 0 on allocation failure. */
int emu_cond_collect(const emu_nparams *v, size_t n, CUgraphConditionalHandle **out, size_t *nout, size_t *cap)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i].type != CU_GRAPH_NODE_TYPE_CONDITIONAL) continue;
        if (!EMU_GROW(*out, *cap, *nout + 1)) return 0;
        (*out)[(*nout)++] = v[i].cond;
        if (!emu_cond_collect(v[i].body, v[i].nbody, out, nout, cap)) return 0;
    }
    return 1;
}
