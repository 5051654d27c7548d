/*
 * test_cond.c: conditional nodes of the emulated driver (docs/emulator.md,
 * "Conditional nodes"): cuGraphConditionalHandleCreate, an IF (with an ELSE
 * body or not), WHILE or SWITCH node added through cuGraphAddNode whose body
 * graphs the driver returns and the program fills, kernels that set the condition (cudaemu_set_conditional,
 * the emulated cudaGraphSetConditional: mod_graph.so's cond_dec_u32 and
 * cond_set), the default re-applied per launch with
 * CU_GRAPH_COND_ASSIGN_DEFAULT (and kept without it), cuGraphExecUpdate's
 * rules (a conditional node's type and number of bodies fixed, each body
 * updated as a child graph), the documented restrictions (no clone, no child graph node, one
 * instantiation, the body's node types), and destroying a graph frees its
 * bodies (AddressSanitizer's leak check in the sanitizer build).
 *
 * Every case reads the device buffers back: a body run once too often or
 * too seldom, or another body than the value picks, gives another number.
 */
#include "graph_util.h"

static CUfunction k_dec, k_set;

/* A kernel node f(args) in g after deps; the arguments are copied by the call. */
static CUgraphNode add_kernel(CUgraph g, const CUgraphNode *deps, size_t n, CUfunction f, void **kp)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = kp;
    CUgraphNode nd = NULL;
    CHECK_CU(cuGraphAddKernelNode(&nd, g, deps, n, &p), CUDA_SUCCESS);
    return nd;
}

/* cond_dec_u32(c, h) in g after deps. */
static CUgraphNode add_dec(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr c, CUgraphConditionalHandle h)
{
    uint64_t nel = N_ELEMS;
    void *kp[] = { &c, &h, &nel };
    return add_kernel(g, deps, n, k_dec, kp);
}

/* cond_set(h, v) in g after deps. */
static CUgraphNode add_set(CUgraph g, const CUgraphNode *deps, size_t n, CUgraphConditionalHandle h, uint32_t v)
{
    void *kp[] = { &h, &v };
    return add_kernel(g, deps, n, k_set, kp);
}

/* A conditional node of type t on h in g after deps; *body gets its body graph. */
static CUresult add_cond(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                         CUgraphConditionalHandle h, CUgraphConditionalNodeType t, unsigned size, CUgraph *body)
{
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = h;
    np.conditional.type = t;
    np.conditional.size = size;
    np.conditional.phGraph_out = body;
    np.conditional.ctx = g_ctx;
    return cuGraphAddNode(out, g, deps, NULL, n, &np);
}

/* A counting loop: p = 0, c = count (memsets); WHILE h { p = p + 1;
 * c -= 1, h = c[0] }. h: default dflt, flags. */
static CUgraph make_loop(CUdeviceptr p, CUdeviceptr c, uint32_t count, unsigned dflt, unsigned flags,
                         CUgraphConditionalHandle *h_out)
{
    CUgraph g, body;
    CUgraphConditionalHandle h;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphConditionalHandleCreate(&h, g, g_ctx, dflt, flags), CUDA_SUCCESS);
    CUgraphNode ms[2], cn;
    CUDA_MEMSET_NODE_PARAMS m0 = gu_set_1d(p, 0), m1 = gu_set_1d(c, count);
    CHECK_CU(cuGraphAddMemsetNode(&ms[0], g, NULL, 0, &m0, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemsetNode(&ms[1], g, NULL, 0, &m1, g_ctx), CUDA_SUCCESS);
    CHECK_CU(add_cond(&cn, g, ms, 2, h, CU_GRAPH_COND_TYPE_WHILE, 1, &body), CUDA_SUCCESS);
    CUgraphNode k = gu_add_affine(body, NULL, 0, p, 1, 1);
    add_dec(body, &k, 1, c, h);
    if (h_out) *h_out = h;
    return g;
}

/* WHILE: the body runs while the value is non-zero, re-read after each
 * iteration; with CU_GRAPH_COND_ASSIGN_DEFAULT every launch starts from the
 * default again. */
