/*
 * adv_records.c: round 27, the capture-time records (core/cap_record.c:
 * kernel_op, add_node, kernel_desc and its per-capture cache of launched
 * handles, 32 slots keyed by ((uintptr_t)h >> 4) & 31, holding the function
 * each names and its parameter layout; core/fp_desc.c's sg_fp_launch_desc).
 * Valid programs that try to make a record differ from the graph the driver
 * built: a wrong record lets the library skip an update the program needs.
 *
 * Every case re-captures its graph each step (its values changing at some
 * steps, repeating the last step's at others), cuGraphExecUpdate_v2 +
 * cuGraphLaunch, and checks two buffers (acc, acc2) against a host model of
 * the graph the exec holds (a refused update leaves the exec as it was; the
 * refusal is printed). The runner also runs every case with
 * STABLEGRAPH_AUDIT_RECORDS=1: no record may differ from the driver's graph.
 *
 * Cases:
 *   collide    two functions of other layouts (add_u32: ptr, u32, u64;
 *              u64_store: ptr, u64) whose handles fall in the same cache
 *              slot (found among 16 loads of the module), launched
 *              alternately in one capture;
 *   kfunc      one kernel launched as its CUkernel (cuLibraryGetKernel, cast
 *              to CUfunction) and as its CUfunction (cuKernelGetFunction)
 *              alternately;
 *   forms      one function launched with kernelParams, then `extra`
 *              (CU_LAUNCH_PARAM_BUFFER_POINTER / SIZE), then kernelParams
 *              and `extra` again, each step changing one of the four;
 *   noparams   a kernel without parameters launched with kernelParams NULL
 *              and with an empty array, its grid changing at some steps
 *              (a counter kernel reads how many blocks ran);
 *   aliasargs  kernelParams pointing into one struct, two of them at the
 *              same bytes (a u32 argument at the low half of the u64 one),
 *              and two pointer arguments at one variable; every argument's
 *              storage overwritten after each launch returns and again
 *              before the update (the driver copied them at the launch);
 *   reuse      versioned(out, a) of adv_ver1.so for 3 steps; the module
 *              unloaded and adv_ver2.so loaded (versioned(out, a, b), which
 *              gets the unloaded function's handle value: the baseline
 *              must say so), then only b changes;
 *   launch_ex  one function by cuLaunchKernel, cuLaunchKernelEx (a priority
 *              attribute, given twice: the later wins; a cooperative one; a
 *              1x1x1 cluster beside an ignored entry; none)
 *              and cuLaunchCooperativeKernel, instantiated with
 *              USE_NODE_PRIORITY: the priority changes at step 4, a
 *              cooperative node becomes plain at step 9 (both refused by the
 *              driver), a cooperative launch becomes cuLaunchKernelEx with
 *              the cooperative attribute at step 7 (the same node);
 *   ctx_kernel a CUkernel launched twice into one capture, on the origin
 *              stream (context A), then on a stream that joined it by an
 *              event, of context B (steps 0-2, 6-8) or of context A (3-5,
 *              9-11), then on the capture's stream again: the same topology
 *              and arguments (the driver refuses the updates that change the
 *              middle node's context);
 *   ptsz_ctx   a capture on the per-thread default stream of context A,
 *              joined by the per-thread default stream of context B (the
 *              same thread, cuCtxSetCurrent between): a memset goes to B's
 *              stream (steps 3-5, 9-11) or to A's, then a kernel on A's
 *              (parallel to the memset, or after it): the topology changes
 *              at steps 3, 6 and 9 (refused by the driver).
 * Usage: adv_records CASE
 */
#include "adv_common.h"

#define N 64
#define STEPS 12

static CUcontext ctx, ctx_b;
static CUmodule mod;
static CUstream s;
static CUfunction f_add, f_mad;
static CUdeviceptr acc, acc2, in_buf;
static uint32_t h_in[N];

/* The host model: what the graph being captured computes (want) and what
 * the exec holds (have: the last graph instantiated or accepted by an
 * update). */
