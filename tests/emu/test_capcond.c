/*
 * test_capcond.c: conditional nodes built during a stream capture in the
 * emulated driver (docs/emulator.md, "Conditional nodes built during a
 * capture"), as the CUDA samples' capturedWhileGraph builds them: the
 * capture's graph and last nodes from cuStreamGetCaptureInfo_v3, a handle
 * created for that graph, the node added there with cuGraphAddNode_v2 and
 * made the stream's dependency with cuStreamUpdateCaptureDependencies_v2,
 * the body filled by cuStreamBeginCaptureToGraph on another stream, the
 * outer capture going on after it.
 *
 * Cases: the whole sequence launched and read back (a WHILE counting, an IF
 * on the handle's default; the capture's view of its dependencies and their
 * edge data; cuStreamEndCapture with no graph argument for a capture into a
 * body); a body's capture refusing graph memory nodes (and invalidated); a
 * graph holding a body still captured into refused by instantiation, update
 * and destroy; a body freed under its capture (the outer capture ended
 * invalidated first: a violation, the body's capture invalidated);
 * cuGraphExecUpdate from a graph whose body was captured again with another
 * kernel argument (taken), another topology (refused); a body captured on a
 * stream of another context with that context's kernel (refused at
 * instantiation: one context for a conditional node and its kernels).
 */
#include "graph_util.h"

static CUfunction k_dec;

static size_t graph_nodes(CUgraph g)
{
    size_t n = 0;
    CHECK_CU(cuGraphGetNodes(g, NULL, &n), CUDA_SUCCESS);
    return n;
}

/* A conditional node of type t on h added to the graph s captures into,
 * after s's dependencies (with their edge data), then s's only dependency. */
static CUgraphNode cap_cond(CUstream s, CUgraphConditionalHandle h, CUgraphConditionalNodeType t, unsigned size,
                            CUgraph *body)
{
    CUstreamCaptureStatus st;
    CUgraph g = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *ed = NULL;
    size_t n = 0;
    CUgraphNode nd = NULL;
    CHECK_CU(cuStreamGetCaptureInfo_v3(s, &st, NULL, &g, &deps, &ed, &n), CUDA_SUCCESS);
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = h;
    np.conditional.type = t;
    np.conditional.size = size;
    np.conditional.phGraph_out = body;
    np.conditional.ctx = g_ctx;
    CHECK_CU(cuGraphAddNode_v2(&nd, g, deps, ed, n, &np), CUDA_SUCCESS);
    CHECK_CU(cuStreamUpdateCaptureDependencies_v2(s, &nd, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES),
             CUDA_SUCCESS);
    return nd;
}

static CUgraphConditionalHandle cap_handle(CUstream s, unsigned dflt, unsigned flags)
{
    CUstreamCaptureStatus st;
    CUgraph g = NULL;
    CUgraphConditionalHandle h = 0;
    CHECK_CU(cuStreamGetCaptureInfo_v3(s, &st, NULL, &g, NULL, NULL, NULL), CUDA_SUCCESS);
    CHECK_CU(cuGraphConditionalHandleCreate(&h, g, g_ctx, dflt, flags), CUDA_SUCCESS);
    return h;
}

/* A capture on s (global mode) whose graph gets an IF (default taken, per
 * launch) as in cap_cond, its body's capture begun on sb; the body in
 * body[0]. */