static void while_counts_and_default_per_launch(void)
{
    CUdeviceptr p = gu_alloc(), c = gu_alloc();
    CUgraph g = make_loop(p, c, 5, 1, CU_GRAPH_COND_ASSIGN_DEFAULT, NULL);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    gu_launch_expect(e, p, 5);
    CHECK(gu_all(c, 0));
    gu_launch_expect(e, p, 5);             /* the default (1) again: the loop runs again */
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(c), CUDA_SUCCESS);
}

/* Without CU_GRAPH_COND_ASSIGN_DEFAULT the value starts as the default and
 * keeps what the kernels set: the second launch finds 0 and skips the body.
 * A default of 0 with the flag: the body never runs. */
static void while_without_assign_default(void)
{
    CUdeviceptr p = gu_alloc(), c = gu_alloc();
    CUgraph g = make_loop(p, c, 3, 1, 0, NULL);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    gu_launch_expect(e, p, 3);
    gu_launch_expect(e, p, 0);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    g = make_loop(p, c, 3, 0, CU_GRAPH_COND_ASSIGN_DEFAULT, NULL);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    gu_launch_expect(e, p, 0);
    CHECK(gu_all(c, 3));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(c), CUDA_SUCCESS);
}

/* A new graph *g with a handle *h (default 0, re-applied per launch):
 * p = 1 (a memset); cond_set(h, v). Returns the cond_set node. */
