/*
 * test_syncmem.c: synchronous memory operations (docs/emulator.md,
 * "Synchronous memory operations: SYNC_MEMOPS"):
 *
 *   cuPointerSetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, ptr): the
 *     whole allocation's flag for cuMemAlloc(Pitch), managed and pinned host
 *     memory (any address in it); CUDA_ERROR_NOT_SUPPORTED on a cuMemMap
 *     mapping, pool and graph memory; CUDA_ERROR_INVALID_VALUE for another
 *     attribute, a NULL value or memory in no allocation; the flag goes with
 *     the allocation (a new block at the same address starts at 0);
 *   cuPointerGetAttribute(s) of SYNC_MEMOPS: the flag, an unsigned int;
 *   cuCtxSetFlags: its errors, cuCtxGetFlags and cuDevicePrimaryCtxGetState
 *     after it;
 *   the backdoors cudaemu_sync_memops (allocation flag or the current
 *     context's CU_CTX_SYNC_MEMOPS) and cudaemu_rdma_capable.
 * (Blocks opened by cuIpcOpenMemHandle: tests/emu/test_ipc.c.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "graph_util.h"
#include "driver/emu_kernel.h"

static const unsigned ONE = 1, ZERO = 0;

/* SYNC_MEMOPS through the singular call, checked against the plural one;
 * exactly 4 bytes written (an unsigned int). -1 where the call fails. */
static int sync_attr(CUdeviceptr p)
{
    unsigned char a[8], b[8];
    memset(a, 0xee, sizeof a);
    memset(b, 0xee, sizeof b);
    if (cuPointerGetAttribute(a, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p) != CUDA_SUCCESS) return -1;
    CUpointer_attribute at = CU_POINTER_ATTRIBUTE_SYNC_MEMOPS;
    void *data[1] = { b };
    CHECK_CU(cuPointerGetAttributes(1, &at, data, p), CUDA_SUCCESS);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(a[4] == 0xee && a[5] == 0xee && a[6] == 0xee && a[7] == 0xee);
    uint32_t v;
    memcpy(&v, a, 4);
    CHECK(v <= 1);
    return (int)v;
}

static CUresult set_sync(CUdeviceptr p, unsigned v) { return cuPointerSetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p); }

/* The rdma backdoor agrees with IS_GPU_DIRECT_RDMA_CAPABLE (same code). */
static int rdma(CUdeviceptr p)
{
    int attr = -1;
    CHECK_CU(cuPointerGetAttribute(&attr, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, p), CUDA_SUCCESS);
    CHECK_EQ(cudaemu_rdma_capable(p), attr);
    return attr;
}