static uint32_t want[2][N], have[2][N];
static CUgraphExec exec;

static uint32_t *hbuf(CUdeviceptr p)
{
    if (p >= acc && p < acc + N * 4) return &want[0][(p - acc) / 4];
    if (p >= acc2 && p < acc2 + N * 4) return &want[1][(p - acc2) / 4];
    printf("model: unknown buffer\n");
    exit(2);
}
static void m_add(CUdeviceptr p, uint32_t v, uint64_t n)
{
    uint32_t *h = hbuf(p);
    for (uint64_t i = 0; i < n; i++) h[i] += v;
}
static void m_mad(const uint32_t *in, CUdeviceptr p, uint64_t n)
{
    uint32_t *h = hbuf(p), tmp[N];
    memcpy(tmp, in, n * 4);                   /* in may be p itself */
    for (uint64_t i = 0; i < n; i++) h[i] = h[i] * 3u + tmp[i];
}
static void m_u64(CUdeviceptr p, uint64_t v)
{
    uint32_t *h = hbuf(p);
    h[0] = (uint32_t)v;
    h[1] = (uint32_t)(v >> 32);
}

/* Begins a step's capture on st: acc and acc2 set to 0 (two memsets). */
static void begin(CUstream st)
{
    MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuMemsetD32Async(acc, 0, N, st));
    R(cuMemsetD32Async(acc2, 0, N, st));
    memset(want, 0, sizeof want);
}

/* Ends step k's capture on st into *g and instantiates (first step, flags)
 * or updates the exec with it; 1 if the exec now holds it (a refusal is
 * printed). */
static int commit(int k, CUstream st, unsigned long long flags, CUgraph *g)
{
    MUST(cuStreamEndCapture(st, g));
    if (!exec) {
        MUST(cuGraphInstantiateWithFlags(&exec, *g, flags));
        return 1;
    }
    CUgraphExecUpdateResultInfo info;
    if (R(cuGraphExecUpdate_v2(exec, *g, &info)) == CUDA_SUCCESS) return 1;
    printf("step %d: update refused, result %d\n", k, (int)info.result);
    return 0;
}

/* Ends step k's capture on st (commit), launches the exec on s, checks both
 * buffers against the exec's model. */
static void finish(int k, CUstream st, unsigned long long flags)
{
    CUgraph g;
    char name[64];
    if (commit(k, st, flags, &g)) memcpy(have, want, sizeof have);
    R(cuGraphLaunch(exec, s));
    R(cuStreamSynchronize(s));
    snprintf(name, sizeof name, "step%d_acc", k);
    adv_check_words(name, acc, have[0], N);
    snprintf(name, sizeof name, "step%d_acc2", k);
    adv_check_words(name, acc2, have[1], N);
    MUST(cuGraphDestroy(g));
}


/* add_u32(p, v, n) and u64_store(p, v) by kernelParams on st. */
static void l_add(CUfunction f, CUstream st, CUdeviceptr p, uint32_t v, uint64_t n)
{
    void *a[] = { &p, &v, &n };
    R(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, st, a, NULL));
    m_add(p, v, n);
}
static void l_u64(CUfunction f, CUstream st, CUdeviceptr p, uint64_t v)
{
    void *a[] = { &p, &v };
    R(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, st, a, NULL));
    m_u64(p, v);
}

/* ------------------------------------------------------------ collide */

static unsigned slot_of(CUfunction f) { return (unsigned)(((uintptr_t)f >> 4) & 31); }

