/*
 * graph_util.h: set-up shared by the graph and capture tests (test_graph.c,
 * test_capture.c): a current primary context, the kernels of mod_graph.so
 * (built next to the test program), device buffers and small launch helpers.
 * Single-threaded set-up; the globals are written once before any case runs.
 */
#ifndef GRAPH_UTIL_H
#define GRAPH_UTIL_H

#include <cuda.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "emu_test.h"
#include "launch_util.h"

static CUcontext g_ctx;
static CUfunction k_fill, k_affine, k_add, k_slow;
static CUmodule g_mod;              /* mod_graph.so: its other kernels */

/* Aborts the program: nothing can be tested without the set-up. */
#define SETUP_CU(expr) do {                                                    \
    CUresult r_ = (expr);                                                      \
    if (r_ != CUDA_SUCCESS) {                                                  \
        printf("Bail out! %s failed: %d\n", #expr, (int)r_);                   \
        exit(1);                                                               \
    }                                                                          \
} while (0)

static void gu_setup(void)
{
    CUmodule mod;
    SETUP_CU(emu_test_open("mod_graph.so", &g_ctx, &mod));
    g_mod = mod;
    SETUP_CU(cuModuleGetFunction(&k_fill, mod, "fill_u32"));
    SETUP_CU(cuModuleGetFunction(&k_affine, mod, "affine_u32"));
    SETUP_CU(cuModuleGetFunction(&k_add, mod, "add_u32"));
    SETUP_CU(cuModuleGetFunction(&k_slow, mod, "slow_fill_u32"));
}

#define N_ELEMS 64

static inline CUdeviceptr gu_alloc(void)
{
    CUdeviceptr p = 0;
    CHECK_CU(cuMemAlloc(&p, N_ELEMS * sizeof(uint32_t)), CUDA_SUCCESS);
    return p;
}

/* A 1-D memset node's parameters: N_ELEMS words of v at dst. */
static inline CUDA_MEMSET_NODE_PARAMS gu_set_1d(CUdeviceptr dst, uint32_t v)
{
    CUDA_MEMSET_NODE_PARAMS m = { .dst = dst, .value = v, .elementSize = 4, .width = N_ELEMS, .height = 1 };
    return m;
}

/* A 1-D device-to-device copy node's parameters: bytes from src to dst. */
static inline CUDA_MEMCPY3D gu_copy_1d(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.dstDevice = dst;
    c.WidthInBytes = bytes;
    c.Height = c.Depth = 1;
    return c;
}

/* Reads buffer p into out (N_ELEMS words). */
static inline void gu_read(CUdeviceptr p, uint32_t *out)
{
    CHECK_CU(cuMemcpyDtoH(out, p, N_ELEMS * sizeof(uint32_t)), CUDA_SUCCESS);
}

/* 1 if every element of p equals v. */
static inline int gu_all(CUdeviceptr p, uint32_t v)
{
    uint32_t h[N_ELEMS];
    gu_read(p, h);
    for (int i = 0; i < N_ELEMS; i++)
        if (h[i] != v) { printf("#   element %d is %u, want %u\n", i, h[i], v); return 0; }
    return 1;
}

/* Launches e on the legacy stream, waits, checks that every word of p is want. */
static inline void gu_launch_expect(CUgraphExec e, CUdeviceptr p, uint32_t want)
{
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(p, want));
}

/* Checks that g has n nodes and e edges, and puts its nodes in nodes (room
 * for n). */
static inline void gu_graph_shape(CUgraph g, size_t n, size_t e, CUgraphNode *nodes)
{
    size_t hn = 0, he = 0;
    CHECK_CU(cuGraphGetNodes(g, NULL, &hn), CUDA_SUCCESS);
    CHECK_CU(cuGraphGetEdges(g, NULL, NULL, NULL, &he), CUDA_SUCCESS);
    CHECK_EQ(hn, n);
    CHECK_EQ(he, e);
    if (hn == n) CHECK_CU(cuGraphGetNodes(g, nodes, &hn), CUDA_SUCCESS);
}

