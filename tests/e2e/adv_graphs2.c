/*
 * tests/e2e/adv_graphs2.c: graph structure beyond flat kernel captures
 * (round 15): host nodes, graph memory nodes, the generic exec setter and
 * instantiation flags, where the library must either understand a change or
 * leave it to the driver.
 *   host_update      each step re-captures mad_u32(in, acc) and a host
 *                    function; the kernel's input changes every other step,
 *                    the host function's userData every step (so half the
 *                    updates differ only in userData); cuGraphExecUpdate;
 *   host_setparams   an explicit graph kernel -> host node; each step the
 *                    kernel's input rotates by cuGraphExecKernelNodeSetParams
 *                    and the host node's userData by
 *                    cuGraphExecHostNodeSetParams or, every third step, by
 *                    the generic cuGraphExecNodeSetParams;
 *   generic          memset -> mad_u32 -> memcpy nodes, instantiated by
 *                    cuGraphInstantiateWithParams with
 *                    CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD; each step the
 *                    kernel's input and the copy's destination rotate among
 *                    three buffers by cuGraphExecNodeSetParams (so the exec
 *                    is served by variants under skip_profiled), and at
 *                    steps 7 and 13 the memset's value changes (no variant
 *                    holds it);
 *   enable_memset    the same graph; the kernel's input rotates (variants);
 *                    from step 5 the memset node is disabled, from step 9
 *                    enabled again (cuGraphNodeSetEnabled on a non-kernel
 *                    node);
 *   memnode_recapture each step captures cuMemAllocAsync(tmp), a memset and
 *                    two kernels through tmp, cuMemFreeAsync(tmp);
 *                    cuGraphExecUpdate, and when the driver refuses it (a
 *                    new allocation node), the exec is destroyed and the new
 *                    graph instantiated;
 *   memnode_autofree an explicit graph: allocation node -> fill_u32 on the
 *                    allocation -> mad_u32 into acc, no free node;
 *                    instantiated with AUTO_FREE_ON_LAUNCH (and UPLOAD);
 *                    launched each step with the fill's scalar changed;
 *                    the allocation is read back, queried
 *                    (cuMemGetAddressRange, cuPointerGetAttribute), then
 *                    freed by cuMemFreeAsync outside the graph; a second
 *                    exec of the graph is instantiated after the first is
 *                    destroyed;
 *   memnode_pressure 256 MiB device: 160 MiB from cuMemAlloc and 160 MiB
 *                    from cuMemAllocAsync, each freed; then a graph whose
 *                    allocation node takes 160 MiB (memset, kernel, free
 *                    node) is launched three times: its memory is had at
 *                    the launch (before the fix the library's arenas kept
 *                    the freed chunks and every launch got
 *                    CUDA_ERROR_OUT_OF_MEMORY).
 * test_correctness.sh runs memnode_pressure, host_update, generic and
 * memnode_autofree (runtime); the other cases are controls that passed when
 * the round was made (run them by hand).
 * Usage: adv_graphs2 CASE
 */
#include "adv_common.h"

#define N 256
#define STEPS 12

static CUcontext ctx;
static CUmodule mod;
static CUfunction f_mad, f_fill;
static CUstream s;
static CUdeviceptr in[3], acc;
static uint32_t h_in[3][N], h_acc[N];

/* The host functions' log: each call appends *(int *)userData. Host
 * functions of one stream run one at a time, in order. */
static int hlog[64], nlog;
static void CUDA_CB host_log(void *ud)
{
    if (nlog < 64) hlog[nlog++] = *(const int *)ud;
}
static int ud[3] = { 101, 202, 303 };

