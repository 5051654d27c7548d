/*
 * tests/e2e/adv_flags.c: round 32, valid programs against the instantiation
 * flags and parameters of an exec that skip_profiled may serve with variants
 * (more driver execs of the program's exec, instantiated by the library).
 * Each variant must behave as the program's exec: the same flags, upload
 * semantics and graph-memory behaviour. Every case rotates a mad_u32 exec
 * (acc = acc * 3 + in) over three inputs so that variants are bought (at
 * once under the runner's free-variant costs), then:
 *   getflags  instantiated with AUTO_FREE_ON_LAUNCH | USE_NODE_PRIORITY
 *             (cuGraphInstantiateWithFlags); each step prints
 *             cuGraphExecGetFlags, launches on s1 or s2 in turn;
 *   priority  the graph built explicitly, its kernel node's priority set
 *             (CU_LAUNCH_ATTRIBUTE_PRIORITY), instantiated with
 *             USE_NODE_PRIORITY; each step rebuilds the graph on the next
 *             input and cuGraphExecUpdate_v2's; at steps 14 and 20 the
 *             priority differs: the driver refuses the update (a node's
 *             priority cannot change in such an exec) and the exec keeps its
 *             input; the refusal must reach the program;
 *   upload    cuGraphInstantiateWithParams with FLAG_UPLOAD and an upload
 *             stream (result info printed), cuGraphUpload on s2 before each
 *             launch on s1 held by a slow host function, a copy behind the
 *             launch on s2;
 *   upload_ptsz / upload_legacy
 *             the same, the upload stream (instantiation and cuGraphUpload)
 *             the per-thread or the legacy default stream;
 *   devlaunch instantiated with DEVICE_LAUNCH (cuGraphInstantiateWithFlags),
 *             launched from the host; flags printed;
 *   twoexec   one explicitly built graph instantiated twice, with
 *             USE_NODE_PRIORITY and without; each step both execs are updated
 *             from the rebuilt graph (the next input) and launched, the
 *             priority differing at steps 14 and 20: only the first exec's
 *             update is refused;
 *   params_err cuGraphInstantiateWithParams refused: DEVICE_LAUNCH over a
 *             host node (result info and error node printed), DEVICE_LAUNCH
 *             with AUTO_FREE_ON_LAUNCH, UPLOAD without WithParams; then the
 *             graph instantiated as it may be and rotated;
 *   autofree / autofree_no
 *             a captured cuMemAllocAsync (graph memory, not freed in the
 *             graph), a kernel writing it and a copy out, instantiated with
 *             AUTO_FREE_ON_LAUNCH or without; launched twice without a free
 *             between (without the flag the second launch fails: the block
 *             is still allocated), then freed and launched again; the
 *             kernel's value changes each step (cuGraphExecKernelNodeSetParams).
 * Checks: values and return codes against the host's model (the runner
 * compares the output with the run without the library).
 * Usage: adv_flags getflags|priority|upload|devlaunch|twoexec|params_err|autofree|autofree_no|
 *        upload_ptsz|upload_legacy
 */
#include "adv_common.h"

#define N 256u
#define STEPS 24

static CUcontext ctx;
static CUmodule mod;
static CUstream s1, s2;
static CUfunction mad, fill;
static CUdeviceptr in[3], acc;
static uint32_t hin[3][N], model[N];
static uint64_t n = N;
static CUgraph g;
static CUgraphNode node;
static CUgraphExec exec;

static void buffers(void)
{
    adv_mad_buffers(N, in, &hin[0][0], &acc, model);
}

/* Captures mad_u32(in[0], acc) on s1 into g (node: its node). */
static void mad_graph(void)
{
    void *args[] = { &in[0], &acc, &n };
    size_t one = 1;
    MUST(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, s1, args, NULL));
    MUST(cuStreamEndCapture(s1, &g));
    MUST(cuGraphGetNodes(g, &node, &one));
}

static void print_flags(int st)
{
    cuuint64_t f = 0;
    if (R(cuGraphExecGetFlags(exec, &f)) == CUDA_SUCCESS) printf("step %d: exec flags %#llx\n", st, (unsigned long long)f);
}

/* Points the exec at input k and launches it on t; the model follows. */
static int mad_step(int k, CUstream t)
{
    void *args[] = { &in[k], &acc, &n };
    if (ADV_SET_KERNEL(exec, node, mad, args) != CUDA_SUCCESS) return 0;
    if (R(cuGraphLaunch(exec, t)) != CUDA_SUCCESS) return 0;
    for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + hin[k][i];
    return 1;
}

