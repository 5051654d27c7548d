/*
 * test_capture.c: stream capture on the emulated driver: captured work gives
 * the same results as eager work, captured kernel parameters read back,
 * capture info, cross-stream fork/join, unjoined and invalidated captures,
 * the capture interaction modes (GLOBAL, THREAD_LOCAL, RELAXED), the legacy
 * entry points, and the calls capture refuses.
 */
#include "graph_util.h"

#include <pthread.h>

/* The legacy ELF names, which cuda.h maps to newer ones. */
#undef cuStreamBeginCapture
CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream);
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out, CUgraph *graph_out,
                                           const CUgraphNode **dependencies_out, size_t *numDependencies_out);

static size_t node_count(CUgraph g)
{
    size_t n = 0;
    CHECK_CU(cuGraphGetNodes(g, NULL, &n), CUDA_SUCCESS);
    return n;
}

static CUresult launch_graph(CUgraph g, CUstream s)
{
    CUgraphExec e;
    CUresult r = cuGraphInstantiate(&e, g, 0);
    if (r != CUDA_SUCCESS) return r;
    r = cuGraphLaunch(e, s);
    if (r == CUDA_SUCCESS) r = cuStreamSynchronize(s);
    cuGraphExecDestroy(e);
    return r;
}

TEST(capture_matches_eager)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc(), c = gu_alloc();
    CUdeviceptr ea = gu_alloc(), eb = gu_alloc(), ec = gu_alloc();
    CHECK_CU(gu_eager_sequence(s, ea, eb, ec), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(ec, GU_SEQUENCE_C));

    CHECK_CU(cuMemsetD32(c, 0, N_ELEMS), CUDA_SUCCESS);
    CUgraph g = NULL;
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(gu_eager_sequence(s, a, b, c), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK(g != NULL);
    /* Recorded, not run. */
    CHECK(gu_all(c, 0));
    CHECK_EQ(node_count(g), 4);
    CUgraphNode nodes[4];
    size_t n = 4;
    CHECK_CU(cuGraphGetNodes(g, nodes, &n), CUDA_SUCCESS);
    CUgraphNodeType want[4] = { CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_KERNEL,
                                CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_KERNEL };
    for (int i = 0; i < 4; i++) {
        CUgraphNodeType t;
        CHECK_CU(cuGraphNodeGetType(nodes[i], &t), CUDA_SUCCESS);
        CHECK_EQ(t, want[i]);
    }
    size_t ne = 0;
    CHECK_CU(cuGraphGetEdges(g, NULL, NULL, NULL, &ne), CUDA_SUCCESS);
    CHECK_EQ(ne, 3);   /* a chain */

    CHECK_CU(launch_graph(g, s), CUDA_SUCCESS);
    uint32_t got[N_ELEMS], ref[N_ELEMS];
    gu_read(c, got);
    gu_read(ec, ref);
    CHECK(memcmp(got, ref, sizeof got) == 0);
    CHECK(gu_all(a, GU_SEQUENCE_A));
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(captured_kernel_params_read_back)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc();
    gu_args x;
    gu_kp_affine(&x, a, 7, 11);
    CUgraph g;
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuLaunchKernel(k_affine, 2, 3, 4, 5, 6, 7, 0, s, x.kp, NULL), CUDA_SUCCESS);
    /* The launch copied its arguments: changing them now changes nothing. */
    x.u0 = 999;
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CUgraphNode nd;
    size_t n = 1;
    CHECK_CU(cuGraphGetNodes(g, &nd, &n), CUDA_SUCCESS);
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0xab, sizeof p);
    CHECK_CU(cuGraphKernelNodeGetParams(nd, &p), CUDA_SUCCESS);
    CHECK(p.func == k_affine);
    CHECK_EQ(p.gridDimX, 2); CHECK_EQ(p.gridDimY, 3); CHECK_EQ(p.gridDimZ, 4);
    CHECK_EQ(p.blockDimX, 5); CHECK_EQ(p.blockDimY, 6); CHECK_EQ(p.blockDimZ, 7);
    CHECK(p.extra == NULL);
    CHECK(p.kernelParams != NULL && p.kernelParams != x.kp);
    if (p.kernelParams) {
        CHECK_EQ(*(CUdeviceptr *)p.kernelParams[0], a);
        CHECK_EQ(*(uint32_t *)p.kernelParams[1], 7);
        CHECK_EQ(*(uint32_t *)p.kernelParams[2], 11);
        CHECK_EQ(*(uint64_t *)p.kernelParams[3], N_ELEMS);
    }
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(capture_info_v3)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc();
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    CHECK_CU(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CHECK_CU(cuStreamGetCaptureInfo(s, NULL, NULL, NULL, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);

    uint64_t ids[2];
    for (int round = 0; round < 2; round++) {
        CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
        cuuint64_t id = 0;
        CUgraph cg = NULL;
        const CUgraphNode *deps = NULL;
        const CUgraphEdgeData *ed = NULL;
        size_t nd = 99;
        CHECK_CU(cuStreamGetCaptureInfo(s, &st, &id, &cg, &deps, &ed, &nd), CUDA_SUCCESS);
        CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
        CHECK(id != 0);
        CHECK(cg != NULL);
        CHECK_EQ(nd, 0);
        CHECK_CU(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
        CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);

        CHECK_CU(cuMemsetD32Async(a, 1, N_ELEMS, s), CUDA_SUCCESS);
        CHECK_CU(cuStreamGetCaptureInfo(s, &st, &id, &cg, &deps, &ed, &nd), CUDA_SUCCESS);
        CHECK_EQ(nd, 1);
        CUgraphNode last = nd == 1 ? deps[0] : NULL;
        CHECK(ed != NULL && ed[0].type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
        CUgraphNodeType t;
        CHECK_CU(cuGraphNodeGetType(last, &t), CUDA_SUCCESS);
        CHECK_EQ(t, CU_GRAPH_NODE_TYPE_MEMSET);

        CUgraph g = NULL;
        CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
        CHECK(g == cg);       /* the graph reported during capture is the result */
        ids[round] = id;
        CHECK_CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, NULL, NULL, NULL), CUDA_SUCCESS);
        CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
        CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    }
    CHECK(ids[0] != ids[1]);
    /* Ending a capture that was never begun. */
    CUgraph g = NULL;
    CHECK(cuStreamEndCapture(s, &g) != CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* s1: A; fork to s2: B; join back to s1: C. */
TEST(fork_join_across_streams)
{
    CUstream s1, s2;
    CUevent e1, e2;
    CHECK_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc(), c = gu_alloc();
    gu_args ka, kb, kc;
    gu_kp_fill(&ka, a, 4);
    gu_kp_fill(&kb, b, 6);
    gu_kp_add(&kc, c, a, b);

    CUgraph g = NULL;
    CHECK_CU(cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_fill, s1, &ka), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(e1, s1), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitEvent(s2, e1, 0), CUDA_SUCCESS);
    CUstreamCaptureStatus st;
    cuuint64_t id1 = 0, id2 = 1;
    CHECK_CU(cuStreamGetCaptureInfo(s1, &st, &id1, NULL, NULL, NULL, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamGetCaptureInfo(s2, &st, &id2, NULL, NULL, NULL, NULL), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);   /* s2 joined the capture */
    CHECK_EQ(id1, id2);
    CHECK_CU(gu_launch(k_fill, s2, &kb), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(e2, s2), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitEvent(s1, e2, 0), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_add, s1, &kc), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s1, &g), CUDA_SUCCESS);
    CHECK_CU(cuStreamIsCapturing(s2, &st), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);

    CHECK_EQ(node_count(g), 3);
    CUgraphNode nodes[3];
    size_t n = 3;
    CHECK_CU(cuGraphGetNodes(g, nodes, &n), CUDA_SUCCESS);
    /* A -> B, A -> C, B -> C */
    CUgraphNode deps[3];
    size_t nd = 3;
    CHECK_CU(cuGraphNodeGetDependencies(nodes[1], deps, NULL, &nd), CUDA_SUCCESS);
    CHECK_EQ(nd, 1);
    CHECK(deps[0] == nodes[0]);
    nd = 3;
    CHECK_CU(cuGraphNodeGetDependencies(nodes[2], deps, NULL, &nd), CUDA_SUCCESS);
    CHECK_EQ(nd, 2);
    CHECK((deps[0] == nodes[0] && deps[1] == nodes[1]) || (deps[0] == nodes[1] && deps[1] == nodes[0]));
    size_t nroots = 0;
    CHECK_CU(cuGraphGetRootNodes(g, NULL, &nroots), CUDA_SUCCESS);
    CHECK_EQ(nroots, 1);

    CHECK_CU(launch_graph(g, s1), CUDA_SUCCESS);
    CHECK(gu_all(c, 10));
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(e1), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(e2), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s1), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
}

