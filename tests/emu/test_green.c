/*
 * test_green.c: green contexts of the emulated driver (docs/emulator.md,
 * "Green contexts"): SM resources and their split, descriptors, a green
 * context's converted context (memory made under it is the primary
 * context's and outlives it), its streams (cuStreamGetCtx answers the
 * converted context, cuStreamGetCtx_v2 the primary one and the green
 * context), cuGreenCtxRecordEvent / cuGreenCtxWaitEvent ordering, and the
 * lifetimes: after cuGreenCtxDestroy its streams answer
 * CUDA_ERROR_CONTEXT_IS_DESTROYED and its converted context is refused; the
 * primary context it retained lives on while the program holds it.
 */
#include "graph_util.h"

/* A green context of `count` SMs on device 0 (the first group of a split). */
static CUgreenCtx make_green(unsigned count, CUdevResource *rem)
{
    CUdevResource dev, grp[2];
    unsigned n = 1;
    CUdevResourceDesc desc = NULL;
    CUgreenCtx g = NULL;
    CHECK_CU(cuDeviceGetDevResource(0, &dev, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
    CHECK_CU(cuDevSmResourceSplitByCount(grp, &n, &dev, rem, 0, count), CUDA_SUCCESS);
    CHECK_EQ(n, 1);
    CHECK_CU(cuDevResourceGenerateDesc(&desc, grp, 1), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
    return g;
}

static void resources_and_split(void)
{
    CUdevResource dev, grp[32], rem, again[2];
    unsigned n = 0;
    int sms = 0;
    CHECK_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetDevResource(0, &dev, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
    CHECK_EQ(dev.type, CU_DEV_RESOURCE_TYPE_SM);
    CHECK_EQ((int)dev.sm.smCount, sms);
    CHECK_EQ(dev.sm.minSmPartitionSize, 8);
    CHECK_CU(cuDeviceGetDevResource(0, &dev, CU_DEV_RESOURCE_TYPE_INVALID), CUDA_ERROR_INVALID_RESOURCE_TYPE);
    CHECK_CU(cuDeviceGetDevResource(99, &dev, CU_DEV_RESOURCE_TYPE_SM), CUDA_ERROR_INVALID_DEVICE);
    CHECK_CU(cuDeviceGetDevResource(0, NULL, CU_DEV_RESOURCE_TYPE_SM), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuDeviceGetDevResource(0, &dev, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
    /* a query: 132 / 40 (rounded up from 36 to a multiple of 8) = 3 groups */
    CHECK_CU(cuDevSmResourceSplitByCount(NULL, &n, &dev, NULL, 0, 36), CUDA_SUCCESS);
    CHECK_EQ(n, (unsigned)sms / 40);
    n = 2;
    CHECK_CU(cuDevSmResourceSplitByCount(grp, &n, &dev, &rem, 0, 36), CUDA_SUCCESS);
    CHECK_EQ(n, 2);
    CHECK_EQ(grp[0].sm.smCount, 40);
    CHECK_EQ(grp[1].sm.smCount, 40);
    CHECK_EQ((int)rem.sm.smCount, sms - 80);
    /* a small count is raised to the minimum; without co-scheduling, to 2 */
    n = 1;
    CHECK_CU(cuDevSmResourceSplitByCount(again, &n, &dev, NULL, 0, 1), CUDA_SUCCESS);
    CHECK_EQ(again[0].sm.smCount, 8);
    CHECK_CU(cuDevSmResourceSplitByCount(again, &n, &dev, NULL, CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, 3),
             CUDA_SUCCESS);
    CHECK_EQ(again[0].sm.smCount, 4);
    /* refusals: more than the input, a group split again, bad flags, no count */
    CHECK_CU(cuDevSmResourceSplitByCount(NULL, &n, &dev, NULL, 0, (unsigned)sms + 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuDevSmResourceSplitByCount(NULL, &n, &grp[0], NULL, 0, 8), CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
    CHECK_CU(cuDevSmResourceSplitByCount(NULL, &n, &dev, NULL, 0x100, 8), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuDevSmResourceSplitByCount(NULL, NULL, &dev, NULL, 0, 8), CUDA_ERROR_INVALID_VALUE);
    /* descriptors: one split's outputs together, not two splits' nor two kinds */
    CUdevResourceDesc d = NULL;
    CUdevResource mix[2] = { grp[0], again[0] };
    CHECK_CU(cuDevResourceGenerateDesc(&d, grp, 2), CUDA_SUCCESS);
    CHECK_CU(cuDevResourceGenerateDesc(&d, mix, 2), CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
    CUdevResource bad = grp[0];
    bad.type = CU_DEV_RESOURCE_TYPE_INVALID;
    CHECK_CU(cuDevResourceGenerateDesc(&d, &bad, 1), CUDA_ERROR_INVALID_RESOURCE_TYPE);
    CHECK_CU(cuDevResourceGenerateDesc(&d, grp, 0), CUDA_ERROR_INVALID_VALUE);
    /* a green context of both groups has their SMs */
    CUgreenCtx g = NULL;
    CHECK_CU(cuDevResourceGenerateDesc(&d, grp, 2), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxCreate(&g, d, 0, 0), CUDA_ERROR_INVALID_VALUE);   /* DEFAULT_STREAM is required */
    CHECK_CU(cuGreenCtxCreate(&g, d, 0, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
    CUdevResource got;
    CHECK_CU(cuGreenCtxGetDevResource(g, &got, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
    CHECK_EQ(got.sm.smCount, 80);
    CUcontext cc = NULL;
    CHECK_CU(cuCtxFromGreenCtx(&cc, g), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetDevResource(cc, &got, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
    CHECK_EQ(got.sm.smCount, 80);
    CHECK_CU(cuCtxGetDevResource(g_ctx, &got, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
    CHECK_EQ((int)got.sm.smCount, sms);
    CHECK_CU(cuGreenCtxDestroy(g), CUDA_SUCCESS);
}

/* The converted context: current, memory and kernels under it, its streams' contexts. */
static void converted_context_and_streams(void)
{
    CUgreenCtx g = make_green(16, NULL);
    CUcontext cc = NULL, got = NULL;
    CUgreenCtx gg = NULL;
    CHECK_CU(cuCtxFromGreenCtx(&cc, g), CUDA_SUCCESS);
    CHECK(cc != NULL && cc != g_ctx);
    CHECK_CU(cuCtxDestroy(cc), CUDA_ERROR_INVALID_CONTEXT);     /* it is a primary context */
    CHECK_CU(cuCtxPushCurrent(cc), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetCurrent(&got), CUDA_SUCCESS);
    CHECK(got == cc);
    CUdevice dev = -1;
    CHECK_CU(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    CHECK_EQ(dev, 0);
    unsigned long long id = 0, id2 = 0;
    CHECK_CU(cuGreenCtxGetId(NULL, &id), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxGetId(g, &id2), CUDA_SUCCESS);
    CHECK(id == id2 && id != 0);
    /* memory made under it, a kernel of the primary context's module on its stream */
    CUdeviceptr p = gu_alloc();
    CUstream s = NULL, s2 = NULL;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);   /* with cc current */
    CHECK_CU(cuGreenCtxStreamCreate(&s2, g, 0, 0), CUDA_ERROR_INVALID_VALUE);  /* NON_BLOCKING required */
    CHECK_CU(cuGreenCtxStreamCreate(&s2, g, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
    gu_args a;
    gu_kp_fill(&a, p, 7);
    CHECK_CU(gu_launch(k_fill, s2, &a), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s2), CUDA_SUCCESS);
    CHECK(gu_all(p, 7));
    /* the default stream under the green context, and the per-thread stream refused */
    gu_kp_fill(&a, p, 8);
    CHECK_CU(gu_launch(k_fill, NULL, &a), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(p, 8));
    CHECK_CU(cuStreamGetCtx(CU_STREAM_PER_THREAD, &got), CUDA_ERROR_INVALID_HANDLE);
    /* contexts of the streams */
    CHECK_CU(cuStreamGetCtx(s, &got), CUDA_SUCCESS);
    CHECK(got == cc);
    CHECK_CU(cuStreamGetCtx(s2, &got), CUDA_SUCCESS);
    CHECK(got == cc);
    CHECK_CU(cuStreamGetCtx(NULL, &got), CUDA_SUCCESS);
    CHECK(got == cc);
    CHECK_CU(cuStreamGetCtx_v2(s2, &got, &gg), CUDA_SUCCESS);
    CHECK(got == g_ctx && gg == g);
    CHECK_CU(cuStreamGetGreenCtx(s, &gg), CUDA_SUCCESS);
    CHECK(gg == g);
    CHECK_CU(cuCtxPopCurrent(&got), CUDA_SUCCESS);
    CHECK(got == cc);
    CUstream plain = NULL;
    CHECK_CU(cuStreamCreate(&plain, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamGetCtx_v2(plain, &got, &gg), CUDA_SUCCESS);
    CHECK(got == g_ctx && gg == NULL);
    /* an event of the primary context recorded on a green stream, waited on by a plain one */
    CUevent ev = NULL;
    CHECK_CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    gu_kp_slow(&a, p, 9, 20000);
    CHECK_CU(gu_launch(k_slow, s, &a), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(ev, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitEvent(plain, ev, 0), CUDA_SUCCESS);
    CUdeviceptr q = gu_alloc();
    CHECK_CU(cuMemcpyDtoDAsync(q, p, N_ELEMS * 4, plain), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(plain), CUDA_SUCCESS);
    CHECK(gu_all(q, 9));
    /* destroy: its streams are detached, its converted context refused; memory and the
     * primary context stay */
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxDestroy(g), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CHECK_CU(cuStreamGetCtx(s, &got), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CHECK_CU(cuStreamDestroy(s), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CHECK_CU(cuCtxSetCurrent(cc), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuCtxFromGreenCtx(&got, g), CUDA_ERROR_INVALID_CONTEXT);
    CHECK(gu_all(p, 9));
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(q), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(plain), CUDA_SUCCESS);
}

/* A thread whose current context is a destroyed green context's converted context. */
static void current_after_destroy(void)
{
    CUgreenCtx g = make_green(8, NULL);
    CUcontext cc = NULL, got = NULL;
    CHECK_CU(cuCtxFromGreenCtx(&cc, g), CUDA_SUCCESS);
    CHECK_CU(cuCtxPushCurrent(cc), CUDA_SUCCESS);
    CHECK_CU(cuCtxPushCurrent(g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxDestroy(g), CUDA_SUCCESS);   /* deeper in the stack: forgotten */
    CHECK_CU(cuCtxPopCurrent(&got), CUDA_SUCCESS);
    CHECK(got == g_ctx);
    CHECK_CU(cuCtxGetCurrent(&got), CUDA_SUCCESS);
    CHECK(got == NULL);
    CHECK_CU(cuCtxPopCurrent(&got), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
}

/* cuGreenCtxRecordEvent waits for every stream of the green context; cuGreenCtxWaitEvent
 * holds them for an event. */
static void record_and_wait(void)
{
    CUgreenCtx g = make_green(8, NULL);
    CUstream a = NULL, b = NULL, plain = NULL;
    CHECK_CU(cuGreenCtxStreamCreate(&a, g, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxStreamCreate(&b, g, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&plain, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr x = gu_alloc(), y = gu_alloc(), z = gu_alloc();
    CUevent ev = NULL;
    CHECK_CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    gu_args a1, a2;
    gu_kp_slow(&a1, x, 3, 20000);
    gu_kp_slow(&a2, y, 4, 30000);
    CHECK_CU(gu_launch(k_slow, a, &a1), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_slow, b, &a2), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxRecordEvent(g, ev), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitEvent(plain, ev, 0), CUDA_SUCCESS);
    gu_args a3;
    gu_kp_add(&a3, z, x, y);
    CHECK_CU(gu_launch(k_add, plain, &a3), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(plain), CUDA_SUCCESS);
    CHECK(gu_all(z, 7));
    /* the green context waits for work of the plain stream */
    gu_kp_slow(&a1, x, 10, 30000);
    CHECK_CU(gu_launch(k_slow, plain, &a1), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(ev, plain), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxWaitEvent(g, ev), CUDA_SUCCESS);
    gu_kp_add(&a3, z, x, x);
    CHECK_CU(gu_launch(k_add, b, &a3), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(b), CUDA_SUCCESS);
    CHECK(gu_all(z, 20));
    /* an event of another context is refused; a capturing stream of g is invalidated */
    CUcontext other = NULL;
    CUevent foreign2 = NULL;
    CHECK_CU(cuCtxCreate(&other, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&foreign2, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxRecordEvent(g, foreign2), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuCtxDestroy(other), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxRecordEvent(g, ev), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUgraph graph = NULL;
    CHECK_CU(cuStreamEndCapture(a, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuStreamDestroy(a), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(b), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(x), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(y), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(z), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(plain), CUDA_SUCCESS);
}

/* The green context holds the primary context: released by the program, it stays active
 * until the green context goes. */
static void primary_retained(void)
{
    CUcontext p = NULL;
    unsigned flags;
    int active = 0;
    CHECK_CU(cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
    CUgreenCtx g = make_green(8, NULL);
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    CHECK_EQ(active, 1);
    CHECK_CU(cuGreenCtxDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    CHECK_EQ(active, 1);   /* emu_test_open's retain */
}

/* A capture begun on a green stream ends with the green context: the calling thread, whose
 * thread-local capture forbade allocations, may allocate again. */
static void capture_ends_with_green(void)
{
    CUgreenCtx g = make_green(8, NULL);
    CUstream s = NULL;
    CHECK_CU(cuGreenCtxStreamCreate(&s, g, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    CUdeviceptr p = 0;
    CHECK_CU(cuMemAlloc(&p, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);   /* invalidates it */
    CHECK_CU(cuGreenCtxDestroy(g), CUDA_SUCCESS);
    CUgraph graph = NULL;
    CHECK_CU(cuStreamEndCapture(s, &graph), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CHECK_CU(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    g = make_green(8, NULL);
    CHECK_CU(cuGreenCtxStreamCreate(&s, g, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* cuDevicePrimaryCtxReset while a green context lives and used its default stream: the
 * reset ends that stream; the green context's next use of its default stream makes another. */
static void reset_under_green(void)
{
    CUgreenCtx g = make_green(8, NULL);
    CUcontext cc = NULL;
    CHECK_CU(cuCtxFromGreenCtx(&cc, g), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(cc), CUDA_SUCCESS);
    CUdeviceptr p = gu_alloc();
    gu_args a;
    gu_kp_fill(&a, p, 5);
    CHECK_CU(gu_launch(k_fill, NULL, &a), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(p, 5));
    CHECK_CU(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);     /* p and the module go */
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);      /* a new default stream */
    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxDestroy(g), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    RUN(resources_and_split);
    RUN(converted_context_and_streams);
    RUN(current_after_destroy);
    RUN(record_and_wait);
    RUN(primary_retained);
    RUN(capture_ends_with_green);
    RUN(reset_under_green);       /* last: the reset ends the set-up's module */
    return check_done();
}
