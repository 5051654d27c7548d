/*
 * test_batchcopy.c: batches of copies in the emulated driver (emu_copy.c,
 * docs/emulator.md "Batches of copies"): cuMemcpyBatchAsync (12.8, with
 * failIdx), cuMemcpyBatchAsync_v2 (13.0) and their per-thread flavours, run
 * on a stream (a source read during the call when its attribute says
 * DURING_API_CALL), the documented refusals (attribute indices, access
 * orders, the legacy NULL stream, a copy out of range named by failIdx), and
 * captured: one memcpy node per nonzero copy, all on the stream's last nodes
 * and together its new last nodes; a source read during the call that the
 * device may not read is a violation.
 *
 * Every case reads the device buffers back.
 */
#include "graph_util.h"

/* The 12.8 entry points, under names of their own (cuda.h maps
 * cuMemcpyBatchAsync to the _v2 of 13.0 and declares the others only for its
 * own build). */
CUresult CUDAAPI batch_v1(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *, size_t *,
                          size_t, size_t *, CUstream) __asm__("cuMemcpyBatchAsync");
CUresult CUDAAPI batch_v1_ptsz(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *, size_t *,
                               size_t, size_t *, CUstream) __asm__("cuMemcpyBatchAsync_ptsz");
CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *,
                                            size_t *, size_t, CUstream);

#define BYTES (N_ELEMS * sizeof(uint32_t))

static CUmemcpyAttributes attr_of(CUmemcpySrcAccessOrder o)
{
    CUmemcpyAttributes a;
    memset(&a, 0, sizeof a);
    a.srcAccessOrder = o;
    return a;
}

