/*
 * tests/e2e/adv_captures.c: captures the library's bookkeeping must follow
 * as the driver does (found by a review of the recorder, 2026-12-06).
 *   end_unmatched    a capture begun on A and joined by B, ended on B
 *                    (CUDA_ERROR_STREAM_CAPTURE_UNMATCHED: the capture goes
 *                    on, invalidated): allocations while A still captures get
 *                    the driver's refusals (the library counted the capture
 *                    as ended and placed them);
 *   end_not_capturing the same, ended on a stream that never captured;
 *   end_unmatched_other the UNMATCHED end while another capture (X) goes on:
 *                    X's graph memory nodes must be captured (the library,
 *                    counting no capture, placed X's cuMemAllocAsync);
 *   node_reuse       explicit nodes destroyed, then a captured graph whose
 *                    nodes get their handle values: a setter on one of them
 *                    must reach the next update (the stale handle entry made
 *                    the library skip it);
 *   abandoned_stream, abandoned_ctx
 *                    a capture abandoned by destroying its stream or its
 *                    context: the library must place memory again after
 *                    (the report check; it counted the capture forever).
 * Usage: adv_captures CASE
 */
#include "adv_common.h"

static int end_wrong(int mode)
{
    CUcontext ctx; CUmodule mod;
    adv_open(&ctx, &mod);
    CUfunction add = adv_fn(mod, "add_u32");
    CUstream a, b, c;
    MUST(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    CUevent e1, e2;
    MUST(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr buf;
    MUST(cuMemAlloc(&buf, 4096));
    MUST(cuMemsetD32(buf, 0, 1024));
    uint32_t v = 1; uint64_t n = 16;
    void *args[] = { &buf, &v, &n };
    R(cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, a, args, NULL));
    R(cuEventRecord(e1, a));
    R(cuStreamWaitEvent(b, e1, 0));
    CUgraph g0 = NULL;
    if (mode == 0) R(cuStreamEndCapture(b, &g0));
    else R(cuStreamEndCapture(c, &g0));
    CUstreamCaptureStatus st;
    R(cuStreamIsCapturing(a, &st)); printf("status a %d\n", st);
    CUdeviceptr p = 0;
    R(cuMemAllocAsync(&p, 256, a));
    CUdeviceptr q = 0;
    R(cuMemAlloc(&q, 256));
    R(cuStreamIsCapturing(a, &st)); printf("status a %d\n", st);
    R(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, b, args, NULL));
    R(cuEventRecord(e2, b));
    R(cuStreamWaitEvent(a, e2, 0));
    CUgraph g = NULL;
    R(cuStreamEndCapture(a, &g));
    printf("graph %s\n", g ? "yes" : "no");
    R(cuStreamIsCapturing(a, &st)); printf("status a %d\n", st);
    R(cuStreamIsCapturing(b, &st)); printf("status b %d\n", st);
    adv_check("done", 1, "");
    return adv_finish();
}

static int end_unmatched_other(int mode)
{
    (void)mode;
    CUcontext ctx; CUmodule mod;
    adv_open(&ctx, &mod);
    CUfunction add = adv_fn(mod, "add_u32");
    CUstream a, b, x;
    MUST(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&x, CU_STREAM_NON_BLOCKING));
    CUevent e1;
    MUST(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr buf;
    MUST(cuMemAlloc(&buf, 4096));
    MUST(cuMemsetD32(buf, 0, 1024));
    uint32_t v = 1; uint64_t n = 16;
    void *args[] = { &buf, &v, &n };
    R(cuStreamBeginCapture(x, CU_STREAM_CAPTURE_MODE_RELAXED));
    R(cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    R(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, a, args, NULL));
    R(cuEventRecord(e1, a));
    R(cuStreamWaitEvent(b, e1, 0));
    CUgraph ga = NULL, gx = NULL;
    R(cuStreamEndCapture(b, &ga));          /* mistake: not the origin */
    R(cuStreamEndCapture(a, &ga));          /* invalidated: ends it */
    CUdeviceptr p = 0;
    R(cuMemAllocAsync(&p, 256, x));        /* X captures: an allocation node */
    void *args2[] = { &p, &v, &n };
    R(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, x, args2, NULL));
    R(cuMemFreeAsync(p, x));
    R(cuStreamEndCapture(x, &gx));
    size_t nn = 0;
    if (gx) R(cuGraphGetNodes(gx, NULL, &nn));
    printf("X graph nodes: %zu\n", nn);
    adv_check("x_nodes", nn == 3, "nodes %zu", nn);
    return adv_finish();
}

