/*
 * test_teardown.c: context teardown (cuCtxDestroy, cuDevicePrimaryCtxReset,
 * the last cuDevicePrimaryCtxRelease). As cuCtxDestroy documents, the
 * context's streams, events, modules and functions, its cuMemAlloc and
 * pinned host memory (and its graph execs) go; using them afterwards is
 * undefined in CUDA: the emulator answers with the call's invalid-handle
 * error (CUDA_ERROR_INVALID_HANDLE for streams, events, modules and
 * functions, CUDA_ERROR_INVALID_VALUE for graph execs and memory), touches no
 * freed memory, and counts a violation for each such use of a handle.
 * Stream-ordered and VMM memory are not the context's ("cuCtxDestroy() will
 * not destroy memory allocations by cuMemCreate(), cuMemAllocAsync() and
 * cuMemAllocFromPoolAsync()") and stay. Work queued before the teardown
 * runs to completion first.
 */
#include "graph_util.h"

#include <stdlib.h>

/* --------------------------------------------------------- the resources */

typedef struct res {
    CUcontext ctx;
    CUmodule mod;
    CUfunction fill;
    CUstream s;
    CUevent ev;
    CUgraph g;
    CUgraphExec e;
    CUdeviceptr dev, async, mapped;
    void *host;
    CUmemGenericAllocationHandle vmm;
    size_t gran;
} res;

static void load_module(res *r)
{
    char path[PATH_MAX + 64];
    CHECK_EQ(emu_test_module_path("mod_graph.so", path, sizeof path), 0);
    CHECK_CU(cuModuleLoad(&r->mod, path), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&r->fill, r->mod, "fill_u32"), CUDA_SUCCESS);
}

/* Makes one of each resource in the current context r->ctx, with slow work
 * still queued on r->s that fills r->async with 77. */
