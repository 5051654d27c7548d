/*
 * test_graphmem.c: stream-ordered allocation during capture and graph
 * memory nodes.
 *
 *   - cuMemFreeAsync on a capturing stream "results in the creation of a free
 *     node and must therefore be passed the address of a graph allocation":
 *     a cuMemAlloc or cuMemAllocAsync block from before the capture gives
 *     CUDA_ERROR_INVALID_VALUE, invalidates the capture (in every mode) and
 *     frees nothing;
 *   - cuMemAllocAsync on a capturing stream creates an allocation node whose
 *     address is fixed, usable by the captured work, allocated by each launch
 *     and freed by the free node;
 *   - an allocation not freed in its graph outlives the launch (and the graph
 *     and exec) until freed; relaunching before that is refused unless the
 *     exec was instantiated with AUTO_FREE_ON_LAUNCH; another graph may hold
 *     its free node; at most one free node per allocation;
 *   - one instantiation at a time, no cloning, no update that moves the
 *     allocation; cuGraphAddMemAllocNode / cuGraphAddNode / get-params.
 */
#include "graph_util.h"

#include <stdlib.h>

static CUstreamCaptureStatus status(CUstream s)
{
    CUstreamCaptureStatus st;
    CHECK_CU(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
    return st;
}

static int dev_alive(CUdeviceptr p)
{
    CUdeviceptr b;
    size_t n;
    return cuMemGetAddressRange(&b, &n, p) == CUDA_SUCCESS;
}

TEST(free_of_uncaptured_memory_invalidates)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr p, q;
    CHECK_CU(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&q, 4096, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CUstreamCaptureMode modes[] = { CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_RELAXED };
    CUdeviceptr blocks[] = { p, q, p + 8 };
    for (int m = 0; m < 2; m++) {
        for (int b = 0; b < 3; b++) {
            CUgraph g = (CUgraph)(uintptr_t)1;
            CHECK_CU(cuStreamBeginCapture(s, modes[m]), CUDA_SUCCESS);
            CHECK_CU(cuMemsetD8Async(p, 1, 16, s), CUDA_SUCCESS);
            CHECK_CU(cuMemFreeAsync(blocks[b], s), CUDA_ERROR_INVALID_VALUE);
            CHECK_EQ(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
            CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
            CHECK(g == NULL);
            CHECK(dev_alive(p));
            CHECK(dev_alive(q));
        }
    }
    CHECK_CU(cuMemFreeAsync(q, s), CUDA_SUCCESS);          /* outside capture: fine */
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Captures: alloc a; fill a with v; copy a -> out; [free a]. */
static CUgraph capture_use(CUstream s, CUdeviceptr out, uint32_t v, int do_free, CUdeviceptr *a_out)
{
    CUdeviceptr a = 0;
    CUgraph g = NULL;
    gu_args k;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&a, N_ELEMS * 4, s), CUDA_SUCCESS);
    CHECK(a != 0);
    gu_kp_fill(&k, a, v);
    CHECK_CU(gu_launch(k_fill, s, &k), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoDAsync(out, a, N_ELEMS * 4, s), CUDA_SUCCESS);
    if (do_free) CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    *a_out = a;
    return g;
}

TEST(captured_allocation_and_free)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr out = gu_alloc(), a;
    size_t free0, total, free1;
    CHECK_CU(cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
    CUgraph g = capture_use(s, out, 5, 1, &a);
    CUgraphNode nodes[4];
    size_t n = 4;
    CHECK_CU(cuGraphGetNodes(g, nodes, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 4);
    CUgraphNodeType want[4] = { CU_GRAPH_NODE_TYPE_MEM_ALLOC, CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMCPY,
                                CU_GRAPH_NODE_TYPE_MEM_FREE };
    for (int i = 0; i < 4; i++) {
        CUgraphNodeType t;
        CHECK_CU(cuGraphNodeGetType(nodes[i], &t), CUDA_SUCCESS);
        CHECK_EQ(t, want[i]);
    }
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    CHECK_CU(cuGraphMemAllocNodeGetParams(nodes[0], &ap), CUDA_SUCCESS);
    CHECK_EQ(ap.dptr, a);
    CHECK_EQ(ap.bytesize, N_ELEMS * 4);
    CHECK_EQ(ap.poolProps.location.id, 0);
    CUdeviceptr fp = 0;
    CHECK_CU(cuGraphMemFreeNodeGetParams(nodes[3], &fp), CUDA_SUCCESS);
    CHECK_EQ(fp, a);
    CHECK(!dev_alive(a));                                    /* reserved, not allocated */
    CUgraphExec e, e2;
    CHECK_CU(cuGraphInstantiate(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiate(&e2, g, 0), CUDA_ERROR_INVALID_VALUE);   /* one at a time */
    CUgraph clone;
    CHECK_CU(cuGraphClone(&clone, g), CUDA_ERROR_NOT_SUPPORTED);
    for (uint32_t round = 0; round < 3; round++) {
        CHECK_CU(cuMemsetD32(out, 0, N_ELEMS), CUDA_SUCCESS);
        CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);         /* freed by its own free node: relaunch is fine */
        CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
        CHECK(gu_all(out, 5));
        CHECK(!dev_alive(a));
        CHECK_CU(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
        CHECK_EQ(free1, free0);
    }
    cuuint64_t high = 0;
    CHECK_CU(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &high), CUDA_SUCCESS);
    CHECK(high >= N_ELEMS * 4);
    /* A re-capture makes a new allocation: the update cannot move it. */
    CUdeviceptr a2;
    CUgraph g2 = capture_use(s, out, 6, 1, &a2);
    CHECK(a2 != a);
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate(e, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiate(&e2, g, 0), CUDA_SUCCESS);  /* the first is gone */
    CHECK_CU(cuGraphExecDestroy(e2), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(out), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(allocation_outlives_its_graph)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr out = gu_alloc(), a;
    CUgraph g = capture_use(s, out, 7, 0, &a);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiate(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(dev_alive(a));
    CHECK(gu_all(a, 7));                                     /* usable after the launch */
    CHECK_CU(cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE); /* still allocated */
    CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);             /* ordered after that free */
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(dev_alive(a));
    /* Again and again: the stream thread runs the free while the next launch
     * is being queued; whichever comes first, the launch leaves it allocated. */
    int gone = 0;
    for (int i = 0; i < 300 && !gone; i++) {
        CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
        CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
        CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
        gone = !dev_alive(a);
    }
    CHECK(!gone);
    /* The exec and graph go; the allocation stays until freed. */
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK(gu_all(a, 7));
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK(!dev_alive(a));
    CHECK_CU(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);

    /* AUTO_FREE_ON_LAUNCH: each launch frees what the last one left. */
    g = capture_use(s, out, 8, 0, &a);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++) CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(a, 8));
    CHECK_CU(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);        /* already freed in stream order */
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(!dev_alive(a));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(out), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(explicit_nodes_and_free_in_another_graph)
{
    CUgraph ga, gb, gc;
    CUgraphNode an, fn, bad;
    CHECK_CU(cuGraphCreate(&ga, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphCreate(&gb, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphCreate(&gc, 0), CUDA_SUCCESS);
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = 0;
    ap.bytesize = N_ELEMS * 4;
    CHECK_CU(cuGraphAddMemAllocNode(&an, ga, NULL, 0, &ap), CUDA_SUCCESS);
    CHECK(ap.dptr != 0);
    CUdeviceptr a = ap.dptr;
    CUDA_MEM_ALLOC_NODE_PARAMS badp = ap;
    badp.poolProps.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;   /* IPC is not supported */
    CHECK_CU(cuGraphAddMemAllocNode(&bad, ga, NULL, 0, &badp), CUDA_ERROR_INVALID_VALUE);
    badp = ap;
    badp.bytesize = 0;
    CHECK_CU(cuGraphAddMemAllocNode(&bad, ga, NULL, 0, &badp), CUDA_ERROR_INVALID_VALUE);
    /* Free nodes: only graph allocations, at their address, once in all. */
    CUdeviceptr plain;
    CHECK_CU(cuMemAlloc(&plain, 4096), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemFreeNode(&bad, gb, NULL, 0, plain), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphAddMemFreeNode(&bad, gb, NULL, 0, a + 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphAddMemFreeNode(&fn, gb, NULL, 0, a), CUDA_SUCCESS);   /* another graph frees it */
    CHECK_CU(cuGraphAddMemFreeNode(&bad, gb, NULL, 0, a), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphAddMemFreeNode(&bad, ga, NULL, 0, a), CUDA_ERROR_INVALID_VALUE);
    /* The generic call, too. */
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    np.free.dptr = a;
    CHECK_CU(cuGraphAddNode(&bad, gc, NULL, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    np.alloc.poolProps = ap.poolProps;
    np.alloc.bytesize = 100;
    CUgraphNode cn;
    CHECK_CU(cuGraphAddNode(&cn, gc, NULL, NULL, 0, &np), CUDA_SUCCESS);
    CHECK(np.alloc.dptr != 0 && np.alloc.dptr != a);
    /* Memory nodes cannot be set. */
    CHECK_CU(cuGraphNodeSetParams(cn, &np), CUDA_ERROR_NOT_SUPPORTED);
    /* Launch ga (allocates), then gb (frees). */
    CUgraphExec ea, eb;
    CHECK_CU(cuGraphInstantiate(&ea, ga, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiate(&eb, gb, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(ea, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(dev_alive(a));
    CHECK_CU(cuGraphLaunch(eb, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(!dev_alive(a));
    CHECK_CU(cuGraphLaunch(ea, NULL), CUDA_SUCCESS);        /* freed: may allocate again */
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(dev_alive(a));
    CHECK_CU(cuGraphExecDestroy(ea), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(eb), CUDA_SUCCESS);
    /* Destroying the graph with the free node frees the allocation's free slot. */
    CHECK_CU(cuGraphDestroy(gb), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemFreeNode(&fn, ga, &an, 1, a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(ga), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(gc), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(plain), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    RUN(free_of_uncaptured_memory_invalidates);
    RUN(captured_allocation_and_free);
    RUN(allocation_outlives_its_graph);
    RUN(explicit_nodes_and_free_in_another_graph);
    return check_done();
}
