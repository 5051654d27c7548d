/*
 * test_pools.c: memory pools the program creates (CUDAEMU_DEVICES=2,
 * CUDAEMU_DEVICE_MEMORY=256M; the program re-executes itself to set them):
 *   create_props      cuMemPoolCreate's documented refusals, and loud
 *                     CUDA_ERROR_NOT_SUPPORTED for what is not emulated
 *                     (host locations, export handle types, usage flags);
 *                     a default pool cannot be destroyed; a destroyed
 *                     pool's handle is refused everywhere;
 *   current_pool      cuDeviceSetMemPool / cuMemSetMemPool: cuMemAllocAsync
 *                     then takes from the created pool (MEMPOOL_HANDLE, its
 *                     figures, not the default pool's); a pool of another
 *                     device is refused; set back; destroying the current
 *                     pool makes the default one current again;
 *   figures_and_trim  each pool holds its own freed memory (the default pool
 *                     does not reuse a created pool's), its release
 *                     threshold, trim, peaks and their reset;
 *   max_size          CUmemPoolProps.maxSize bounds what the pool reserves;
 *   destroy_in_use    destroyed with an allocation live: the allocation
 *                     stays usable until freed, then its memory goes back
 *                     to the device and the pool is gone;
 *   pool_access       pool memory is the owner device's only (peer access
 *                     does not open it): a kernel of device 1 touching it is
 *                     a violation until cuMemPoolSetAccess gives read-write;
 *                     cuMemPoolGetAccess; the owner cannot lose access;
 *   capture           cuMemAllocFromPoolAsync of a created pool during a
 *                     capture: an allocation node on the pool's device with
 *                     its access; the memory is the graph's (the pool's
 *                     figures do not move);
 *   use_after_free    a memset of pool memory after its free: a violation.
 */
#include "graph_util.h"

#include <dlfcn.h>
#include <stdlib.h>

#define MIB (1ull << 20)
#define TOTAL (256 * MIB)

