/*
 * test_update_rules.c: documented rules of exec updates that the emulated
 * driver had not followed (round 20 audit; the table is in docs/emulator.md,
 * "Graph update rules: what is checked"):
 *   - cuGraphExecUpdate: "Neither hGraph nor hGraphExec may contain
 *     device-updatable kernel nodes";
 *   - cuGraphExecUpdate, cuGraphExecMemsetNodeSetParams and
 *     cuGraphExecMemcpyNodeSetParams: the operands of a memset or memcpy
 *     node must be allocated from the same contexts as the original ones
 *     (two contexts on one device: the device rule alone lets it pass), the
 *     original operands' contexts as they were when the node was made.
 */
#include "graph_util.h"

static CUgraphNode add_fill(CUgraph g, CUdeviceptr p, uint32_t v, gu_args *a)
{
    gu_kp_fill(a, p, v);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, a);
    CUgraphNode nd = NULL;
    CHECK_CU(cuGraphAddKernelNode(&nd, g, NULL, 0, &kp), CUDA_SUCCESS);
    return nd;
}

static void set_device_updatable(CUgraphNode nd)
{
    CUkernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    v.deviceUpdatableKernelNode.deviceUpdatable = 1;
    CHECK_CU(cuGraphKernelNodeSetAttribute(nd, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v),
             CUDA_SUCCESS);
}

/* A device-updatable kernel node on either side refuses the whole update:
 * CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED ("something about a node is
 * unsupported, like the node's type or configuration"), errorNode the node
 * of hGraph; the exec keeps its parameters. */
