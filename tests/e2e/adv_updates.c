/*
 * tests/e2e/adv_updates.c: update decisions against driver rules the
 * comparison alone does not show (found by a review of the decision path,
 * 2026-12-06). Each case prints what the program observes; the output must
 * be the same with and without the library.
 *   ctx_reuse        a CUfunction handle value reused after a context
 *                    teardown (cuDevicePrimaryCtxReset, no cuModuleUnload):
 *                    a function with one more argument must not be described
 *                    with the old function's parameter layout (updates were
 *                    skipped: 5 of 5 checks wrong);
 *   topology_first   an update whose new graph has another topology and a
 *                    memset node whose buffer was freed since: the driver
 *                    reports the topology (TOPOLOGY_CHANGED, no error node),
 *                    not the range (PARAMETERS_CHANGED);
 *   tograph_legacy, tograph_sync, tograph_destroy, tograph_during
 *                    a capture into an existing, instantiated graph
 *                    (cuStreamBeginCaptureToGraph) adds a node and is
 *                    invalidated (a legacy-stream memset, a stream
 *                    synchronization, the stream destroyed), or the update
 *                    comes while it goes on: the graph has 2 nodes and the
 *                    driver refuses the update (the library answered it from
 *                    the graph's old record);
 *   memcpy2d_setter  cuGraphExecMemcpyNodeSetParams and
 *                    cuGraphExecNodeSetParams of a 2D memcpy node with its own
 *                    parameters: refused ("must be 1-dimensional"), where the
 *                    library answered success without the driver;
 *   variants_2dcopy  variants bought for an exec with a 2D memcpy node whose
 *                    destination is then moved by the per-node setter: the
 *                    driver refuses, skip_profiled accepted it and copied.
 * Usage: adv_updates CASE
 */
#include "adv_common.h"

/* Device 0's primary context current, the kernels loaded, a stream. */
static CUstream set_up(CUcontext *ctx, CUmodule *mod)
{
    CUstream s;
    adv_open(ctx, mod);
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return s;
}

static CUgraphExec ctx_reuse_capture(CUstream s, CUfunction f, void **args, CUgraph *g)
{
    CUgraphExec e;
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    MUST(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    MUST(cuStreamEndCapture(s, g));
    MUST(cuGraphInstantiateWithFlags(&e, *g, 0));
    return e;
}

static int ctx_reuse(int mode)
{
    (void)mode;
    CUcontext ctx;
    CUdevice dev;
    CUmodule m1, m2;
    char p1[PATH_MAX + 64], p2[PATH_MAX + 64];
    adv_open_module("adv_kernels.so", &ctx, NULL);
    MUST(cuDeviceGet(&dev, 0));
    adv_path("adv_ver1.so", p1, sizeof p1);
    adv_path("adv_ver2.so", p2, sizeof p2);
    MUST(cuModuleLoad(&m1, p1));
    CUfunction f1;
    MUST(cuModuleGetFunction(&f1, m1, "versioned"));
    CUstream s;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr out;
    MUST(cuMemAlloc(&out, 64));
    unsigned a = 7;
    void *args1[] = { &out, &a };
    CUgraph g;
    CUgraphExec e = ctx_reuse_capture(s, f1, args1, &g);
    MUST(cuGraphLaunch(e, s));
    MUST(cuStreamSynchronize(s));
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    MUST(cuStreamDestroy(s));
    MUST(cuMemFree(out));
    /* the context goes, with its module: no cuModuleUnload */
    MUST(cuDevicePrimaryCtxReset(dev));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuModuleLoad(&m2, p2));
    CUfunction f2;
    MUST(cuModuleGetFunction(&f2, m2, "versioned"));
    fprintf(stderr, "f1 %p f2 %p (%s)\n", (void *)f1, (void *)f2, f1 == f2 ? "reused" : "new");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&out, 64));
    unsigned b = 1;
    void *args2[] = { &out, &a, &b };
    CUgraph g1, g2;
    e = ctx_reuse_capture(s, f2, args2, &g1);
    MUST(cuGraphLaunch(e, s));
    for (unsigned step = 2; step <= 6; step++) {
        b = step;
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuLaunchKernel(f2, 1, 1, 1, 1, 1, 1, 0, s, args2, NULL));
        MUST(cuStreamEndCapture(s, &g2));
        CUgraphExecUpdateResultInfo info;
        R(cuGraphExecUpdate(e, g2, &info));
        MUST(cuGraphLaunch(e, s));
        unsigned v = 0;
        MUST(cuStreamSynchronize(s));
        MUST(cuMemcpyDtoH(&v, out, 4));
        adv_check("step", v == a * 1000 + b, "step %u: %u, expected %u", step, v, a * 1000 + b);
        MUST(cuGraphDestroy(g2));
    }
    return adv_finish();
}

