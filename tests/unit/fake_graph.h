/*
 * tests/unit/fake_graph.h: an in-memory fake of the driver's graph queries
 * for unit tests of core/fingerprint.c and core/graphs.c (header-only; each
 * test program includes it once).
 *
 * A fake graph (fg) holds up to FG_MAX nodes (kernel, memcpy, memset, empty
 * or any other type) and edges; handles given to core/ are pointers into it.
 * Fake functions (ff) declare their argument layout for cuFuncGetParamInfo /
 * cuKernelGetParamInfo. Device addresses are the range [FG_DEV_LO, FG_DEV_HI)
 * (cuPointerGetAttribute answers for them). Every fake counts its calls in
 * fg_calls. Single-threaded, like the tests.
 */
#ifndef FAKE_GRAPH_H
#define FAKE_GRAPH_H

#include <cuda.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "core/driver.h"

#define FG_MAX 16
#define FG_NATTR 17
#define FG_DEV_LO 0x70000000ull
#define FG_DEV_HI 0x80000000ull

typedef struct ff {                 /* a fake CUfunction / CUkernel */
    int n;
    size_t off[8], size[8];
    CUresult info_error;            /* if set, cuFuncGetParamInfo answers this */
    int calls, fail_from;           /* if fail_from: its calls from that one on answer
                                       CUDA_ERROR_INVALID_VALUE (a failing driver) */
} ff;

typedef struct fg fg;
typedef struct fg_node {
    fg *g;
    CUgraphNodeType type;
    CUDA_KERNEL_NODE_PARAMS kp;     /* kernelParams points into args[] */
    unsigned char args[8][32];
    void *argv[8];
    CUDA_MEMCPY3D cp;
    CUDA_MEMSET_NODE_PARAMS ms;
    CUkernelNodeAttrValue attr[FG_NATTR];
    CUresult attr_err[FG_NATTR];    /* non-zero: GetAttribute answers this */
} fg_node;

struct fg {
    fg_node nodes[FG_MAX];
    size_t n;
    int from[FG_MAX * 2], to[FG_MAX * 2];
    size_t ne;
};

static struct {
    int get_nodes, get_edges, get_type, kparams, attr, memcpy_p, memset_p, param_info, ptr_attr;
} fg_calls;
static cuuint64_t fg_exec_flags;

/* Appends a kernel node running f with argument values vals (each arg's
 * bytes from vals[i], f->size[i] of them). */
static inline fg_node *fg_kernel(fg *g, const ff *f, const void *const *vals)
{
    fg_node *nd = &g->nodes[g->n++];
    memset(nd, 0, sizeof *nd);
    nd->g = g;
    nd->type = CU_GRAPH_NODE_TYPE_KERNEL;
    nd->kp.func = (CUfunction)(uintptr_t)f;
    nd->kp.gridDimX = 4; nd->kp.gridDimY = nd->kp.gridDimZ = 1;
    nd->kp.blockDimX = 128; nd->kp.blockDimY = nd->kp.blockDimZ = 1;
    for (int i = 0; i < f->n; i++) {
        memcpy(nd->args[i], vals[i], f->size[i]);
        nd->argv[i] = nd->args[i];
    }
    nd->kp.kernelParams = nd->argv;
    nd->attr[CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP].memSyncDomainMap.remote = 1;
    return nd;
}

static inline fg_node *fg_other(fg *g, CUgraphNodeType type)
{
    fg_node *nd = &g->nodes[g->n++];
    memset(nd, 0, sizeof *nd);
    nd->g = g;
    nd->type = type;
    return nd;
}

static inline void fg_edge(fg *g, int a, int b)
{
    g->from[g->ne] = a;
    g->to[g->ne++] = b;
}

/* A copy of g whose node handles are its own (as a re-capture makes). */
/* The graph both graph tests start from: kernel f(in, salt, out) -> a
 * 64-byte device-to-device memcpy in -> out -> a memset of out, chained. */
static inline void fg_make_chain(fg *g, const ff *f, const CUdeviceptr *in, const uint32_t *salt,
                                 const CUdeviceptr *out)
{
    memset(g, 0, sizeof *g);
    const void *vals[] = { in, salt, out };
    fg_kernel(g, f, vals);
    fg_node *c = fg_other(g, CU_GRAPH_NODE_TYPE_MEMCPY);
    c->cp.srcMemoryType = c->cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c->cp.srcDevice = *in;
    c->cp.dstDevice = *out;
    c->cp.WidthInBytes = 64;
    c->cp.Height = c->cp.Depth = 1;
    fg_node *s = fg_other(g, CU_GRAPH_NODE_TYPE_MEMSET);
    s->ms.dst = *out;
    s->ms.elementSize = 4;
    s->ms.width = 16;
    s->ms.height = 1;
    fg_edge(g, 0, 1);
    fg_edge(g, 1, 2);
}

static inline void fg_copy(fg *dst, const fg *src)
{
    *dst = *src;
    for (size_t i = 0; i < dst->n; i++) {
        dst->nodes[i].g = dst;
        for (int a = 0; a < 8; a++) dst->nodes[i].argv[a] = dst->nodes[i].args[a];
        if (dst->nodes[i].kp.kernelParams) dst->nodes[i].kp.kernelParams = dst->nodes[i].argv;
    }
}

static CUresult fg_get_nodes(CUgraph h, CUgraphNode *out, size_t *n)
{
    fg *g = (fg *)h;
    fg_calls.get_nodes++;
    if (out)
        for (size_t i = 0; i < g->n && i < *n; i++) out[i] = (CUgraphNode)&g->nodes[i];
    *n = g->n;
    return CUDA_SUCCESS;
}

