/*
 * test_enable.c: exec node state the program sets, and stale node handles.
 *
 *   - cuGraphNodeSetEnabled / cuGraphNodeGetEnabled: "Disabled nodes are
 *     functionally equivalent to empty nodes until they are reenabled.
 *     Existing node parameters are not affected by disabling/enabling the
 *     node." Nothing else re-enables a node: a whole-graph cuGraphExecUpdate
 *     and the per-node exec setters keep it disabled, and the parameters they
 *     set are the ones that run once it is enabled again. Kernel, memcpy and
 *     memset nodes are checked.
 *   - Node handles that no longer name a node of the graph the exec was
 *     instantiated from ("hNode must not have been removed from the original
 *     graph"): a node of a destroyed graph, or of another graph, given to
 *     cuGraphExecKernelNodeSetParams(_v2), cuGraphExecMemsetNodeSetParams,
 *     cuGraphExecMemcpyNodeSetParams, cuGraphNodeSetEnabled or
 *     cuGraphNodeGetEnabled gives CUDA_ERROR_INVALID_VALUE and changes
 *     nothing, also when a new node happens to get the old node's address.
 */
#include "graph_util.h"

/* Builds kernel (fill a) -> memset (b) -> memcpy (c = b) and instantiates it. */
typedef struct three {
    CUgraph g;
    CUgraphExec e;
    CUgraphNode kn, sn, cn;
    CUdeviceptr a, b, c;
} three;

/* The graph with fill value kv, memset value sv. */
static CUgraph build(three *t, uint32_t kv, uint32_t sv, CUgraphNode *kn, CUgraphNode *sn, CUgraphNode *cn)
{
    CUgraph g;
    gu_args k;
    gu_kp_fill(&k, t->a, kv);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &k);
    CUDA_MEMSET_NODE_PARAMS sp = gu_set_1d(t->b, sv);
    CUDA_MEMCPY3D cp = gu_copy_1d(t->c, t->b, N_ELEMS * sizeof(uint32_t));
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddKernelNode(kn, g, NULL, 0, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemsetNode(sn, g, kn, 1, &sp, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemcpyNode(cn, g, sn, 1, &cp, g_ctx), CUDA_SUCCESS);
    return g;
}

static void three_make(three *t)
{
    t->a = gu_alloc();
    t->b = gu_alloc();
    t->c = gu_alloc();
    t->g = build(t, 1, 2, &t->kn, &t->sn, &t->cn);
    CHECK_CU(cuGraphInstantiateWithFlags(&t->e, t->g, 0), CUDA_SUCCESS);
}

static void three_free(three *t)
{
    CHECK_CU(cuGraphExecDestroy(t->e), CUDA_SUCCESS);
    if (t->g) CHECK_CU(cuGraphDestroy(t->g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(t->a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(t->b), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(t->c), CUDA_SUCCESS);
}

/* Zeroes the buffers (c gets 99 so a disabled copy shows), launches, and
 * says whether a, b, c hold the given values. */
static int run_expect(three *t, uint32_t av, uint32_t bv, uint32_t cv)
{
    CHECK_CU(cuMemsetD32(t->a, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(t->b, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(t->c, 99, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(t->e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    return gu_all(t->a, av) && gu_all(t->b, bv) && gu_all(t->c, cv);
}

static unsigned enabled(three *t, CUgraphNode n)
{
    unsigned on = 7;
    CHECK_CU(cuGraphNodeGetEnabled(t->e, n, &on), CUDA_SUCCESS);
    return on;
}

TEST(disabled_nodes_do_not_run)
{
    three t;
    three_make(&t);
    CHECK(run_expect(&t, 1, 2, 2));
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.kn, 0), CUDA_SUCCESS);
    CHECK(run_expect(&t, 0, 2, 2));
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.sn, 0), CUDA_SUCCESS);
    CHECK(run_expect(&t, 0, 0, 0));
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.cn, 0), CUDA_SUCCESS);
    CHECK(run_expect(&t, 0, 0, 99));
    CHECK_EQ(enabled(&t, t.kn), 0);
    CHECK_EQ(enabled(&t, t.sn), 0);
    CHECK_EQ(enabled(&t, t.cn), 0);
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.kn, 5), CUDA_SUCCESS);    /* any nonzero enables */
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.sn, 1), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.cn, 1), CUDA_SUCCESS);
    CHECK_EQ(enabled(&t, t.kn), 1);
    CHECK(run_expect(&t, 1, 2, 2));
    three_free(&t);
}

/* A whole-graph update does not re-enable; its parameters run once the node
 * is enabled again. */
TEST(update_keeps_disabled_state)
{
    three t;
    three_make(&t);
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.kn, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.sn, 0), CUDA_SUCCESS);
    CUgraphNode kn, sn, cn;
    CUgraph g2 = build(&t, 5, 6, &kn, &sn, &cn);
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate(t.e, g2, &info), CUDA_SUCCESS);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    CHECK_EQ(enabled(&t, t.kn), 0);
    CHECK_EQ(enabled(&t, t.sn), 0);
    CHECK_EQ(enabled(&t, t.cn), 1);
    CHECK(run_expect(&t, 0, 0, 0));
    /* A second update (re-capture style, every node rebuilt) keeps it too. */
    CUgraph g3 = build(&t, 7, 8, &kn, &sn, &cn);
    CHECK_CU(cuGraphExecUpdate(t.e, g3, &info), CUDA_SUCCESS);
    CHECK(run_expect(&t, 0, 0, 0));
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.kn, 1), CUDA_SUCCESS);
    CHECK(run_expect(&t, 7, 0, 0));
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.sn, 1), CUDA_SUCCESS);
    CHECK(run_expect(&t, 7, 8, 8));
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g3), CUDA_SUCCESS);
    three_free(&t);
}

