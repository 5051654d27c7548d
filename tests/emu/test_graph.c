/*
 * test_graph.c: graphs built through the node API on the emulated driver:
 * launches compute what eager work computes, in dependency order; node
 * parameters read back and set; graph structure queries; instantiate
 * variants; cuGraphExecUpdate (topology, node type and parameter checks, the
 * result info, and that a successful update changes the next launch); exec
 * node set-params (rules, and no effect on a launch already queued); launches
 * of one exec serialised across streams; destroying an exec in flight;
 * kernel node attributes.
 */
#include "graph_util.h"

#include <sys/wait.h>
#include <unistd.h>

/* The legacy ELF names, which cuda.h maps to newer ones. */
#undef cuGraphInstantiate
#undef cuGraphExecUpdate
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                    char *logBuffer, size_t bufferSize);
CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize);
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                   CUgraphExecUpdateResult *updateResult_out);

#define SLOW_US 200000u   /* keeps a stream busy while the test changes things */

static CUgraphNode add_fill(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr p, uint32_t v)
{
    gu_args a;
    gu_kp_fill(&a, p, v);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &a);
    CUgraphNode nd = NULL;
    CHECK_CU(cuGraphAddKernelNode(&nd, g, deps, n, &kp), CUDA_SUCCESS);
    return nd;
}

static CUgraphNode add_affine(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr p, uint32_t mul, uint32_t add)
{
    gu_args a;
    gu_kp_affine(&a, p, mul, add);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_affine, &a);
    CUgraphNode nd = NULL;
    CHECK_CU(cuGraphAddKernelNode(&nd, g, deps, n, &kp), CUDA_SUCCESS);
    return nd;
}

/* The gu_eager_sequence work as a hand-built graph (a chain of 4 nodes). */
static CUgraph build_sequence(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUgraphNode out[4])
{
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS ms = gu_set_1d(a, 3);
    CHECK_CU(cuGraphAddMemsetNode(&out[0], g, NULL, 0, &ms, g_ctx), CUDA_SUCCESS);
    out[1] = add_affine(g, &out[0], 1, a, 5, 2);
    CUDA_MEMCPY3D cp = gu_copy_1d(b, a, N_ELEMS * sizeof(uint32_t));
    CHECK_CU(cuGraphAddMemcpyNode(&out[2], g, &out[1], 1, &cp, g_ctx), CUDA_SUCCESS);
    gu_args ad;
    gu_kp_add(&ad, c, a, b);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_add, &ad);
    CHECK_CU(cuGraphAddKernelNode(&out[3], g, &out[2], 1, &kp), CUDA_SUCCESS);
    return g;
}

static CUresult run_exec(CUgraphExec e, CUstream s)
{
    CUresult r = cuGraphLaunch(e, s);
    return r != CUDA_SUCCESS ? r : cuStreamSynchronize(s);
}