/* Kernel arguments kept alive for a params struct. */
typedef struct gu_args {
    CUdeviceptr p0, p1, p2;
    uint32_t u0, u1;
    uint64_t n;
    void *kp[4];
} gu_args;

static inline void gu_kp_fill(gu_args *a, CUdeviceptr p, uint32_t v)
{
    a->p0 = p; a->u0 = v; a->n = N_ELEMS;
    a->kp[0] = &a->p0; a->kp[1] = &a->u0; a->kp[2] = &a->n; a->kp[3] = NULL;
}

static inline void gu_kp_affine(gu_args *a, CUdeviceptr p, uint32_t mul, uint32_t add)
{
    a->p0 = p; a->u0 = mul; a->u1 = add; a->n = N_ELEMS;
    a->kp[0] = &a->p0; a->kp[1] = &a->u0; a->kp[2] = &a->u1; a->kp[3] = &a->n;
}

static inline void gu_kp_add(gu_args *a, CUdeviceptr d, CUdeviceptr x, CUdeviceptr y)
{
    a->p0 = d; a->p1 = x; a->p2 = y; a->n = N_ELEMS;
    a->kp[0] = &a->p0; a->kp[1] = &a->p1; a->kp[2] = &a->p2; a->kp[3] = &a->n;
}

/* slow_fill: fills p with v after `us` microseconds. */
static inline void gu_kp_slow(gu_args *a, CUdeviceptr p, uint32_t v, uint32_t us)
{
    a->p0 = p; a->u0 = v; a->n = N_ELEMS; a->u1 = us;
    a->kp[0] = &a->p0; a->kp[1] = &a->u0; a->kp[2] = &a->n; a->kp[3] = &a->u1;
}

static inline CUresult gu_launch(CUfunction f, CUstream s, gu_args *a)
{
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, a->kp, NULL);
}

static inline CUDA_KERNEL_NODE_PARAMS gu_knode(CUfunction f, gu_args *a)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = a->kp;
    return p;
}

/* The fixed work sequence used to compare graphs with eager execution:
 * a = 3 (memset); a = a*5 + 2 (kernel); b = a (memcpy); c = a + b (kernel). */
static inline CUresult gu_eager_sequence(CUstream s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c)
{
    gu_args x, y;
    CUresult r;
    gu_kp_affine(&x, a, 5, 2);
    gu_kp_add(&y, c, a, b);
    if ((r = cuMemsetD32Async(a, 3, N_ELEMS, s)) != CUDA_SUCCESS) return r;
    if ((r = gu_launch(k_affine, s, &x)) != CUDA_SUCCESS) return r;
    if ((r = cuMemcpyDtoDAsync(b, a, N_ELEMS * sizeof(uint32_t), s)) != CUDA_SUCCESS) return r;
    return gu_launch(k_add, s, &y);
}
#define GU_SEQUENCE_A 17u   /* 3*5+2 */
#define GU_SEQUENCE_C 34u

/* Adds a kernel node affine_u32(p, mul, add) to g after deps (its
 * arguments live in a ring of 16, past the calls that read them). */
static inline CUgraphNode gu_add_affine(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr p,
                                        uint32_t mul, uint32_t add)
{
    static gu_args ring[16];
    static int next;
    gu_args *a = &ring[next++ % 16];
    gu_kp_affine(a, p, mul, add);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_affine, a);
    CUgraphNode nd = NULL;
    CHECK_CU(cuGraphAddKernelNode(&nd, g, deps, n, &kp), CUDA_SUCCESS);
    return nd;
}

/* Holds stream s for the host (cuStreamWaitValue32 on a mapped host flag,
 * until it is 1); returns the flag (cuMemFreeHost it). */
static inline uint32_t *gu_hold(CUstream s)
{
    uint32_t *flag = NULL;
    CUdeviceptr d = 0;
    CHECK_CU(cuMemHostAlloc((void **)&flag, 4096, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    CHECK_CU(cuMemHostGetDevicePointer(&d, flag, 0), CUDA_SUCCESS);
    __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamWaitValue32(s, d, 1, CU_STREAM_WAIT_VALUE_EQ), CUDA_SUCCESS);
    return flag;
}

#endif /* GRAPH_UTIL_H */