TEST(backdoors_and_entry_points)
{
    CHECK(cudaemu_sync_memops != NULL);
    CHECK(cudaemu_rdma_capable != NULL);
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    CHECK_CU(cuGetProcAddress("cuPointerSetAttribute", &fn, 12000, 0, &st), CUDA_SUCCESS);
    CHECK(fn == (void *)cuPointerSetAttribute && st == CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK_CU(cuGetProcAddress("cuCtxSetFlags", &fn, 12010, 0, &st), CUDA_SUCCESS);
    CHECK(fn == (void *)cuCtxSetFlags && st == CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK_CU(cuGetProcAddress("cuCtxSetFlags", &fn, 12000, 0, &st), CUDA_SUCCESS);   /* came with 12.1 */
    CHECK(fn == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

TEST(cumemalloc_block)
{
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc(&p, 1000), CUDA_SUCCESS);
    CHECK_EQ(sync_attr(p), 0);                          /* never set */
    CHECK_EQ(cudaemu_sync_memops(p), 0);
    CHECK_EQ(rdma(p + 3), 1);
    CHECK_CU(set_sync(p + 500, 1), CUDA_SUCCESS);      /* an inner address: the whole block */
    CHECK_EQ(sync_attr(p), 1);
    CHECK_EQ(sync_attr(p + 999), 1);
    CHECK_EQ(cudaemu_sync_memops(p + 10), 1);
    CHECK_CU(set_sync(p + 999, 0), CUDA_SUCCESS);      /* unset */
    CHECK_EQ(sync_attr(p + 1), 0);
    CHECK_EQ(cudaemu_sync_memops(p), 0);
    CHECK_CU(set_sync(p, 7), CUDA_SUCCESS);            /* any non-zero value sets it */
    CHECK_EQ(sync_attr(p), 1);
    /* errors change nothing */
    CHECK_CU(cuPointerSetAttribute(&ZERO, CU_POINTER_ATTRIBUTE_IS_MANAGED, p), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuPointerSetAttribute(&ZERO, CU_POINTER_ATTRIBUTE_CONTEXT, p), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuPointerSetAttribute(&ZERO, CU_POINTER_ATTRIBUTE_P2P_TOKENS, p), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuPointerSetAttribute(NULL, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(sync_attr(p), 1);
    /* memory in no allocation */
    unsigned stack_word = 0;
    CHECK_CU(set_sync((CUdeviceptr)&stack_word, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(set_sync(0, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cudaemu_sync_memops((CUdeviceptr)&stack_word), -1);
    CHECK_EQ(cudaemu_rdma_capable((CUdeviceptr)&stack_word), -1);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);

    /* cuMemAllocPitch: the same, for any row */
    size_t pitch;
    CHECK_CU(cuMemAllocPitch(&p, &pitch, 100, 4, 4), CUDA_SUCCESS);
    CHECK_EQ(sync_attr(p), 0);
    CHECK_CU(set_sync(p + 2 * pitch + 8, 1), CUDA_SUCCESS);
    CHECK_EQ(sync_attr(p), 1);
    CHECK_EQ(cudaemu_sync_memops(p + 3 * pitch), 1);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* The flag goes with the allocation: a freed block answers nothing, and a
 * new block at the same address starts at 0. */
TEST(flag_lifetime)
{
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc(&p, 3 * 4096), CUDA_SUCCESS);
    CHECK_CU(set_sync(p, 1), CUDA_SUCCESS);
    CHECK_EQ(cudaemu_sync_memops(p), 1);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_EQ(sync_attr(p), -1);
    CHECK_CU(set_sync(p, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cudaemu_sync_memops(p), -1);
    CHECK_EQ(cudaemu_rdma_capable(p), -1);
    /* allocate until a block lands at the old address (the address space
     * hands the hole out again), keeping the others so each try is new */
    CUdeviceptr got[16];
    int n = 0, hit = -1;
    for (; n < 16 && hit < 0; n++) {
        CHECK_CU(cuMemAlloc(&got[n], 3 * 4096), CUDA_SUCCESS);
        if (got[n] == p) hit = n;
    }
    CHECK(hit >= 0);                                    /* else the rule went untested */
    if (hit >= 0) {
        CHECK_EQ(sync_attr(p), 0);
        CHECK_EQ(cudaemu_sync_memops(p + 5000), 0);
    }
    for (int i = 0; i < n; i++) CHECK_CU(cuMemFree(got[i]), CUDA_SUCCESS);
}

TEST(managed_and_host_memory)
{
    CUdeviceptr m;
    CHECK_CU(cuMemAllocManaged(&m, 5000, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CHECK_EQ(sync_attr(m), 0);
    CHECK_CU(set_sync(m + 4999, 1), CUDA_SUCCESS);
    CHECK_EQ(sync_attr(m), 1);
    CHECK_EQ(cudaemu_sync_memops(m + 1), 1);
    CHECK_EQ(rdma(m), 0);
    CHECK_CU(cuMemFree(m), CUDA_SUCCESS);

    void *h;
    CHECK_CU(cuMemHostAlloc(&h, 300, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
    CHECK_EQ(sync_attr((CUdeviceptr)h), 0);
    CHECK_CU(set_sync((CUdeviceptr)h + 20, 1), CUDA_SUCCESS);
    CHECK_EQ(sync_attr((CUdeviceptr)h + 299), 1);
    CHECK_EQ(cudaemu_sync_memops((CUdeviceptr)h), 1);
    CHECK_EQ(rdma((CUdeviceptr)h), 0);
    CHECK_CU(cuMemFreeHost(h), CUDA_SUCCESS);

    void *buf = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(buf != MAP_FAILED);
    CHECK_EQ(cudaemu_sync_memops((CUdeviceptr)buf), -1);        /* pageable: no allocation */
    CHECK_CU(set_sync((CUdeviceptr)buf, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemHostRegister(buf, 8192, 0), CUDA_SUCCESS);
    CHECK_EQ(sync_attr((CUdeviceptr)buf + 4096), 0);
    CHECK_CU(set_sync((CUdeviceptr)buf + 4096, 1), CUDA_SUCCESS);
    CHECK_EQ(sync_attr((CUdeviceptr)buf), 1);
    CHECK_EQ(cudaemu_sync_memops((CUdeviceptr)buf), 1);
    CHECK_CU(cuMemHostUnregister(buf), CUDA_SUCCESS);
    CHECK_EQ(cudaemu_sync_memops((CUdeviceptr)buf), -1);
    CHECK_CU(cuMemHostRegister(buf, 8192, 0), CUDA_SUCCESS);      /* registered again: a new flag */
    CHECK_EQ(sync_attr((CUdeviceptr)buf), 0);
    CHECK_CU(cuMemHostUnregister(buf), CUDA_SUCCESS);
    munmap(buf, 8192);
}

/* A cuMemMap mapping refuses the attribute (NOT_SUPPORTED) and reads 0; the
 * guarantee comes from the context's CU_CTX_SYNC_MEMOPS instead, and only
 * for operations from that context. */
TEST(vmm_mapping)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    size_t g;
    CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CUmemGenericAllocationHandle plain, capable;
    CHECK_CU(cuMemCreate(&plain, g, &prop, 0), CUDA_SUCCESS);
    prop.allocFlags.gpuDirectRDMACapable = 1;
    CHECK_CU(cuMemCreate(&capable, g, &prop, 0), CUDA_SUCCESS);
    CUdeviceptr va;
    CHECK_CU(cuMemAddressReserve(&va, 3 * g, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(va, g, 0, plain, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(va + g, g, 0, capable, 0), CUDA_SUCCESS);
    CUmemAccessDesc rw = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CHECK_CU(cuMemSetAccess(va, 2 * g, &rw, 1), CUDA_SUCCESS);

    CHECK_CU(set_sync(va, 1), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(set_sync(va + g + 100, 1), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(set_sync(va + 2 * g, 1), CUDA_ERROR_INVALID_VALUE);    /* reserved, not mapped */
    CHECK_EQ(cudaemu_sync_memops(va + 2 * g), -1);
    CHECK_EQ(cudaemu_rdma_capable(va + 2 * g), -1);
    CHECK_EQ(sync_attr(va), 0);
    CHECK_EQ(cudaemu_sync_memops(va), 0);
    CHECK_EQ(cudaemu_sync_memops(va + g), 0);
    CHECK_EQ(rdma(va + 5), 0);                          /* the handle did not ask */
    CHECK_EQ(rdma(va + g + 5), 1);                      /* allocFlags.gpuDirectRDMACapable */

    /* UCX's answer: the context's flag */
    unsigned f = 99;
    CHECK_CU(cuCtxGetFlags(&f), CUDA_SUCCESS);
    CHECK_EQ(f, 0);
    CHECK_CU(cuCtxSetFlags(CU_CTX_SYNC_MEMOPS), CUDA_SUCCESS);
    CHECK_EQ(cudaemu_sync_memops(va), 1);
    CHECK_EQ(cudaemu_sync_memops(va + g + 1), 1);
    CHECK_EQ(sync_attr(va), 0);                         /* the attribute stays the allocation's */
    CHECK_CU(set_sync(va, 1), CUDA_ERROR_NOT_SUPPORTED);
    /* from another context the guarantee does not hold */
    CUcontext other;
    CUdevice dev;
    CHECK_CU(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxCreate(&other, NULL, 0, dev), CUDA_SUCCESS);     /* pushed current */
    CHECK_EQ(cudaemu_sync_memops(va), 0);
    CHECK_CU(cuCtxSetFlags(CU_CTX_SYNC_MEMOPS | CU_CTX_SCHED_SPIN), CUDA_SUCCESS);
    CHECK_EQ(cudaemu_sync_memops(va), 1);
    CHECK_CU(cuCtxDestroy(other), CUDA_SUCCESS);        /* popped: the primary context again */
    CUcontext cur = NULL;
    CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == g_ctx);
    CHECK_EQ(cudaemu_sync_memops(va), 1);
    CHECK_CU(cuCtxSetFlags(0), CUDA_SUCCESS);
    CHECK_EQ(cudaemu_sync_memops(va), 0);
    /* no current context: nothing guarantees it */
    CHECK_CU(cuCtxSetFlags(CU_CTX_SYNC_MEMOPS), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_EQ(cudaemu_sync_memops(va), 0);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    CHECK_EQ(cudaemu_sync_memops(va), 1);
    CHECK_CU(cuCtxSetFlags(0), CUDA_SUCCESS);

    CHECK_CU(cuMemUnmap(va, 2 * g), CUDA_SUCCESS);
    CHECK_EQ(cudaemu_sync_memops(va), -1);
    CHECK_CU(cuMemAddressFree(va, 3 * g), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(plain), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(capable), CUDA_SUCCESS);
}

TEST(pool_and_graph_memory)
{
    CUdeviceptr p, q;
    CUmemoryPool pool;
    CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&p, 10000, NULL), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocFromPoolAsync(&q, 100, pool, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_CU(set_sync(p, 1), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(set_sync(p + 9999, 0), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(set_sync(q, 1), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_EQ(sync_attr(p), 0);
    CHECK_EQ(sync_attr(q), 0);
    CHECK_EQ(cudaemu_sync_memops(p), 0);
    CHECK_EQ(rdma(p), 0);
    CHECK_CU(cuMemFreeAsync(p, NULL), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(q, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);

    /* a graph allocation while allocated */
    CUgraph graph;
    CUgraphExec exec;
    CUgraphNode an;
    CHECK_CU(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = 0;
    ap.bytesize = 4096;
    CHECK_CU(cuGraphAddMemAllocNode(&an, graph, NULL, 0, &ap), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(exec, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(sync_attr(ap.dptr), 0);
    CHECK_CU(set_sync(ap.dptr, 1), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(set_sync(ap.dptr + 100, 1), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_EQ(cudaemu_sync_memops(ap.dptr), 0);
    CHECK_CU(cuMemFree(ap.dptr), CUDA_SUCCESS);
    CHECK_EQ(cudaemu_sync_memops(ap.dptr), -1);
    CHECK_CU(cuGraphExecDestroy(exec), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(graph), CUDA_SUCCESS);
}

TEST(ctx_set_flags)
{
    unsigned f = 99, pf = 99;
    int active = 0;
    CUdevice dev;
    CHECK_CU(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetFlags(CU_CTX_SCHED_BLOCKING_SYNC | CU_CTX_SYNC_MEMOPS), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetFlags(&f), CUDA_SUCCESS);
    CHECK_EQ(f, CU_CTX_SCHED_BLOCKING_SYNC | CU_CTX_SYNC_MEMOPS);
    /* the primary context's flags are the device's (the emulator's reading) */
    CHECK_CU(cuDevicePrimaryCtxGetState(dev, &pf, &active), CUDA_SUCCESS);
    CHECK_EQ(pf, CU_CTX_SCHED_BLOCKING_SYNC | CU_CTX_SYNC_MEMOPS);
    CHECK_EQ(active, 1);
    /* errors leave them */
    CHECK_CU(cuCtxSetFlags(0x100), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuCtxSetFlags(CU_CTX_SYNC_MEMOPS | 0x8000), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuCtxSetFlags(CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuCtxSetFlags(CU_CTX_SCHED_YIELD | CU_CTX_SCHED_BLOCKING_SYNC), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuCtxSetFlags(CU_CTX_SCHED_MASK), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuCtxGetFlags(&f), CUDA_SUCCESS);
    CHECK_EQ(f, CU_CTX_SCHED_BLOCKING_SYNC | CU_CTX_SYNC_MEMOPS);
    /* overwritten, not or-ed; every flag of the mask with one scheduling flag */
    CHECK_CU(cuCtxSetFlags(CU_CTX_FLAGS_MASK & ~(CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD)), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetFlags(&f), CUDA_SUCCESS);
    CHECK_EQ(f, CU_CTX_FLAGS_MASK & ~(CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD));
    CHECK_CU(cuCtxSetFlags(CU_CTX_SCHED_YIELD), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetFlags(&f), CUDA_SUCCESS);
    CHECK_EQ(f, CU_CTX_SCHED_YIELD);
    /* cuDevicePrimaryCtxSetFlags takes CU_CTX_SYNC_MEMOPS too (documented
     * there), and cuCtxGetFlags of the primary context shows it */
    CHECK_CU(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SYNC_MEMOPS), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetFlags(&f), CUDA_SUCCESS);
    CHECK_EQ(f, CU_CTX_SYNC_MEMOPS);
    CHECK_CU(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuDevicePrimaryCtxSetFlags(dev, 0x100), CUDA_ERROR_INVALID_VALUE);

    /* a created context: its own flags, the primary context's unchanged */
    CUcontext c;
    CHECK_CU(cuCtxCreate(&c, NULL, CU_CTX_SCHED_SPIN, dev), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetFlags(&f), CUDA_SUCCESS);
    CHECK_EQ(f, CU_CTX_SCHED_SPIN);
    CHECK_CU(cuCtxSetFlags(CU_CTX_SYNC_MEMOPS), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetFlags(&f), CUDA_SUCCESS);
    CHECK_EQ(f, CU_CTX_SYNC_MEMOPS);
    CHECK_CU(cuCtxSetFlags(0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxGetState(dev, &pf, &active), CUDA_SUCCESS);
    CHECK_EQ(pf, CU_CTX_SYNC_MEMOPS);
    CHECK_CU(cuCtxDestroy(c), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetFlags(&f), CUDA_SUCCESS);           /* the primary context again */
    CHECK_EQ(f, CU_CTX_SYNC_MEMOPS);

    /* no current context */
    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetFlags(0), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuCtxGetFlags(&f), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetFlags(&f), CUDA_SUCCESS);
    CHECK_EQ(f, CU_CTX_SYNC_MEMOPS);
    CHECK_CU(cuCtxSetFlags(0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxGetState(dev, &pf, &active), CUDA_SUCCESS);
    CHECK_EQ(pf, 0);
}

int main(void)
{
    /* before cuInit */
    CHECK_CU(cuPointerSetAttribute(&ONE, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, 4096), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_CU(cuCtxSetFlags(0), CUDA_ERROR_NOT_INITIALIZED);
    gu_setup();
    RUN(backdoors_and_entry_points);
    RUN(cumemalloc_block);
    RUN(flag_lifetime);
    RUN(managed_and_host_memory);
    RUN(vmm_mapping);
    RUN(pool_and_graph_memory);
    RUN(ctx_set_flags);
    return check_done();
}
