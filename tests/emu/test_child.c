/*
 * test_child.c: child graph nodes of the emulated driver (docs/emulator.md,
 * "Child graph nodes"): the node holds a clone of the child graph made when
 * it is added, cuGraphChildGraphNodeGetGraph gives the embedded graph itself
 * (changes reach the node), a launch runs the child's nodes between the
 * node's dependencies and dependents in the child's own order,
 * cuGraphExecUpdate and cuGraphExecChildGraphNodeSetParams update the
 * child's instance recursively under the cuGraphExecUpdate rules, clones are
 * deep and independent, and destroying a parent or the node frees the
 * embedded graph (AddressSanitizer's leak check in the sanitizer build).
 *
 * Every case reads the device buffer back: the kernels are order-sensitive
 * (affine_u32: p = p * mul + add), so a child run out of place, or with
 * stale parameters, gives another number.
 */
#include "graph_util.h"

/* A child graph: p = (p * m1 + 2) * 3, two kernel nodes in a chain. */
static CUgraph make_child(CUdeviceptr p, uint32_t m1)
{
    CUgraph c;
    CHECK_CU(cuGraphCreate(&c, 0), CUDA_SUCCESS);
    CUgraphNode k1 = gu_add_affine(c, NULL, 0, p, m1, 2);
    gu_add_affine(c, &k1, 1, p, 3, 0);
    return c;
}

/* A parent: p = 1 (memset); the child; p = p * 2 + 1. With make_child(p, 5):
 * ((1 * 5 + 2) * 3) * 2 + 1 = 43. *child_node gets the child graph node. */
static CUgraph make_parent(CUdeviceptr p, CUgraph child, CUgraphNode *child_node)
{
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUgraphNode ms, cn;
    CUDA_MEMSET_NODE_PARAMS m = gu_set_1d(p, 1);
    CHECK_CU(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddChildGraphNode(&cn, g, &ms, 1, child), CUDA_SUCCESS);
    gu_add_affine(g, &cn, 1, p, 2, 1);
    if (child_node) *child_node = cn;
    return g;
}

#define PARENT_RESULT(m1) ((((1u * (m1) + 2u) * 3u) * 2u) + 1u)

/* A buffer, a child graph make_child(p, m1), its parent and child node. */
typedef struct fixture {
    CUdeviceptr p;
    CUgraph c, g;                   /* g: NULL once a case destroyed it */
    CUgraphNode cn;
} fixture;

static fixture fx_make(uint32_t m1)
{
    fixture f;
    f.p = gu_alloc();
    f.c = make_child(f.p, m1);
    f.g = make_parent(f.p, f.c, &f.cn);
    return f;
}

static void fx_free(fixture *f)
{
    if (f->g) CHECK_CU(cuGraphDestroy(f->g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(f->c), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(f->p), CUDA_SUCCESS);
}

/* Instantiates g, launches it once and checks p ends as want. */
static void run_expect(CUgraph g, CUdeviceptr p, uint32_t want)
{
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(p, want));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
}

/* The child's nodes run after the node's dependency and before its
 * dependent, in their own order; the node holds a clone made at the call
 * (changing childGraph later changes nothing); its type is GRAPH;
 * cuGraphChildGraphNodeGetGraph gives the embedded graph, not childGraph. */
