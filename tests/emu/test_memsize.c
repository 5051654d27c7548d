/*
 * test_memsize.c: one device memory budget (CUDAEMU_DEVICE_MEMORY=256M; the
 * program re-executes itself to set it) charged by every path that takes
 * device memory, with CUDA_ERROR_OUT_OF_MEMORY beyond it and cuMemGetInfo
 * consistent with it:
 *   cuMemAlloc / cuMemAllocPitch: the bytes rounded up to 4 KiB pages, so 256
 *     blocks of 1 MiB fit exactly; cuMemAllocPitch's pitch is a multiple of
 *     512 (CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT);
 *   cuMemCreate: its size (a multiple of the 2 MiB granularity);
 *   the stream-ordered pool (cuMemAllocAsync, cuMemAllocFromPoolAsync): pages
 *     like cuMemAlloc; freed bytes stay reserved by the pool (and charged)
 *     until a stream, event or context synchronize gives back what exceeds
 *     the release threshold (default 0), or cuMemPoolTrimTo; the pool reuses
 *     what it holds; RESERVED/USED_MEM_CURRENT/HIGH report it;
 *   claims: a cuMemAllocAsync that does not fit takes the bytes of frees
 *     queued on other streams and not reached yet, and its stream waits for
 *     them (REUSE_ALLOW_INTERNAL_DEPENDENCIES, default on; off: OUT_OF_MEMORY);
 *   graph allocations: pages, from the launch that allocates them until
 *     freed (a launch beyond the budget fails with OUT_OF_MEMORY);
 *   CUDA arrays: their elements' bytes in pages, until destroyed.
 */
#include "graph_util.h"

#include <stdlib.h>

#define MIB (1ull << 20)
#define TOTAL (256 * MIB)