static void begin_if_body(CUstream s, CUstream sb, CUgraph *body)
{
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CUgraphConditionalHandle h = cap_handle(s, 1, CU_GRAPH_COND_ASSIGN_DEFAULT);
    cap_cond(s, h, CU_GRAPH_COND_TYPE_IF, 1, body);
    CHECK_CU(cuStreamBeginCaptureToGraph(sb, body[0], NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
}

static void launch_dec(CUstream s, CUdeviceptr c, CUgraphConditionalHandle h)
{
    uint64_t n = N_ELEMS;
    void *kp[] = { &c, &h, &n };
    CHECK_CU(cuLaunchKernel(k_dec, 1, 1, 1, 1, 1, 1, 0, s, kp, NULL), CUDA_SUCCESS);
}

static void launch_affine(CUstream s, CUdeviceptr p, uint32_t mul, uint32_t add)
{
    gu_args a;
    gu_kp_affine(&a, p, mul, add);
    CHECK_CU(gu_launch(k_affine, s, &a), CUDA_SUCCESS);
}

/* p = 0, c = loops; WHILE h { p = p + w; c -= 1, h = c }; IF hi (default
 * taken) { p = p * 3 + 1 }; p += 2, captured on s with bodies on sb. The
 * body of the WHILE: *wbody. */
static CUgraph capture_loop(CUstream s, CUstream sb, CUdeviceptr p, CUdeviceptr c, uint32_t loops, uint32_t w,
                            unsigned taken, int extra, CUgraph *wbody)
{
    CUgraph g = NULL, body[1], got = NULL;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(p, 0, N_ELEMS, s), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(c, loops, N_ELEMS, s), CUDA_SUCCESS);
    CUgraphConditionalHandle h = cap_handle(s, 1, CU_GRAPH_COND_ASSIGN_DEFAULT);
    CUgraphNode wn = cap_cond(s, h, CU_GRAPH_COND_TYPE_WHILE, 1, body);
    /* the capture's view: the conditional node alone, default edge data */
    CUstreamCaptureStatus st;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *ed = NULL;
    size_t n = 0;
    CHECK_CU(cuStreamGetCaptureInfo_v3(s, &st, NULL, NULL, &deps, &ed, &n), CUDA_SUCCESS);
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && n == 1 && deps[0] == wn && ed[0].from_port == 0 &&
          ed[0].type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
    /* "Only kernel nodes define non-zero ports": not from a conditional node */
    CUgraphEdgeData pe;
    memset(&pe, 0, sizeof pe);
    pe.from_port = CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER;
    CHECK_CU(cuStreamUpdateCaptureDependencies_v2(s, &wn, &pe, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES),
             CUDA_ERROR_INVALID_VALUE);
    /* the body's capture: another stream, the body graph; no dependency of
     * the outer graph there */
    CHECK_CU(cuStreamBeginCaptureToGraph(sb, body[0], &wn, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamBeginCaptureToGraph(sb, body[0], NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    launch_affine(sb, p, 1, w);
    if (extra) launch_affine(sb, p, 1, 0);
    launch_dec(sb, c, h);
    CHECK_CU(cuStreamEndCapture(sb, &got), CUDA_SUCCESS);
    CHECK(got == body[0]);
    CUgraph ib[1];
    CUgraphConditionalHandle hi = cap_handle(s, taken, CU_GRAPH_COND_ASSIGN_DEFAULT);
    cap_cond(s, hi, CU_GRAPH_COND_TYPE_IF, 1, ib);
    CHECK_CU(cuStreamBeginCaptureToGraph(sb, ib[0], NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    launch_affine(sb, p, 3, 1);
    CHECK_CU(cuStreamEndCapture(sb, NULL), CUDA_SUCCESS);      /* the samples' form */
    launch_affine(s, p, 1, 2);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    if (wbody) *wbody = body[0];
    return g;
}

/* The whole sequence, launched; then cuGraphExecUpdate from graphs captured
 * again: another scalar in the body and another IF default (taken), another
 * body topology (refused). */
static void captured_bodies_run_and_update(void)
{
    CUstream s, sb;
    CUdeviceptr p = gu_alloc(), c = gu_alloc();
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUgraph g = capture_loop(s, sb, p, c, 4, 5, 1, 0, NULL);
    CHECK_CU(cuStreamEndCapture(s, NULL), CUDA_ERROR_ILLEGAL_STATE);   /* not capturing */
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    gu_launch_expect(e, p, (4 * 5) * 3 + 1 + 2);
    CUgraph g2 = capture_loop(s, sb, p, c, 3, 7, 0, 0, NULL);
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate_v2(e, g2, &info), CUDA_SUCCESS);
    gu_launch_expect(e, p, 3 * 7 + 2);
    CUgraph g3 = capture_loop(s, sb, p, c, 3, 7, 0, 1, NULL);
    CHECK_CU(cuGraphExecUpdate_v2(e, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    gu_launch_expect(e, p, 3 * 7 + 2);          /* unchanged */
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g3), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(sb), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(c), CUDA_SUCCESS);
}

/* A body's capture: no graph memory node (refused, that capture
 * invalidated, the outer one not); a graph holding a body still captured
 * into is neither instantiated, updated from, nor destroyed. */
static void body_capture_rules(void)
{
    CUstream s, sb;
    CUdeviceptr p = gu_alloc();
    CUgraph g = NULL, body[1], got = NULL;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    begin_if_body(s, sb, body);
    CUdeviceptr m = 0;
    CHECK_CU(cuMemAllocAsync(&m, 4096, sb), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUstreamCaptureStatus st;
    CHECK_CU(cuStreamIsCapturing(sb, &st), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CHECK_CU(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK_CU(cuStreamEndCapture(sb, &got), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_EQ(graph_nodes(body[0]), 0);
    /* the body captured into again, left open while the outer capture ends */
    CHECK_CU(cuStreamBeginCaptureToGraph(sb, body[0], NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    launch_affine(sb, p, 1, 9);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CUgraphExec e = NULL;
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = { 0 };
    CHECK_CU(cuGraphInstantiateWithParams(&e, g, &ip), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(ip.result_out, CUDA_GRAPH_INSTANTIATE_ERROR);
    CHECK_CU(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
    CUgraphNode nodes[1];
    size_t nn = 1;
    CHECK_CU(cuGraphGetNodes(g, nodes, &nn), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroyNode(nodes[0]), CUDA_ERROR_INVALID_VALUE);   /* the IF whose body it is */
    CHECK_CU(cuStreamEndCapture(sb, &got), CUDA_SUCCESS);
    CHECK(got == body[0]);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(p, 1, N_ELEMS), CUDA_SUCCESS);
    gu_launch_expect(e, p, 10);
    /* an update from a graph whose body is captured into: refused */
    CUgraph g2 = NULL, b2[1];
    begin_if_body(s, sb, b2);
    launch_affine(sb, p, 1, 9);
    CHECK_CU(cuStreamEndCapture(s, &g2), CUDA_SUCCESS);
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate_v2(e, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR);
    CHECK_CU(cuStreamEndCapture(sb, NULL), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(e, g2, &info), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    /* a capture of its own graph still needs the argument */
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(sb), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* The outer capture invalidated and ended while a body's capture goes on:
 * the driver frees the outer graph and its bodies; the body's capture can
 * add nothing more (a violation; it ends invalidated). */
static void body_freed_under_capture(void)
{
    CUstream s, sb;
    CUdeviceptr p = gu_alloc();
    CUgraph g = NULL, body[1], got = NULL;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CUgraphConditionalHandle h = cap_handle(s, 1, CU_GRAPH_COND_ASSIGN_DEFAULT);
    cap_cond(s, h, CU_GRAPH_COND_TYPE_IF, 1, body);
    CHECK_CU(cuStreamBeginCaptureToGraph(sb, body[0], NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    launch_affine(sb, p, 1, 9);
    CUevent ev;
    CHECK_CU(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(ev, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitEvent(s, ev, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);  /* outer invalidated */
    emu_test_stderr_begin();
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_EQ(emu_test_violations(), 1);
    CUstreamCaptureStatus st;
    CHECK_CU(cuStreamIsCapturing(sb, &st), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    gu_args a;
    gu_kp_affine(&a, p, 1, 1);
    CHECK_CU(gu_launch(k_affine, sb, &a), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuStreamEndCapture(sb, &got), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuStreamIsCapturing(sb, &st), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(sb), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* "All kernels, including kernels in nested conditionals or child graphs at
 * any level, must belong to the same CUDA context": a body captured on a
 * stream of another context, with that context's kernel, is refused at
 * instantiation (the kernel named); captured again in the node's context,
 * it is instantiated. */
static void body_of_another_context(void)
{
    CUcontext c2;
    CUmodule m2;
    CUfunction f2;
    CUstream s, s2;
    char path[4096];
    CHECK(emu_test_module_path("mod_graph.so", path, sizeof path) == 0);
    CHECK_CU(cuCtxCreate(&c2, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuModuleLoad(&m2, path), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&f2, m2, "affine_u32"), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr p = gu_alloc();
    CUgraph g = NULL, body[1], got = NULL;
    begin_if_body(s, s2, body);
    gu_args a;
    gu_kp_affine(&a, p, 1, 1);
    CHECK_CU(gu_launch(f2, s2, &a), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s2, &got), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CUgraphNode bn[1];
    size_t nb = 1;
    CHECK_CU(cuGraphGetNodes(body[0], bn, &nb), CUDA_SUCCESS);
    CUgraphExec e = NULL;
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = { 0 };
    CHECK_CU(cuGraphInstantiateWithParams(&e, g, &ip), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(ip.result_out, CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED);
    CHECK(ip.hErrNode_out == bn[0]);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    /* the same with the node's context's kernel on its stream */
    begin_if_body(s, s2, body);
    CHECK_CU(gu_launch(k_affine, s2, &a), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s2, &got), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(p, 4, N_ELEMS), CUDA_SUCCESS);
    gu_launch_expect(e, p, 5);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuCtxDestroy(c2), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    SETUP_CU(cuModuleGetFunction(&k_dec, g_mod, "cond_dec_u32"));
    RUN(captured_bodies_run_and_update);
    RUN(body_capture_rules);
    RUN(body_freed_under_capture);
    RUN(body_of_another_context);
    return check_done();
}