TEST(child_runs_in_place_from_its_clone)
{
    fixture f = fx_make(5);
    CUgraphNodeType t;
    CHECK_CU(cuGraphNodeGetType(f.cn, &t), CUDA_SUCCESS);
    CHECK_EQ(t, CU_GRAPH_NODE_TYPE_GRAPH);
    gu_add_affine(f.c, NULL, 0, f.p, 100, 100);      /* after the clone: not in the node */
    CUgraph emb = NULL;
    CHECK_CU(cuGraphChildGraphNodeGetGraph(f.cn, &emb), CUDA_SUCCESS);
    CHECK(emb != NULL && emb != f.c);
    size_t n = 0;
    CHECK_CU(cuGraphGetNodes(emb, NULL, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 2);
    CHECK_CU(cuGraphGetNodes(f.g, NULL, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 3);                               /* the child's nodes are not the parent's */
    run_expect(f.g, f.p, PARENT_RESULT(5));
    CUgraph got;
    CHECK_CU(cuGraphChildGraphNodeGetGraph(NULL, &got), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphChildGraphNodeGetGraph(f.cn, NULL), CUDA_ERROR_INVALID_VALUE);
    CUgraphNode roots[1];
    n = 1;
    CHECK_CU(cuGraphGetRootNodes(f.g, roots, &n), CUDA_SUCCESS);
    CHECK_CU(cuGraphChildGraphNodeGetGraph(roots[0], &got), CUDA_ERROR_INVALID_VALUE);  /* a memset node */
    CHECK_CU(cuGraphAddChildGraphNode(&roots[0], f.g, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    fx_free(&f);
}

/* "Changes to the graph will be reflected in the node": a kernel node of the
 * embedded graph set through its handle changes what a new instance runs.
 * "Allocation and free nodes cannot be added to the returned graph", and a
 * graph with memory nodes cannot become a child. The embedded graph belongs
 * to its node: cuGraphDestroy of it is refused (a violation). */
TEST(embedded_graph_changes_reach_the_node)
{
    fixture f = fx_make(5);
    CUgraph emb;
    CHECK_CU(cuGraphChildGraphNodeGetGraph(f.cn, &emb), CUDA_SUCCESS);
    CUgraphNode inner[2];
    size_t n = 2;
    CHECK_CU(cuGraphGetNodes(emb, inner, &n), CUDA_SUCCESS);
    gu_args a;
    gu_kp_affine(&a, f.p, 7, 2);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_affine, &a);
    CHECK_CU(cuGraphKernelNodeSetParams(inner[0], &kp), CUDA_SUCCESS);
    run_expect(f.g, f.p, PARENT_RESULT(7));

    CUDA_MEM_ALLOC_NODE_PARAMS al;
    memset(&al, 0, sizeof al);
    al.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    al.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    al.bytesize = 256;
    CUgraphNode an;
    CHECK_CU(cuGraphAddMemAllocNode(&an, emb, NULL, 0, &al), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphGetNodes(emb, NULL, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 2);
    CUgraph withmem;
    CHECK_CU(cuGraphCreate(&withmem, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemAllocNode(&an, withmem, NULL, 0, &al), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemFreeNode(&an, withmem, &an, 1, al.dptr), CUDA_SUCCESS);
    CUgraphNode bad = NULL;
    CHECK_CU(cuGraphAddChildGraphNode(&bad, f.g, NULL, 0, withmem), CUDA_ERROR_INVALID_VALUE);
    CHECK(bad == NULL);
    CHECK_CU(cuGraphDestroy(withmem), CUDA_SUCCESS);

    emu_test_stderr_begin();
    CHECK_CU(cuGraphDestroy(emb), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(emu_test_violations(), 1);
    CHECK_CU(cuGraphGetNodes(emb, NULL, &n), CUDA_SUCCESS);   /* still there */
    CHECK_CU(cuGraphDestroy(f.g), CUDA_SUCCESS);
    f.g = NULL;
    CHECK_CU(cuGraphGetNodes(emb, NULL, &n), CUDA_ERROR_INVALID_VALUE);  /* gone with its node */
    fx_free(&f);
}

/* cuGraphExecUpdate from a parent whose child kernels have other arguments
 * (a scalar, then a pointer): the next launch uses them. A child with
 * another topology: TOPOLOGY_CHANGED, errorNode the child graph node of
 * hGraph; a child node of another type: NODE_TYPE_CHANGED; the exec keeps
 * its parameters after a refusal. */
TEST(exec_update_reaches_the_child)
{
    CUdeviceptr p = gu_alloc(), q = gu_alloc();
    CUgraph c5 = make_child(p, 5), c9 = make_child(p, 9), cq = make_child(q, 5);
    CUgraph g5 = make_parent(p, c5, NULL), g9 = make_parent(p, c9, NULL), gq = make_parent(p, cq, NULL);
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g5, 0), CUDA_SUCCESS);
    gu_launch_expect(e, p, PARENT_RESULT(5));
    CHECK_CU(cuGraphExecUpdate_v2(e, g9, &info), CUDA_SUCCESS);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    gu_launch_expect(e, p, PARENT_RESULT(9));
    /* the child works on q: p = 1 * 2 + 1, q = (1 * 5 + 2) * 3 */
    CHECK_CU(cuMemsetD32(q, 1, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(e, gq, &info), CUDA_SUCCESS);
    gu_launch_expect(e, p, 3);
    CHECK(gu_all(q, 21));

    /* topology: the child has a third node */
    CUgraph c3 = make_child(p, 5);
    gu_add_affine(c3, NULL, 0, p, 1, 1);
    CUgraphNode cn3, cnt;
    CUgraph g3 = make_parent(p, c3, &cn3);
    CHECK_CU(cuGraphExecUpdate_v2(e, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    CHECK(info.errorNode == cn3);
    CHECK(info.errorFromNode == NULL);
    /* node type: the child's first node is a memset */
    CUgraph ct;
    CHECK_CU(cuGraphCreate(&ct, 0), CUDA_SUCCESS);
    CUgraphNode m1;
    CUDA_MEMSET_NODE_PARAMS ms = gu_set_1d(p, 4);
    CHECK_CU(cuGraphAddMemsetNode(&m1, ct, NULL, 0, &ms, g_ctx), CUDA_SUCCESS);
    gu_add_affine(ct, &m1, 1, p, 3, 0);
    CUgraph gt = make_parent(p, ct, &cnt);
    CHECK_CU(cuGraphExecUpdate_v2(e, gt, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
    CHECK(info.errorNode == cnt);
    /* a parent whose child node became an empty node */
    CUgraph ge;
    CHECK_CU(cuGraphCreate(&ge, 0), CUDA_SUCCESS);
    CUgraphNode n0, n1;
    CHECK_CU(cuGraphAddMemsetNode(&n0, ge, NULL, 0, &ms, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddEmptyNode(&n1, ge, &n0, 1), CUDA_SUCCESS);
    gu_add_affine(ge, &n1, 1, p, 2, 1);
    CHECK_CU(cuGraphExecUpdate_v2(e, ge, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
    CHECK(info.errorNode == n1);
    CHECK_CU(cuMemsetD32(q, 1, N_ELEMS), CUDA_SUCCESS);
    gu_launch_expect(e, p, 3);                       /* still the gq parameters */
    CHECK(gu_all(q, 21));

    CUgraph all[] = { c5, c9, cq, g5, g9, gq, c3, g3, ct, gt, ge };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) CHECK_CU(cuGraphDestroy(all[i]), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(q), CUDA_SUCCESS);
}

/* cuGraphExecChildGraphNodeSetParams (and cuGraphExecNodeSetParams with a
 * GRAPH node): the exec's instance of the node takes childGraph's
 * parameters; "hNode is also not modified by this call"; a childGraph of
 * another topology, a node that is not a child graph node, or a node of
 * another graph: CUDA_ERROR_INVALID_VALUE, nothing changed. */
TEST(exec_child_set_params)
{
    CUdeviceptr p = gu_alloc();
    CUgraph c5 = make_child(p, 5), c9 = make_child(p, 9), c11 = make_child(p, 11), c3 = make_child(p, 5);
    gu_add_affine(c3, NULL, 0, p, 1, 1);
    CUgraphNode cn, other_cn;
    CUgraph g = make_parent(p, c5, &cn), other = make_parent(p, c5, &other_cn);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecChildGraphNodeSetParams(e, cn, c9), CUDA_SUCCESS);
    gu_launch_expect(e, p, PARENT_RESULT(9));
    run_expect(g, p, PARENT_RESULT(5));           /* the node itself is unchanged */
    CHECK_CU(cuGraphExecChildGraphNodeSetParams(e, cn, c3), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecChildGraphNodeSetParams(e, other_cn, c5), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecChildGraphNodeSetParams(e, cn, NULL), CUDA_ERROR_INVALID_VALUE);
    CUgraphNode roots[1];
    size_t n = 1;
    CHECK_CU(cuGraphGetRootNodes(g, roots, &n), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecChildGraphNodeSetParams(e, roots[0], c5), CUDA_ERROR_INVALID_VALUE);
    gu_launch_expect(e, p, PARENT_RESULT(9));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_GRAPH;
    np.graph.graph = c11;
    CHECK_CU(cuGraphExecNodeSetParams(e, cn, &np), CUDA_SUCCESS);
    gu_launch_expect(e, p, PARENT_RESULT(11));
    np.graph.graph = c3;
    CHECK_CU(cuGraphExecNodeSetParams(e, cn, &np), CUDA_ERROR_INVALID_VALUE);
    gu_launch_expect(e, p, PARENT_RESULT(11));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CUgraph all[] = { c5, c9, c11, c3, g, other };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) CHECK_CU(cuGraphDestroy(all[i]), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* cuGraphClone copies child graphs recursively: the clone's embedded graph
 * is its own (changing it leaves the original's alone), and the clone
 * outlives the original. Nested: a child graph holding a child graph. */
TEST(clone_is_deep)
{
    CUdeviceptr p = gu_alloc();
    CUgraph inner = make_child(p, 5), mid;
    CHECK_CU(cuGraphCreate(&mid, 0), CUDA_SUCCESS);
    CUgraphNode icn;
    CHECK_CU(cuGraphAddChildGraphNode(&icn, mid, NULL, 0, inner), CUDA_SUCCESS);
    CUgraphNode cn;
    CUgraph g = make_parent(p, mid, &cn);         /* memset; mid{inner{2 kernels}}; kernel */
    CHECK_CU(cuGraphDestroy(mid), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(inner), CUDA_SUCCESS);
    run_expect(g, p, PARENT_RESULT(5));

    CUgraph cl, emb_mid, emb_inner;
    CHECK_CU(cuGraphClone(&cl, g), CUDA_SUCCESS);
    CUgraphNode ccn, cicn, kn[2];
    CHECK_CU(cuGraphNodeFindInClone(&ccn, cn, cl), CUDA_SUCCESS);
    CHECK_CU(cuGraphChildGraphNodeGetGraph(ccn, &emb_mid), CUDA_SUCCESS);
    size_t n = 1;
    CHECK_CU(cuGraphGetNodes(emb_mid, &cicn, &n), CUDA_SUCCESS);
    CHECK_CU(cuGraphChildGraphNodeGetGraph(cicn, &emb_inner), CUDA_SUCCESS);
    n = 2;
    CHECK_CU(cuGraphGetNodes(emb_inner, kn, &n), CUDA_SUCCESS);
    gu_args a;
    gu_kp_affine(&a, p, 13, 2);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_affine, &a);
    CHECK_CU(cuGraphKernelNodeSetParams(kn[0], &kp), CUDA_SUCCESS);
    run_expect(cl, p, PARENT_RESULT(13));
    run_expect(g, p, PARENT_RESULT(5));           /* the original is untouched */
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    run_expect(cl, p, PARENT_RESULT(13));
    CHECK_CU(cuGraphDestroy(cl), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* cuGraphDestroyNode of a child graph node frees its embedded graph (stale
 * handles after); an exec made before keeps running it, even after the
 * parent is destroyed; the generic cuGraphAddNode adds a child graph node
 * (a clone; a moved child graph is not emulated: CUDA_ERROR_NOT_SUPPORTED),
 * and cuGraphNodeSetParams of one is not emulated either. */
TEST(destroy_and_generic_calls)
{
    fixture f = fx_make(5);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, f.g, 0), CUDA_SUCCESS);
    CUgraph emb;
    CHECK_CU(cuGraphChildGraphNodeGetGraph(f.cn, &emb), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroyNode(f.cn), CUDA_SUCCESS);
    size_t n = 0;
    CHECK_CU(cuGraphGetNodes(emb, NULL, &n), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphGetNodes(f.g, NULL, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 2);
    CHECK_CU(cuGraphDestroy(f.g), CUDA_SUCCESS);
    f.g = NULL;
    gu_launch_expect(e, f.p, PARENT_RESULT(5));      /* the exec is a snapshot */
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);

    CUgraph h;
    CHECK_CU(cuGraphCreate(&h, 0), CUDA_SUCCESS);
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_GRAPH;
    np.graph.graph = f.c;
    np.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    CUgraphNode gn = NULL;
    CHECK_CU(cuGraphAddNode(&gn, h, NULL, NULL, 0, &np), CUDA_ERROR_NOT_SUPPORTED);
    np.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
    CHECK_CU(cuGraphAddNode(&gn, h, NULL, NULL, 0, &np), CUDA_SUCCESS);
    CUgraphNodeType t;
    CHECK_CU(cuGraphNodeGetType(gn, &t), CUDA_SUCCESS);
    CHECK_EQ(t, CU_GRAPH_NODE_TYPE_GRAPH);
    CHECK_CU(cuGraphNodeSetParams(gn, &np), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemsetD32(f.p, 1, N_ELEMS), CUDA_SUCCESS);
    run_expect(h, f.p, (1 * 5 + 2) * 3);
    CHECK_CU(cuGraphDestroy(h), CUDA_SUCCESS);
    fx_free(&f);
}

int main(void)
{
    gu_setup();
    RUN(child_runs_in_place_from_its_clone);
    RUN(embedded_graph_changes_reach_the_node);
    RUN(exec_update_reaches_the_child);
    RUN(exec_child_set_params);
    RUN(clone_is_deep);
    RUN(destroy_and_generic_calls);
    return check_done();
}