static size_t free_mem(void)
{
    size_t f = 0, t = 0;
    CHECK_CU(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    CHECK_EQ(t, TOTAL);
    return f;
}

TEST(total)
{
    size_t t = 0;
    CHECK_CU(cuDeviceTotalMem(&t, 0), CUDA_SUCCESS);
    CHECK_EQ(t, TOTAL);
    CHECK_EQ(free_mem(), TOTAL);
}

TEST(cumemalloc_256_blocks_of_1mib)
{
    static CUdeviceptr p[257];
    for (int i = 0; i < 256; i++) {
        CUresult r = cuMemAlloc(&p[i], MIB);
        if (r != CUDA_SUCCESS) printf("#   block %d: %d\n", i, (int)r);
        CHECK_CU(r, CUDA_SUCCESS);
    }
    CHECK_EQ(free_mem(), 0);
    p[256] = 0;
    CHECK_CU(cuMemAlloc(&p[256], 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(p[256], 0);
    for (int i = 0; i < 256; i++) CHECK_CU(cuMemFree(p[i]), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
}

TEST(page_rounding)
{
    CUdeviceptr a, b;
    CHECK_CU(cuMemAlloc(&a, 1), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 4096);
    CHECK_CU(cuMemAlloc(&b, 4097), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 3 * 4096);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
}

TEST(alloc_pitch)
{
    CUdeviceptr p = 0;
    size_t pitch = 0;
    int align = 0;
    CHECK_CU(cuDeviceGetAttribute(&align, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 0), CUDA_SUCCESS);
    CHECK_EQ(align, 512);
    CHECK_CU(cuMemAllocPitch(&p, &pitch, 1000, 100, 4), CUDA_SUCCESS);
    CHECK_EQ(pitch, 1024);
    CHECK_EQ(free_mem(), TOTAL - 102400);                  /* 1024 * 100, whole pages */
    /* The pitched rows are usable with cuMemcpy2D and cuMemsetD2D32. */
    CHECK_CU(cuMemsetD2D32(p, pitch, 7, 250, 100), CUDA_SUCCESS);
    CHECK_EQ(((uint32_t *)(p + 99 * pitch))[249], 7);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocPitch(&p, &pitch, 1000, 100, 3), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAllocPitch(&p, &pitch, 0, 100, 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAllocPitch(&p, &pitch, 1000, 0, 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAllocPitch(&p, &pitch, 1 << 20, 257, 16), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuMemAllocPitch(&p, &pitch, 1 << 20, 256, 16), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), 0);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
}

static CUmemAllocationProp dev_prop(void)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    return prop;
}

TEST(mem_create_shares_the_budget)
{
    CUmemAllocationProp prop = dev_prop();
    static CUmemGenericAllocationHandle h[129];
    for (int i = 0; i < 128; i++) CHECK_CU(cuMemCreate(&h[i], 2 * MIB, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), 0);
    CHECK_CU(cuMemCreate(&h[128], 2 * MIB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc(&p, 1), CUDA_ERROR_OUT_OF_MEMORY);
    for (int i = 64; i < 128; i++) CHECK_CU(cuMemRelease(h[i]), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), 128 * MIB);
    CHECK_CU(cuMemAlloc(&p, 128 * MIB), CUDA_SUCCESS);      /* the other half, as cuMemAlloc */
    CHECK_CU(cuMemCreate(&h[128], 2 * MIB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    for (int i = 0; i < 64; i++) CHECK_CU(cuMemRelease(h[i]), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
}

static cuuint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    CHECK_CU(cuMemPoolGetAttribute(pool, a, &v), CUDA_SUCCESS);
    return v;
}

TEST(stream_ordered_pool)
{
    CUstream s;
    CUmemoryPool pool;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);
    CUdeviceptr p[5] = { 0 };
    for (int i = 0; i < 4; i++) CHECK_CU(cuMemAllocAsync(&p[i], 64 * MIB, s), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), 0);
    CHECK_CU(cuMemAllocAsync(&p[4], 1, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuMemAllocFromPoolAsync(&p[4], 1, pool, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), TOTAL);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), TOTAL);
    for (int i = 0; i < 4; i++) CHECK_CU(cuMemFreeAsync(p[i], s), CUDA_SUCCESS);
    /* Freed, but the pool still holds it: another allocator cannot have it... */
    CUdeviceptr q = 0;
    while (cuStreamQuery(s) == CUDA_ERROR_NOT_READY) usleep(1000);   /* the frees ran (a query is no synchronize) */
    CHECK_EQ(free_mem(), 0);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), TOTAL);
    CHECK_CU(cuMemAlloc(&q, MIB), CUDA_ERROR_OUT_OF_MEMORY);
    /* ...while the pool reuses it. */
    CHECK_CU(cuMemAllocAsync(&p[0], 128 * MIB, s), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), 0);
    /* A synchronize gives back what exceeds the release threshold (0). */
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), 128 * MIB);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 128 * MIB);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), TOTAL);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), TOTAL);
    CHECK_CU(cuMemAlloc(&q, MIB), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(q), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(p[0], s), CUDA_SUCCESS);

    /* With a release threshold of 96 MiB a synchronize keeps that much. */
    cuuint64_t keep = 96 * MIB;
    CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep), CUDA_SUCCESS);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 96 * MIB);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 96 * MIB);
    /* cuMemPoolTrimTo gives back down to what is asked. */
    CHECK_CU(cuMemPoolTrimTo(pool, 32 * MIB), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 32 * MIB);
    CHECK_CU(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
    /* An event synchronize releases too; memory in use is never released. */
    CUevent ev;
    CHECK_CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    keep = 0;
    CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&p[0], 8 * MIB, s), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&p[1], 8 * MIB, s), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(p[1], s), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(ev, s), CUDA_SUCCESS);
    CHECK_CU(cuEventSynchronize(ev), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 8 * MIB);
    CHECK_CU(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 8 * MIB);
    CHECK_CU(cuMemFreeAsync(p[0], s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
    /* Watermarks reset to the current value; only 0 may be written. */
    cuuint64_t zero = 0, one = 1;
    CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero), CUDA_SUCCESS);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 0);
    CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero), CUDA_ERROR_INVALID_VALUE);
    int reuse = -1;
    CHECK_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse), CUDA_SUCCESS);
    CHECK_EQ(reuse, 1);
    CHECK_CU(cuMemPoolTrimTo(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Graph allocations are charged from the launch that allocates them until
 * freed; a launch that cannot have them fails with OUT_OF_MEMORY. */
TEST(graph_allocations)
{
    CUgraph g;
    CUgraphNode an, fn;
    CUgraphExec e;
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.bytesize = 200 * MIB;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiate(&e, g, 0), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);                       /* reserved address only */
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc(&p, 100 * MIB), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 200 * MIB);
    cuuint64_t used = 0;
    CHECK_CU(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used), CUDA_SUCCESS);
    CHECK_EQ(used, 200 * MIB);
    CHECK_CU(cuMemAlloc(&p, 100 * MIB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuMemFreeAsync(ap.dptr, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    /* Freed in the graph: charged only while the launch holds it. */
    CHECK_CU(cuGraphAddMemFreeNode(&fn, g, &an, 1, ap.dptr), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiate(&e, g, 0), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++) CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
}

/* CUDA arrays (cuArrayCreate, cuArray3DCreate) take their elements' bytes,
 * in whole pages, until cuArrayDestroy or their context's teardown; a
 * descriptor that breaks cuArray3DCreate's rules is refused and charges
 * nothing. */
TEST(arrays)
{
    CUarray a2, a3, x;
    CUDA_ARRAY_DESCRIPTOR d2 = { .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4 };
    CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = 256, .Height = 256, .Depth = 256, .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                   .NumChannels = 1 }, back3;
    CUDA_ARRAY_DESCRIPTOR back2;
    CHECK_CU(cuArrayCreate(&a2, &d2), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 16 * MIB);                     /* 1024 * 1024 * 16 bytes */
    CHECK_CU(cuArray3DCreate(&a3, &d3), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 32 * MIB);
    CHECK_CU(cuArrayGetDescriptor(&back2, a2), CUDA_SUCCESS);
    CHECK(back2.Width == 1024 && back2.Height == 1024 && back2.Format == CU_AD_FORMAT_FLOAT && back2.NumChannels == 4);
    CHECK_CU(cuArray3DGetDescriptor(&back3, a2), CUDA_SUCCESS);
    CHECK(back3.Width == 1024 && back3.Depth == 0 && back3.Flags == 0);
    CHECK_CU(cuArray3DGetDescriptor(&back3, a3), CUDA_SUCCESS);
    CHECK(memcmp(&back3, &d3, sizeof d3) == 0);
    CHECK_CU(cuArrayGetDescriptor(&back2, a3), CUDA_ERROR_INVALID_VALUE);   /* "1D or 2D" */
    CUDA_ARRAY_DESCRIPTOR d1 = { .Width = 1, .Format = CU_AD_FORMAT_HALF, .NumChannels = 2 };
    CHECK_CU(cuArrayCreate(&x, &d1), CUDA_SUCCESS);              /* 4 bytes, one page */
    CHECK_EQ(free_mem(), TOTAL - 32 * MIB - 4096);
    CHECK_CU(cuArrayDestroy(x), CUDA_SUCCESS);

    /* beyond the budget: refused, and the budget full of cuMemAlloc too */
    CUDA_ARRAY3D_DESCRIPTOR big = { .Width = 1024, .Height = 1024, .Depth = 64, .Format = CU_AD_FORMAT_FLOAT,
                                    .NumChannels = 4 };
    CHECK_CU(cuArray3DCreate(&x, &big), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(free_mem(), TOTAL - 32 * MIB);
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc(&p, TOTAL - 32 * MIB), CUDA_SUCCESS);
    CHECK_CU(cuArrayCreate(&x, &d2), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuArrayDestroy(a2), CUDA_SUCCESS);
    CHECK_CU(cuArrayCreate(&x, &d2), CUDA_SUCCESS);              /* what a2 gave back */
    CHECK_CU(cuArrayDestroy(x), CUDA_SUCCESS);
    CHECK_CU(cuArrayDestroy(x), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);

    /* cuArray3DCreate's rules */
    struct { CUDA_ARRAY3D_DESCRIPTOR d; CUresult want; } cases[] = {
        { { .Width = 0, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 }, CUDA_ERROR_INVALID_VALUE },
        { { .Width = 8, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 3 }, CUDA_ERROR_INVALID_VALUE },
        { { .Width = 8, .Depth = 2, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 }, CUDA_ERROR_INVALID_VALUE },
        { { .Width = 8, .Height = 8, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1, .Flags = CUDA_ARRAY3D_LAYERED },
          CUDA_ERROR_INVALID_VALUE },
        { { .Width = 8, .Depth = 3, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1, .Flags = CUDA_ARRAY3D_LAYERED },
          CUDA_SUCCESS },
        { { .Width = 8, .Height = 4, .Depth = 6, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1,
            .Flags = CUDA_ARRAY3D_CUBEMAP }, CUDA_ERROR_INVALID_VALUE },
        { { .Width = 8, .Height = 8, .Depth = 5, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1,
            .Flags = CUDA_ARRAY3D_CUBEMAP }, CUDA_ERROR_INVALID_VALUE },
        { { .Width = 8, .Height = 8, .Depth = 6, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1,
            .Flags = CUDA_ARRAY3D_CUBEMAP }, CUDA_SUCCESS },
        { { .Width = 8, .Height = 8, .Depth = 12, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1,
            .Flags = CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_LAYERED }, CUDA_SUCCESS },
        { { .Width = 8, .Height = 8, .Depth = 2, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1,
            .Flags = CUDA_ARRAY3D_TEXTURE_GATHER }, CUDA_ERROR_INVALID_VALUE },
        { { .Width = 8, .Height = 8, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1,
            .Flags = CUDA_ARRAY3D_TEXTURE_GATHER | CUDA_ARRAY3D_SURFACE_LDST }, CUDA_SUCCESS },
        { { .Width = 8, .Height = 8, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1, .Flags = CUDA_ARRAY3D_SPARSE },
          CUDA_ERROR_NOT_SUPPORTED },
        { { .Width = 8, .Height = 8, .Format = CU_AD_FORMAT_NV12, .NumChannels = 1 }, CUDA_ERROR_NOT_SUPPORTED },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CUresult r = cuArray3DCreate(&x, &cases[i].d);
        if (r != cases[i].want) printf("#   case %zu\n", i);
        CHECK_CU(r, cases[i].want);
        if (r == CUDA_SUCCESS) CHECK_CU(cuArrayDestroy(x), CUDA_SUCCESS);
    }
    CHECK_CU(cuArray3DCreate(&x, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuArrayCreate(NULL, &d2), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(free_mem(), TOTAL - 16 * MIB);

    /* an array goes with its context; its handle is then stale (a violation) */
    CUcontext c2;
    CHECK_CU(cuCtxCreate(&c2, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuArrayCreate(&x, &d2), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 32 * MIB);
    CHECK_CU(cuCtxDestroy(c2), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 16 * MIB);
    emu_test_stderr_begin();
    CHECK_CU(cuArrayDestroy(x), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ(emu_test_violations(), 1);
    CHECK_CU(cuArrayDestroy(a3), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
}

TEST(claims_wait_for_pending_frees)
{
    emu_test_stderr_begin();
    CUstream a, b;
    CUmemoryPool pool;
    CHECK_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    CUdeviceptr x = 0, y = 0, z = 0;
    CHECK_CU(cuMemAllocAsync(&x, 192 * MIB, a), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(a), CUDA_SUCCESS);
    uint32_t *flag = gu_hold(a);
    CHECK_CU(cuMemFreeAsync(x, a), CUDA_SUCCESS);            /* queued behind the hold */
    CHECK_EQ(free_mem(), 64 * MIB);
    /* 128 MiB on b: 64 MiB free, 64 MiB claimed from x's pending free */
    CHECK_CU(cuMemAllocAsync(&y, 128 * MIB, b), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), 0);
    CHECK_CU(cuMemsetD8Async(y, 7, 128 * MIB, b), CUDA_SUCCESS);
    usleep(50000);
    CHECK_CU(cuStreamQuery(b), CUDA_ERROR_NOT_READY);        /* b waits for a's free */
    /* beyond what is pending and free: refused, nothing claimed */
    CHECK_CU(cuMemAllocAsync(&z, 129 * MIB, b), CUDA_ERROR_OUT_OF_MEMORY);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(b), CUDA_SUCCESS);
    unsigned char c = 0;
    CHECK_CU(cuMemcpyDtoH(&c, y + 128 * MIB - 1, 1), CUDA_SUCCESS);
    CHECK_EQ(c, 7);
    /* x's 192 MiB went: 64 to y, 128 back to the pool, released by the synchronizes */
    CHECK_CU(cuStreamSynchronize(a), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), 128 * MIB);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 128 * MIB);
    CHECK_CU(cuMemFreeAsync(y, b), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(b), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);

    /* With internal dependencies disallowed the same allocation fails. */
    int off = 0, on = 1;
    CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &off),
             CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&x, 192 * MIB, a), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(a), CUDA_SUCCESS);
    flag = gu_hold(a);
    CHECK_CU(cuMemFreeAsync(x, a), CUDA_SUCCESS);
    y = 0;
    CHECK_CU(cuMemAllocAsync(&y, 128 * MIB, b), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(y, 0);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
    CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &on),
             CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(a), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(b), CUDA_SUCCESS);
    CHECK_EQ(emu_test_violations(), 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *have = getenv("CUDAEMU_DEVICE_MEMORY");
    if (!have || strcmp(have, "256M") != 0) {
        setenv("CUDAEMU_DEVICE_MEMORY", "256M", 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    gu_setup();
    RUN(total);
    RUN(cumemalloc_256_blocks_of_1mib);
    RUN(page_rounding);
    RUN(alloc_pitch);
    RUN(mem_create_shares_the_budget);
    RUN(stream_ordered_pool);
    RUN(claims_wait_for_pending_frees);
    RUN(graph_allocations);
    RUN(arrays);
    return check_done();
}