static void case_collide(void)
{
    char path[PATH_MAX + 64];
    CUmodule m[16];
    CUfunction fa[16], fu[16], a = NULL, u = NULL;
    adv_path("adv_kernels.so", path, sizeof path);
    for (int i = 0; i < 16; i++) {              /* all 16: the same calls whatever the handles */
        MUST(cuModuleLoad(&m[i], path));
        fa[i] = adv_fn(m[i], "add_u32");
        fu[i] = adv_fn(m[i], "u64_store");
        for (int j = 0; j <= i && !a; j++) {
            if (slot_of(fa[i]) == slot_of(fu[j])) a = fa[i], u = fu[j];
            else if (slot_of(fa[j]) == slot_of(fu[i])) a = fa[j], u = fu[i];
        }
    }
    if (getenv("ADV_VERBOSE")) fprintf(stderr, "collide: %p %p slot %u %u\n", (void *)a, (void *)u, slot_of(a), slot_of(u));
    if (!a) {
        printf("no add_u32 and u64_store handles in one slot among 16 loads\n");
        exit(2);
    }
    for (int k = 0; k < STEPS; k++) {
        begin(s);
        for (int j = 0; j < 4; j++) {          /* a, u, a, u, ...: each evicts the other */
            l_add(a, s, acc + 4u * (uint32_t)j, adv_val(k, 3, j % 3, 10u * (uint32_t)j), N - 8u * (uint32_t)j);
            l_u64(u, s, acc2 + 8u * (uint32_t)j, ((uint64_t)adv_val(k, 4, j, 5) << 32) | adv_val(k, 5, j, 1000));
        }
        finish(k, s, 0);
    }
}

/* ------------------------------------------------------------ kfunc */

static CUlibrary lib;

static CUkernel lib_kernel(const char *name)
{
    char path[PATH_MAX + 64];
    CUkernel kk;
    if (!lib) {
        adv_path("adv_kernels.so", path, sizeof path);
        MUST(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0));
    }
    MUST(cuLibraryGetKernel(&kk, lib, name));
    return kk;
}

static void case_kfunc(void)
{
    CUkernel k = lib_kernel("add_u32"), km = lib_kernel("mad_u32");
    CUfunction f, fm;
    MUST(cuKernelGetFunction(&f, k));
    MUST(cuKernelGetFunction(&fm, km));
    for (int st = 0; st < STEPS; st++) {
        begin(s);
        for (int j = 0; j < 6; j++) {
            CUfunction h = j % 2 ? f : (CUfunction)k;
            l_add(h, s, j < 3 ? acc : acc2, adv_val(st, 4, j % 4, 3u + (uint32_t)j), N);
            uint64_t n = N;
            CUdeviceptr p = j < 3 ? acc2 : acc;
            void *ma[] = { &in_buf, &p, &n };
            R(cuLaunchKernel(j % 2 ? (CUfunction)km : fm, 1, 1, 1, 1, 1, 1, 0, s, ma, NULL));
            m_mad(h_in, p, N);
        }
        finish(st, s, 0);
    }
}

/* ------------------------------------------------------------ forms */

/* add_u32 by `extra`: the emulated layout (ptr at 0, u32 at 8, u64 at 16). */
static void l_add_extra(CUfunction f, CUstream st, CUdeviceptr p, uint32_t v, uint64_t n)
{
    unsigned char buf[24];
    size_t size = sizeof buf;
    memset(buf, 0xa5, sizeof buf);            /* the gap after v: not an argument */
    memcpy(buf, &p, 8);
    memcpy(buf + 8, &v, 4);
    memcpy(buf + 16, &n, 8);
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                      CU_LAUNCH_PARAM_END };
    R(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, st, NULL, extra));
    m_add(p, v, n);
}

static void case_forms(void)
{
    for (int k = 0; k < STEPS; k++) {
        begin(s);
        l_add(f_add, s, acc, adv_val(k, 4, 0, 1), N);
        l_add_extra(f_add, s, acc, adv_val(k, 4, 1, 100), N);
        l_add(f_add, s, acc2, adv_val(k, 4, 2, 10000), N);
        l_add_extra(f_add, s, acc2, 7, (uint64_t)N - (uint64_t)adv_val(k, 4, 3, 0) % 32u);
        l_add(f_add, s, acc2 + 4, 3, 8);
        finish(k, s, 0);
    }
}

/* ------------------------------------------------------------ noparams */