static CUgraphNode set_first(CUdeviceptr p, uint32_t v, CUgraph *g, CUgraphConditionalHandle *h)
{
    CUgraphNode ms;
    CHECK_CU(cuGraphCreate(g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphConditionalHandleCreate(h, *g, g_ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS m = gu_set_1d(p, 1);
    CHECK_CU(cuGraphAddMemsetNode(&ms, *g, NULL, 0, &m, g_ctx), CUDA_SUCCESS);
    return add_set(*g, &ms, 1, *h, v);
}

/* IF: p = 1; cond_set(h, v); IF h { p = p * mul + 1 (then `extra` times
 * p = p * 1 + 0) }; p = p * 2. */
static CUgraph make_if(CUdeviceptr p, uint32_t v, uint32_t mul, int extra, CUgraphNode *cond_node)
{
    CUgraph g, body;
    CUgraphConditionalHandle h;
    CUgraphNode cn, st = set_first(p, v, &g, &h);
    CHECK_CU(add_cond(&cn, g, &st, 1, h, CU_GRAPH_COND_TYPE_IF, 1, &body), CUDA_SUCCESS);
    CUgraphNode k = gu_add_affine(body, NULL, 0, p, mul, 1);
    while (extra--) k = gu_add_affine(body, &k, 1, p, 1, 0);
    gu_add_affine(g, &cn, 1, p, 2, 0);
    if (cond_node) *cond_node = cn;
    return g;
}

static void run_expect(CUgraph g, CUdeviceptr p, uint32_t want)
{
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    gu_launch_expect(e, p, want);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
}

static void if_taken_and_not(void)
{
    CUdeviceptr p = gu_alloc();
    CUgraph g = make_if(p, 1, 3, 0, NULL);
    run_expect(g, p, (1 * 3 + 1) * 2);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    g = make_if(p, 0, 3, 0, NULL);
    run_expect(g, p, 1 * 2);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    g = make_if(p, 7, 3, 0, NULL);         /* any non-zero value */
    run_expect(g, p, (1 * 3 + 1) * 2);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* cuGraphExecUpdate: a body's kernel parameters change under the usual
 * rules (the new graph has its own handle, which the exec then reads); the
 * node's type may not change; a body's topology may not either. */
static void exec_update_rules(void)
{
    CUdeviceptr p = gu_alloc(), c = gu_alloc();
    CUgraph a = make_if(p, 1, 3, 0, NULL), b = make_if(p, 1, 5, 0, NULL), d = make_if(p, 0, 5, 0, NULL);
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, a, 0), CUDA_SUCCESS);
    gu_launch_expect(e, p, (1 * 3 + 1) * 2);
    CHECK_CU(cuGraphExecUpdate(e, b, &info), CUDA_SUCCESS);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    gu_launch_expect(e, p, (1 * 5 + 1) * 2);
    CHECK_CU(cuGraphExecUpdate(e, d, &info), CUDA_SUCCESS);   /* the set kernel's value changes */
    gu_launch_expect(e, p, 1 * 2);
    CHECK_CU(cuGraphExecUpdate(e, a, &info), CUDA_SUCCESS);   /* and back */
    gu_launch_expect(e, p, (1 * 3 + 1) * 2);
    /* IF to WHILE: "Changing node parameters is not supported". */
    CUgraph w = make_loop(p, c, 2, 1, 0, NULL);
    CUgraph t;
    CUgraphNode ms, st, cn;
    CUgraphConditionalHandle h;
    CHECK_CU(cuGraphCreate(&t, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphConditionalHandleCreate(&h, t, g_ctx, 0, 0), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS m = gu_set_1d(p, 1);
    CHECK_CU(cuGraphAddMemsetNode(&ms, t, NULL, 0, &m, g_ctx), CUDA_SUCCESS);
    st = add_set(t, &ms, 1, h, 1);
    CUgraph body;
    CHECK_CU(add_cond(&cn, t, &st, 1, h, CU_GRAPH_COND_TYPE_WHILE, 1, &body), CUDA_SUCCESS);
    gu_add_affine(body, NULL, 0, p, 3, 1);
    gu_add_affine(t, &cn, 1, p, 2, 0);
    CHECK_CU(cuGraphExecUpdate(e, t, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    CHECK(info.errorNode == cn);
    /* A body with one more node: the topology changed (named by the
     * conditional node); a graph of another shape. */
    CUgraphNode cb;
    CUgraphNodeType ty;
    CUgraph b2 = make_if(p, 1, 3, 1, &cb);
    CHECK_CU(cuGraphNodeGetType(cb, &ty), CUDA_SUCCESS);
    CHECK_EQ(ty, CU_GRAPH_NODE_TYPE_CONDITIONAL);
    CHECK_CU(cuGraphExecUpdate(e, b2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    CHECK(info.errorNode == cb);
    CHECK_CU(cuGraphExecUpdate(e, w, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    gu_launch_expect(e, p, (1 * 3 + 1) * 2);   /* the refusals changed nothing */
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CUgraph all[] = { a, b, d, w, t, b2 };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) CHECK_CU(cuGraphDestroy(all[i]), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(c), CUDA_SUCCESS);
}

static size_t graph_nodes(CUgraph g)
{
    size_t n = 0;
    CHECK_CU(cuGraphGetNodes(g, NULL, &n), CUDA_SUCCESS);
    return n;
}

/* IF with an ELSE body, SWITCH: p = 1; cond_set(h, v); COND h { body b:
 * p = p * (b + 2) + (b + 1 + shift) }; p = p * 2. Each body gives p another
 * number (2b + 3 + shift before the doubling), none leaves it 1. extra_body:
 * the body that gets one more node (p = p * 1 + 0; -1: none). *bodies (if
 * not NULL) gets the size body graphs. */
static CUgraph make_multi(CUdeviceptr p, CUgraphConditionalNodeType t, unsigned size, uint32_t v, uint32_t shift,
                          int extra_body, CUgraphNode *cond_node, CUgraph *bodies)
{
    CUgraph g, body[8] = { 0 };
    CUgraphConditionalHandle h;
    CHECK(size <= 8);
    CUgraphNode cn, st = set_first(p, v, &g, &h);
    CHECK_CU(add_cond(&cn, g, &st, 1, h, t, size, body), CUDA_SUCCESS);
    for (unsigned b = 0; b < size; b++) {
        CHECK(body[b] != NULL);
        for (unsigned c = 0; c < b; c++) CHECK(body[b] != body[c]);    /* a graph of its own each */
        CUgraphNode k = gu_add_affine(body[b], NULL, 0, p, b + 2, b + 1 + shift);
        if ((int)b == extra_body) gu_add_affine(body[b], &k, 1, p, 1, 0);
    }
    gu_add_affine(g, &cn, 1, p, 2, 0);
    if (cond_node) *cond_node = cn;
    if (bodies) memcpy(bodies, body, size * sizeof *body);
    return g;
}

/* What make_multi's graph leaves in p, worked out here (b: the body taken, -1 none). */
static uint32_t multi_want(int b, uint32_t shift)
{
    return 2 * (b < 0 ? 1 : 2 * (uint32_t)b + 3 + shift);
}

/* IF with an ELSE body: "phGraph_out[0] is executed when the condition is
 * non-zero. If size == 2, phGraph_out[1] will be executed when the condition
 * is zero." Exactly one of them runs, once. */
static void if_else_one_body(void)
{
    CUdeviceptr p = gu_alloc();
    static const uint32_t vals[] = { 1, 0, 7, 0xffffffffu };
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        CUgraph g = make_multi(p, CU_GRAPH_COND_TYPE_IF, 2, vals[i], 0, -1, NULL, NULL);
        run_expect(g, p, multi_want(vals[i] ? 0 : 1, 0));
        CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    }
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* SWITCH: "phGraph_out[n] is executed when the condition is equal to n. If
 * the condition >= size, no body graph is executed." Every value below the
 * size runs its body only; values at and above it run none. A size of 1
 * runs its body on 0 only. */
static void switch_body_of_value(void)
{
    CUdeviceptr p = gu_alloc();
    static const uint32_t vals[] = { 0, 1, 2, 3, 4, 5, 6, 0x80000000u };
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        CUgraph g = make_multi(p, CU_GRAPH_COND_TYPE_SWITCH, 5, vals[i], 0, -1, NULL, NULL);
        run_expect(g, p, multi_want(vals[i] < 5 ? (int)vals[i] : -1, 0));
        CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    }
    for (uint32_t v = 0; v < 2; v++) {
        CUgraph g = make_multi(p, CU_GRAPH_COND_TYPE_SWITCH, 1, v, 0, -1, NULL, NULL);
        run_expect(g, p, multi_want(v ? -1 : 0, 0));
        CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    }
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* An update that make_multi(t, size, 2, 20, extra) must be refused with want, naming its node. */
static void multi_refused(CUgraphExec e, CUdeviceptr p, CUgraphConditionalNodeType t, unsigned size, int extra,
                          CUgraphExecUpdateResult want)
{
    CUgraphExecUpdateResultInfo info;
    CUgraphNode cn;
    CUgraph x = make_multi(p, t, size, 2, 20, extra, &cn, NULL);
    CHECK_CU(cuGraphExecUpdate(e, x, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, want);
    CHECK(info.errorNode == cn);
    CHECK_CU(cuGraphDestroy(x), CUDA_SUCCESS);
}

/* cuGraphExecUpdate of IF/ELSE and SWITCH nodes: "Changing node parameters
 * is not supported" (another type or number of bodies:
 * CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, naming the node); every
 * body is updated under the child graph rules, one not taken included (its
 * new parameters show once the value picks it); a body's topology may not
 * change, whichever body it is. A refusal changes nothing. */
static void multi_update_rules(void)
{
    CUdeviceptr p = gu_alloc();
    CUgraphExecUpdateResultInfo info;
    CUgraphExec e;
    CUgraph a = make_multi(p, CU_GRAPH_COND_TYPE_SWITCH, 3, 1, 0, -1, NULL, NULL);
    CUgraph b = make_multi(p, CU_GRAPH_COND_TYPE_SWITCH, 3, 1, 10, -1, NULL, NULL);
    CUgraph c = make_multi(p, CU_GRAPH_COND_TYPE_SWITCH, 3, 2, 10, -1, NULL, NULL);
    CUgraph d = make_multi(p, CU_GRAPH_COND_TYPE_SWITCH, 3, 3, 10, -1, NULL, NULL);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, a, 0), CUDA_SUCCESS);
    gu_launch_expect(e, p, multi_want(1, 0));
    CHECK_CU(cuGraphExecUpdate(e, b, &info), CUDA_SUCCESS);     /* every body's scalar */
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    gu_launch_expect(e, p, multi_want(1, 10));
    CHECK_CU(cuGraphExecUpdate(e, c, &info), CUDA_SUCCESS);     /* value 2: body 2 as b set it */
    gu_launch_expect(e, p, multi_want(2, 10));
    CHECK_CU(cuGraphExecUpdate(e, d, &info), CUDA_SUCCESS);     /* value 3: no body */
    gu_launch_expect(e, p, multi_want(-1, 10));
    CHECK_CU(cuGraphExecUpdate(e, c, &info), CUDA_SUCCESS);
    multi_refused(e, p, CU_GRAPH_COND_TYPE_SWITCH, 4, -1, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    multi_refused(e, p, CU_GRAPH_COND_TYPE_SWITCH, 2, -1, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    multi_refused(e, p, CU_GRAPH_COND_TYPE_IF, 1, -1, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    multi_refused(e, p, CU_GRAPH_COND_TYPE_SWITCH, 3, 2, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    multi_refused(e, p, CU_GRAPH_COND_TYPE_SWITCH, 3, 0, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    gu_launch_expect(e, p, multi_want(2, 10));     /* c's, unchanged by the refusals */
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    /* IF with an ELSE body: to IF without one, to a SWITCH of two, refused;
     * the else body's new scalar shows once the value is 0 */
    CUgraph i1 = make_multi(p, CU_GRAPH_COND_TYPE_IF, 2, 5, 0, -1, NULL, NULL);
    CUgraph i2 = make_multi(p, CU_GRAPH_COND_TYPE_IF, 2, 0, 30, -1, NULL, NULL);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, i1, 0), CUDA_SUCCESS);
    gu_launch_expect(e, p, multi_want(0, 0));
    multi_refused(e, p, CU_GRAPH_COND_TYPE_IF, 1, -1, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    multi_refused(e, p, CU_GRAPH_COND_TYPE_SWITCH, 2, -1, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    multi_refused(e, p, CU_GRAPH_COND_TYPE_IF, 2, 1, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    gu_launch_expect(e, p, multi_want(0, 0));
    CHECK_CU(cuGraphExecUpdate(e, i2, &info), CUDA_SUCCESS);
    gu_launch_expect(e, p, multi_want(1, 30));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CUgraph all[] = { a, b, c, d, i1, i2 };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) CHECK_CU(cuGraphDestroy(all[i]), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* The restrictions hold for graphs with several bodies: no clone, one
 * instantiation at a time, no child graph node of them, the node types of
 * every body checked (a host node in the second body is named), a
 * conditional node is no child graph node for
 * cuGraphExecChildGraphNodeSetParams, a handle made for a body belongs to
 * the top-level graph, and the bodies go with their node. */
static void multi_restrictions(void)
{
    CUdeviceptr p = gu_alloc();
    CUgraph bodies[3], nested[2], x, other;
    CUgraphNode cn, nd;
    CUgraph g = make_multi(p, CU_GRAPH_COND_TYPE_SWITCH, 3, 0, 0, -1, &cn, bodies);
    CHECK_CU(cuGraphClone(&x, g), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuGraphCreate(&other, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddChildGraphNode(&nd, other, NULL, 0, g), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(graph_nodes(other), 0);
    CUgraphExec e, e2;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e2, g, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecChildGraphNodeSetParams(e, cn, bodies[1]), CUDA_ERROR_INVALID_VALUE);
    gu_launch_expect(e, p, multi_want(0, 0));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CUgraphConditionalHandle hb;
    CHECK_CU(cuGraphConditionalHandleCreate(&hb, bodies[2], g_ctx, 0, 0), CUDA_SUCCESS);
    CHECK_CU(add_cond(&nd, bodies[2], NULL, 0, hb, CU_GRAPH_COND_TYPE_IF, 2, nested), CUDA_SUCCESS);
    CUDA_HOST_NODE_PARAMS hp = { .fn = (CUhostFn)free, .userData = NULL };
    CUgraphNode hn;
    CHECK_CU(cuGraphAddHostNode(&hn, bodies[1], NULL, 0, &hp), CUDA_SUCCESS);
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = { 0 };
    CHECK_CU(cuGraphInstantiateWithParams(&e, g, &ip), CUDA_ERROR_INVALID_VALUE);
    CHECK(ip.hErrNode_out == hn);
    CHECK_EQ(ip.result_out, CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED);
    CHECK_CU(cuGraphDestroyNode(hn), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddHostNode(&hn, nested[1], NULL, 0, &hp), CUDA_SUCCESS);   /* nested: named too */
    memset(&ip, 0, sizeof ip);
    CHECK_CU(cuGraphInstantiateWithParams(&e, g, &ip), CUDA_ERROR_INVALID_VALUE);
    CHECK(ip.hErrNode_out == hn);
    CHECK_CU(cuGraphDestroyNode(hn), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    gu_launch_expect(e, p, multi_want(0, 0));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroyNode(cn), CUDA_SUCCESS);     /* the bodies (the nested ones too) with it */
    CHECK_CU(cuGraphDestroy(other), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* The documented restrictions and argument checks. */
static void restrictions(void)
{
    CUdeviceptr p = gu_alloc(), c = gu_alloc();
    CUgraphConditionalHandle h;
    CUgraph g = make_loop(p, c, 2, 1, 0, &h), other, x, body;
    CUgraphNode nd;
    /* "Currently must be CU_GRAPH_COND_ASSIGN_DEFAULT or 0." */
    CHECK_CU(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, 2), CUDA_ERROR_INVALID_VALUE);
    /* "The graph cannot be cloned." / "cannot be used in a child node". */
    CHECK_CU(cuGraphClone(&x, g), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuGraphCreate(&other, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddChildGraphNode(&nd, other, NULL, 0, g), CUDA_ERROR_INVALID_VALUE);
    /* A handle of another graph; sizes ("1 for CU_GRAPH_COND_TYPE_WHILE, 1 or
     * 2 for CU_GRAPH_COND_TYPE_IF, or any value greater than zero for
     * CU_GRAPH_COND_TYPE_SWITCH"); a type that is none of them. */
    CHECK_CU(add_cond(&nd, other, NULL, 0, h, CU_GRAPH_COND_TYPE_IF, 1, &body), CUDA_ERROR_INVALID_VALUE);
    CUgraphConditionalHandle h2;
    CHECK_CU(cuGraphConditionalHandleCreate(&h2, other, g_ctx, 0, 0), CUDA_SUCCESS);
    CHECK_CU(add_cond(&nd, other, NULL, 0, h2, CU_GRAPH_COND_TYPE_WHILE, 2, &body), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(add_cond(&nd, other, NULL, 0, h2, CU_GRAPH_COND_TYPE_IF, 0, &body), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(add_cond(&nd, other, NULL, 0, h2, CU_GRAPH_COND_TYPE_IF, 3, &body), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(add_cond(&nd, other, NULL, 0, h2, CU_GRAPH_COND_TYPE_SWITCH, 0, &body), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(add_cond(&nd, other, NULL, 0, h2, (CUgraphConditionalNodeType)3, 1, &body), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(graph_nodes(other), 0);
    CHECK_CU(add_cond(&nd, other, NULL, 0, 0, CU_GRAPH_COND_TYPE_IF, 1, &body), CUDA_ERROR_INVALID_VALUE);
    /* "Only one instantiation of the graph may exist at any point in time." */
    CUgraphExec e, e2;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e2, g, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    /* A host node in a body: not an allowed node type. */
    CHECK_CU(add_cond(&nd, other, NULL, 0, h2, CU_GRAPH_COND_TYPE_IF, 1, &body), CUDA_SUCCESS);
    CUDA_HOST_NODE_PARAMS hp = { .fn = (CUhostFn)free, .userData = NULL };
    CUgraphNode hn;
    CHECK_CU(cuGraphAddHostNode(&hn, body, NULL, 0, &hp), CUDA_SUCCESS);
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = { 0 };
    CHECK_CU(cuGraphInstantiateWithParams(&e, other, &ip), CUDA_ERROR_INVALID_VALUE);
    CHECK(ip.hErrNode_out == hn);
    CHECK_EQ(ip.result_out, CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED);
    /* The body belongs to its node: destroyed with it. */
    CHECK_CU(cuGraphDestroyNode(nd), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(other), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(c), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    SETUP_CU(cuModuleGetFunction(&k_dec, g_mod, "cond_dec_u32"));
    SETUP_CU(cuModuleGetFunction(&k_set, g_mod, "cond_set"));
    RUN(while_counts_and_default_per_launch);
    RUN(while_without_assign_default);
    RUN(if_taken_and_not);
    RUN(exec_update_rules);
    RUN(restrictions);
    RUN(if_else_one_body);
    RUN(switch_body_of_value);
    RUN(multi_update_rules);
    RUN(multi_restrictions);
    return check_done();
}