static void setup(void)
{
    adv_open(&ctx, &mod);
    f_mad = adv_fn(mod, "mad_u32");
    f_fill = adv_fn(mod, "fill_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < N; i++) h_in[k][i] = (uint32_t)(k * 1000003u + i * 7u + 1u);
        MUST(cuMemAlloc(&in[k], N * 4));
        MUST(cuMemcpyHtoD(in[k], h_in[k], N * 4));
    }
    MUST(cuMemAlloc(&acc, N * 4));
    MUST(cuMemsetD32(acc, 0, N));
    memset(h_acc, 0, sizeof h_acc);
}

static void host_mad(const uint32_t *x)
{
    for (int i = 0; i < N; i++) h_acc[i] = h_acc[i] * 3u + x[i];
}

static void check_acc(int step)
{
    char name[64];
    snprintf(name, sizeof name, "acc step %d", step);
    adv_check_words(name, acc, h_acc, N);
}

static void check_log(const int *want, int n)
{
    int bad = nlog != n;
    for (int i = 0; i < n && !bad; i++) bad = hlog[i] != want[i];
    adv_check("host log", !bad, "%d calls, last %d", nlog, nlog ? hlog[nlog - 1] : -1);
}

/* cuGraphExecUpdate_v2, printing the result when it is not success. */
static CUresult update(CUgraphExec e, CUgraph g, int line)
{
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    CUresult r = adv_r(cuGraphExecUpdate(e, g, &info), "cuGraphExecUpdate(e, g, &info)", line);
    if (r != CUDA_SUCCESS) printf("update result %d\n", (int)info.result);
    return r;
}

static void host_update(void)
{
    CUgraphExec e = NULL;
    CUgraph prev = NULL;
    int want[STEPS];
    uint64_t n = N;
    for (int st = 0; st < STEPS; st++) {
        CUgraph g;
        int k = (st / 2) % 3;
        void *args[] = { &in[k], &acc, &n };
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuLaunchKernel(f_mad, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        MUST(cuLaunchHostFunc(s, host_log, &ud[st % 3]));
        MUST(cuStreamEndCapture(s, &g));
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else MUST(update(e, g, __LINE__));
        if (prev) MUST(cuGraphDestroy(prev));
        prev = g;
        MUST(cuGraphLaunch(e, s));
        MUST(cuStreamSynchronize(s));
        host_mad(h_in[k]);
        want[st] = ud[st % 3];
        check_acc(st);
    }
    check_log(want, STEPS);
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(prev));
}

static void host_setparams(void)
{
    CUgraph g;
    CUgraphNode kn, hn;
    CUgraphExec e;
    uint64_t n = N;
    int want[STEPS];
    void *args0[] = { &in[0], &acc, &n };
    CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(f_mad, args0);
    CUDA_HOST_NODE_PARAMS hp = { .fn = host_log, .userData = &ud[0] };
    MUST(cuGraphCreate(&g, 0));
    MUST(cuGraphAddKernelNode(&kn, g, NULL, 0, &kp));
    MUST(cuGraphAddHostNode(&hn, g, &kn, 1, &hp));
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int st = 0; st < STEPS; st++) {
        int k = st % 3, u = (st * 2 + 1) % 3;
        void *args[] = { &in[k], &acc, &n };
        MUST(ADV_SET_KERNEL(e, kn, f_mad, args));
        if (st % 3 == 2) {
            CUgraphNodeParams gp;
            memset(&gp, 0, sizeof gp);
            gp.type = CU_GRAPH_NODE_TYPE_HOST;
            gp.host.fn = host_log;
            gp.host.userData = &ud[u];
            MUST(cuGraphExecNodeSetParams(e, hn, &gp));
        } else {
            CUDA_HOST_NODE_PARAMS h = { .fn = host_log, .userData = &ud[u] };
            MUST(cuGraphExecHostNodeSetParams(e, hn, &h));
        }
        MUST(cuGraphLaunch(e, s));
        MUST(cuStreamSynchronize(s));
        host_mad(h_in[k]);
        want[st] = ud[u];
        check_acc(st);
    }
    check_log(want, STEPS);
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
}