static void case_noparams(void)
{
    CUfunction f0 = adv_fn(mod, "no_args"), fr = adv_fn(mod, "no_args_read");
    uint32_t count = 0, have_blocks = 0;
    void *empty[1] = { NULL };
    for (int k = 0; k < STEPS; k++) {
        unsigned g1 = 1u + adv_val(k, 3, 1, 0) % 3u, g2 = 1u + adv_val(k, 4, 2, 0) % 4u;
        begin(s);
        R(cuLaunchKernel(f0, g1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
        R(cuLaunchKernel(f0, g2, 1, 1, 1, 1, 1, 0, s, empty, NULL));
        R(cuLaunchKernel(f0, 1, 1, 1, 1, 1, 1, 0, s, adv_rep(k) % 2 ? empty : NULL, NULL));
        void *ra[] = { &acc };
        R(cuLaunchKernel(fr, 1, 1, 1, 1, 1, 1, 0, s, ra, NULL));
        /* the counter counts every block the execs ran: the model follows
         * the blocks of the graph the exec holds */
        CUgraph g;
        if (commit(k, s, 0, &g)) have_blocks = g1 + g2 + 1;
        count += have_blocks;
        R(cuGraphLaunch(exec, s));
        R(cuStreamSynchronize(s));
        uint32_t w[N] = { count };
        char name[32];
        snprintf(name, sizeof name, "step%d_count", k);
        adv_check_words(name, acc, w, N);
        MUST(cuGraphDestroy(g));
    }
}

/* ------------------------------------------------------------ aliasargs */

static void case_aliasargs(void)
{
    struct { CUdeviceptr p; uint64_t nn; CUdeviceptr q; } a;
    for (int k = 0; k < STEPS; k++) {
        begin(s);
        /* add_u32(p, v, n) with v the low half of n's bytes: v == n */
        a.p = acc;
        a.nn = 8u + adv_val(k, 3, 1, 0) % 48u;
        void *args1[] = { &a.p, &a.nn, &a.nn };
        R(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s, args1, NULL));
        m_add(acc, (uint32_t)a.nn, a.nn);
        a.nn = 0xdeadbeefu;                    /* after the launch: not in the graph */
        a.p = 0;
        /* mad_u32(in, acc, n) with in and acc one variable: acc2 = acc2 * 4 */
        a.q = acc2;
        a.nn = N;
        void *args2[] = { &a.q, &a.q, &a.nn };
        l_add(f_add, s, acc2, adv_val(k, 4, 2, 5), N);
        R(cuLaunchKernel(f_mad, 1, 1, 1, 1, 1, 1, 0, s, args2, NULL));
        m_mad(want[1], acc2, N);
        /* the same array again, its storage changed in between */
        a.q = acc;
        a.nn = 4u + adv_val(k, 5, 3, 0) % 16u;
        R(cuLaunchKernel(f_mad, 1, 1, 1, 1, 1, 1, 0, s, args2, NULL));
        m_mad(want[0], acc, a.nn);
        a.q = acc2;                            /* after the last launch, before the end */
        a.nn = 1;
        finish(k, s, 0);
    }
}

/* ------------------------------------------------------------ reuse */

static void case_reuse(void)
{
    char p1[PATH_MAX + 64], p2[PATH_MAX + 64];
    adv_path("adv_ver1.so", p1, sizeof p1);
    adv_path("adv_ver2.so", p2, sizeof p2);
    CUmodule m1, m2 = NULL;
    CUfunction v1, v2 = NULL;
    MUST(cuModuleLoad(&m1, p1));
    v1 = adv_fn(m1, "versioned");
    for (int k = 0; k < STEPS; k++) {
        if (k == 3) {
            MUST(cuModuleUnload(m1));
            MUST(cuModuleLoad(&m2, p2));
            v2 = adv_fn(m2, "versioned");
            fprintf(stderr, "versioned: the new function %s the unloaded one's handle value\n",
                    v2 == v1 ? "has" : "does not have");
        }
        begin(s);
        uint32_t a = 3, b = adv_val(k, 3, 1, 40);
        l_add(f_add, s, acc, adv_val(k, 5, 0, 1), N);
        CUdeviceptr o = acc2;
        void *a1[] = { &o, &a }, *a2[] = { &o, &a, &b };
        if (k < 3) {
            R(cuLaunchKernel(v1, 1, 1, 1, 1, 1, 1, 0, s, a1, NULL));
            want[1][0] = a;
        } else {
            R(cuLaunchKernel(v2, 1, 1, 1, 1, 1, 1, 0, s, a2, NULL));
            want[1][0] = a * 1000u + b;
        }
        l_add(f_add, s, acc, 2, N);
        finish(k, s, 0);
    }
    R(cuGraphExecDestroy(exec));
    exec = NULL;
    MUST(cuModuleUnload(m2));
}

/* ------------------------------------------------------------ launch_ex */

static void l_add_ex(CUfunction f, CUstream st, CUdeviceptr p, uint32_t v, const CUlaunchAttribute *at,
                     unsigned nat)
{
    uint64_t n = N;
    void *a[] = { &p, &v, &n };
    CUlaunchConfig cfg = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1,
                           .blockDimZ = 1, .hStream = st, .attrs = (CUlaunchAttribute *)at, .numAttrs = nat };
    R(cuLaunchKernelEx(&cfg, f, a, NULL));
    m_add(p, v, N);
}

