/*
 * test_memops.c: stream memory operations in batches and in graphs, in the
 * emulated driver (emu_copy.c, emu_graph.c; docs/emulator.md "Stream memory
 * operations in graphs"): cuStreamBatchMemOp (v1, _v2, per-thread) with its
 * documented checks; cuStreamWriteValue32/64, WaitValue32/64 and
 * cuStreamBatchMemOp captured as batch memory operation nodes;
 * cuGraphAddBatchMemOpNode, its getter and setter, clones; the exec setter's
 * and cuGraphExecUpdate's rules (addresses, values and the wait type may
 * change; the context, count, operation types and other flags may not); a
 * wait node holding a launch until the host writes its flag.
 *
 * Every case reads the words back.
 */
#include "graph_util.h"

/* cuda.h maps cuStreamBatchMemOp to the _v2; the first version under a name
 * of its own. */
CUresult CUDAAPI batch_v1(CUstream, unsigned int, CUstreamBatchMemOpParams *, unsigned int)
    __asm__("cuStreamBatchMemOp");
CUresult CUDAAPI cuStreamBatchMemOp_v2_ptsz(CUstream, unsigned int, CUstreamBatchMemOpParams *, unsigned int);

static CUstreamBatchMemOpParams op_write32(CUdeviceptr a, uint32_t v)
{
    CUstreamBatchMemOpParams o;
    memset(&o, 0, sizeof o);
    o.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    o.writeValue.address = a;
    o.writeValue.value = v;
    return o;
}

static CUstreamBatchMemOpParams op_write64(CUdeviceptr a, uint64_t v)
{
    CUstreamBatchMemOpParams o = op_write32(a, 0);
    o.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    o.writeValue.value64 = v;
    return o;
}

static CUstreamBatchMemOpParams op_wait32(CUdeviceptr a, uint32_t v, unsigned flags)
{
    CUstreamBatchMemOpParams o;
    memset(&o, 0, sizeof o);
    o.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    o.waitValue.address = a;
    o.waitValue.value = v;
    o.waitValue.flags = flags;
    return o;
}

static uint32_t word(CUdeviceptr p, size_t i)
{
    uint32_t h[N_ELEMS];
    gu_read(p, h);
    return h[i];
}