/* memset(buf, 5) -> mad_u32(buf, acc) -> memcpy(out[0] <- acc), with buf
 * and out[] allocated here. */
static CUdeviceptr buf, out[3];
static CUgraphNode ms_n, k_n, cp_n;

static CUgraph three_node_graph(void)
{
    CUgraph g;
    uint64_t n = N;
    void *args[] = { &buf, &acc, &n };
    CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(f_mad, args);
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = acc;
    cp.WidthInBytes = N * 4;
    cp.Height = cp.Depth = 1;
    MUST(cuMemAlloc(&buf, N * 4));
    CUDA_MEMSET_NODE_PARAMS mp = { .dst = buf, .value = 5, .elementSize = 4, .width = N, .height = 1 };
    for (int k = 0; k < 3; k++) {
        MUST(cuMemAlloc(&out[k], N * 4));
        MUST(cuMemsetD32(out[k], 0, N));
    }
    cp.dstDevice = out[0];
    MUST(cuGraphCreate(&g, 0));
    MUST(cuGraphAddMemsetNode(&ms_n, g, NULL, 0, &mp, ctx));
    MUST(cuGraphAddKernelNode(&k_n, g, &ms_n, 1, &kp));
    MUST(cuGraphAddMemcpyNode(&cp_n, g, &k_n, 1, &cp, ctx));
    return g;
}

static CUgraphExec instantiate_upload(CUgraph g, cuuint64_t flags)
{
    CUgraphExec e;
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = { .flags = flags | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,
                                         .hUploadStream = s };
    MUST(cuGraphInstantiateWithParams(&e, g, &ip));
    if (ip.result_out != CUDA_GRAPH_INSTANTIATE_SUCCESS) printf("instantiate result %d\n", (int)ip.result_out);
    return e;
}

static void generic(void)
{
    CUgraph g = three_node_graph();
    CUgraphExec e = instantiate_upload(g, 0);
    uint64_t n = N;
    uint32_t val = 5, h_out[3][N];
    memset(h_out, 0, sizeof h_out);
    for (int st = 0; st < 16; st++) {
        int k = st % 3;
        CUgraphNodeParams gp;
        memset(&gp, 0, sizeof gp);
        gp.type = CU_GRAPH_NODE_TYPE_KERNEL;
        void *args[] = { &in[k], &acc, &n };
        gp.kernel.func = f_mad;
        gp.kernel.gridDimX = gp.kernel.gridDimY = gp.kernel.gridDimZ = 1;
        gp.kernel.blockDimX = gp.kernel.blockDimY = gp.kernel.blockDimZ = 1;
        gp.kernel.kernelParams = args;
        MUST(cuGraphExecNodeSetParams(e, k_n, &gp));
        memset(&gp, 0, sizeof gp);
        gp.type = CU_GRAPH_NODE_TYPE_MEMCPY;
        gp.memcpy.copyCtx = ctx;
        gp.memcpy.copyParams.srcMemoryType = gp.memcpy.copyParams.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        gp.memcpy.copyParams.srcDevice = acc;
        gp.memcpy.copyParams.dstDevice = out[(st + 1) % 3];
        gp.memcpy.copyParams.WidthInBytes = N * 4;
        gp.memcpy.copyParams.Height = gp.memcpy.copyParams.Depth = 1;
        MUST(cuGraphExecNodeSetParams(e, cp_n, &gp));
        if (st == 7 || st == 13) {
            val = 5 + (uint32_t)st;
            memset(&gp, 0, sizeof gp);
            gp.type = CU_GRAPH_NODE_TYPE_MEMSET;
            gp.memset = (CUDA_MEMSET_NODE_PARAMS_v2){ .dst = buf, .value = val, .elementSize = 4,
                                                      .width = N, .height = 1, .ctx = ctx };
            MUST(cuGraphExecNodeSetParams(e, ms_n, &gp));
        }
        MUST(cuGraphLaunch(e, s));
        MUST(cuStreamSynchronize(s));
        host_mad(h_in[k]);
        memcpy(h_out[(st + 1) % 3], h_acc, sizeof h_acc);
        char name[64];
        snprintf(name, sizeof name, "out step %d", st);
        adv_check_words(name, out[(st + 1) % 3], h_out[(st + 1) % 3], N);
    }
    /* the memset's value reached buf */
    uint32_t want[N];
    for (int i = 0; i < N; i++) want[i] = val;
    adv_check_words("memset value", buf, want, N);
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
}