TEST(unjoined_fork_fails)
{
    CUstream s1, s2;
    CUevent e1;
    CHECK_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc();
    gu_args ka, kb;
    gu_kp_fill(&ka, a, 1);
    gu_kp_fill(&kb, b, 2);
    CHECK_CU(cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_fill, s1, &ka), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(e1, s1), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitEvent(s2, e1, 0), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_fill, s2, &kb), CUDA_SUCCESS);   /* never joined back */
    CUgraph g = (CUgraph)(uintptr_t)1;
    CHECK_CU(cuStreamEndCapture(s1, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    CHECK(g == NULL);
    CUstreamCaptureStatus st;
    CHECK_CU(cuStreamIsCapturing(s1, &st), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CHECK_CU(cuStreamIsCapturing(s2, &st), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
    /* Both streams work eagerly again. */
    CHECK_CU(gu_launch(k_fill, s2, &kb), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s2), CUDA_SUCCESS);
    CHECK(gu_all(b, 2));
    CHECK_CU(cuEventDestroy(e1), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s1), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
}

/* ------------------------------------------------------- modes and threads */

typedef struct thread_job {
    int set_mode;              /* switch this thread to `mode` first */
    CUstreamCaptureMode mode;
    int end_capture;           /* call cuStreamEndCapture(s) instead of allocating */
    CUstream s;
    CUresult alloc_result, end_result, exchange_result;
    CUstreamCaptureMode previous_mode;
    CUgraph graph;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    cuCtxSetCurrent(g_ctx);
    if (j->set_mode) {
        CUstreamCaptureMode m = j->mode;
        j->exchange_result = cuThreadExchangeStreamCaptureMode(&m);
        j->previous_mode = m;
    }
    if (j->end_capture) {
        j->end_result = cuStreamEndCapture(j->s, &j->graph);
        return NULL;
    }
    CUdeviceptr p = 0;
    j->alloc_result = cuMemAlloc(&p, 4096);
    if (j->alloc_result == CUDA_SUCCESS) cuMemFree(p);
    return NULL;
}

static void run_thread(thread_job *j)
{
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, thread_main, j), 0);
    pthread_join(t, NULL);
}