#define NX 64
#define NK 16
static int node_reuse(int mode)
{
    (void)mode;
    CUcontext ctx; CUmodule mod;
    adv_open(&ctx, &mod);
    CUfunction add = adv_fn(mod, "add_u32");
    CUstream s;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr buf;
    MUST(cuMemAlloc(&buf, 4096));
    MUST(cuMemsetD32(buf, 0, 1024));
    uint32_t v = 1, w = 100; uint64_t n = 16;
    CUdeviceptr ptr[NK];
    void *args[NK][3];
    for (int i = 0; i < NK; i++) { ptr[i] = buf + 64 * i; args[i][0] = &ptr[i]; args[i][1] = &v; args[i][2] = &n; }
    CUDA_KERNEL_NODE_PARAMS p = { .func = add, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
        .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1, .kernelParams = args[0] };
    CUgraph g1, g2;
    CUgraphNode x[NX];
    MUST(cuGraphCreate(&g1, 0));
    for (int i = 0; i < NX; i++) MUST(cuGraphAddKernelNode(&x[i], g1, NULL, 0, &p));
    for (int i = 0; i < NX; i++) MUST(cuGraphDestroyNode(x[i]));
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int i = 0; i < NK; i++) MUST(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args[i], NULL));
    MUST(cuStreamEndCapture(s, &g2));
    CUgraphNode k[NK];
    adv_chain_nodes(g2, k, NK);
    int pick = -1;
    for (int i = 0; i < NK && pick < 0; i++)
        for (int j = 0; j < NX; j++) if (k[i] == x[j]) { pick = i; break; }
    fprintf(stderr, "reused handle at captured node %d\n", pick);
    if (pick < 0) pick = 0;
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g2, 0));
    void *a2[3] = { &ptr[pick], &w, &n };
    p.kernelParams = a2;
    MUST(cuGraphKernelNodeSetParams(k[pick], &p));
    CUgraphExecUpdateResultInfo info;
    R(cuGraphExecUpdate(e, g2, &info));
    MUST(cuGraphLaunch(e, s));
    MUST(cuStreamSynchronize(s));
    uint32_t h[1024];
    MUST(cuMemcpyDtoH(h, buf, sizeof h));
    int ok = 1;
    for (int i = 0; i < NK; i++) ok &= h[16 * i] == (i == pick ? 100u : 1u);
    adv_check("values", ok, "node %d: %u", pick, h[16 * pick]);
    return adv_finish();
}

static int abandoned(int mode)
{
    CUcontext ctx; CUmodule mod;
    adv_open(&ctx, &mod);
    CUdevice dev; MUST(cuDeviceGet(&dev, 0));
    CUcontext c2 = NULL;
    if (mode == 1) { MUST(cuCtxCreate(&c2, NULL, 0, dev)); }
    CUstream s;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    if (mode == 0) R(cuStreamDestroy(s));
    else { R(cuCtxDestroy(c2)); MUST(cuCtxSetCurrent(ctx)); }
    CUdeviceptr p[8];
    for (int i = 0; i < 8; i++) R(cuMemAlloc(&p[i], 1 << 16));
    adv_check("ran", 1, "");
    return adv_finish();
}

int main(int argc, char **argv)
{
    static const struct { const char *name; int (*fn)(int); int mode; } cases[] = {
        { "end_unmatched", end_wrong, 0 },
        { "end_not_capturing", end_wrong, 1 },
        { "end_unmatched_other", end_unmatched_other, 0 },
        { "node_reuse", node_reuse, 0 },
        { "abandoned_stream", abandoned, 0 },
        { "abandoned_ctx", abandoned, 1 },
    };
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].name) == 0) return cases[i].fn(cases[i].mode);
    printf("usage: %s CASE (see the header)\n", argv[0]);
    return 4;
}