static int topology_first(int mode)
{
    (void)mode;
    CUcontext ctx;
    CUmodule mod;
    CUstream s = set_up(&ctx, &mod);
    CUfunction fill = adv_fn(mod, "fill_u32");
    CUdeviceptr out, tmp;
    MUST(cuMemAlloc(&out, 4096));
    MUST(cuMemAlloc(&tmp, 4096));
    unsigned v = 5;
    unsigned long long n = 16;
    void *args[] = { &out, &v, &n };
    CUgraph g1, g2;
    CUgraphExec e;
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    MUST(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    MUST(cuStreamEndCapture(s, &g1));
    MUST(cuGraphInstantiateWithFlags(&e, g1, 0));
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    MUST(cuMemsetD32Async(tmp, 0, 1024, s));
    MUST(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    MUST(cuStreamEndCapture(s, &g2));
    MUST(cuMemFree(tmp));
    CUgraphExecUpdateResultInfo info = { 0 };
    R(cuGraphExecUpdate(e, g2, &info));
    CUgraphNode nodes[2];
    size_t nn = 2;
    MUST(cuGraphGetNodes(g2, nodes, &nn));
    printf("result %d errorNode %s errorFromNode %s\n", (int)info.result,
           !info.errorNode ? "NULL" : info.errorNode == nodes[0] ? "node0" : info.errorNode == nodes[1] ? "node1" : "other",
           info.errorFromNode ? "set" : "NULL");
    adv_check("ran", 1, "");
    return adv_finish();
}

static int tograph(int mode)
{
    CUcontext ctx; CUmodule mod;
    adv_open(&ctx, &mod);
    CUfunction add = adv_fn(mod, "add_u32");
    CUstream s;
    MUST(cuStreamCreate(&s, 0));
    CUdeviceptr buf;
    MUST(cuMemAlloc(&buf, 4096));
    MUST(cuMemsetD32(buf, 0, 1024));
    uint32_t v = 1, w = 100; uint64_t n = 16;
    void *args[] = { &buf, &v, &n };
    void *args2[] = { &buf, &w, &n };
    CUgraph g;
    MUST(cuGraphCreate(&g, 0));
    CUDA_KERNEL_NODE_PARAMS p = { .func = add, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
        .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1, .kernelParams = args };
    CUgraphNode k1;
    MUST(cuGraphAddKernelNode(&k1, g, NULL, 0, &p));
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    CUgraphExecUpdateResultInfo info;
    R(cuGraphExecUpdate(e, g, &info)); printf("update0 result %d\n", info.result);
    R(cuStreamBeginCaptureToGraph(s, g, &k1, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args2, NULL));
    if (mode == 0) R(cuMemsetD32Async(buf + 2048, 7, 4, NULL));
    else if (mode == 1) R(cuStreamSynchronize(s));
    else if (mode == 2) { R(cuStreamDestroy(s)); }
    else if (mode == 3) { CUgraphExecUpdateResultInfo i3; memset(&i3, 0, sizeof i3);
        R(cuGraphExecUpdate(e, g, &i3)); printf("update during capture: result %d\n", i3.result); }
    CUgraph g2 = NULL;
    if (mode != 2) R(cuStreamEndCapture(s, &g2));
    size_t nn = 0;
    R(cuGraphGetNodes(g, NULL, &nn));
    printf("g nodes after: %zu\n", nn);
    memset(&info, 0, sizeof info);
    R(cuGraphExecUpdate(e, g, &info)); printf("update1 result %d\n", info.result);
    CUstream s2; MUST(cuStreamCreate(&s2, 0));
    MUST(cuGraphLaunch(e, s2));
    MUST(cuStreamSynchronize(s2));
    uint32_t h[16];
    MUST(cuMemcpyDtoH(h, buf, sizeof h));
    printf("buf[0] = %u\n", h[0]);
    adv_check("ran", 1, "");
    return adv_finish();
}

/* A 2D copy of 4 rows of 128 bytes, pitch 256, from a to b. */
static CUDA_MEMCPY3D copy2d(CUdeviceptr a, CUdeviceptr b)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = a;
    c.srcPitch = 256;
    c.srcHeight = 4;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = b;
    c.dstPitch = 256;
    c.dstHeight = 4;
    c.WidthInBytes = 128;
    c.Height = 4;
    c.Depth = 1;
    return c;
}

static int memcpy2d_setter(int mode)
{
    (void)mode;
    CUcontext ctx;
    CUmodule mod;
    CUstream s = set_up(&ctx, &mod);
    CUdeviceptr a, b;
    MUST(cuMemAlloc(&a, 4096));
    MUST(cuMemAlloc(&b, 4096));
    MUST(cuMemsetD32(a, 7, 1024));
    MUST(cuMemsetD32(b, 0, 1024));
    CUDA_MEMCPY3D c = copy2d(a, b);
    CUgraph g;
    MUST(cuGraphCreate(&g, 0));
    CUgraphNode n;
    MUST(cuGraphAddMemcpyNode(&n, g, NULL, 0, &c, ctx));
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    CUresult r = R(cuGraphExecMemcpyNodeSetParams(e, n, &c, ctx));
    printf("2D memcpy node set to its own parameters: %s\n", adv_err(r));
    /* the generic setter too */
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    np.memcpy.copyCtx = ctx;
    np.memcpy.copyParams = c;
    r = R(cuGraphExecNodeSetParams(e, n, &np));
    printf("generic: %s\n", adv_err(r));
    MUST(cuGraphLaunch(e, s));
    MUST(cuStreamSynchronize(s));
    adv_check("ran", 1, "");
    return adv_finish();
}

static int variants_2dcopy(int mode)
{
    (void)mode;
    CUcontext ctx;
    CUmodule mod;
    CUstream s = set_up(&ctx, &mod);
    CUfunction fill = adv_fn(mod, "fill_u32");
    CUdeviceptr x[3], a, b, b2;
    for (int i = 0; i < 3; i++) MUST(cuMemAlloc(&x[i], 4096));
    MUST(cuMemAlloc(&a, 4096));
    MUST(cuMemAlloc(&b, 4096));
    MUST(cuMemAlloc(&b2, 4096));
    MUST(cuMemsetD32(a, 7, 1024));
    MUST(cuMemsetD32(b, 0, 1024));
    MUST(cuMemsetD32(b2, 0, 1024));
    unsigned v = 5;
    unsigned long long n = 16;
    CUdeviceptr out = x[0];
    void *args[] = { &out, &v, &n };
    CUDA_KERNEL_NODE_PARAMS kp = { .func = fill, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                   .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                                   .kernelParams = args };
    CUDA_MEMCPY3D c = copy2d(a, b);
    CUgraph g;
    MUST(cuGraphCreate(&g, 0));
    CUgraphNode kn, cn;
    MUST(cuGraphAddKernelNode(&kn, g, NULL, 0, &kp));
    MUST(cuGraphAddMemcpyNode(&cn, g, &kn, 1, &c, ctx));
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int step = 0; step < 12; step++) {
        out = x[step % 3];
        MUST(cuGraphExecKernelNodeSetParams(e, kn, &kp));
        if (step == 9) {
            CUDA_MEMCPY3D c2 = c;
            c2.dstDevice = b2;
            CUresult r = R(cuGraphExecMemcpyNodeSetParams(e, cn, &c2, ctx));
            printf("step 9: 2D memcpy dst moved: %s\n", adv_err(r));
        }
        MUST(cuGraphLaunch(e, s));
        MUST(cuStreamSynchronize(s));
    }
    unsigned w = 0;
    MUST(cuMemcpyDtoH(&w, b2, 4));
    adv_check("b2", w == 0, "b2[0] = %u (the driver refused the change: 0)", w);
    return adv_finish();
}

int main(int argc, char **argv)
{
    static const struct { const char *name; int (*fn)(int); int mode; } cases[] = {
        { "ctx_reuse", ctx_reuse, 0 },
        { "topology_first", topology_first, 0 },
        { "tograph_legacy", tograph, 0 },
        { "tograph_sync", tograph, 1 },
        { "tograph_destroy", tograph, 2 },
        { "tograph_during", tograph, 3 },
        { "memcpy2d_setter", memcpy2d_setter, 0 },
        { "variants_2dcopy", variants_2dcopy, 0 },
    };
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].name) == 0) return cases[i].fn(cases[i].mode);
    printf("usage: %s CASE (see the header)\n", argv[0]);
    return 4;
}