TEST(batch_on_stream)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr x = gu_alloc();
    CHECK_CU(cuMemsetD32(x, 0, N_ELEMS), CUDA_SUCCESS);
    uint32_t *flag = gu_hold(s);
    CUstreamBatchMemOpParams ops[3] = { op_write32(x, 5), op_write64(x + 8, 0x100000002ull), op_write32(x + 4, 6) };
    CHECK_CU(batch_v1(s, 3, ops, 0), CUDA_SUCCESS);
    CHECK_EQ(word(x, 0), 0);                   /* held */
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(word(x, 0), 5);
    CHECK_EQ(word(x, 1), 6);
    CHECK_EQ(word(x, 2), 2);
    CHECK_EQ(word(x, 3), 1);
    /* a wait then a write, in order; a barrier only in the _v2 entry points */
    CUstreamBatchMemOpParams bar;
    memset(&bar, 0, sizeof bar);
    bar.memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
    bar.memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_GPU;
    CUstreamBatchMemOpParams seq[3] = { op_wait32(x, 5, CU_STREAM_WAIT_VALUE_EQ), bar, op_write32(x + 16, 8) };
    CHECK_CU(batch_v1(s, 3, seq, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamBatchMemOp_v2(s, 3, seq, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamBatchMemOp_v2_ptsz(NULL, 1, &seq[2], 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    CHECK_EQ(word(x, 4), 8);
    /* the documented refusals */
    CUstreamBatchMemOpParams many[256], bad = op_write32(x + 2, 1), unk = op_write32(x, 1);
    for (int i = 0; i < 256; i++) many[i] = op_write32(x, 1);
    unk.operation = (CUstreamBatchMemOpType)99;
    CUstreamBatchMemOpParams badflag = op_write32(x, 1), badwait = op_wait32(x, 1, 0x100);
    badflag.writeValue.flags = 0x8;
    CHECK_CU(cuStreamBatchMemOp(s, 0, ops, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamBatchMemOp(s, 256, many, 0), CUDA_ERROR_INVALID_VALUE);   /* "less than 256" */
    CHECK_CU(cuStreamBatchMemOp(s, 255, many, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamBatchMemOp(s, 1, ops, 1), CUDA_ERROR_INVALID_VALUE);      /* flags must be 0 */
    CHECK_CU(cuStreamBatchMemOp(s, 1, &bad, 0), CUDA_ERROR_INVALID_VALUE);     /* misaligned */
    CHECK_CU(cuStreamBatchMemOp(s, 1, &unk, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamBatchMemOp(s, 1, &badflag, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamBatchMemOp(s, 1, &badwait, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamBatchMemOp(s, 1, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(word(x, 0), 1);
    CHECK_CU(cuMemFreeHost(flag), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(x), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Captured memory operations: one batch node per call, in stream order. */
TEST(captured_nodes)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr x = gu_alloc();
    gu_args fa;
    gu_kp_fill(&fa, x, 3);
    CUstreamBatchMemOpParams ops[2] = { op_write32(x + 4, 9), op_write64(x + 8, 11) };
    CUgraph g;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_fill, s, &fa), CUDA_SUCCESS);
    CHECK_CU(cuStreamWriteValue32(s, x, 7, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamBatchMemOp(s, 2, ops, 0), CUDA_SUCCESS);
    ops[0].writeValue.value = 1234;            /* copied by the call */
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    size_t n = 3;
    CUgraphNode nodes[3];
    gu_graph_shape(g, 3, 2, nodes);
    int batches = 0;
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType t;
        CUDA_BATCH_MEM_OP_NODE_PARAMS bp;
        CHECK_CU(cuGraphNodeGetType(nodes[i], &t), CUDA_SUCCESS);
        if (t != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
            CHECK_CU(cuGraphBatchMemOpNodeGetParams(nodes[i], &bp), CUDA_ERROR_INVALID_VALUE);
            continue;
        }
        batches++;
        CHECK_CU(cuGraphBatchMemOpNodeGetParams(nodes[i], &bp), CUDA_SUCCESS);
        CHECK(bp.ctx == g_ctx);
        CHECK(bp.count == 1 || bp.count == 2);
        if (bp.count == 2) {
            CHECK_EQ(bp.paramArray[0].writeValue.value, 9);
            CHECK_EQ(bp.paramArray[1].writeValue.operation, CU_STREAM_MEM_OP_WRITE_VALUE_64);
        }
    }
    CHECK_EQ(batches, 2);
    CHECK_CU(cuMemsetD32(x, 0, N_ELEMS), CUDA_SUCCESS);
    CUgraphExec ex;
    CHECK_CU(cuGraphInstantiateWithFlags(&ex, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(ex, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(word(x, 0), 7);                   /* after the fill */
    CHECK_EQ(word(x, 1), 9);
    CHECK_EQ(word(x, 2), 11);
    CHECK_EQ(word(x, 3), 0);
    CHECK_EQ(word(x, 5), 3);                   /* the fill's */
    CHECK_CU(cuGraphExecDestroy(ex), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(x), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* One write node in a graph; launches x[i] = v. */
static CUgraph write_graph(CUdeviceptr a, uint32_t v, CUgraphNode *nd)
{
    CUgraph g;
    CUstreamBatchMemOpParams o = op_write32(a, v);
    CUDA_BATCH_MEM_OP_NODE_PARAMS p = { .ctx = g_ctx, .count = 1, .paramArray = &o, .flags = 0 };
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddBatchMemOpNode(nd, g, NULL, 0, &p), CUDA_SUCCESS);
    return g;
}

TEST(explicit_nodes_and_updates)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr x = gu_alloc();
    CHECK_CU(cuMemsetD32(x, 0, N_ELEMS), CUDA_SUCCESS);
    CUgraphNode n1, n2, n3, nc;
    CUgraph g1 = write_graph(x, 1, &n1), g2 = write_graph(x + 4, 2, &n2), g3, gc;
    CUgraphExec ex;
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphInstantiateWithFlags(&ex, g1, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate(ex, g2, &info), CUDA_SUCCESS);     /* address and value may change */
    /* (the exec's node is still named by g1's node, n1) */
    CHECK_CU(cuGraphLaunch(ex, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(word(x, 0), 0);
    CHECK_EQ(word(x, 1), 2);
    /* the operation type may not change, nor the count, nor a write's flags */
    CUstreamBatchMemOpParams w = op_wait32(x, 0, CU_STREAM_WAIT_VALUE_GEQ), two[2] = { op_write32(x, 3),
                                                                                        op_write32(x, 4) };
    CUDA_BATCH_MEM_OP_NODE_PARAMS p = { .ctx = g_ctx, .count = 1, .paramArray = &w };
    CHECK_CU(cuGraphCreate(&g3, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddBatchMemOpNode(&n3, g3, NULL, 0, &p), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate(ex, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    CHECK_CU(cuGraphExecBatchMemOpNodeSetParams(ex, n1, &p), CUDA_ERROR_INVALID_VALUE);
    p.paramArray = two;
    p.count = 2;
    CHECK_CU(cuGraphExecBatchMemOpNodeSetParams(ex, n1, &p), CUDA_ERROR_INVALID_VALUE);
    two[0].writeValue.flags = CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER;
    p.count = 1;
    CHECK_CU(cuGraphExecBatchMemOpNodeSetParams(ex, n1, &p), CUDA_ERROR_INVALID_VALUE);
    two[0].writeValue.flags = 0;
    CHECK_CU(cuGraphExecBatchMemOpNodeSetParams(ex, n1, &p), CUDA_SUCCESS);   /* x[0] = 3 */
    CHECK_CU(cuGraphLaunch(ex, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(word(x, 0), 3);
    /* the graph node's own setter and getter; a clone copies the operations */
    CUDA_BATCH_MEM_OP_NODE_PARAMS got;
    CHECK_CU(cuGraphBatchMemOpNodeSetParams(n1, &p), CUDA_SUCCESS);
    CHECK_CU(cuGraphBatchMemOpNodeGetParams(n1, &got), CUDA_SUCCESS);
    CHECK_EQ(got.count, 1);
    CHECK_EQ(got.paramArray[0].writeValue.value, 3);
    CHECK(got.paramArray != two);
    CHECK_CU(cuGraphClone(&gc, g1), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeFindInClone(&nc, n1, gc), CUDA_SUCCESS);
    CHECK_CU(cuGraphBatchMemOpNodeGetParams(nc, &got), CUDA_SUCCESS);
    CHECK_EQ(got.paramArray[0].writeValue.address, x);
    CHECK_CU(cuGraphAddBatchMemOpNode(&nc, gc, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecDestroy(ex), CUDA_SUCCESS);
    CUgraph all[4] = { g1, g2, g3, gc };
    for (int i = 0; i < 4; i++) CHECK_CU(cuGraphDestroy(all[i]), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(x), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* A wait node holds the launch until the host writes its flag. */
TEST(wait_node_holds_launch)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr x = gu_alloc(), df = 0;
    uint32_t *flag = NULL;
    CHECK_CU(cuMemHostAlloc((void **)&flag, 4096, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    CHECK_CU(cuMemHostGetDevicePointer(&df, flag, 0), CUDA_SUCCESS);
    *flag = 0;
    CHECK_CU(cuMemsetD32(x, 0, N_ELEMS), CUDA_SUCCESS);
    CUstreamBatchMemOpParams ops[2] = { op_wait32(df, 1, CU_STREAM_WAIT_VALUE_EQ), op_write32(x, 42) };
    CUDA_BATCH_MEM_OP_NODE_PARAMS p = { .ctx = g_ctx, .count = 2, .paramArray = ops };
    CUgraph g;
    CUgraphNode nd;
    CUgraphExec ex;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddBatchMemOpNode(&nd, g, NULL, 0, &p), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&ex, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(ex, s), CUDA_SUCCESS);
    usleep(20000);
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(word(x, 0), 42);
    CHECK_CU(cuGraphExecDestroy(ex), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeHost(flag), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(x), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    RUN(batch_on_stream);
    RUN(captured_nodes);
    RUN(explicit_nodes_and_updates);
    RUN(wait_node_holds_launch);
    return check_done();
}