/* The per-node exec setters do not re-enable either. */
TEST(exec_setters_keep_disabled_state)
{
    three t;
    three_make(&t);
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.kn, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.sn, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.cn, 0), CUDA_SUCCESS);
    gu_args k;
    gu_kp_fill(&k, t.a, 11);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &k);
    CHECK_CU(cuGraphExecKernelNodeSetParams(t.e, t.kn, &kp), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS sp = gu_set_1d(t.b, 12);
    CHECK_CU(cuGraphExecMemsetNodeSetParams(t.e, t.sn, &sp, g_ctx), CUDA_SUCCESS);
    CUDA_MEMCPY3D cp = gu_copy_1d(t.c, t.a, N_ELEMS * sizeof(uint32_t));
    CHECK_CU(cuGraphExecMemcpyNodeSetParams(t.e, t.cn, &cp, g_ctx), CUDA_SUCCESS);
    CHECK_EQ(enabled(&t, t.kn), 0);
    CHECK_EQ(enabled(&t, t.sn), 0);
    CHECK_EQ(enabled(&t, t.cn), 0);
    CHECK(run_expect(&t, 0, 0, 99));
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.kn, 1), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.sn, 1), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.cn, 1), CUDA_SUCCESS);
    CHECK(run_expect(&t, 11, 12, 11));
    three_free(&t);
}

/* Launches already queued keep the state they were queued with. */
TEST(queued_launch_keeps_state)
{
    three t;
    three_make(&t);
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr w = gu_alloc();
    gu_args slow;
    gu_kp_slow(&slow, w, 1, 100000);
    CHECK_CU(cuMemsetD32(t.a, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_slow, s, &slow), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(t.e, s), CUDA_SUCCESS);          /* queued enabled */
    CHECK_CU(cuGraphNodeSetEnabled(t.e, t.kn, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(t.a, 1));
    CHECK(run_expect(&t, 0, 2, 2));
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(w), CUDA_SUCCESS);
    three_free(&t);
}

/* Every call that names an exec node by a graph node, with a node that is
 * not one of the exec's original graph: INVALID_VALUE, nothing changed. */
static void stale_calls(three *t, CUgraphNode kn, CUgraphNode sn, CUgraphNode cn)
{
    gu_args k;
    gu_kp_fill(&k, t->a, 42);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &k);
    CHECK_CU(cuGraphExecKernelNodeSetParams_v2(t->e, kn, &kp), CUDA_ERROR_INVALID_VALUE);
    gu_kp_fill(&k, t->a, 1);            /* the parameters the node has */
    CHECK_CU(cuGraphExecKernelNodeSetParams_v2(t->e, kn, &kp), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMSET_NODE_PARAMS sp = gu_set_1d(t->b, 43);
    CHECK_CU(cuGraphExecMemsetNodeSetParams(t->e, sn, &sp, g_ctx), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY3D cp = gu_copy_1d(t->c, t->a, N_ELEMS * sizeof(uint32_t));
    CHECK_CU(cuGraphExecMemcpyNodeSetParams(t->e, cn, &cp, g_ctx), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphNodeSetEnabled(t->e, kn, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphNodeSetEnabled(t->e, sn, 0), CUDA_ERROR_INVALID_VALUE);
    unsigned on = 7;
    CHECK_CU(cuGraphNodeGetEnabled(t->e, kn, &on), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(on, 7);
    CHECK(run_expect(t, 1, 2, 2));       /* the exec is unchanged */
}

#undef cuGraphExecKernelNodeSetParams
CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v1 *);

TEST(stale_node_handles)
{
    three t;
    three_make(&t);
    /* Nodes of another graph of the same shape. */
    CUgraphNode kn, sn, cn;
    CUgraph other = build(&t, 1, 2, &kn, &sn, &cn);
    stale_calls(&t, kn, sn, cn);
    CHECK_CU(cuGraphDestroy(other), CUDA_SUCCESS);
    /* Nodes of the original graph once it is destroyed; the exec lives on. */
    CUgraphNode okn = t.kn, osn = t.sn, ocn = t.cn;
    CHECK_CU(cuGraphDestroy(t.g), CUDA_SUCCESS);
    t.g = NULL;
    stale_calls(&t, okn, osn, ocn);
    gu_args k;
    gu_kp_fill(&k, t.a, 42);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &k);
    CUDA_KERNEL_NODE_PARAMS_v1 kp1;
    memset(&kp1, 0, sizeof kp1);
    kp1.func = kp.func;
    kp1.gridDimX = kp1.gridDimY = kp1.gridDimZ = kp1.blockDimX = kp1.blockDimY = kp1.blockDimZ = 1;
    kp1.kernelParams = kp.kernelParams;
    CHECK_CU(cuGraphExecKernelNodeSetParams(t.e, okn, &kp1), CUDA_ERROR_INVALID_VALUE);  /* legacy name */
    /* New graphs made now may reuse the freed nodes' memory: still stale. */
    CUgraph again[4];
    for (int i = 0; i < 4; i++) {
        again[i] = build(&t, 1, 2, &kn, &sn, &cn);
        if (kn == okn || sn == osn || cn == ocn) printf("#   a new node got a stale node's address\n");
        stale_calls(&t, okn, osn, ocn);
    }
    for (int i = 0; i < 4; i++) CHECK_CU(cuGraphDestroy(again[i]), CUDA_SUCCESS);
    three_free(&t);
}

int main(void)
{
    gu_setup();
    RUN(disabled_nodes_do_not_run);
    RUN(update_keeps_disabled_state);
    RUN(exec_setters_keep_disabled_state);
    RUN(queued_launch_keeps_state);
    RUN(stale_node_handles);
    return check_done();
}