/* Captures one memset on s in `mode`, runs job on another thread meanwhile,
 * and returns what cuStreamEndCapture gives (the graph is destroyed). */
static CUresult capture_around(CUstream s, CUstreamCaptureMode mode, thread_job *j, CUgraph *out)
{
    CUdeviceptr a = gu_alloc();
    CHECK_CU(cuStreamBeginCapture_v2(s, mode), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(a, 1, N_ELEMS, s), CUDA_SUCCESS);
    run_thread(j);
    *out = (CUgraph)(uintptr_t)1;
    return cuStreamEndCapture(s, out);
}

TEST(unsafe_call_from_other_thread_invalidates_global_capture)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    thread_job j = { 0 };
    CUgraph g;
    CHECK_CU(capture_around(s, CU_STREAM_CAPTURE_MODE_GLOBAL, &j, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_EQ(j.alloc_result, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK(g == NULL);
    /* Without a capture the same call succeeds. */
    run_thread(&j);
    CHECK_EQ(j.alloc_result, CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(relaxed_thread_does_not_invalidate)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    thread_job j = { .set_mode = 1, .mode = CU_STREAM_CAPTURE_MODE_RELAXED };
    CUgraph g;
    CHECK_CU(capture_around(s, CU_STREAM_CAPTURE_MODE_GLOBAL, &j, &g), CUDA_SUCCESS);
    CHECK_EQ(j.exchange_result, CUDA_SUCCESS);
    CHECK_EQ(j.previous_mode, CU_STREAM_CAPTURE_MODE_GLOBAL);   /* the default */
    CHECK_EQ(j.alloc_result, CUDA_SUCCESS);
    CHECK(g != NULL && g != (CUgraph)(uintptr_t)1);
    if (g && g != (CUgraph)(uintptr_t)1) {
        CHECK_EQ(node_count(g), 1);
        CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    }
    /* The capturing thread itself: RELAXED lets it allocate too, and the mode
     * swap returns the previous mode. */
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUdeviceptr a = gu_alloc(), p = 0;
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(a, 1, N_ELEMS, s), CUDA_SUCCESS);
    CHECK_CU(cuThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
    CHECK_EQ(m, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CHECK_CU(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
    CHECK_EQ(m, CU_STREAM_CAPTURE_MODE_RELAXED);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK(g != NULL);
    if (g) CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    /* Back in GLOBAL mode, the same call invalidates. */
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&p, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(g == NULL);
    m = (CUstreamCaptureMode)42;
    CHECK_CU(cuThreadExchangeStreamCaptureMode(&m), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuThreadExchangeStreamCaptureMode(NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(thread_local_and_relaxed_captures)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    /* Another thread (GLOBAL mode) ignores a THREAD_LOCAL capture... */
    thread_job j = { 0 };
    CUgraph g;
    CHECK_CU(capture_around(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, &j, &g), CUDA_SUCCESS);
    CHECK_EQ(j.alloc_result, CUDA_SUCCESS);
    if (g) CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    /* A THREAD_LOCAL thread ignores another thread's GLOBAL capture. */
    thread_job tl = { .set_mode = 1, .mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL };
    CHECK_CU(capture_around(s, CU_STREAM_CAPTURE_MODE_GLOBAL, &tl, &g), CUDA_SUCCESS);
    CHECK_EQ(tl.alloc_result, CUDA_SUCCESS);
    if (g) CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    /* ...but the capturing thread may not make unsafe calls. */
    CUdeviceptr p = 0;
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&p, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUstreamCaptureStatus st;
    CHECK_CU(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* A RELAXED capture forbids nothing, even on its own thread. */
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    if (g) CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(end_capture_from_wrong_thread)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    thread_job j = { .end_capture = 1, .s = s };
    run_thread(&j);
    CHECK_EQ(j.end_result, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    CUgraph g = NULL;
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);   /* still capturing, still valid */
    CHECK(g != NULL);
    if (g) CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    /* RELAXED captures may be ended from any thread. */
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    j.graph = NULL;
    run_thread(&j);
    CHECK_EQ(j.end_result, CUDA_SUCCESS);
    CHECK(j.graph != NULL);
    if (j.graph) CHECK_CU(cuGraphDestroy(j.graph), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* ------------------------------------------------------ variants, refusals */

TEST(legacy_begin_capture_v1_is_global)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc(), c = gu_alloc();
    CUgraph g = NULL;
    CHECK_CU(cuStreamBeginCapture(s), CUDA_SUCCESS);
    CHECK_CU(gu_eager_sequence(s, a, b, c), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK_EQ(node_count(g), 4);
    CHECK_CU(launch_graph(g, s), CUDA_SUCCESS);
    CHECK(gu_all(c, GU_SEQUENCE_C));
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    /* GLOBAL: another thread's unsafe call invalidates it. */
    thread_job j = { 0 };
    CHECK_CU(cuStreamBeginCapture(s), CUDA_SUCCESS);
    run_thread(&j);
    CHECK_EQ(j.alloc_result, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(capture_refusals)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    /* The legacy NULL stream cannot capture. */
    CHECK_CU(cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU(cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL),
             CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU(cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
    /* Beginning twice. */
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, NULL), CUDA_ERROR_INVALID_VALUE);
    /* A graph launch cannot be captured here: the capture is invalidated. */
    CUgraph eg;
    CUgraphExec ex;
    CUgraphNode en;
    CHECK_CU(cuGraphCreate(&eg, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddEmptyNode(&en, eg, NULL, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiate(&ex, eg, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(ex, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUstreamCaptureStatus st;
    CHECK_CU(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CUgraph g = (CUgraph)(uintptr_t)1;
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(g == NULL);
    CHECK_CU(cuGraphExecDestroy(ex), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(eg), CUDA_SUCCESS);
    /* Waiting on an event recorded outside any capture crosses the boundary. */
    CUstream other;
    CUevent ev;
    CHECK_CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(ev, other), CUDA_SUCCESS);
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitEvent(s, ev, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(other), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* cuStreamIsCapturing, cuStreamGetCaptureInfo: "if this is called on
 * CU_STREAM_LEGACY (the "null stream") while a blocking stream in the same
 * context is capturing, it will return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
 * ... The blocking stream capture is not invalidated." A non-blocking
 * stream's capture leaves the legacy stream's status NONE. Before, the
 * legacy stream always answered NONE. */
TEST(legacy_stream_capture_status)
{
    CUstream blocking, nonblocking;
    CUstreamCaptureStatus st;
    cuuint64_t id;
    CUgraph g = NULL;
    CHECK_CU(cuStreamCreate(&blocking, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUstreamCaptureMode modes[] = { CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                    CU_STREAM_CAPTURE_MODE_RELAXED };
    for (size_t m = 0; m < 3; m++) {
        CHECK_CU(cuStreamBeginCapture_v2(blocking, modes[m]), CUDA_SUCCESS);
        CHECK_CU(cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
        CHECK_CU(cuStreamIsCapturing(CU_STREAM_LEGACY, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
        CHECK_CU(cuStreamGetCaptureInfo_v2(CU_STREAM_LEGACY, &st, &id, NULL, NULL, NULL),
                 CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
        CHECK_CU(cuStreamGetCaptureInfo_v3(CU_STREAM_LEGACY, &st, &id, NULL, NULL, NULL, NULL),
                 CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
        /* The per-thread default stream is not the legacy stream. */
        CHECK_CU(cuStreamIsCapturing(CU_STREAM_PER_THREAD, &st), CUDA_SUCCESS);
        CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
        CHECK_CU(cuStreamIsCapturing(blocking, &st), CUDA_SUCCESS);
        CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);      /* not invalidated */
        CHECK_CU(cuStreamEndCapture(blocking, &g), CUDA_SUCCESS);
        CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
        CHECK_CU(cuStreamIsCapturing(NULL, &st), CUDA_SUCCESS);
        CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);

        CHECK_CU(cuStreamBeginCapture_v2(nonblocking, modes[m]), CUDA_SUCCESS);
        CHECK_CU(cuStreamIsCapturing(NULL, &st), CUDA_SUCCESS);
        CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
        CHECK_CU(cuStreamEndCapture(nonblocking, &g), CUDA_SUCCESS);
        CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    }
    /* A blocking stream that joined a non-blocking stream's capture counts. */
    CUevent ev;
    CHECK_CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    CHECK_CU(cuStreamBeginCapture_v2(nonblocking, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(ev, nonblocking), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitEvent(blocking, ev, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CHECK_CU(cuEventRecord(ev, blocking), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitEvent(nonblocking, ev, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(nonblocking, &g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamIsCapturing(NULL, &st), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(blocking), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(nonblocking), CUDA_SUCCESS);
}

TEST(per_thread_stream_capture)
{
    CUdeviceptr a = gu_alloc(), b = gu_alloc(), c = gu_alloc();
    CUgraph g = NULL;
    CHECK_CU(cuStreamBeginCapture_v2_ptsz(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(gu_eager_sequence(CU_STREAM_PER_THREAD, a, b, c), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture_ptsz(NULL, &g), CUDA_SUCCESS);
    CHECK_EQ(node_count(g), 4);
    CHECK_CU(launch_graph(g, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    CHECK(gu_all(c, GU_SEQUENCE_C));
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
}

TEST(capture_to_existing_graph)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc();
    CUgraph g, out = NULL;
    CUgraphNode first;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS ms = { .dst = a, .value = 2, .elementSize = 4, .width = N_ELEMS, .height = 1 };
    CHECK_CU(cuGraphAddMemsetNode(&first, g, NULL, 0, &ms, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuStreamBeginCaptureToGraph(s, g, &first, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    gu_args k;
    gu_kp_affine(&k, a, 10, 1);
    CHECK_CU(gu_launch(k_affine, s, &k), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &out), CUDA_SUCCESS);
    CHECK(out == g);
    CHECK_EQ(node_count(g), 2);
    CUgraphNode from[2], to[2];
    size_t ne = 2;
    CHECK_CU(cuGraphGetEdges(g, from, to, NULL, &ne), CUDA_SUCCESS);
    CHECK_EQ(ne, 1);
    CHECK(from[0] == first);
    CHECK(to[1] == NULL);
    CHECK_CU(launch_graph(g, s), CUDA_SUCCESS);
    CHECK(gu_all(a, 21));
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(update_capture_dependencies)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc();
    CHECK_CU(cuStreamUpdateCaptureDependencies(s, NULL, NULL, 0, CU_STREAM_SET_CAPTURE_DEPENDENCIES),
             CUDA_ERROR_ILLEGAL_STATE);   /* not capturing */
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(a, 1, N_ELEMS, s), CUDA_SUCCESS);
    const CUgraphNode *deps;
    size_t n = 0;
    CUstreamCaptureStatus st;
    CHECK_CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 1);
    CUgraphNode first = n ? deps[0] : NULL;
    CHECK_CU(cuMemsetD32Async(b, 2, N_ELEMS, s), CUDA_SUCCESS);
    /* The next node depends on `first` only, not on the second memset. */
    CHECK_CU(cuStreamUpdateCaptureDependencies(s, &first, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES), CUDA_SUCCESS);
    CHECK_CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 1);
    CHECK(n == 1 && deps[0] == first);
    gu_args k;
    gu_kp_affine(&k, a, 2, 0);
    CHECK_CU(gu_launch(k_affine, s, &k), CUDA_SUCCESS);
    CUgraph g = NULL;
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);   /* the dropped node is not "unjoined" */
    CUgraphNode nodes[3];
    size_t nn = 3;
    CHECK_CU(cuGraphGetNodes(g, nodes, &nn), CUDA_SUCCESS);
    CHECK_EQ(nn, 3);
    CUgraphNode d[3];
    size_t nd = 3;
    CHECK_CU(cuGraphNodeGetDependencies(nodes[2], d, NULL, &nd), CUDA_SUCCESS);
    CHECK_EQ(nd, 1);
    CHECK(d[0] == first);
    if (g) CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    RUN(capture_matches_eager);
    RUN(captured_kernel_params_read_back);
    RUN(capture_info_v3);
    RUN(fork_join_across_streams);
    RUN(unjoined_fork_fails);
    RUN(unsafe_call_from_other_thread_invalidates_global_capture);
    RUN(relaxed_thread_does_not_invalidate);
    RUN(thread_local_and_relaxed_captures);
    RUN(end_capture_from_wrong_thread);
    RUN(legacy_begin_capture_v1_is_global);
    RUN(capture_refusals);
    RUN(legacy_stream_capture_status);
    RUN(per_thread_stream_capture);
    RUN(capture_to_existing_graph);
    RUN(update_capture_dependencies);
    return check_done();
}