/* STEPS rotating launches, flags printed each step, on s1 / s2 in turn. */
static void rotate(void)
{
    for (int st = 0; st < STEPS; st++) {
        mad_step(st % 3, st % 2 ? s2 : s1);
        print_flags(st);
        MUST(cuCtxSynchronize());
    }
    adv_check_words("accumulator", acc, model, N);
}

static void getflags(void)
{
    buffers();
    mad_graph();
    MUST(cuGraphInstantiateWithFlags(&exec, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                                   CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY));
    rotate();
}

static void devlaunch(void)
{
    buffers();
    mad_graph();
    MUST(cuGraphInstantiateWithFlags(&exec, g, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH));
    R(cuGraphUpload(exec, s1));
    rotate();
}

/* The mad graph on input k with its node's priority prio, built explicitly. */
static CUgraph prio_graph(int k, int prio, CUgraphNode *out)
{
    CUgraph h;
    void *args[] = { &in[k], &acc, &n };
    MUST(cuGraphCreate(&h, 0));
    *out = adv_add_kernel(h, NULL, 0, mad, args);
    CUkernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    v.priority = prio;
    MUST(cuGraphKernelNodeSetAttribute(*out, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
    return h;
}

static void priority(void)
{
    buffers();
    int lo = 0, hi = -1;        /* within every device's range ([-5, 0] emulated) */
    g = prio_graph(0, hi, &node);
    MUST(cuGraphInstantiateWithFlags(&exec, g, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY));
    int held = 0;               /* the input the exec holds */
    for (int st = 0; st < STEPS; st++) {
        int k = st % 3, prio = (st == 14 || st == 20) ? lo : hi;
        CUgraphNode nd;
        CUgraph h = prio_graph(k, prio, &nd);
        CUgraphExecUpdateResultInfo info;
        if (R(cuGraphExecUpdate_v2(exec, h, &info)) == CUDA_SUCCESS) held = k;
        else printf("step %d: update refused, result %d\n", st, (int)info.result);
        if (R(cuGraphLaunch(exec, st % 2 ? s2 : s1)) == CUDA_SUCCESS)
            for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + hin[held][i];
        print_flags(st);
        MUST(cuCtxSynchronize());
        MUST(cuGraphDestroy(h));
    }
    adv_check_words("accumulator", acc, model, N);
}

static void upload_on(CUstream us)
{
    buffers();
    mad_graph();
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    memset(&ip, 0, sizeof ip);
    ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    ip.hUploadStream = us;
    MUST(cuGraphInstantiateWithParams(&exec, g, &ip));
    printf("instantiate result %d\n", (int)ip.result_out);
    CUdeviceptr snap;
    MUST(cuMemAlloc(&snap, N * 4));
    int good = 0;
    for (int st = 0; st < STEPS; st++) {
        R(cuLaunchHostFunc(s1, adv_sleep_host, (void *)(uintptr_t)1000));
        R(cuGraphUpload(exec, us));
        int ran = mad_step(st % 3, s1);
        MUST(cuStreamSynchronize(us));
        R(cuMemcpyDtoDAsync(snap, acc, N * 4, s1));
        MUST(cuStreamSynchronize(s1));
        uint32_t *got = adv_read(snap, N);
        good += ran && got && memcmp(got, model, sizeof model) == 0;
        free(got);
        print_flags(st);
    }
    adv_check("copies behind the launches", good == STEPS, "%d of %d", good, STEPS);
    adv_check_words("accumulator", acc, model, N);
}

static void twoexec(void)
{
    buffers();
    int lo = 0, hi = -1;
    CUgraphNode nd0;
    g = prio_graph(0, hi, &nd0);
    CUgraphExec ex[2];
    MUST(cuGraphInstantiateWithFlags(&ex[0], g, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY));
    MUST(cuGraphInstantiateWithFlags(&ex[1], g, 0));
    int held[2] = { 0, 0 };
    for (int st = 0; st < STEPS; st++) {
        int k = st % 3, prio = (st == 14 || st == 20) ? lo : hi;
        CUgraphNode nd;
        CUgraph h = prio_graph(k, prio, &nd);
        for (int e = 0; e < 2; e++) {
            CUgraphExecUpdateResultInfo info;
            if (R(cuGraphExecUpdate_v2(ex[e], h, &info)) == CUDA_SUCCESS) held[e] = k;
            else printf("step %d exec %d: update refused, result %d\n", st, e, (int)info.result);
            if (R(cuGraphLaunch(ex[e], e ? s2 : s1)) == CUDA_SUCCESS)
                for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + hin[held[e]][i];
            MUST(cuCtxSynchronize());
        }
        MUST(cuGraphDestroy(h));
    }
    adv_check_words("accumulator", acc, model, N);
}

static void CUDA_CB nop_host(void *arg) { (void)arg; }

static void params_err(void)
{
    buffers();
    mad_graph();
    CUgraphNode hn;
    CUDA_HOST_NODE_PARAMS hp = { .fn = nop_host, .userData = NULL };
    MUST(cuGraphAddHostNode(&hn, g, &node, 1, &hp));
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    memset(&ip, 0, sizeof ip);
    ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
    CUresult r = R(cuGraphInstantiateWithParams(&exec, g, &ip));
    printf("device launch over a host node: %s, result %d, error node %s\n", adv_err(r), (int)ip.result_out,
           ip.hErrNode_out == hn ? "the host node" : ip.hErrNode_out ? "another" : "none");
    MUST(cuGraphDestroyNode(hn));
    memset(&ip, 0, sizeof ip);
    ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
    r = R(cuGraphInstantiateWithParams(&exec, g, &ip));
    printf("device launch with auto free: %s, result %d\n", adv_err(r), (int)ip.result_out);
    r = R(cuGraphInstantiateWithFlags(&exec, g, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD));
    printf("upload flag without params: %s\n", adv_err(r));
    memset(&ip, 0, sizeof ip);
    ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
    ip.hUploadStream = s1;
    MUST(cuGraphInstantiateWithParams(&exec, g, &ip));
    printf("instantiated, result %d\n", (int)ip.result_out);
    rotate();
}

static void upload(void) { upload_on(s2); }
static void upload_ptsz(void) { upload_on(CU_STREAM_PER_THREAD); }
static void upload_legacy(void) { upload_on(CU_STREAM_LEGACY); }

/* The graph-memory cases: alloc (captured) -> fill_u32(tmp, v) -> copy to out. */
static void autofree_case(int flag)
{
    CUdeviceptr out, tmp = 0;
    uint32_t v = 5, want[N];
    MUST(cuMemAlloc(&out, N * 4));
    MUST(cuMemsetD32(out, 0, N));
    MUST(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    MUST(cuMemAllocAsync(&tmp, N * 4, s1));
    void *args[] = { &tmp, &v, &n };
    MUST(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s1, args, NULL));
    MUST(cuMemcpyDtoDAsync(out, tmp, N * 4, s1));
    MUST(cuStreamEndCapture(s1, &g));
    CUgraphNode nds[3];
    adv_chain_nodes(g, nds, 3);
    node = nds[1];
    MUST(cuGraphInstantiateWithFlags(&exec, g, flag ? CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH : 0));
    print_flags(-1);
    for (uint32_t i = 0; i < N; i++) want[i] = 0;
    for (int st = 0; st < 12; st++) {
        v = 1000u * (uint32_t)st;
        void *a[] = { &tmp, &v, &n };
        R(ADV_SET_KERNEL(exec, node, fill, a));
        CUresult r1 = R(cuGraphLaunch(exec, st % 2 ? s2 : s1));
        MUST(cuCtxSynchronize());
        if (r1 == CUDA_SUCCESS)
            for (uint32_t i = 0; i < N; i++) want[i] = v + i;
        if (st % 3 == 0) {      /* launched again, the block still allocated */
            CUresult r2 = R(cuGraphLaunch(exec, s1));
            printf("step %d: second launch %s\n", st, adv_err(r2));
            MUST(cuCtxSynchronize());
        }
        R(cuMemFreeAsync(tmp, s1));
        MUST(cuStreamSynchronize(s1));
        adv_check_words("out", out, want, N);
    }
}

static void autofree(void) { autofree_case(1); }
static void autofree_no(void) { autofree_case(0); }

int main(int argc, char **argv)
{
    static const char *const names[] = { "getflags", "priority", "upload", "devlaunch", "twoexec",
                                         "params_err", "autofree", "autofree_no", "upload_ptsz",
                                         "upload_legacy", NULL };
    static void (*const fns[])(void) = { getflags, priority, upload, devlaunch, twoexec, params_err,
                                         autofree, autofree_no, upload_ptsz, upload_legacy };
    int c = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    mad = adv_fn(mod, "mad_u32");
    fill = adv_fn(mod, "fill_u32");
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    fns[c]();
    return adv_finish();
}