static size_t free_mem(void)
{
    size_t f = 0, t = 0;
    CHECK_CU(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    return f;
}

static cuuint64_t pattr(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    CHECK_CU(cuMemPoolGetAttribute(pool, a, &v), CUDA_SUCCESS);
    return v;
}

static CUmemPoolProps props(int dev)
{
    CUmemPoolProps p;
    memset(&p, 0, sizeof p);
    p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    return p;
}

static unsigned long long live_pools(void)
{
    unsigned long long n = 0;
    CUresult (*live)(const char *, unsigned long long *) =
        (CUresult (*)(const char *, unsigned long long *))dlsym(RTLD_DEFAULT, "cuemuLive");
    if (live) live("pools", &n);
    return n;
}

TEST(create_props)
{
    CUmemoryPool p = NULL, d;
    CUmemPoolProps pp = props(0);
    emu_test_stderr_begin();
    CHECK_CU(cuMemPoolCreate(NULL, &pp), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemPoolCreate(&p, NULL), CUDA_ERROR_INVALID_VALUE);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_ERROR_INVALID_VALUE);
    pp = props(0);
    pp.reserved[3] = 1;
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_ERROR_INVALID_VALUE);
    pp = props(0);
    pp.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_ERROR_INVALID_VALUE);
    pp.location.type = CU_MEM_LOCATION_TYPE_HOST;
    pp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_ERROR_INVALID_VALUE);
    pp.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_ERROR_NOT_SUPPORTED);          /* not emulated */
    pp = props(7);
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_ERROR_INVALID_DEVICE);
    pp = props(0);
    pp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_ERROR_NOT_SUPPORTED);          /* not emulated */
    CHECK_EQ(emu_test_violations(), 0);

    CHECK_CU(cuDeviceGetDefaultMemPool(&d, 0), CUDA_SUCCESS);
    unsigned long long before = live_pools();
    CHECK_EQ(before, 2);                            /* the two devices' default pools */
    pp = props(0);
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_SUCCESS);
    CHECK_EQ(live_pools(), before + 1);
    CHECK(p != d);
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    CHECK_CU(cuMemPoolDestroy(d), CUDA_ERROR_INVALID_VALUE);              /* a default pool */
    CHECK_CU(cuMemPoolDestroy(p), CUDA_SUCCESS);
    CHECK_EQ(live_pools(), before);
    CHECK_CU(cuMemPoolDestroy(p), CUDA_ERROR_INVALID_VALUE);
    cuuint64_t v;
    CHECK_CU(cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemPoolTrimTo(p, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuDeviceSetMemPool(0, p), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr q;
    CHECK_CU(cuMemAllocFromPoolAsync(&q, 64, p, NULL), CUDA_ERROR_INVALID_VALUE);
    /* the next pool may get the destroyed one's value (handles are reused) */
    CUmemoryPool p2;
    CHECK_CU(cuMemPoolCreate(&p2, &pp), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolDestroy(p2), CUDA_SUCCESS);
}

TEST(current_pool)
{
    CUstream s;
    CUmemoryPool d, p, got, p1;
    CUmemPoolProps pp = props(0);
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetDefaultMemPool(&d, 0), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetMemPool(&got, 0), CUDA_SUCCESS);
    CHECK(got == d);
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_SUCCESS);
    pp = props(1);
    CHECK_CU(cuMemPoolCreate(&p1, &pp), CUDA_SUCCESS);
    CHECK_CU(cuDeviceSetMemPool(0, p1), CUDA_ERROR_INVALID_VALUE);        /* not local to device 0 */
    CHECK_CU(cuDeviceSetMemPool(0, p), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetMemPool(&got, 0), CUDA_SUCCESS);
    CHECK(got == p);
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    CHECK_CU(cuMemGetMemPool(&got, &loc, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
    CHECK(got == p);

    CUdeviceptr a = 0, b = 0;
    CHECK_CU(cuMemAllocAsync(&a, 3 * MIB, s), CUDA_SUCCESS);
    CUmemoryPool from = NULL;
    CHECK_CU(cuPointerGetAttribute(&from, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a), CUDA_SUCCESS);
    CHECK(from == p);
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 3 * MIB);
    CHECK_EQ(pattr(d, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);

    /* set back with cuMemSetMemPool: the default pool again */
    CHECK_CU(cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, d), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&b, MIB, s), CUDA_SUCCESS);
    CHECK_CU(cuPointerGetAttribute(&from, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, b), CUDA_SUCCESS);
    CHECK(from == d);
    CHECK_EQ(pattr(d, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), MIB);

    /* destroying the current pool makes the default one current */
    CHECK_CU(cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, p), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(b, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolDestroy(p), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetMemPool(&got, 0), CUDA_SUCCESS);
    CHECK(got == d);
    CHECK_CU(cuMemAllocAsync(&a, MIB, s), CUDA_SUCCESS);
    CHECK_CU(cuPointerGetAttribute(&from, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a), CUDA_SUCCESS);
    CHECK(from == d);
    CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolDestroy(p1), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(figures_and_trim)
{
    CUstream s;
    CUmemoryPool d, p;
    CUmemPoolProps pp = props(0);
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetDefaultMemPool(&d, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_SUCCESS);
    cuuint64_t keep = UINT64_MAX;
    CHECK_CU(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep), CUDA_SUCCESS);
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), UINT64_MAX);
    CHECK_EQ(pattr(d, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);            /* its own */
    CUdeviceptr a = 0, b = 0;
    CHECK_CU(cuMemAllocFromPoolAsync(&a, 192 * MIB, p, s), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    /* the created pool keeps its 192 MiB (threshold): the default pool cannot have them */
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 192 * MIB);
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 192 * MIB);
    CHECK_EQ(free_mem(), TOTAL - 192 * MIB);
    CHECK_CU(cuMemAllocAsync(&b, 128 * MIB, s), CUDA_ERROR_OUT_OF_MEMORY);
    /* ...while the created pool reuses them */
    CHECK_CU(cuMemAllocFromPoolAsync(&a, 128 * MIB, p, s), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 192 * MIB);
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 128 * MIB);
    /* peaks reset to what is current; only 0 may be written */
    cuuint64_t zero = 0, one = 1;
    CHECK_CU(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero), CUDA_SUCCESS);
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 128 * MIB);
    CHECK_CU(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    /* trim down to 64 MiB, then everything */
    CHECK_CU(cuMemPoolTrimTo(p, 64 * MIB), CUDA_SUCCESS);
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 64 * MIB);
    CHECK_EQ(free_mem(), TOTAL - 64 * MIB);
    CHECK_CU(cuMemPoolTrimTo(p, 0), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
    int reuse = 0, off = 0;
    CHECK_CU(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &off), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse), CUDA_SUCCESS);
    CHECK_EQ(reuse, 0);
    CHECK_CU(cuMemPoolGetAttribute(d, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse), CUDA_SUCCESS);
    CHECK_EQ(reuse, 1);
    /* destroying a pool gives back what it holds */
    CHECK_CU(cuMemAllocFromPoolAsync(&a, 32 * MIB, p, s), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL - 32 * MIB);
    CHECK_CU(cuMemPoolDestroy(p), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(max_size)
{
    CUstream s;
    CUmemoryPool p;
    CUmemPoolProps pp = props(0);
    pp.maxSize = 8 * MIB;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_SUCCESS);
    CUdeviceptr a = 0, b = 0, c = 0;
    CHECK_CU(cuMemAllocFromPoolAsync(&a, 6 * MIB, p, s), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocFromPoolAsync(&b, 4 * MIB, p, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuMemAllocFromPoolAsync(&b, 2 * MIB, p, s), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocFromPoolAsync(&c, 1, p, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuMemFreeAsync(b, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocFromPoolAsync(&c, 2 * MIB, p, s), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(c, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolDestroy(p), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(destroy_in_use)
{
    CUstream s;
    CUmemoryPool p;
    CUmemPoolProps pp = props(0);
    unsigned long long before = live_pools();
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_SUCCESS);
    CUdeviceptr a = 0;
    emu_test_stderr_begin();
    CHECK_CU(cuMemAllocFromPoolAsync(&a, 4 * MIB, p, s), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolDestroy(p), CUDA_SUCCESS);
    CHECK_EQ(live_pools(), before);                 /* the handle is gone... */
    CHECK_EQ(free_mem(), TOTAL - 4 * MIB);          /* ...its allocation stays */
    CHECK_CU(cuMemsetD32Async(a, 0x5a5a5a5a, 4 * MIB / 4, s), CUDA_SUCCESS);
    uint32_t w = 0;
    CHECK_CU(cuMemcpyDtoHAsync(&w, a + 4 * MIB - 4, 4, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(w, 0x5a5a5a5a);
    CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);                    /* a destroyed pool holds nothing */
    CHECK_EQ(emu_test_violations(), 0);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(pool_access)
{
    CUcontext c1;
    CUdevice dev1;
    CUstream s0, s1;
    CUmemoryPool p;
    CUmemPoolProps pp = props(0);
    CHECK_CU(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_SUCCESS);
    CUdeviceptr a = 0;
    CHECK_CU(cuMemAllocFromPoolAsync(&a, MIB, p, s0), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s0), CUDA_SUCCESS);
    CUmemAccess_flags f = 99;
    CUmemLocation l0 = { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, l1 = { CU_MEM_LOCATION_TYPE_DEVICE, 1 };
    CHECK_CU(cuMemPoolGetAccess(&f, p, &l0), CUDA_SUCCESS);
    CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_CU(cuMemPoolGetAccess(&f, p, &l1), CUDA_SUCCESS);
    CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    CUmemAccessDesc own = { l0, CU_MEM_ACCESS_FLAGS_PROT_NONE };
    CHECK_CU(cuMemPoolSetAccess(p, &own, 1), CUDA_ERROR_INVALID_VALUE);

    CHECK_CU(cuDeviceGet(&dev1, 1), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRetain(&c1, dev1), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c1), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    char path[PATH_MAX];
    CUmodule m1;
    CUfunction fill1;
    gu_args ka;
    CHECK(emu_test_module_path("mod_graph.so", path, sizeof path) == 0);
    CHECK_CU(cuModuleLoad(&m1, path), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&fill1, m1, "fill_u32"), CUDA_SUCCESS);
    gu_kp_fill(&ka, a, 1);
    emu_test_stderr_begin();
    CHECK_CU(gu_launch(fill1, s1, &ka), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s1), CUDA_SUCCESS);
    CHECK_EQ(emu_test_violations(), 1);             /* a kernel of device 1: not open to it */
    CUmemAccessDesc rw = { l1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CHECK_CU(cuMemPoolSetAccess(p, &rw, 1), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolGetAccess(&f, p, &l1), CUDA_SUCCESS);
    CHECK_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    emu_test_stderr_begin();
    CHECK_CU(gu_launch(fill1, s1, &ka), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s1), CUDA_SUCCESS);
    CHECK_EQ(emu_test_violations(), 0);
    CHECK_CU(cuStreamDestroy(s1), CUDA_SUCCESS);
    CHECK_CU(cuModuleUnload(m1), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRelease(dev1), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(a, s0), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s0), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolDestroy(p), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s0), CUDA_SUCCESS);
}

TEST(capture)
{
    CUstream s;
    CUmemoryPool p;
    CUmemPoolProps pp = props(0);
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_SUCCESS);
    CUmemAccessDesc rw = { { CU_MEM_LOCATION_TYPE_DEVICE, 1 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CHECK_CU(cuMemPoolSetAccess(p, &rw, 1), CUDA_SUCCESS);
    CUgraph g;
    CUdeviceptr a = 0;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocFromPoolAsync(&a, MIB, p, s), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(a, 7, MIB / 4, s), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    size_t n = 0;
    CHECK_CU(cuGraphGetNodes(g, NULL, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 3);
    CUgraphNode nodes[3];
    CHECK_CU(cuGraphGetNodes(g, nodes, &n), CUDA_SUCCESS);
    CUgraphNodeType t;
    CHECK_CU(cuGraphNodeGetType(nodes[0], &t), CUDA_SUCCESS);
    CHECK_EQ(t, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    CHECK_CU(cuGraphMemAllocNodeGetParams(nodes[0], &ap), CUDA_SUCCESS);
    CHECK_EQ(ap.poolProps.location.id, 0);
    CHECK_EQ(ap.accessDescCount, 1);
    CHECK_EQ(ap.accessDescs[0].location.id, 1);
    CHECK_EQ(ap.dptr, a);
    /* the graph's memory, not the pool's */
    CUgraphExec x;
    CHECK_CU(cuGraphInstantiate(&x, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(x, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
    CHECK_EQ(pattr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 0);
    CHECK_CU(cuGraphExecDestroy(x), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolDestroy(p), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(use_after_free)
{
    CUstream s;
    CUmemoryPool p;
    CUmemPoolProps pp = props(0);
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolCreate(&p, &pp), CUDA_SUCCESS);
    cuuint64_t keep = UINT64_MAX;       /* the pool keeps the memory: a real GPU would not fault */
    CHECK_CU(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep), CUDA_SUCCESS);
    CUdeviceptr a = 0;
    CHECK_CU(cuMemAllocFromPoolAsync(&a, MIB, p, s), CUDA_SUCCESS);
    /* the stream held, so that the free is not reached when the memset is
     * queued (reached, the memset's own check refuses it: INVALID_VALUE) */
    uint32_t *flag = gu_hold(s);
    CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    emu_test_stderr_begin();
    CHECK_CU(cuMemsetD32Async(a, 1, 16, s), CUDA_SUCCESS);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(emu_test_violations(), 1);
    CHECK_CU(cuMemFreeHost(flag), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolDestroy(p), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *have = getenv("CUDAEMU_DEVICE_MEMORY"), *devs = getenv("CUDAEMU_DEVICES");
    if (!have || strcmp(have, "256M") != 0 || !devs || strcmp(devs, "2") != 0) {
        setenv("CUDAEMU_DEVICE_MEMORY", "256M", 1);
        setenv("CUDAEMU_DEVICES", "2", 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    gu_setup();
    RUN(create_props);
    RUN(current_pool);
    RUN(figures_and_trim);
    RUN(max_size);
    RUN(destroy_in_use);
    RUN(pool_access);
    RUN(capture);
    RUN(use_after_free);
    return check_done();
}