static void enable_memset(void)
{
    CUgraph g = three_node_graph();
    CUgraphExec e = instantiate_upload(g, 0);
    uint64_t n = N;
    uint32_t h_buf[N];
    for (int st = 0; st < 14; st++) {
        int k = st % 3;
        /* the kernel reads buf (even steps), which the memset sets to 5
         * while enabled, or in[k] (odd steps: the pointer rotates) */
        void *args[] = { &buf, &acc, &n };
        void *a2[] = { &in[k], &acc, &n };
        if (st == 5) MUST(cuGraphNodeSetEnabled(e, ms_n, 0));
        if (st == 9) MUST(cuGraphNodeSetEnabled(e, ms_n, 1));
        /* buf changed behind the graph: visible only while the memset is off */
        MUST(cuMemcpyHtoD(buf, h_in[k], N * 4));
        MUST(ADV_SET_KERNEL(e, k_n, f_mad, st % 2 ? a2 : args));
        MUST(cuGraphLaunch(e, s));
        MUST(cuStreamSynchronize(s));
        int memset_on = st < 5 || st >= 9;
        for (int i = 0; i < N; i++) h_buf[i] = memset_on ? 5u : h_in[k][i];
        host_mad(st % 2 ? h_in[k] : h_buf);
        check_acc(st);
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
}

static void memnode_recapture(void)
{
    CUgraphExec e = NULL;
    CUgraph prev = NULL;
    uint64_t n = N;
    for (int st = 0; st < 8; st++) {
        CUgraph g;
        CUdeviceptr tmp;
        int k = st % 3;
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuMemAllocAsync(&tmp, N * 4, s));
        MUST(cuMemsetD32Async(tmp, 1, N, s));
        void *a1[] = { &in[k], &tmp, &n };
        void *a2[] = { &tmp, &acc, &n };
        MUST(cuLaunchKernel(f_mad, 1, 1, 1, 1, 1, 1, 0, s, a1, NULL));
        MUST(cuLaunchKernel(f_mad, 1, 1, 1, 1, 1, 1, 0, s, a2, NULL));
        MUST(cuMemFreeAsync(tmp, s));
        MUST(cuStreamEndCapture(s, &g));
        if (e && update(e, g, __LINE__) != CUDA_SUCCESS) {
            MUST(cuGraphExecDestroy(e));
            e = NULL;
        }
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        if (prev) MUST(cuGraphDestroy(prev));
        prev = g;
        MUST(cuGraphLaunch(e, s));
        MUST(cuStreamSynchronize(s));
        uint32_t t[N];
        for (int i = 0; i < N; i++) t[i] = 1u * 3u + h_in[k][i];
        host_mad(t);
        check_acc(st);
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(prev));
}