static void case_launch_ex(void)
{
    for (int k = 0; k < STEPS; k++) {
        CUlaunchAttribute pr[2], co[1];
        memset(pr, 0, sizeof pr);
        memset(co, 0, sizeof co);
        pr[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        pr[0].value.priority = -2;                      /* overridden by the later one */
        pr[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        pr[1].value.priority = adv_rep(k) == 4 ? -1 : 0;
        co[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        co[0].value.cooperative = 1;
        begin(s);
        l_add(f_add, s, acc, adv_val(k, 3, 0, 1), N);
        l_add_ex(f_add, s, acc, adv_val(k, 3, 1, 20), pr, 2);
        l_add(f_add, s, acc, 5, N);                    /* the same function, plain, between */
        uint32_t c = adv_val(k, 4, 1, 300);
        uint64_t n = N;
        void *ca[] = { &acc2, &c, &n };
        if (adv_rep(k) < 7) {
            R(cuLaunchCooperativeKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s, ca));
            m_add(acc2, c, N);
        } else if (adv_rep(k) != 9) {
            l_add_ex(f_add, s, acc2, c, co, 1);          /* the same node */
        } else {
            l_add(f_add, s, acc2, c, N);                /* not cooperative */
        }
        CUlaunchAttribute cl[2];                        /* an ignored entry, a 1x1x1 cluster */
        memset(cl, 0, sizeof cl);
        cl[0].id = CU_LAUNCH_ATTRIBUTE_IGNORE;
        cl[0].value.priority = 5;
        cl[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        cl[1].value.clusterDim.x = cl[1].value.clusterDim.y = cl[1].value.clusterDim.z = 1;
        l_add_ex(f_add, s, acc2, adv_val(k, 5, 2, 4000), cl, 2);
        l_add_ex(f_add, s, acc2, 1, co, 0);
        finish(k, s, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
    }
}

/* ------------------------------------------------------------ ctx_kernel */

static void case_ctx_kernel(void)
{
    CUkernel k = lib_kernel("add_u32");
    CUstream sb, s2;
    CUevent e, eb, e2;
    CUdevice dev;
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuCtxCreate(&ctx_b, NULL, 0, dev));
    MUST(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&eb, CU_EVENT_DISABLE_TIMING));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    for (int st = 0; st < STEPS; st++) {
        /* the same topology every step: the middle launch runs on a stream
         * of context B (even steps) or on another stream of context A */
        int on_b = st / 3 % 2 == 0;                    /* switches where nothing else changes */
        CUstream sx = on_b ? sb : s2;
        CUevent ex = on_b ? eb : e2;
        begin(s);
        l_add((CUfunction)k, s, acc, 11, N);             /* in context A, first */
        R(cuEventRecord(e, s));
        MUST(cuCtxSetCurrent(on_b ? ctx_b : ctx));       /* (the stream's context current) */
        R(cuStreamWaitEvent(sx, e, 0));
        l_add((CUfunction)k, sx, acc2, 13, N);
        R(cuEventRecord(ex, sx));
        MUST(cuCtxSetCurrent(ctx));
        R(cuStreamWaitEvent(s, ex, 0));
        l_add((CUfunction)k, s, acc2, adv_val(st, 3, 1, 100), N);
        finish(st, s, 0);
    }
    MUST(cuCtxSetCurrent(ctx_b));
    R(cuEventDestroy(eb));
    R(cuStreamDestroy(sb));
    MUST(cuCtxSetCurrent(ctx));
    R(cuEventDestroy(e));
    R(cuEventDestroy(e2));
    R(cuStreamDestroy(s2));
}

/* ------------------------------------------------------------ ptsz_ctx */

static void case_ptsz_ctx(void)
{
    CUstream pt = CU_STREAM_PER_THREAD;
    CUevent e, eb;
    CUdevice dev;
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuCtxCreate(&ctx_b, NULL, 0, dev));
    MUST(cuEventCreate(&eb, CU_EVENT_DISABLE_TIMING));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    for (int k = 0; k < STEPS; k++) {
        int on_b = k / 3 % 2;                           /* switches where nothing else changes */
        uint32_t v = adv_val(k, 3, 1, 70);
        begin(pt);                                      /* context A's per-thread stream */
        R(cuEventRecord(e, pt));
        MUST(cuCtxSetCurrent(ctx_b));
        R(cuStreamWaitEvent(pt, e, 0));                 /* B's per-thread stream joins */
        if (on_b) R(cuMemsetD32Async(acc2, v, N, pt));   /* on B's */
        MUST(cuCtxSetCurrent(ctx));
        if (!on_b) R(cuMemsetD32Async(acc2, v, N, pt));  /* on A's */
        for (int i = 0; i < N; i++) want[1][i] = v;
        l_add(f_add, pt, acc, adv_val(k, 3, 1, 9), N);      /* on A's */
        MUST(cuCtxSetCurrent(ctx_b));
        R(cuEventRecord(eb, pt));
        MUST(cuCtxSetCurrent(ctx));
        R(cuStreamWaitEvent(pt, eb, 0));
        finish(k, pt, 0);
    }
    MUST(cuCtxSetCurrent(ctx_b));
    R(cuEventDestroy(eb));
    MUST(cuCtxSetCurrent(ctx));
    R(cuEventDestroy(e));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "collide", "kfunc", "forms", "noparams", "aliasargs", "reuse",
                                         "launch_ex", "ctx_kernel", "ptsz_ctx", NULL };
    int which = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    f_add = adv_fn(mod, "add_u32");
    f_mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&acc, N * 4));
    MUST(cuMemAlloc(&acc2, N * 4));
    MUST(cuMemAlloc(&in_buf, N * 4));
    for (int i = 0; i < N; i++) h_in[i] = 1000u + (uint32_t)i * 3u;
    MUST(cuMemcpyHtoD(in_buf, h_in, sizeof h_in));
    static void (*const run[])(void) = { case_collide, case_kfunc, case_forms, case_noparams, case_aliasargs,
                                         case_reuse, case_launch_ex, case_ctx_kernel, case_ptsz_ctx };
    run[which]();
    if (exec) R(cuGraphExecDestroy(exec));
    if (ctx_b) R(cuCtxDestroy(ctx_b));
    MUST(cuCtxSetCurrent(ctx));
    if (lib) R(cuLibraryUnload(lib));
    R(cuMemFree(in_buf));
    R(cuMemFree(acc2));
    R(cuMemFree(acc));
    R(cuStreamDestroy(s));
    return adv_finish();
}