TEST(batch_on_stream)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc(), x = gu_alloc(), y = gu_alloc(), z = gu_alloc();
    CHECK_CU(cuMemsetD32(a, 11, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(b, 22, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(x, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(y, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(z, 0, N_ELEMS), CUDA_SUCCESS);
    /* the stream is held, so the copies run after the call returned; the
     * third copy's source is a host buffer overwritten at once: read during
     * the call, its first value arrives */
    uint32_t *flag = gu_hold(s);
    uint32_t host[N_ELEMS];
    for (int i = 0; i < N_ELEMS; i++) host[i] = 33;
    CUdeviceptr dsts[4] = { x, y, z, x }, srcs[4] = { a, b, (CUdeviceptr)(uintptr_t)host, a };
    size_t sizes[4] = { BYTES, BYTES, BYTES, 0 }, idx[2] = { 0, 2 };
    CUmemcpyAttributes at[2] = { attr_of(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
                                 attr_of(CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) };
    at[0].flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE;
    CHECK_CU(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 4, at, idx, 2, s), CUDA_SUCCESS);
    for (int i = 0; i < N_ELEMS; i++) host[i] = 99;
    CHECK(gu_all(x, 0));                       /* not run yet: the stream is held */
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(x, 11));
    CHECK(gu_all(y, 22));
    CHECK(gu_all(z, 33));
    /* the 12.8 entry point, one attribute for all; the per-thread flavours
     * take NULL as the per-thread stream */
    size_t fail = 7, one = 0;
    CUmemcpyAttributes st = attr_of(CU_MEMCPY_SRC_ACCESS_ORDER_ANY);
    CUdeviceptr d2[2] = { x, y }, s2[2] = { b, a };
    size_t z2[2] = { BYTES, BYTES };
    CHECK_CU(batch_v1(d2, s2, z2, 2, &st, &one, 1, &fail, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(fail, SIZE_MAX);
    CHECK(gu_all(x, 22));
    CHECK(gu_all(y, 11));
    CHECK_CU(batch_v1_ptsz(d2, s2 + 1, z2, 1, &st, &one, 1, &fail, NULL), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyBatchAsync_v2_ptsz(d2 + 1, s2, z2, 1, &st, &one, 1, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    CHECK(gu_all(x, 11));
    CHECK(gu_all(y, 22));
    CHECK_CU(cuMemFreeHost(flag), CUDA_SUCCESS);
    CUdeviceptr all[5] = { a, b, x, y, z };
    for (int i = 0; i < 5; i++) CHECK_CU(cuMemFree(all[i]), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(batch_refusals)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), x = gu_alloc();
    CHECK_CU(cuMemsetD32(a, 5, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(x, 0, N_ELEMS), CUDA_SUCCESS);
    CUdeviceptr d[3] = { x, x, x }, sr[3] = { a, a, a };
    size_t sz[3] = { 8, 8, 8 }, i0[2] = { 0, 1 }, bad1[1] = { 1 }, bad2[2] = { 0, 0 }, bad3[2] = { 0, 3 };
    CUmemcpyAttributes at[2] = { attr_of(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
                                 attr_of(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM) };
    CUmemcpyAttributes inv = attr_of(CU_MEMCPY_SRC_ACCESS_ORDER_INVALID), flg = at[0];
    flg.flags = 2;
    size_t fail = 0;
    CHECK_CU(cuMemcpyBatchAsync_v2(d, sr, sz, 0, at, i0, 1, s), CUDA_ERROR_INVALID_VALUE);     /* count 0 */
    CHECK_CU(cuMemcpyBatchAsync_v2(d, sr, sz, 3, at, i0, 0, s), CUDA_ERROR_INVALID_VALUE);     /* no attrs */
    CHECK_CU(cuMemcpyBatchAsync_v2(d, sr, sz, 3, at, bad1, 1, s), CUDA_ERROR_INVALID_VALUE);   /* first != 0 */
    CHECK_CU(cuMemcpyBatchAsync_v2(d, sr, sz, 3, at, bad2, 2, s), CUDA_ERROR_INVALID_VALUE);   /* not increasing */
    CHECK_CU(cuMemcpyBatchAsync_v2(d, sr, sz, 3, at, bad3, 2, s), CUDA_ERROR_INVALID_VALUE);   /* past count */
    CHECK_CU(cuMemcpyBatchAsync_v2(d, sr, sz, 1, at, i0, 2, s), CUDA_ERROR_INVALID_VALUE);     /* numAttrs > count */
    CHECK_CU(cuMemcpyBatchAsync_v2(d, sr, sz, 3, &inv, i0, 1, s), CUDA_ERROR_INVALID_VALUE);   /* order */
    CHECK_CU(cuMemcpyBatchAsync_v2(d, sr, sz, 3, &flg, i0, 1, s), CUDA_ERROR_INVALID_VALUE);   /* flags */
    CHECK_CU(cuMemcpyBatchAsync_v2(d, sr, sz, 3, at, i0, 1, NULL), CUDA_ERROR_INVALID_VALUE);  /* legacy NULL */
    CHECK_CU(cuMemcpyBatchAsync_v2(d, sr, sz, 3, at, i0, 1, CU_STREAM_LEGACY), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemcpyBatchAsync_v2(NULL, sr, sz, 3, at, i0, 1, s), CUDA_ERROR_INVALID_VALUE);
    /* a copy past its allocation's end: failIdx names it, nothing runs */
    size_t over[3] = { 8, BYTES + 4, 8 };
    CHECK_CU(cuMemsetD32(x, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(batch_v1(d, sr, over, 3, at, i0, 2, &fail, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(fail, 1);
    CHECK_CU(batch_v1(d, sr, sz, 3, &inv, i0, 1, &fail, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(fail, 0);
    CHECK_CU(batch_v1(d, sr, sz, 0, at, i0, 1, &fail, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(fail, SIZE_MAX);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(x, 0));
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(x), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(batch_captured)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc(), x = gu_alloc(), y = gu_alloc(), c = gu_alloc();
    gu_args fa, fb, ad;
    gu_kp_fill(&fa, a, 4);
    gu_kp_fill(&fb, b, 6);
    gu_kp_add(&ad, c, x, y);
    CUdeviceptr dsts[3] = { x, y, x }, srcs[3] = { a, b, a };
    size_t sizes[3] = { BYTES, BYTES, 0 }, i0 = 0;
    CUmemcpyAttributes st = attr_of(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
    CUgraph g;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_fill, s, &fa), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_fill, s, &fb), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, &st, &i0, 1, s), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_add, s, &ad), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    /* fill, fill, two copies (the zero-sized one makes none), add: 4 edges */
    size_t n = 5;
    CUgraphNode nodes[5];
    gu_graph_shape(g, 5, 5, nodes);
    int copies = 0;
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType t;
        CHECK_CU(cuGraphNodeGetType(nodes[i], &t), CUDA_SUCCESS);
        if (t != CU_GRAPH_NODE_TYPE_MEMCPY) continue;
        copies++;
        CUDA_MEMCPY3D p;
        size_t nd = 0, nu = 0;
        CHECK_CU(cuGraphMemcpyNodeGetParams(nodes[i], &p), CUDA_SUCCESS);
        CHECK_EQ(p.WidthInBytes, BYTES);
        CHECK(p.dstDevice == x || p.dstDevice == y);
        CHECK_CU(cuGraphNodeGetDependencies(nodes[i], NULL, NULL, &nd), CUDA_SUCCESS);
        CHECK_CU(cuGraphNodeGetDependentNodes(nodes[i], NULL, NULL, &nu), CUDA_SUCCESS);
        CHECK_EQ(nd, 1);                       /* the second fill */
        CHECK_EQ(nu, 1);                       /* the add */
    }
    CHECK_EQ(copies, 2);
    CUgraphExec ex;
    CHECK_CU(cuGraphInstantiateWithFlags(&ex, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(ex, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(c, 10));
    CHECK_CU(cuGraphExecDestroy(ex), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    /* a source read during the call cannot be captured: the capture is
     * invalidated */
    CUmemcpyAttributes now = attr_of(CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, &now, &i0, 1, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CUdeviceptr all[5] = { a, b, x, y, c };
    for (int i = 0; i < 5; i++) CHECK_CU(cuMemFree(all[i]), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* A source read during the call that the device may not read (a VMM
 * mapping without access): the read would fault on a GPU; the emulator
 * reports a violation instead of faulting itself, and the bytes read as
 * zeros. */
TEST(batch_now_inaccessible_source)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK_CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CUdeviceptr va = 0, x = gu_alloc();
    CUmemGenericAllocationHandle h = 0;
    CHECK_CU(cuMemAddressReserve(&va, gran, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemCreate(&h, gran, &prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(va, gran, 0, h, 0), CUDA_SUCCESS);      /* no cuMemSetAccess */
    CHECK_CU(cuMemsetD32(x, 7, N_ELEMS), CUDA_SUCCESS);
    CUmemcpyAttributes now = attr_of(CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
    size_t bytes = BYTES, i0 = 0;
    emu_test_stderr_begin();
    CHECK_CU(cuMemcpyBatchAsync_v2(&x, &va, &bytes, 1, &now, &i0, 1, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(emu_test_violations(), 1);
    CHECK(gu_all(x, 0));
    CHECK_CU(cuMemUnmap(va, gran), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(va, gran), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(x), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    RUN(batch_on_stream);
    RUN(batch_refusals);
    RUN(batch_captured);
    RUN(batch_now_inaccessible_source);
    return check_done();
}