static void memnode_autofree(void)
{
    CUgraph g;
    CUgraphNode an, fn_, mn;
    uint64_t n = N;
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = 0;
    ap.bytesize = N * 4;
    MUST(cuGraphCreate(&g, 0));
    MUST(cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap));
    CUdeviceptr tmp = ap.dptr;
    uint32_t v = 7;
    void *fa[] = { &tmp, &v, &n };
    CUDA_KERNEL_NODE_PARAMS fp = adv_kernel_params(f_fill, fa);
    MUST(cuGraphAddKernelNode(&fn_, g, &an, 1, &fp));
    void *ma[] = { &tmp, &acc, &n };
    CUDA_KERNEL_NODE_PARAMS mp = adv_kernel_params(f_mad, ma);
    MUST(cuGraphAddKernelNode(&mn, g, &fn_, 1, &mp));
    for (int round = 0; round < 2; round++) {
        CUgraphExec e = instantiate_upload(g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
        for (int st = 0; st < 6; st++) {
            v = 7 + (uint32_t)(st / 2) + 100u * (uint32_t)round;
            MUST(ADV_SET_KERNEL(e, fn_, f_fill, fa));
            MUST(cuGraphLaunch(e, s));
            MUST(cuStreamSynchronize(s));
            uint32_t t[N];
            for (int i = 0; i < N; i++) t[i] = v + (uint32_t)i;
            host_mad(t);
            check_acc(round * 6 + st);
            char name[64];
            snprintf(name, sizeof name, "allocation round %d step %d", round, st);
            adv_check_words(name, tmp, t, N);
        }
        CUdeviceptr base = 0;
        size_t size = 0;
        unsigned int mt = 0;
        MUST(cuMemGetAddressRange(&base, &size, tmp + 64));
        MUST(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, tmp));
        adv_check("allocation range", base == tmp && size >= N * 4 && mt == CU_MEMORYTYPE_DEVICE,
                  "base ok %d, size ok %d, type %u", base == tmp, size >= N * 4, mt);
        MUST(cuMemFreeAsync(tmp, s));
        MUST(cuStreamSynchronize(s));
        MUST(cuGraphExecDestroy(e));
    }
    MUST(cuGraphDestroy(g));
}

/* 256 MiB device: 160 MiB taken by cuMemAlloc and by cuMemAllocAsync and
 * freed; then a graph whose allocation node takes 160 MiB is launched (the
 * graph's memory is had at the launch). A refused launch shows as a wrong
 * check (the host counts every launch). */
static void memnode_pressure(void)
{
    const size_t big = (size_t)160 << 20;
    CUdeviceptr p;
    MUST(cuMemAlloc(&p, big));
    MUST(cuMemFree(p));
    MUST(cuMemAllocAsync(&p, big, s));
    MUST(cuMemFreeAsync(p, s));
    MUST(cuStreamSynchronize(s));
    CUgraph g;
    CUgraphNode an, mn, cn, fn_;
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = 0;
    ap.bytesize = big;
    MUST(cuGraphCreate(&g, 0));
    MUST(cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap));
    CUDA_MEMSET_NODE_PARAMS mp = { .dst = ap.dptr + big - N * 4, .value = 9, .elementSize = 4,
                                   .width = N, .height = 1 };
    MUST(cuGraphAddMemsetNode(&mn, g, &an, 1, &mp, ctx));
    uint64_t n = N;
    CUdeviceptr last = ap.dptr + big - N * 4;
    void *ma[] = { &last, &acc, &n };
    CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(f_mad, ma);
    MUST(cuGraphAddKernelNode(&cn, g, &mn, 1, &kp));
    MUST(cuGraphAddMemFreeNode(&fn_, g, &cn, 1, ap.dptr));
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    uint32_t nine[N];
    for (int i = 0; i < N; i++) nine[i] = 9;
    for (int st = 0; st < 3; st++) {
        R(cuGraphLaunch(e, s));
        host_mad(nine);
        MUST(cuStreamSynchronize(s));
        check_acc(st);
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "host_update", "host_setparams", "generic", "enable_memset",
                                         "memnode_recapture", "memnode_autofree", "memnode_pressure", NULL };
    int c = adv_case(argc, argv, names);
    setup();
    switch (c) {
    case 0: host_update(); break;
    case 1: host_setparams(); break;
    case 2: generic(); break;
    case 3: enable_memset(); break;
    case 4: memnode_recapture(); break;
    case 5: memnode_autofree(); break;
    case 6: memnode_pressure(); break;
    }
    return adv_finish();
}