TEST(built_graph_matches_eager)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc(), c = gu_alloc();
    CUdeviceptr ea = gu_alloc(), eb = gu_alloc(), ec = gu_alloc();
    CHECK_CU(gu_eager_sequence(s, ea, eb, ec), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);

    CUgraphNode nd[4];
    CUgraph g = build_sequence(a, b, c, nd);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    uint32_t got[N_ELEMS], ref[N_ELEMS];
    gu_read(c, got);
    gu_read(ec, ref);
    CHECK(memcmp(got, ref, sizeof got) == 0);
    CHECK(gu_all(c, GU_SEQUENCE_C));
    /* A second launch recomputes from scratch (the memset resets a). */
    CHECK_CU(cuMemsetD32(c, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(c, GU_SEQUENCE_C));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Nodes added in an order that is not the dependency order still run in
 * dependency order: affine(x2) must run after fill, and affine(+1) last. */
TEST(launch_runs_in_dependency_order)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc();
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUgraphNode last = add_affine(g, NULL, 0, a, 1, 1);     /* added first, runs last */
    CUgraphNode mid = add_affine(g, NULL, 0, a, 2, 0);
    CUgraphNode first = add_fill(g, NULL, 0, a, 5);
    CUgraphNode from[2] = { first, mid }, to[2] = { mid, last };
    CHECK_CU(cuGraphAddDependencies(g, from, to, NULL, 2), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddDependencies(g, from, to, NULL, 1), CUDA_ERROR_INVALID_VALUE);  /* exists */
    CHECK_CU(cuGraphAddDependencies(g, &first, &first, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    size_t nroots = 0;
    CUgraphNode root = NULL;
    nroots = 1;
    CHECK_CU(cuGraphGetRootNodes(g, &root, &nroots), CUDA_SUCCESS);
    CHECK_EQ(nroots, 1);
    CHECK(root == first);
    CUgraphNode ef[3], et[3];
    size_t ne = 3;
    CHECK_CU(cuGraphGetEdges(g, ef, et, NULL, &ne), CUDA_SUCCESS);
    CHECK_EQ(ne, 2);
    CHECK(ef[0] == first && et[0] == mid && ef[1] == mid && et[1] == last);
    CHECK(ef[2] == NULL && et[2] == NULL);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(a, 11));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    /* A cycle cannot be instantiated. */
    CHECK_CU(cuGraphAddDependencies(g, &last, &first, NULL, 1), CUDA_SUCCESS);
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = { 0 };
    e = NULL;
    CHECK_CU(cuGraphInstantiateWithParams(&e, g, &ip), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(ip.result_out, CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE);
    CHECK(ip.hErrNode_out != NULL);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(node_params_get_and_set)
{
    CUdeviceptr a = gu_alloc(), b = gu_alloc();
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    gu_args args;
    gu_kp_affine(&args, a, 6, 9);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_affine, &args);
    kp.gridDimX = 3;
    kp.sharedMemBytes = 128;
    CUgraphNode kn;
    CHECK_CU(cuGraphAddKernelNode(&kn, g, NULL, 0, &kp), CUDA_SUCCESS);
    args.u0 = 1000;   /* the node copied its arguments */
    CUDA_KERNEL_NODE_PARAMS got;
    memset(&got, 0xcd, sizeof got);
    CHECK_CU(cuGraphKernelNodeGetParams(kn, &got), CUDA_SUCCESS);
    CHECK(got.func == k_affine);
    CHECK_EQ(got.gridDimX, 3);
    CHECK_EQ(got.sharedMemBytes, 128);
    CHECK(got.extra == NULL);
    CHECK(got.kernelParams != NULL && got.kernelParams != args.kp);
    CHECK_EQ(*(CUdeviceptr *)got.kernelParams[0], a);
    CHECK_EQ(*(uint32_t *)got.kernelParams[1], 6);
    CHECK_EQ(*(uint32_t *)got.kernelParams[2], 9);
    /* Set through the returned storage, the usual get-modify-set pattern. */
    uint32_t nine = 9;
    got.kernelParams[1] = &nine;
    CHECK_CU(cuGraphKernelNodeSetParams(kn, &got), CUDA_SUCCESS);
    CUDA_KERNEL_NODE_PARAMS again;
    CHECK_CU(cuGraphKernelNodeGetParams(kn, &again), CUDA_SUCCESS);
    CHECK_EQ(*(uint32_t *)again.kernelParams[1], 9);
    CHECK_EQ(*(CUdeviceptr *)again.kernelParams[0], a);

    /* Memcpy and memset nodes. */
    CUDA_MEMCPY3D cp = gu_copy_1d(b, a, 64), cg;
    CUgraphNode mn, sn, hn;
    CHECK_CU(cuGraphAddMemcpyNode(&mn, g, &kn, 1, &cp, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphMemcpyNodeGetParams(mn, &cg), CUDA_SUCCESS);
    CHECK(cg.dstDevice == b && cg.srcDevice == a && cg.WidthInBytes == 64);
    cp.WidthInBytes = 32;
    CHECK_CU(cuGraphMemcpyNodeSetParams(mn, &cp), CUDA_SUCCESS);
    CHECK_CU(cuGraphMemcpyNodeGetParams(mn, &cg), CUDA_SUCCESS);
    CHECK_EQ(cg.WidthInBytes, 32);
    CUDA_MEMSET_NODE_PARAMS ms = gu_set_1d(b, 4), mg;
    CHECK_CU(cuGraphAddMemsetNode(&sn, g, NULL, 0, &ms, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphMemsetNodeGetParams(sn, &mg), CUDA_SUCCESS);
    CHECK(mg.dst == b && mg.value == 4 && mg.width == N_ELEMS);
    ms.elementSize = 3;
    CHECK_CU(cuGraphMemsetNodeSetParams(sn, &ms), CUDA_ERROR_INVALID_VALUE);
    /* Wrong node kinds. */
    CHECK_CU(cuGraphMemsetNodeGetParams(kn, &mg), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphKernelNodeGetParams(sn, &got), CUDA_ERROR_INVALID_VALUE);

    /* The generic API: add an empty node, reject unsupported types, set. */
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_EMPTY;
    CHECK_CU(cuGraphAddNode(&hn, g, &mn, NULL, 1, &np), CUDA_SUCCESS);
    CUgraphNodeType t;
    CHECK_CU(cuGraphNodeGetType(hn, &t), CUDA_SUCCESS);
    CHECK_EQ(t, CU_GRAPH_NODE_TYPE_EMPTY);
    np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;               /* zero bytes */
    CUgraphNode bad;
    CHECK_CU(cuGraphAddNode(&bad, g, NULL, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    np.type = CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL;        /* no semaphores (test_ext.c) */
    CHECK_CU(cuGraphAddNode(&bad, g, NULL, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEMSET;
    np.memset.dst = a; np.memset.value = 8; np.memset.elementSize = 4;
    np.memset.width = N_ELEMS; np.memset.height = 1; np.memset.ctx = g_ctx;
    CHECK_CU(cuGraphNodeSetParams(sn, &np), CUDA_SUCCESS);
    CHECK_CU(cuGraphMemsetNodeGetParams(sn, &mg), CUDA_SUCCESS);
    CHECK(mg.dst == a && mg.value == 8);
    CHECK_CU(cuGraphNodeSetParams(kn, &np), CUDA_ERROR_INVALID_VALUE);   /* type mismatch */
    size_t nn = 0;
    CHECK_CU(cuGraphGetNodes(g, NULL, &nn), CUDA_SUCCESS);
    CHECK_EQ(nn, 4);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeGetType(kn, &t), CUDA_ERROR_INVALID_VALUE);       /* gone with the graph */
}

/* ------------------------------------------------------------------ update */

/* g0: fill(x) -> affine(x). */
static CUgraph two_node_graph(CUdeviceptr x, uint32_t v, CUgraphNode nd[2])
{
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    nd[0] = add_fill(g, NULL, 0, x, v);
    nd[1] = add_affine(g, &nd[0], 1, x, 2, 1);
    return g;
}

static void check_update_fails(CUgraphExec e, CUgraph g, CUgraphExecUpdateResult want,
                               CUgraphNode want_node, CUgraphNode want_from)
{
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0xee, sizeof info);
    CHECK_CU(cuGraphExecUpdate_v2(e, g, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, want);
    CHECK(info.errorNode == want_node);
    CHECK(info.errorFromNode == want_from);
}

TEST(update_detects_topology_and_type_changes)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr x = gu_alloc(), y = gu_alloc();
    CUgraphNode n0[2];
    CUgraph g0 = two_node_graph(x, 3, n0);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g0, 0), CUDA_SUCCESS);

    /* Another node count: errorNode NULL. */
    CUgraphNode n1[3];
    CUgraph g1 = two_node_graph(y, 4, n1);
    n1[2] = add_fill(g1, NULL, 0, y, 1);
    check_update_fails(e, g1, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, NULL, NULL);

    /* Same count, a node with another number of dependencies: errorNode is
     * that node of the new graph. */
    CUgraph g2;
    CUgraphNode n2[2];
    CHECK_CU(cuGraphCreate(&g2, 0), CUDA_SUCCESS);
    n2[0] = add_fill(g2, NULL, 0, y, 4);
    n2[1] = add_affine(g2, NULL, 0, y, 2, 1);
    check_update_fails(e, g2, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, n2[1], NULL);

    /* Same counts, a dependency on another node: errorFromNode names it. */
    CUgraph g3;
    CUgraphNode n3[3];
    CUgraphNode e0[2];
    CUgraph g0b;
    CHECK_CU(cuGraphCreate(&g0b, 0), CUDA_SUCCESS);   /* a -> c, b */
    e0[0] = add_fill(g0b, NULL, 0, x, 1);
    e0[1] = add_fill(g0b, NULL, 0, y, 1);
    add_affine(g0b, &e0[0], 1, x, 1, 1);
    CUgraphExec e3;
    CHECK_CU(cuGraphInstantiateWithFlags(&e3, g0b, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphCreate(&g3, 0), CUDA_SUCCESS);    /* a, b -> c */
    n3[0] = add_fill(g3, NULL, 0, x, 1);
    n3[1] = add_fill(g3, NULL, 0, y, 1);
    n3[2] = add_affine(g3, &n3[1], 1, x, 1, 1);
    check_update_fails(e3, g3, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, n3[2], n3[1]);

    /* Node type changed. */
    CUgraph g4;
    CUgraphNode n4[2];
    CHECK_CU(cuGraphCreate(&g4, 0), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS ms = gu_set_1d(y, 4);
    CHECK_CU(cuGraphAddMemsetNode(&n4[0], g4, NULL, 0, &ms, g_ctx), CUDA_SUCCESS);
    n4[1] = add_affine(g4, &n4[0], 1, y, 2, 1);
    check_update_fails(e, g4, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, n4[0], NULL);

    /* The legacy entry point reports the same. */
    CUgraphNode err = NULL;
    CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    CHECK_CU(cuGraphExecUpdate(e, g4, &err, &res), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(res, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
    CHECK(err == n4[0]);

    /* After all these failures the exec is unchanged: x = 3*2+1, y untouched. */
    CHECK_CU(cuMemsetD32(y, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(x, 7));
    CHECK(gu_all(y, 0));

    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e3), CUDA_SUCCESS);
    CUgraph gs[] = { g0, g1, g2, g3, g4, g0b };
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) CHECK_CU(cuGraphDestroy(gs[i]), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(update_success_changes_next_launch)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr x = gu_alloc(), y = gu_alloc();
    CUgraphNode n0[2], n1[2];
    CUgraph g0 = two_node_graph(x, 3, n0), g1 = two_node_graph(y, 10, n1);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(y, 0, N_ELEMS), CUDA_SUCCESS);
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0xee, sizeof info);
    CHECK_CU(cuGraphExecUpdate_v2(e, g1, &info), CUDA_SUCCESS);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    CHECK(info.errorNode == NULL && info.errorFromNode == NULL);
    CHECK_CU(cuMemsetD32(x, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(y, 21));   /* the new graph's buffer and values */
    CHECK(gu_all(x, 0));    /* the old one no longer touched */
    /* Exec nodes are still named by the original graph's nodes. */
    gu_args a;
    gu_kp_fill(&a, y, 1);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &a);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e, n0[0], &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e, n1[0], &kp), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(y, 3));
    /* Legacy update, memset parameter rules: a 2D memset may not change shape. */
    CUgraph m0, m1;
    CUgraphNode mn0, mn1;
    CHECK_CU(cuGraphCreate(&m0, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphCreate(&m1, 0), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS s2 = { .dst = x, .pitch = 64, .value = 1, .elementSize = 4, .width = 8, .height = 4 };
    CHECK_CU(cuGraphAddMemsetNode(&mn0, m0, NULL, 0, &s2, g_ctx), CUDA_SUCCESS);
    s2.width = 4;
    CHECK_CU(cuGraphAddMemsetNode(&mn1, m1, NULL, 0, &s2, g_ctx), CUDA_SUCCESS);
    CUgraphExec me;
    CUgraphNode err = NULL;
    CHECK_CU(cuGraphInstantiate(&me, m0, &err, NULL, 0), CUDA_SUCCESS);   /* legacy v1 */
    CUgraphExecUpdateResult res;
    CHECK_CU(cuGraphExecUpdate(me, m1, &err, &res), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(res, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    CHECK(err == mn1);
    /* Address and value may change: legacy update succeeds. */
    s2.width = 8; s2.dst = y; s2.value = 77;
    CHECK_CU(cuGraphMemsetNodeSetParams(mn1, &s2), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate(me, m1, &err, &res), CUDA_SUCCESS);
    CHECK_EQ(res, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    CHECK(err == NULL);
    CHECK_CU(cuMemsetD32(y, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(run_exec(me, s), CUDA_SUCCESS);
    uint32_t h[N_ELEMS];
    gu_read(y, h);
    CHECK_EQ(h[0], 77); CHECK_EQ(h[7], 77); CHECK_EQ(h[8], 0); CHECK_EQ(h[16], 77); CHECK_EQ(h[63], 0);
    CHECK_CU(cuGraphExecDestroy(me), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g0), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g1), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(m0), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(m1), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* ---------------------------------------------------------- exec set params */

TEST(exec_set_params_spares_queued_launch)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr x = gu_alloc(), z = gu_alloc();
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUgraphNode kn = add_fill(g, NULL, 0, x, 1);
    CUDA_MEMSET_NODE_PARAMS ms = gu_set_1d(z, 5);
    CUgraphNode sn;
    CHECK_CU(cuGraphAddMemsetNode(&sn, g, &kn, 1, &ms, g_ctx), CUDA_SUCCESS);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(x, 0, N_ELEMS), CUDA_SUCCESS);

    gu_args slow;
    CUdeviceptr w = gu_alloc();
    gu_kp_slow(&slow, w, 1, SLOW_US);
    CHECK_CU(gu_launch(k_slow, s, &slow), CUDA_SUCCESS);     /* keeps the launch queued */
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    gu_args a;
    gu_kp_fill(&a, x, 2);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &a);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e, kn, &kp), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS ms2 = gu_set_1d(z, 6);
    CHECK_CU(cuGraphExecMemsetNodeSetParams(e, sn, &ms2, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_NOT_READY);        /* really still queued */
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(x, 1));   /* the queued launch used its own snapshot */
    CHECK(gu_all(z, 5));
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(x, 2));   /* later launches see the change */
    CHECK(gu_all(z, 6));
    /* The graph's node itself is not modified. */
    CUDA_KERNEL_NODE_PARAMS got;
    CHECK_CU(cuGraphKernelNodeGetParams(kn, &got), CUDA_SUCCESS);
    CHECK_EQ(*(uint32_t *)got.kernelParams[1], 1);

    /* Rules: a node of another graph, a type mismatch, a 2D memset change. */
    CUgraph other;
    CHECK_CU(cuGraphCreate(&other, 0), CUDA_SUCCESS);
    CUgraphNode on = add_fill(other, NULL, 0, x, 3);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e, on, &kp), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e, sn, &kp), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMSET_NODE_PARAMS ms3 = { .dst = z, .pitch = 64, .value = 1, .elementSize = 4, .width = 8, .height = 2 };
    CHECK_CU(cuGraphExecMemsetNodeSetParams(e, sn, &ms3, g_ctx), CUDA_ERROR_INVALID_VALUE);
    /* The generic entry point. */
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_KERNEL;
    gu_args b;
    gu_kp_fill(&b, x, 4);
    np.kernel.func = k_fill;
    np.kernel.gridDimX = np.kernel.gridDimY = np.kernel.gridDimZ = 1;
    np.kernel.blockDimX = np.kernel.blockDimY = np.kernel.blockDimZ = 1;
    np.kernel.kernelParams = b.kp;
    CHECK_CU(cuGraphExecNodeSetParams(e, kn, &np), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(x, 4));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(other), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(exec_memcpy_set_params)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc(), c = gu_alloc();
    CHECK_CU(cuMemsetD32(a, 12, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(b, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(c, 0, N_ELEMS), CUDA_SUCCESS);
    CUgraph g;
    CUgraphNode mn;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUDA_MEMCPY3D cp = gu_copy_1d(b, a, N_ELEMS * 4);
    CHECK_CU(cuGraphAddMemcpyNode(&mn, g, NULL, 0, &cp, g_ctx), CUDA_SUCCESS);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CUDA_MEMCPY3D cp2 = gu_copy_1d(c, a, N_ELEMS * 4);
    CHECK_CU(cuGraphExecMemcpyNodeSetParams(e, mn, &cp2, g_ctx), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(c, 12));
    CHECK(gu_all(b, 0));
    /* Memory type may not change; zero-length copies are refused. */
    uint32_t host[N_ELEMS];
    CUDA_MEMCPY3D cp3 = cp2;
    cp3.dstMemoryType = CU_MEMORYTYPE_HOST;
    cp3.dstHost = host;
    CHECK_CU(cuGraphExecMemcpyNodeSetParams(e, mn, &cp3, g_ctx), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY3D cp4 = cp2;
    cp4.WidthInBytes = 0;
    CHECK_CU(cuGraphExecMemcpyNodeSetParams(e, mn, &cp4, g_ctx), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Launch 1 (queued behind a slow kernel on s1) then launch 2 on idle s2:
 * launch 2 must wait for launch 1. affine(x,1,5) then affine(x,3,0) on x=1
 * gives 18; the other order would give 8. */
TEST(launches_of_one_exec_are_serialised)
{
    CUstream s1, s2;
    CHECK_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr x = gu_alloc(), w = gu_alloc();
    CHECK_CU(cuMemsetD32(x, 1, N_ELEMS), CUDA_SUCCESS);
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUgraphNode kn = add_affine(g, NULL, 0, x, 1, 5);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    gu_args slow;
    gu_kp_slow(&slow, w, 1, SLOW_US);
    CHECK_CU(gu_launch(k_slow, s1, &slow), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s1), CUDA_SUCCESS);
    gu_args a;
    gu_kp_affine(&a, x, 3, 0);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_affine, &a);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e, kn, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s2), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s2), CUDA_SUCCESS);
    CHECK_CU(cuStreamQuery(s1), CUDA_SUCCESS);   /* launch 2 finished, so launch 1 did */
    CHECK(gu_all(x, 18));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s1), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
}

TEST(exec_destroyed_while_in_flight)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr x = gu_alloc(), w = gu_alloc();
    CHECK_CU(cuMemsetD32(x, 0, N_ELEMS), CUDA_SUCCESS);
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    add_fill(g, NULL, 0, x, 42);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    gu_args slow;
    gu_kp_slow(&slow, w, 1, SLOW_US);
    CHECK_CU(gu_launch(k_slow, s, &slow), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(x, 42));  /* the launch still ran, whole */
    CHECK_CU(cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(instantiate_variants)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc(), c = gu_alloc();
    CUgraphNode nd[4];
    CUgraph g = build_sequence(a, b, c, nd);
    CUgraphExec e[4];
    CUgraphNode err = (CUgraphNode)(uintptr_t)1;
    char log[64] = "junk";
    CHECK_CU(cuGraphInstantiate(&e[0], g, &err, log, sizeof log), CUDA_SUCCESS);     /* legacy v1 */
    CHECK(err == NULL);
    CHECK_CU(cuGraphInstantiate_v2(&e[1], g, &err, log, sizeof log), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e[2], g, 0), CUDA_SUCCESS);
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = { .flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, .hUploadStream = s,
                                         .hErrNode_out = (CUgraphNode)(uintptr_t)1,
                                         .result_out = CUDA_GRAPH_INSTANTIATE_ERROR };
    CHECK_CU(cuGraphInstantiateWithParams(&e[3], g, &ip), CUDA_SUCCESS);
    CHECK_EQ(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
    CHECK(ip.hErrNode_out == NULL);
    cuuint64_t fl = 99;
    CHECK_CU(cuGraphExecGetFlags(e[3], &fl), CUDA_SUCCESS);
    CHECK_EQ(fl, 0);   /* UPLOAD is not reported */
    for (int i = 0; i < 4; i++) {
        CHECK_CU(cuMemsetD32(c, 0, N_ELEMS), CUDA_SUCCESS);
        CHECK_CU(run_exec(e[i], s), CUDA_SUCCESS);
        CHECK(gu_all(c, GU_SEQUENCE_C));
        CHECK_CU(cuGraphUpload(e[i], s), CUDA_SUCCESS);
        CHECK_CU(cuGraphExecDestroy(e[i]), CUDA_SUCCESS);
    }
    CUgraphExec bad;
    CHECK_CU(cuGraphInstantiateWithFlags(&bad, g, 1ull << 40), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphInstantiateWithFlags(&bad, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(clone_is_independent)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc(), c = gu_alloc();
    CUgraphNode nd[4];
    CUgraph g = build_sequence(a, b, c, nd), cl;
    CHECK_CU(cuGraphClone(&cl, g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    size_t ne = 0, nn = 0;
    CHECK_CU(cuGraphGetNodes(cl, NULL, &nn), CUDA_SUCCESS);
    CHECK_CU(cuGraphGetEdges(cl, NULL, NULL, NULL, &ne), CUDA_SUCCESS);
    CHECK_EQ(nn, 4);
    CHECK_EQ(ne, 3);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, cl, 0), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(c, GU_SEQUENCE_C));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(cl), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Kernel node attributes: CUDA's defaults, set and get, kept by set-params,
 * carried by clone, invalid ids and values refused. */
TEST(kernel_node_attributes)
{
    CUdeviceptr a = gu_alloc();
    CUgraph g, cl;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    gu_args args;
    gu_kp_fill(&args, a, 3);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &args);
    CUgraphNode kn, en, cn;
    CHECK_CU(cuGraphAddKernelNode(&kn, g, NULL, 0, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddEmptyNode(&en, g, NULL, 0), CUDA_SUCCESS);
    CUkernelNodeAttrValue v;
    memset(&v, 0xcd, sizeof v);
    CHECK_CU(cuGraphKernelNodeGetAttribute(kn, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v), CUDA_SUCCESS);
    CHECK_EQ(v.priority, 0);
    CHECK_CU(cuGraphKernelNodeGetAttribute(kn, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, &v),
             CUDA_SUCCESS);
    CHECK_EQ(v.memSyncDomainMap.default_, 0);
    CHECK_EQ(v.memSyncDomainMap.remote, 1);
    CHECK_CU(cuGraphKernelNodeGetAttribute(kn, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v),
             CUDA_SUCCESS);
    CHECK(v.clusterDim.x == 0 && v.clusterDim.y == 0 && v.clusterDim.z == 0);

    memset(&v, 0, sizeof v);
    v.priority = 2;
    CHECK_CU(cuGraphKernelNodeSetAttribute(kn, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v), CUDA_SUCCESS);
    v.clusterDim.x = 2; v.clusterDim.y = 1; v.clusterDim.z = 1;
    CHECK_CU(cuGraphKernelNodeSetAttribute(kn, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v),
             CUDA_SUCCESS);
    /* set-params keeps the attributes */
    gu_kp_fill(&args, a, 4);
    kp = gu_knode(k_fill, &args);
    CHECK_CU(cuGraphKernelNodeSetParams(kn, &kp), CUDA_SUCCESS);
    memset(&v, 0, sizeof v);
    CHECK_CU(cuGraphKernelNodeGetAttribute(kn, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v), CUDA_SUCCESS);
    CHECK_EQ(v.priority, 2);
    /* clone carries them */
    CHECK_CU(cuGraphClone(&cl, g), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeFindInClone(&cn, kn, cl), CUDA_SUCCESS);
    memset(&v, 0, sizeof v);
    CHECK_CU(cuGraphKernelNodeGetAttribute(cn, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v),
             CUDA_SUCCESS);
    CHECK_EQ(v.clusterDim.x, 2);
    CHECK_CU(cuGraphKernelNodeGetAttribute(cn, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v), CUDA_SUCCESS);
    CHECK_EQ(v.priority, 2);
    /* an exec instantiated from it still runs, and updates from the original */
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(e, cl, &info), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);

    /* refused: ids not valid for graph nodes, non-kernel nodes, NULL, opting out */
    CHECK_CU(cuGraphKernelNodeGetAttribute(kn, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphKernelNodeGetAttribute(kn, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                           &v), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphKernelNodeGetAttribute(en, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphKernelNodeGetAttribute(kn, CU_LAUNCH_ATTRIBUTE_PRIORITY, NULL),
             CUDA_ERROR_INVALID_VALUE);
    memset(&v, 0, sizeof v);
    v.deviceUpdatableKernelNode.deviceUpdatable = 2;
    CHECK_CU(cuGraphKernelNodeSetAttribute(kn, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v),
             CUDA_ERROR_INVALID_VALUE);
    v.deviceUpdatableKernelNode.deviceUpdatable = 1;
    CHECK_CU(cuGraphKernelNodeSetAttribute(kn, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v),
             CUDA_SUCCESS);
    v.deviceUpdatableKernelNode.deviceUpdatable = 0;
    CHECK_CU(cuGraphKernelNodeSetAttribute(kn, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphKernelNodeGetAttribute(kn, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v),
             CUDA_SUCCESS);
    CHECK_EQ(v.deviceUpdatableKernelNode.deviceUpdatable, 1);
    CHECK_CU(cuGraphDestroy(cl), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

/* Stream attributes (cuStreamSetAttribute / GetAttribute / CopyAttributes):
 * the five valid for streams, priority clamped as at creation and seen by
 * cuStreamGetPriority; a kernel captured on the stream takes its access
 * policy window and priority as node attributes. cuGraphExecUpdate's
 * documented attribute rules: under CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY
 * a node's priority cannot change, and a node cannot become cooperative. */
static CUgraph capture_fill(CUstream s, CUdeviceptr a, gu_args *args)
{
    CUgraph g = NULL;
    gu_kp_fill(args, a, 7);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_fill, s, args), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    return g;
}

static CUkernelNodeAttrValue first_node_attr(CUgraph g, CUlaunchAttributeID id)
{
    CUgraphNode n;
    size_t cnt = 1;
    CUkernelNodeAttrValue v;
    memset(&v, 0xcd, sizeof v);
    CHECK_CU(cuGraphGetNodes(g, &n, &cnt), CUDA_SUCCESS);
    CHECK_CU(cuGraphKernelNodeGetAttribute(n, id, &v), CUDA_SUCCESS);
    return v;
}

TEST(stream_attributes)
{
    CUdeviceptr a = gu_alloc();
    CUstream s, t;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&t, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUstreamAttrValue v, got;
    memset(&got, 0xcd, sizeof got);
    CHECK_CU(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got), CUDA_SUCCESS);
    CHECK_EQ(got.syncPolicy, CU_SYNC_POLICY_AUTO);
    CHECK_CU(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_PRIORITY, &got), CUDA_SUCCESS);
    CHECK_EQ(got.priority, 0);
    /* refused: NULL, an id not valid for streams, a bad policy */
    memset(&v, 0, sizeof v);
    CHECK_CU(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_PRIORITY, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_PRIORITY, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v), CUDA_ERROR_INVALID_VALUE);
    v.syncPolicy = (CUsynchronizationPolicy)9;
    CHECK_CU(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v),
             CUDA_ERROR_INVALID_VALUE);
    /* set: priority clamped, the window kept */
    memset(&v, 0, sizeof v);
    v.priority = -9;
    CHECK_CU(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_PRIORITY, &v), CUDA_SUCCESS);
    int prio = 0;
    CHECK_CU(cuStreamGetPriority(s, &prio), CUDA_SUCCESS);
    CHECK_EQ(prio, -5);
    memset(&v, 0, sizeof v);
    v.accessPolicyWindow.base_ptr = (void *)(uintptr_t)a;
    v.accessPolicyWindow.num_bytes = 4096;
    v.accessPolicyWindow.hitRatio = 0.5f;
    v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
    CHECK_CU(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v), CUDA_SUCCESS);
    /* copied */
    CHECK_CU(cuStreamCopyAttributes(t, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamGetAttribute(t, CU_STREAM_ATTRIBUTE_PRIORITY, &got), CUDA_SUCCESS);
    CHECK_EQ(got.priority, -5);
    CHECK_CU(cuStreamGetAttribute(t, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &got), CUDA_SUCCESS);
    CHECK_EQ(got.accessPolicyWindow.num_bytes, 4096);
    /* taken by the kernels captured on the stream */
    gu_args args;
    CUgraph g = capture_fill(t, a, &args);
    CHECK_EQ(first_node_attr(g, CU_LAUNCH_ATTRIBUTE_PRIORITY).priority, -5);
    CHECK_EQ(first_node_attr(g, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW).accessPolicyWindow.num_bytes, 4096);
    /* the update rules */
    CUgraphExec eprio, eplain;
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphInstantiateWithFlags(&eprio, g, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY),
             CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&eplain, g, 0), CUDA_SUCCESS);
    memset(&v, 0, sizeof v);
    CHECK_CU(cuStreamSetAttribute(t, CU_STREAM_ATTRIBUTE_PRIORITY, &v), CUDA_SUCCESS);
    CUgraph g2 = capture_fill(t, a, &args);
    CHECK_EQ(first_node_attr(g2, CU_LAUNCH_ATTRIBUTE_PRIORITY).priority, 0);
    CHECK_CU(cuGraphExecUpdate_v2(eprio, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED);
    CHECK_CU(cuGraphExecUpdate_v2(eplain, g2, &info), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(eprio, g, &info), CUDA_SUCCESS);   /* same priority */
    CUgraphNode n;
    size_t cnt = 1;
    CHECK_CU(cuGraphGetNodes(g2, &n, &cnt), CUDA_SUCCESS);
    CUkernelNodeAttrValue c;
    memset(&c, 0, sizeof c);
    c.cooperative = 1;
    CHECK_CU(cuGraphKernelNodeSetAttribute(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &c), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(eplain, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED);
    CHECK_CU(cuGraphExecDestroy(eprio), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(eplain), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(t), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

/* cuGraphRemoveDependencies (_v2): an existing edge with matching data goes
 * (from the graph and from the node's dependencies); anything else is
 * refused and changes nothing; an exec instantiated before refuses the
 * update (topology). cuGraphKernelNodeCopyAttributes: kernel nodes only. */
TEST(remove_dependencies_and_copy_attributes)
{
    CUdeviceptr a = gu_alloc();
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    gu_args args;
    gu_kp_fill(&args, a, 3);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &args);
    CUgraphNode k0, k1, k2, en;
    CHECK_CU(cuGraphAddKernelNode(&k0, g, NULL, 0, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddKernelNode(&k1, g, &k0, 1, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddKernelNode(&k2, g, &k0, 1, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddEmptyNode(&en, g, NULL, 0), CUDA_SUCCESS);
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    size_t ne = 0, nd = 0;
    CHECK_CU(cuGraphRemoveDependencies_v2(g, &k0, &k1, NULL, 1), CUDA_SUCCESS);
    CHECK_CU(cuGraphGetEdges_v2(g, NULL, NULL, NULL, &ne), CUDA_SUCCESS);
    CHECK_EQ(ne, 1);
    CHECK_CU(cuGraphNodeGetDependencies(k1, NULL, NULL, &nd), CUDA_SUCCESS);
    CHECK_EQ(nd, 0);
    /* refused, nothing changed: gone already, NULL arrays, other edge data */
    CHECK_CU(cuGraphRemoveDependencies_v2(g, &k0, &k1, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphRemoveDependencies_v2(g, NULL, &k2, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CUgraphEdgeData ed;
    memset(&ed, 0, sizeof ed);
    ed.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    CHECK_CU(cuGraphRemoveDependencies_v2(g, &k0, &k2, &ed, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphGetEdges_v2(g, NULL, NULL, NULL, &ne), CUDA_SUCCESS);
    CHECK_EQ(ne, 1);
    CHECK_CU(cuGraphExecUpdate_v2(e, g, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    memset(&ed, 0, sizeof ed);
    CHECK_CU(cuGraphRemoveDependencies_v2(g, &k0, &k2, &ed, 1), CUDA_SUCCESS);   /* default data */
    CHECK_CU(cuGraphGetEdges_v2(g, NULL, NULL, NULL, &ne), CUDA_SUCCESS);
    CHECK_EQ(ne, 0);
    /* attributes */
    CUkernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    v.priority = -2;
    CHECK_CU(cuGraphKernelNodeSetAttribute(k1, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v), CUDA_SUCCESS);
    CHECK_CU(cuGraphKernelNodeCopyAttributes(k2, k1), CUDA_SUCCESS);
    memset(&v, 0, sizeof v);
    CHECK_CU(cuGraphKernelNodeGetAttribute(k2, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v), CUDA_SUCCESS);
    CHECK_EQ(v.priority, -2);
    CHECK_CU(cuGraphKernelNodeCopyAttributes(en, k1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphKernelNodeCopyAttributes(k1, en), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

/* External semaphore nodes without semaphores (emulated since round 50:
 * test_ext.c) are refused with CUDA_ERROR_INVALID_VALUE and add nothing;
 * their setters find no node of their kind (CUDA_ERROR_INVALID_VALUE). A batch memory operation node
 * without operations is refused (CUDA_ERROR_INVALID_VALUE; the node kind is
 * emulated since round 35: test_memops.c), and the batch and event nodes'
 * setters find no node of their kind either (test_evnodes.c). */
TEST(unemulated_node_kinds)
{
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUgraphNode en, out = NULL;
    CHECK_CU(cuGraphAddEmptyNode(&en, g, NULL, 0), CUDA_SUCCESS);
    CUevent ev;
    CHECK_CU(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    CUDA_EXT_SEM_SIGNAL_NODE_PARAMS sig;
    CUDA_EXT_SEM_WAIT_NODE_PARAMS wt;
    CUDA_BATCH_MEM_OP_NODE_PARAMS bm;
    memset(&sig, 0, sizeof sig);
    memset(&wt, 0, sizeof wt);
    memset(&bm, 0, sizeof bm);
    CHECK_CU(cuGraphAddExternalSemaphoresSignalNode(&out, g, NULL, 0, &sig), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphAddExternalSemaphoresWaitNode(&out, g, NULL, 0, &wt), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphAddBatchMemOpNode(&out, g, NULL, 0, &bm), CUDA_ERROR_INVALID_VALUE);
    CHECK(out == NULL);
    CHECK_CU(cuGraphAddEventRecordNode(&out, NULL, NULL, 0, ev), CUDA_ERROR_INVALID_VALUE);
    size_t n = 0;
    CHECK_CU(cuGraphGetNodes(g, NULL, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 1);
    CHECK_CU(cuGraphEventRecordNodeSetEvent(en, ev), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphEventWaitNodeSetEvent(en, ev), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExternalSemaphoresSignalNodeSetParams(en, &sig), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExternalSemaphoresWaitNodeSetParams(en, &wt), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphBatchMemOpNodeSetParams(en, &bm), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
}

/* cuLaunchKernelEx and cuLaunchCooperativeKernel: they run as cuLaunchKernel
 * does; captured, the node keeps the launch's attributes (over the stream's);
 * attributes the emulation does not run are refused (clusters of more than
 * one block, programmatic and completion events: CUDA_ERROR_NOT_SUPPORTED; the
 * stream-only synchronization policy: CUDA_ERROR_INVALID_VALUE). A node
 * cannot be updated from cooperative to not (ATTRIBUTES_CHANGED). */
TEST(launch_ex_and_cooperative)
{
    CUdeviceptr a = gu_alloc();
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    gu_args args;
    gu_kp_fill(&args, a, 11);
    CUlaunchAttribute at[2];
    memset(at, 0, sizeof at);
    at[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    at[0].value.priority = -3;
    at[1].id = CU_LAUNCH_ATTRIBUTE_IGNORE;
    CUlaunchConfig cfg = launch_config_1x1(s, at, 2);
    CHECK_CU(cuLaunchKernelEx(&cfg, k_fill, args.kp, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(a, 11));
    CHECK_CU(cuLaunchKernelEx(NULL, k_fill, args.kp, NULL), CUDA_ERROR_INVALID_VALUE);
    CUlaunchAttribute bad;
    memset(&bad, 0, sizeof bad);
    cfg.attrs = &bad;
    cfg.numAttrs = 1;
    bad.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    bad.value.clusterDim.x = 2; bad.value.clusterDim.y = 1; bad.value.clusterDim.z = 1;
    CHECK_CU(cuLaunchKernelEx(&cfg, k_fill, args.kp, NULL), CUDA_ERROR_NOT_SUPPORTED);
    memset(&bad, 0, sizeof bad);
    bad.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT;
    CHECK_CU(cuLaunchKernelEx(&cfg, k_fill, args.kp, NULL), CUDA_ERROR_NOT_SUPPORTED);
    bad.id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
    CHECK_CU(cuLaunchKernelEx(&cfg, k_fill, args.kp, NULL), CUDA_ERROR_NOT_SUPPORTED);
    memset(&bad, 0, sizeof bad);
    bad.id = CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY;
    bad.value.syncPolicy = CU_SYNC_POLICY_SPIN;
    CHECK_CU(cuLaunchKernelEx(&cfg, k_fill, args.kp, NULL), CUDA_ERROR_INVALID_VALUE);
    /* captured: the launch's attributes on the node */
    CUgraph g, gc;
    cfg.attrs = at;
    cfg.numAttrs = 2;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuLaunchKernelEx(&cfg, k_fill, args.kp, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK_EQ(first_node_attr(g, CU_LAUNCH_ATTRIBUTE_PRIORITY).priority, -3);
    CHECK_EQ(first_node_attr(g, CU_LAUNCH_ATTRIBUTE_COOPERATIVE).cooperative, 0);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuLaunchCooperativeKernel(k_fill, 1, 1, 1, 1, 1, 1, 0, s, args.kp), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &gc), CUDA_SUCCESS);
    CHECK_EQ(first_node_attr(gc, CU_LAUNCH_ATTRIBUTE_COOPERATIVE).cooperative, 1);
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(e, gc, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED);
    /* eager cooperative launch runs */
    gu_kp_fill(&args, a, 12);
    CHECK_CU(cuLaunchCooperativeKernel(k_fill, 1, 1, 1, 1, 1, 1, 0, s, args.kp), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(a, 12));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(gc), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

/* The one edge of a two-node graph: its data. */
static CUgraphEdgeData only_edge(CUgraph g)
{
    CUgraphNode f, t;
    CUgraphEdgeData d;
    size_t n = 1;
    memset(&d, 0xff, sizeof d);
    CHECK_CU(cuGraphGetEdges_v2(g, &f, &t, &d, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 1);
    return d;
}

/* Programmatic dependent launch and edge data. cuLaunchKernelEx with
 * CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION runs (serialized,
 * which the overlap it allows includes); captured, the new node's edges from
 * kernel nodes are programmatic (port PROGRAMMATIC, type PROGRAMMATIC), from
 * other nodes full; the node keeps no attribute for it. CUgraphEdgeData's
 * rules: non-zero ports from kernel nodes only, a programmatic edge between
 * kernel nodes only and from a PROGRAMMATIC or LAUNCH_ORDER port, the
 * PROGRAMMATIC port with a programmatic edge only. cuGraphExecUpdate: an
 * edge whose data changed is a changed topology (errorNode its downstream
 * end, errorFromNode its upstream end). */
TEST(programmatic_edges)
{
    CUdeviceptr a = gu_alloc();
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    gu_args fa, xa;
    gu_kp_fill(&fa, a, 3);
    gu_kp_affine(&xa, a, 10, 1);
    CUlaunchAttribute pss;
    memset(&pss, 0, sizeof pss);
    pss.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    pss.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg = launch_config_1x1(s, &pss, 1);
    /* eager: runs after the previous kernel */
    CHECK_CU(gu_launch(k_fill, s, &fa), CUDA_SUCCESS);
    CHECK_CU(cuLaunchKernelEx(&cfg, k_affine, xa.kp, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(a, 31));
    /* captured with and without it */
    CUgraph gp, g0, gz, gm;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_fill, s, &fa), CUDA_SUCCESS);
    CHECK_CU(cuLaunchKernelEx(&cfg, k_affine, xa.kp, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &gp), CUDA_SUCCESS);
    CUgraphEdgeData d = only_edge(gp);
    CHECK(d.from_port == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC && d.to_port == 0 &&
          d.type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC);
    size_t ne = 1;
    CUgraphNode f1[1], t1[1];
    CHECK_CU(cuGraphGetEdges_v2(gp, f1, t1, NULL, &ne), CUDA_ERROR_LOSSY_QUERY);   /* data asked for */
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_fill, s, &fa), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_affine, s, &xa), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g0), CUDA_SUCCESS);
    d = only_edge(g0);
    CHECK(d.from_port == 0 && d.type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
    pss.value.programmaticStreamSerializationAllowed = 0;          /* 0: an ordinary launch */
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_fill, s, &fa), CUDA_SUCCESS);
    CHECK_CU(cuLaunchKernelEx(&cfg, k_affine, xa.kp, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &gz), CUDA_SUCCESS);
    d = only_edge(gz);
    CHECK(d.from_port == 0 && d.type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
    pss.value.programmaticStreamSerializationAllowed = 1;          /* after a memset: a full edge */
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(a, 3, N_ELEMS, s), CUDA_SUCCESS);
    CHECK_CU(cuLaunchKernelEx(&cfg, k_affine, xa.kp, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &gm), CUDA_SUCCESS);
    d = only_edge(gm);
    CHECK(d.from_port == 0 && d.type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
    /* the graph runs; an update changing only the edge's data is refused */
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, gp, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(a, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(a, 31));
    CHECK_CU(cuGraphExecUpdate_v2(e, g0, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    CUgraphNode gn[2];
    size_t nn = 2;
    CHECK_CU(cuGraphGetNodes(g0, gn, &nn), CUDA_SUCCESS);
    CHECK(info.errorNode == gn[1] && info.errorFromNode == gn[0]);
    CHECK_CU(cuGraphExecUpdate_v2(e, gp, &info), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g0, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(e, gp, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    CHECK_CU(cuGraphExecUpdate_v2(e, gz, &info), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    /* edge data rules, explicit graphs */
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUgraphNode k1 = add_fill(g, NULL, 0, a, 1), k2 = add_fill(g, NULL, 0, a, 2), en, x;
    CHECK_CU(cuGraphAddEmptyNode(&en, g, NULL, 0), CUDA_SUCCESS);
    CUgraphEdgeData ed;
    memset(&ed, 0, sizeof ed);
    ed.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;                 /* DEFAULT port */
    CHECK_CU(cuGraphAddDependencies_v2(g, &k1, &k2, &ed, 1), CUDA_ERROR_INVALID_VALUE);
    ed.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
    CHECK_CU(cuGraphAddDependencies_v2(g, &en, &k2, &ed, 1), CUDA_ERROR_INVALID_VALUE);  /* from an empty node */
    CHECK_CU(cuGraphAddDependencies_v2(g, &k1, &en, &ed, 1), CUDA_ERROR_INVALID_VALUE);  /* to one */
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_EMPTY;
    CHECK_CU(cuGraphAddNode_v2(&x, g, &k1, &ed, 1, &np), CUDA_ERROR_INVALID_VALUE);
    ed.type = CU_GRAPH_DEPENDENCY_TYPE_DEFAULT;                      /* PROGRAMMATIC port, full edge */
    CHECK_CU(cuGraphAddDependencies_v2(g, &k1, &k2, &ed, 1), CUDA_ERROR_INVALID_VALUE);
    ed.from_port = 3;
    CHECK_CU(cuGraphAddDependencies_v2(g, &k1, &k2, &ed, 1), CUDA_ERROR_INVALID_VALUE);
    ed.from_port = CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER;           /* allowed: full or programmatic */
    CHECK_CU(cuGraphAddDependencies_v2(g, &k1, &en, &ed, 1), CUDA_SUCCESS);
    ed.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    CHECK_CU(cuGraphAddDependencies_v2(g, &k1, &k2, &ed, 1), CUDA_SUCCESS);
    CHECK_CU(cuGraphGetEdges_v2(g, NULL, NULL, NULL, &ne), CUDA_SUCCESS);
    CHECK_EQ(ne, 2);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(gp), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g0), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(gz), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(gm), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

/* cudaFuncAttributes.maxDynamicSharedSizeBytes: "Any launch must have a
 * dynamic shared memory size smaller than this value", a kernel node's launch
 * too: checked against the function's attribute when the graph is launched
 * (CUDA_ERROR_INVALID_VALUE, nothing runs), not when the node is added, the
 * graph instantiated or the exec updated; a disabled node is not launched. */
TEST(func_attr_at_graph_launch)
{
    CUdeviceptr a = gu_alloc();
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    int dflt = 0;
    CHECK_CU(cuFuncGetAttribute(&dflt, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k_fill), CUDA_SUCCESS);
    const unsigned big = (unsigned)dflt + 4096;
    gu_args fa;
    gu_kp_fill(&fa, a, 5);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &fa);
    kp.sharedMemBytes = big;
    CUgraph g;
    CUgraphNode nd;
    CUgraphExec e;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddKernelNode(&nd, g, NULL, 0, &kp), CUDA_SUCCESS);     /* not checked here */
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);          /* nor here */
    CHECK_CU(cuMemsetD32(a, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(a, 0));                                                      /* nothing ran */
    CHECK_CU(cuFuncSetAttribute(k_fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)big), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(a, 5));
    /* lowered after instantiation: the next launch is refused, a disabled
     * node is not launched, a node updated to less shared memory runs */
    CHECK_CU(cuFuncSetAttribute(k_fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dflt), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphNodeSetEnabled(e, nd, 0), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeSetEnabled(e, nd, 1), CUDA_SUCCESS);
    gu_kp_fill(&fa, a, 6);
    kp = gu_knode(k_fill, &fa);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e, nd, &kp), CUDA_SUCCESS);
    CHECK_CU(run_exec(e, s), CUDA_SUCCESS);
    CHECK(gu_all(a, 6));
    /* cuKernelSetAttribute-style per-function state is the function's: a
     * stream launch is refused the same way */
    CHECK_CU(cuLaunchKernel(k_fill, 1, 1, 1, 1, 1, 1, big, s, fa.kp, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

/* cuGraphDestroyNode: "Removes hNode from its graph. This operation also
 * severs any dependencies of other nodes on hNode and vice versa. Nodes which
 * belong to a graph which contains allocation or free nodes cannot be
 * destroyed." An exec instantiated before keeps running the old graph, its
 * other nodes are still named by their handles (though their positions in
 * the graph shifted), the removed one no longer names anything; clones are
 * separate. */
TEST(destroy_node)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc();
    CUgraph g, cl;
    CUgraphNode n[3], deps[2], cn, x, list[4];
    CUgraphNodeType t;
    size_t cnt;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    n[0] = add_fill(g, NULL, 0, a, 2);                     /* a = 2 */
    n[1] = add_affine(g, &n[0], 1, a, 10, 0);              /* a *= 10 */
    deps[0] = n[0];
    deps[1] = n[1];
    n[2] = add_affine(g, deps, 2, a, 1, 3);                /* a += 3 */
    CUgraphExec e1, e2;
    CHECK_CU(cuGraphInstantiateWithFlags(&e1, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphClone(&cl, g), CUDA_SUCCESS);

    CHECK_CU(cuGraphDestroyNode(n[1]), CUDA_SUCCESS);
    cnt = 4;
    CHECK_CU(cuGraphGetNodes(g, list, &cnt), CUDA_SUCCESS);
    CHECK(cnt == 2 && list[0] == n[0] && list[1] == n[2]);
    CHECK_CU(cuGraphGetEdges(g, NULL, NULL, NULL, &cnt), CUDA_SUCCESS);
    CHECK_EQ(cnt, 1);
    cnt = 4;
    CHECK_CU(cuGraphNodeGetDependencies(n[2], list, NULL, &cnt), CUDA_SUCCESS);
    CHECK(cnt == 1 && list[0] == n[0]);
    cnt = 4;
    CHECK_CU(cuGraphNodeGetDependentNodes(n[0], list, NULL, &cnt), CUDA_SUCCESS);
    CHECK(cnt == 1 && list[0] == n[2]);
    /* the removed handle is stale */
    CHECK_CU(cuGraphNodeGetType(n[1], &t), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphDestroyNode(n[1]), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphAddEmptyNode(&x, g, &n[1], 1), CUDA_ERROR_INVALID_VALUE);

    /* the exec made before runs all three nodes: 2 * 10 + 3 */
    CHECK_CU(run_exec(e1, s), CUDA_SUCCESS);
    CHECK(gu_all(a, 23));
    /* n[2] (second in the graph now, third in the exec) still names its exec
     * node; n[1] names nothing */
    gu_args ar;
    gu_kp_affine(&ar, a, 1, 4);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_affine, &ar);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e1, n[2], &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e1, n[1], &kp), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(run_exec(e1, s), CUDA_SUCCESS);
    CHECK(gu_all(a, 24));
    check_update_fails(e1, g, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, NULL, NULL);
    /* an exec of the graph now: 2 + 3 */
    CHECK_CU(cuGraphInstantiateWithFlags(&e2, g, 0), CUDA_SUCCESS);
    CHECK_CU(run_exec(e2, s), CUDA_SUCCESS);
    CHECK(gu_all(a, 5));

    /* the clone kept all three; its copies are found by the original handles
     * while they are in it, from the graph it was cloned from only */
    cnt = 0;
    CHECK_CU(cuGraphGetNodes(cl, NULL, &cnt), CUDA_SUCCESS);
    CHECK_EQ(cnt, 3);
    CHECK_CU(cuGraphNodeFindInClone(&cn, n[2], cl), CUDA_SUCCESS);
    cnt = 4;
    CHECK_CU(cuGraphNodeGetDependencies(cn, list, NULL, &cnt), CUDA_SUCCESS);
    CHECK_EQ(cnt, 2);
    CHECK_CU(cuGraphNodeFindInClone(&cn, n[0], cl), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeGetDependentNodes(cn, list, NULL, &cnt), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroyNode(list[0]), CUDA_SUCCESS);     /* the clone of n[1] */
    CHECK_CU(cuGraphNodeFindInClone(&cn, n[2], cl), CUDA_SUCCESS);
    cnt = 4;
    CHECK_CU(cuGraphNodeGetDependencies(cn, list, NULL, &cnt), CUDA_SUCCESS);
    CHECK(cnt == 1);
    CHECK_CU(cuGraphNodeFindInClone(&cn, cn, cl), CUDA_ERROR_INVALID_VALUE);  /* not from g */
    CHECK_CU(cuGraphAddEmptyNode(&x, g, NULL, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeFindInClone(&cn, x, cl), CUDA_ERROR_INVALID_VALUE);   /* added later */

    /* a graph with memory nodes refuses */
    CUgraph gm;
    CUgraphNode an, en;
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.bytesize = N_ELEMS * 4;
    CHECK_CU(cuGraphCreate(&gm, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddEmptyNode(&en, gm, NULL, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemAllocNode(&an, gm, &en, 1, &ap), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroyNode(en), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphNodeGetType(en, &t), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(gm), CUDA_SUCCESS);

    CHECK_CU(cuGraphExecDestroy(e1), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e2), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(cl), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* A fork right after a launch completed: the child launches the same exec
 * again, and that launch waits for the previous one's launch token, which
 * must be finished when the stream counts the launch done (a fork child
 * never runs the parent's release of completed work). Before, the token was
 * finished at release, a little later: a child forked in between waited
 * forever. Each child is killed by SIGALRM after 5 s. */
TEST(fork_right_after_a_launch)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc();
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    add_affine(g, NULL, 0, a, 1, 1);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    int bad = 0;
    for (int i = 0; i < 300 && !bad; i++) {
        CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
        CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(5);
            CUresult r = cuGraphLaunch(e, s);
            if (r == CUDA_SUCCESS) r = cuStreamSynchronize(s);
            _exit(r == CUDA_SUCCESS ? 0 : 1);
        }
        int st = -1;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("#   fork %d: child %s %d\n", i, WIFEXITED(st) ? "exited" : "killed by signal",
                   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            bad = 1;
        }
    }
    CHECK(!bad);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

/* cuGraphNodeSetEnabled: a disabled exec node does nothing in later launches
 * (launches already queued keep the state they were queued with); only kernel,
 * memcpy and memset nodes can be disabled. */
TEST(node_enable)
{
    CUdeviceptr a = gu_alloc();
    CUgraph g;
    CUgraphExec e;
    gu_args args;
    CUgraphNode kn, en;
    unsigned on = 7;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    gu_kp_fill(&args, a, 9);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &args);
    CHECK_CU(cuGraphAddKernelNode(&kn, g, NULL, 0, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddEmptyNode(&en, g, &kn, 1), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(a, 1, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeGetEnabled(e, kn, &on), CUDA_SUCCESS);
    CHECK_EQ(on, 1);
    CHECK_CU(cuGraphNodeSetEnabled(e, kn, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeGetEnabled(e, kn, &on), CUDA_SUCCESS);
    CHECK_EQ(on, 0);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(a, 1));                          /* the kernel did not run */
    CHECK_CU(cuGraphNodeSetEnabled(e, kn, 1), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(a, 9));
    CHECK_CU(cuGraphNodeSetEnabled(e, en, 0), CUDA_ERROR_INVALID_VALUE);   /* empty node */
    CHECK_CU(cuGraphNodeSetEnabled(NULL, kn, 0), CUDA_ERROR_INVALID_VALUE);
    /* Setters of other node types: the driver's refusal. */
    CHECK_CU(cuGraphExecChildGraphNodeSetParams(e, kn, g), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecEventRecordNodeSetEvent(e, kn, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    RUN(built_graph_matches_eager);
    RUN(launch_runs_in_dependency_order);
    RUN(node_params_get_and_set);
    RUN(update_detects_topology_and_type_changes);
    RUN(update_success_changes_next_launch);
    RUN(exec_set_params_spares_queued_launch);
    RUN(exec_memcpy_set_params);
    RUN(launches_of_one_exec_are_serialised);
    RUN(exec_destroyed_while_in_flight);
    RUN(instantiate_variants);
    RUN(clone_is_independent);
    RUN(kernel_node_attributes);
    RUN(stream_attributes);
    RUN(remove_dependencies_and_copy_attributes);
    RUN(unemulated_node_kinds);
    RUN(launch_ex_and_cooperative);
    RUN(programmatic_edges);
    RUN(func_attr_at_graph_launch);
    RUN(node_enable);
    RUN(destroy_node);
    RUN(fork_right_after_a_launch);
    return check_done();
}