static void make_resources(res *r)
{
    load_module(r);
    CHECK_CU(cuStreamCreate(&r->s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&r->ev, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&r->dev, N_ELEMS * 4), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocHost(&r->host, 4096), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&r->async, N_ELEMS * 4, r->s), CUDA_SUCCESS);
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CHECK_CU(cuMemGetAllocationGranularity(&r->gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CHECK_CU(cuMemCreate(&r->vmm, r->gran, &prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressReserve(&r->mapped, r->gran, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(r->mapped, r->gran, 0, r->vmm, 0), CUDA_SUCCESS);
    CUmemAccessDesc acc = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CHECK_CU(cuMemSetAccess(r->mapped, r->gran, &acc, 1), CUDA_SUCCESS);
    gu_args a;
    gu_kp_fill(&a, r->dev, 5);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(r->fill, &a);
    CUgraphNode n;
    CHECK_CU(cuGraphCreate(&r->g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddKernelNode(&n, r->g, NULL, 0, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&r->e, r->g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(r->e, r->s), CUDA_SUCCESS);
    gu_args slow;
    gu_kp_slow(&slow, r->async, 77, 100000);
    CHECK_CU(gu_launch(k_slow, r->s, &slow), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(r->ev, r->s), CUDA_SUCCESS);
}

/* After the teardown, with a live context current: every stale use gives the
 * call's error and is counted; what is not the context's is intact. */
static void check_after(res *r)
{
    /* Work queued before the teardown ran first: the memory it filled is
     * stream-ordered memory, which is not the context's and is still here. */
    uint32_t *q = (uint32_t *)r->async;
    CHECK_EQ(q[0], 77);
    CHECK_EQ(q[N_ELEMS - 1], 77);
    CUdeviceptr base;
    size_t size;
    CHECK_CU(cuMemGetAddressRange(&base, &size, r->async), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h;
    CHECK_CU(cuMemRetainAllocationHandle(&h, (void *)r->mapped), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    ((volatile uint32_t *)r->mapped)[0] = 3;       /* still mapped */

    emu_test_stderr_begin();
    int want = 0;
#define STALE(expr, err) do { CHECK_CU(expr, err); want++; } while (0)
    uint32_t v = 1;
    uint64_t nn = N_ELEMS;
    void *args[] = { &r->dev, &v, &nn };
    size_t off;
    CUfunction f2;
    STALE(cuEventRecord(r->ev, NULL), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuEventQuery(r->ev), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuEventSynchronize(r->ev), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuStreamQuery(r->s), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuStreamSynchronize(r->s), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuMemsetD32Async(r->async, 0, N_ELEMS, r->s), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuLaunchKernel(r->fill, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuFuncGetParamInfo(r->fill, 0, &off, NULL), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuModuleGetFunction(&f2, r->mod, "fill_u32"), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuGraphLaunch(r->e, NULL), CUDA_ERROR_INVALID_VALUE);
    STALE(cuStreamDestroy(r->s), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuEventDestroy(r->ev), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuModuleUnload(r->mod), CUDA_ERROR_INVALID_HANDLE);
    STALE(cuGraphExecDestroy(r->e), CUDA_ERROR_INVALID_VALUE);
#undef STALE
    /* Freed memory: gone, like a double free (not a handle: no violation). */
    CHECK_CU(cuMemGetAddressRange(&base, &size, r->dev), CUDA_ERROR_NOT_FOUND);
    CHECK_CU(cuMemFree(r->dev), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFreeHost(r->host), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(emu_test_violations(), want);

    /* The graph is not a context resource; the rest is freed normally. */
    CHECK_CU(cuGraphDestroy(r->g), CUDA_SUCCESS);
    CUstream s2;
    CHECK_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(r->async, s2), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s2), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
    CHECK_CU(cuMemUnmap(r->mapped, r->gran), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(r->mapped, r->gran), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(r->vmm), CUDA_SUCCESS);
}

TEST(primary_context_reset)
{
    res r;
    memset(&r, 0, sizeof r);
    r.ctx = g_ctx;
    make_resources(&r);
    CHECK_CU(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
    /* The primary context keeps its handle and is usable again. */
    CUcontext c;
    CHECK_CU(cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    CHECK(c == g_ctx);
    CHECK_CU(cuCtxSetCurrent(c), CUDA_SUCCESS);
    check_after(&r);
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

TEST(created_context_destroy)
{
    res r;
    memset(&r, 0, sizeof r);
    CHECK_CU(cuCtxCreate(&r.ctx, NULL, 0, 0), CUDA_SUCCESS);
    make_resources(&r);
    CHECK_CU(cuCtxDestroy(r.ctx), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    check_after(&r);
}

TEST(primary_context_last_release)
{
    res r;
    memset(&r, 0, sizeof r);
    CUcontext c;
    /* g_ctx holds one retain (gu_setup); take one more, then drop both. */
    CHECK_CU(cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    r.ctx = c;
    make_resources(&r);
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CUevent probe;
    CHECK_CU(cuEventCreate(&probe, 0), CUDA_SUCCESS);     /* one retain left: all alive */
    CHECK_CU(cuEventSynchronize(r.ev), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(probe), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);  /* the last one */
    CHECK_CU(cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c), CUDA_SUCCESS);
    check_after(&r);
}

/* The handle value of an event or stream ended by a teardown is the next one
 * given out (LIFO reuse): using it then is using the new object, no
 * violation. */
TEST(ended_handle_values_are_reused)
{
    CUstream s, s2;
    CUevent ev, ev2;
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
    CUcontext c;
    CHECK_CU(cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s2, 0), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&ev2, 0), CUDA_SUCCESS);
    CHECK(s2 == s);
    CHECK(ev2 == ev);
    emu_test_stderr_begin();
    CHECK_CU(cuEventRecord(ev, s), CUDA_SUCCESS);
    CHECK_CU(cuEventSynchronize(ev), CUDA_SUCCESS);
    CHECK_EQ(emu_test_violations(), 0);
    CHECK_CU(cuEventDestroy(ev2), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    RUN(primary_context_reset);
    gu_setup();             /* the module went with the reset */
    RUN(created_context_destroy);
    RUN(primary_context_last_release);
    gu_setup();
    RUN(ended_handle_values_are_reused);
    return check_done();
}