static CUresult fg_get_edges(CUgraph h, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *d,
                             size_t *n)
{
    fg *g = (fg *)h;
    fg_calls.get_edges++;
    if (from)
        for (size_t i = 0; i < g->ne && i < *n; i++) {
            from[i] = (CUgraphNode)&g->nodes[g->from[i]];
            to[i] = (CUgraphNode)&g->nodes[g->to[i]];
            if (d) memset(&d[i], 0, sizeof d[i]);
        }
    *n = g->ne;
    return CUDA_SUCCESS;
}

static CUresult fg_get_type(CUgraphNode h, CUgraphNodeType *t)
{
    fg_calls.get_type++;
    *t = ((fg_node *)h)->type;
    return CUDA_SUCCESS;
}

static CUresult fg_kparams(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *p)
{
    fg_node *nd = (fg_node *)h;
    fg_calls.kparams++;
    if (nd->type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
    *p = nd->kp;
    return CUDA_SUCCESS;
}

static CUresult fg_attr(CUgraphNode h, CUkernelNodeAttrID id, CUkernelNodeAttrValue *v)
{
    fg_node *nd = (fg_node *)h;
    fg_calls.attr++;
    if ((int)id >= FG_NATTR) return CUDA_ERROR_INVALID_VALUE;
    if (nd->attr_err[id]) return nd->attr_err[id];
    memset(v, 0xee, sizeof *v);   /* bytes beyond the value's own are garbage */
    memcpy(v, &nd->attr[id], id == CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP ? 2 : 28);
    return CUDA_SUCCESS;
}

static CUresult fg_memcpy(CUgraphNode h, CUDA_MEMCPY3D *p)
{
    fg_calls.memcpy_p++;
    *p = ((fg_node *)h)->cp;
    return CUDA_SUCCESS;
}

static CUresult fg_memset(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *p)
{
    fg_calls.memset_p++;
    *p = ((fg_node *)h)->ms;
    return CUDA_SUCCESS;
}

static CUresult fg_param_info(CUfunction h, size_t i, size_t *off, size_t *size)
{
    const ff *f = (const ff *)h;
    fg_calls.param_info++;
    if (f->info_error) return f->info_error;
    if (f->fail_from && ((ff *)h)->calls++ + 1 >= f->fail_from) return CUDA_ERROR_INVALID_VALUE;
    if (i >= (size_t)f->n) return CUDA_ERROR_INVALID_VALUE;
    *off = f->off[i];
    *size = f->size[i];
    return CUDA_SUCCESS;
}

static CUresult fg_kernel_param_info(CUkernel h, size_t i, size_t *off, size_t *size)
{
    return fg_param_info((CUfunction)(void *)h, i, off, size);
}

static CUresult fg_ptr_attr(void *out, CUpointer_attribute a, CUdeviceptr p)
{
    fg_calls.ptr_attr++;
    if (a != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR || p < FG_DEV_LO || p >= FG_DEV_HI)
        return CUDA_ERROR_INVALID_VALUE;
    *(CUdeviceptr *)out = p & ~0xfffull;
    return CUDA_SUCCESS;
}

static CUresult fg_exec_get_flags(CUgraphExec e, cuuint64_t *flags)
{
    (void)e;
    *flags = fg_exec_flags;
    return CUDA_SUCCESS;
}

static CUresult fg_ctx_current(CUcontext *c)
{
    *c = (CUcontext)(uintptr_t)0xc7c7;
    return CUDA_SUCCESS;
}

/* Installs the fakes as core/'s driver table. */
static inline void fg_install(void)
{
    sg_driver d;
    memset(&d, 0, sizeof d);
    d.cuGraphGetNodes = fg_get_nodes;
    d.cuGraphGetEdges_v2 = fg_get_edges;
    d.cuGraphNodeGetType = fg_get_type;
    d.cuGraphKernelNodeGetParams_v2 = fg_kparams;
    d.cuGraphKernelNodeGetAttribute = fg_attr;
    d.cuGraphMemcpyNodeGetParams = fg_memcpy;
    d.cuGraphMemsetNodeGetParams = fg_memset;
    d.cuFuncGetParamInfo = fg_param_info;
    d.cuKernelGetParamInfo = fg_kernel_param_info;
    d.cuPointerGetAttribute = fg_ptr_attr;
    d.cuGraphExecGetFlags = fg_exec_get_flags;
    d.cuCtxGetCurrent = fg_ctx_current;
    sg_driver_set(&d);
}

static inline CUresult fg_made_forward(const void *args)
{
    (void)args;
    return CUDA_SUCCESS;
}

/* g made by the program (a cuGraphCreate through core/, answering g): the
 * library keeps an exec's node handles only for a graph it saw made (its
 * record, which the fake's counts then spoil: read back). */
static inline void fg_made(fg *g)
{
    CUgraph out = (CUgraph)g;
    sg_gb gb;
    memset(&gb, 0, sizeof gb);
    gb.kind = SG_GB_GRAPH_CREATE;
    gb.u.graph_out = &out;
    sg_call c;
    memset(&c, 0, sizeof c);
    c.kind = SG_CALL_FORWARD;
    c.forward = fg_made_forward;
    c.gb = &gb;
    (void)sg_core_call(&c);
}

/* ff with the emulator's ABI layout for the given sizes. */
static inline ff ff_make(int n, const size_t *sizes)
{
    ff f;
    memset(&f, 0, sizeof f);
    f.n = n;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t al = 1;
        while (al < sizes[i] && al < 8) al *= 2;
        off = (off + al - 1) / al * al;
        f.off[i] = off;
        f.size[i] = sizes[i];
        off += sizes[i];
    }
    return f;
}

#endif /* FAKE_GRAPH_H */