TEST(device_updatable_nodes_refuse_update)
{
    CUdeviceptr a = gu_alloc();
    gu_args a0, a1, a2;
    CUgraph plain, plain2, du;
    CHECK_CU(cuGraphCreate(&plain, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphCreate(&plain2, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphCreate(&du, 0), CUDA_SUCCESS);
    add_fill(plain, a, 1, &a0);
    CUgraphNode p2 = add_fill(plain2, a, 2, &a1);
    CUgraphNode dn = add_fill(du, a, 3, &a2);
    set_device_updatable(dn);

    CUgraphExec e, edu;
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, plain, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(e, du, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
    CHECK(info.errorNode == dn);
    CHECK(info.errorFromNode == NULL);
    CHECK_CU(cuGraphLaunch(e, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(0), CUDA_SUCCESS);
    CHECK(gu_all(a, 1));                         /* not updated */

    CHECK_CU(cuGraphInstantiateWithFlags(&edu, du, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(edu, plain2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
    CHECK(info.errorNode == p2);

    CHECK_CU(cuGraphExecUpdate_v2(e, plain2, &info), CUDA_SUCCESS);   /* control */
    CHECK_CU(cuGraphExecDestroy(edu), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(du), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(plain2), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(plain), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

/* One node (memset of dst, or copy src -> dst) in a new graph. */
static CUgraph one_node(int copy, CUdeviceptr dst, CUdeviceptr src, CUgraphNode *nd)
{
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    if (copy) {
        CUDA_MEMCPY3D c = gu_copy_1d(dst, src, N_ELEMS * sizeof(uint32_t));
        CHECK_CU(cuGraphAddMemcpyNode(nd, g, NULL, 0, &c, g_ctx), CUDA_SUCCESS);
    } else {
        CUDA_MEMSET_NODE_PARAMS m = gu_set_1d(dst, 7);
        CHECK_CU(cuGraphAddMemsetNode(nd, g, NULL, 0, &m, g_ctx), CUDA_SUCCESS);
    }
    return g;
}

/* Memory of another context of the same device: refused by the whole-graph
 * update (PARAMETERS_CHANGED, errorNode the node of hGraph) and by the
 * per-node setters (CUDA_ERROR_INVALID_VALUE); memory of the original
 * context is accepted. */
TEST(operands_keep_their_context)
{
    CUdevice dev;
    CUcontext other;
    CHECK_CU(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxCreate(&other, NULL, 0, dev), CUDA_SUCCESS);
    CUdeviceptr foreign = gu_alloc();            /* made in `other` */
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc(), c = gu_alloc();

    for (int copy = 0; copy < 2; copy++) {
        printf("# %s node\n", copy ? "memcpy" : "memset");
        CUgraphNode n0, n1, n2;
        CUgraph g0 = one_node(copy, a, b, &n0);
        CUgraph same = one_node(copy, c, b, &n1);         /* another buffer, same context */
        CUgraph moved = copy ? one_node(copy, a, foreign, &n2) : one_node(copy, foreign, b, &n2);
        CUgraphExec e;
        CUgraphExecUpdateResultInfo info;
        CHECK_CU(cuGraphInstantiateWithFlags(&e, g0, 0), CUDA_SUCCESS);
        CHECK_CU(cuGraphExecUpdate_v2(e, moved, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
        CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
        CHECK(info.errorNode == n2);
        CHECK_CU(cuGraphExecUpdate_v2(e, same, &info), CUDA_SUCCESS);
        if (copy) {
            CUDA_MEMCPY3D cp = gu_copy_1d(a, foreign, N_ELEMS * sizeof(uint32_t));
            CHECK_CU(cuGraphExecMemcpyNodeSetParams(e, n0, &cp, g_ctx), CUDA_ERROR_INVALID_VALUE);
            cp = gu_copy_1d(a, b, N_ELEMS * sizeof(uint32_t));
            CHECK_CU(cuGraphExecMemcpyNodeSetParams(e, n0, &cp, g_ctx), CUDA_SUCCESS);
        } else {
            CUDA_MEMSET_NODE_PARAMS m = gu_set_1d(foreign, 9);
            CHECK_CU(cuGraphExecMemsetNodeSetParams(e, n0, &m, g_ctx), CUDA_ERROR_INVALID_VALUE);
            m = gu_set_1d(a, 9);
            CHECK_CU(cuGraphExecMemsetNodeSetParams(e, n0, &m, g_ctx), CUDA_SUCCESS);
        }
        CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
        CHECK_CU(cuGraphDestroy(moved), CUDA_SUCCESS);
        CHECK_CU(cuGraphDestroy(same), CUDA_SUCCESS);
        CHECK_CU(cuGraphDestroy(g0), CUDA_SUCCESS);
    }
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(c), CUDA_SUCCESS);
    CHECK_CU(cuCtxDestroy(other), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
}

/* The rule compares with the context the original operand was allocated
 * in, not with whatever holds its address at the time of the update: the
 * original block freed and its address given to a block of another context,
 * an update (and a per-node set) with memory of the original context is
 * accepted. (Until round 24 the emulator looked the original address up at
 * the update, and refused it: two host threads each re-capturing a graph on
 * their own device, tests/e2e/rt_devices.cu `threads`.) */
TEST(original_operand_freed_address_reused)
{
    CUdevice dev;
    CUcontext other;
    CHECK_CU(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxCreate(&other, NULL, 0, dev), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    for (int copy = 0; copy < 2; copy++) {
        printf("# %s node\n", copy ? "memcpy" : "memset");
        CUdeviceptr a = gu_alloc(), b = gu_alloc();
        CUgraphNode n0, n1;
        CUgraph g0 = one_node(copy, a, b, &n0);
        CUgraphExec e;
        CUgraphExecUpdateResultInfo info;
        CHECK_CU(cuGraphInstantiateWithFlags(&e, g0, 0), CUDA_SUCCESS);
        CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
        CHECK_CU(cuCtxSetCurrent(other), CUDA_SUCCESS);
        CUdeviceptr reused = gu_alloc();         /* the freed block's pages, in `other` */
        CHECK(reused == a);
        CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
        CUdeviceptr c = gu_alloc();
        CUgraph next = one_node(copy, c, b, &n1);
        CHECK_CU(cuGraphExecUpdate_v2(e, next, &info), CUDA_SUCCESS);
        CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
        CHECK_CU(cuGraphLaunch(e, 0), CUDA_SUCCESS);
        CHECK_CU(cuStreamSynchronize(0), CUDA_SUCCESS);
        CHECK(copy || gu_all(c, 7));
        CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
        CHECK_CU(cuGraphDestroy(next), CUDA_SUCCESS);
        CHECK_CU(cuGraphDestroy(g0), CUDA_SUCCESS);
        CHECK_CU(cuMemFree(c), CUDA_SUCCESS);
        CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
        CHECK_CU(cuMemFree(reused), CUDA_SUCCESS);
    }
    CHECK_CU(cuCtxDestroy(other), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
}

/* "hGraph has more exit nodes than [hGraphExec], in which case
 * resultInfo->errorNode is set to one of the exit nodes in hGraph", checked
 * before the dependencies: an exec of the chain A -> B -> C updated to A -> B,
 * A -> C (the same node count and dependency counts; C's dependency
 * differs, but the exit nodes come first): TOPOLOGY_CHANGED, errorNode C (the
 * exit nodes paired in node order, the first of hGraph's left over),
 * errorFromNode NULL (before round 36: C, with errorFromNode A). Fewer exit
 * nodes (the chain updated from A -> B, A -> C's exec) is the dependency
 * rule's: C, from B. test_graph.c's fill -> affine updated to the two apart
 * names the second exit node too (as before).
 * The exec keeps its parameters. */
TEST(more_exit_nodes_first)
{
    CUdeviceptr a = gu_alloc();
    gu_args x[6];
    CUgraph chain, fork;
    CUgraphNode c[3], f[3];
    CHECK_CU(cuGraphCreate(&chain, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphCreate(&fork, 0), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++) {
        gu_kp_fill(&x[i], a, 1);
        CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &x[i]);
        CHECK_CU(cuGraphAddKernelNode(&c[i], chain, i ? &c[i - 1] : NULL, i ? 1 : 0, &kp), CUDA_SUCCESS);
        gu_kp_fill(&x[3 + i], a, 2);
        kp = gu_knode(k_fill, &x[3 + i]);
        CHECK_CU(cuGraphAddKernelNode(&f[i], fork, i ? &f[0] : NULL, i ? 1 : 0, &kp), CUDA_SUCCESS);
    }
    CUgraphExec e, ef;
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, chain, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(e, fork, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    CHECK(info.errorNode == f[2]);
    CHECK(info.errorFromNode == NULL);
    CHECK_CU(cuGraphLaunch(e, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(0), CUDA_SUCCESS);
    CHECK(gu_all(a, 1));                         /* not updated */

    CHECK_CU(cuGraphInstantiateWithFlags(&ef, fork, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(ef, chain, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    CHECK(info.errorNode == c[2]);
    CHECK(info.errorFromNode == c[1]);

    CHECK_CU(cuGraphExecUpdate_v2(e, chain, &info), CUDA_SUCCESS);    /* control */
    CHECK_CU(cuGraphExecDestroy(ef), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(fork), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(chain), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    RUN(device_updatable_nodes_refuse_update);
    RUN(operands_keep_their_context);
    RUN(original_operand_freed_address_reused);
    RUN(more_exit_nodes_first);
    return check_done();
}
