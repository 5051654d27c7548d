/*
 * tests/e2e/adv_ptsz.c: round 29, the per-thread default stream across
 * contexts. CU_STREAM_PER_THREAD is "local to both the thread and the
 * CUcontext" (CUDA driver API, "Stream synchronization behavior"): one
 * thread's per-thread streams of two contexts are two streams, which the
 * driver does not order. The library's stream identities (core/streams.h:
 * stream-ordered reuse of freed placed memory, the launch order of exec
 * variants) must keep them apart (before round 29 they keyed a per-thread
 * stream by its thread only and the legacy stream by nothing:
 * variants_ctx and variants_legacy computed wrongly under skip_profiled).
 * Context A is the primary context of
 * device 0, context B one created on the same device; "A's stream" is the
 * per-thread default stream with A current.
 *   mem_ctx        A's block (cuMemAllocAsync on A's stream, filled), read
 *                  by a slow kernel on B's stream and freed there
 *                  (cuMemFreeAsync, stream-ordered behind the reader); then,
 *                  A current again, a block of the same size allocated on
 *                  A's stream and overwritten at once: taken for the stream
 *                  of the free, the block is reused without waiting for it;
 *   mem_threads    the contrast: the same with two threads of one context,
 *                  each on its own per-thread stream (the second thread
 *                  allocates while the first one's reader still runs);
 *   variants_ctx   an exec (acc = acc * 3 + in) launched each step on A's
 *                  stream (held by a slow host function) with input a, then
 *                  pointed at input b (cuGraphExecKernelNodeSetParams) and
 *                  launched on B's stream: the driver orders launches of one
 *                  exec, a library serving the two states from two variants
 *                  must order them itself, which it skips on the same stream;
 *   variants_legacy  the same on the legacy default streams of A and B
 *                  (also one per context);
 *   variants_named the control: the same on a named stream of A and one of B;
 *   variants_threads  the contrast: the second launch from another thread
 *                  of context A, on its per-thread stream;
 *   switch         one thread's per-thread stream of A across cuCtxSetCurrent
 *                  switches: an exec launched on A's stream (held), B's own
 *                  exec launched on B's stream, back to A, the exec pointed
 *                  at b and launched on A's stream again; every other step
 *                  a block freed on A's stream behind a slow reader, a
 *                  block allocated and freed on B's stream meanwhile, the
 *                  same size allocated on A's stream after the switch back
 *                  (same stream: its reuse is stream-ordered, no wait
 *                  needed).
 * Checks: each slow reader saw its block unchanged (0 words changed), every
 * second user's block holds what it wrote, each accumulator equals the
 * host's model after every step (the launches ran in launch order).
 * Usage: adv_ptsz CASE
 */
#include "adv_common.h"

#define WORDS (64u * 1024u)         /* 256 KiB */
#define SLOW_US 50000u
#define N 1024u
#define STEPS 6

static CUcontext ctx, ctx_b;
static CUfunction f_fill, f_slow, f_mad;         /* context A's */
static CUfunction fb_fill, fb_slow, fb_mad;      /* context B's (its own module) */
#define MAXREADERS 32
static CUdeviceptr bad;                         /* one word per slow reader */
static int nreaders;
static __thread CUcontext cur;                           /* the context this thread made current */
#define FN(f) (cur == ctx_b && ctx_b ? fb_##f : f_##f)

/* cuCtxSetCurrent(c), remembered for FN */
static void use(CUcontext c)
{
    MUST(cuCtxSetCurrent(c));
    cur = c;
}
#define PT CU_STREAM_PER_THREAD

static void CUDA_CB slow_host(void *arg)
{
    (void)arg;
    adv_sleep_us(20000);
}

/* A block of WORDS words on stream s of the current context, filled with v + i. */
static CUdeviceptr filled(CUstream s, uint32_t v)
{
    CUdeviceptr p;
    uint64_t n = WORDS;
    MUST(cuMemAllocAsync(&p, WORDS * 4, s));
    ADV_LAUNCH(FN(fill), s, &p, &v, &n);
    return p;
}

/* A slow reader of p (filled with v + i) on s, then p freed on s. */
static void read_free(CUdeviceptr p, uint32_t v, CUstream s)
{
    uint32_t us = SLOW_US;
    uint64_t n = WORDS;
    CUdeviceptr out = bad + 4u * (uint32_t)__atomic_fetch_add(&nreaders, 1, __ATOMIC_RELAXED);
    ADV_LAUNCH(FN(slow), s, &p, &v, &n, &us, &out);
    R(cuMemFreeAsync(p, s));
}

/* The second user: a block allocated on s, overwritten at once, checked. */
static void second_user(const char *name, CUstream s)
{
    CUdeviceptr p = filled(s, 5000);
    R(cuStreamSynchronize(s));
    uint32_t first = 0, last = 0;
    R(cuMemcpyDtoH(&first, p, 4));
    R(cuMemcpyDtoH(&last, p + (WORDS - 1) * 4, 4));
    adv_check(name, first == 5000 && last == 5000 + WORDS - 1, "first %u, last %u", first, last);
    R(cuMemFreeAsync(p, s));
    R(cuStreamSynchronize(s));
}

/* The slow readers saw their blocks unchanged. */
static void check_readers(void)
{
    use(ctx);
    R(cuCtxSynchronize());
    if (ctx_b) {
        use(ctx_b);
        R(cuCtxSynchronize());
        use(ctx);
    }
    uint32_t words[MAXREADERS], nbad = 0;
    R(cuMemcpyDtoH(words, bad, sizeof words));
    for (int i = 0; i < nreaders && i < MAXREADERS; i++) nbad += words[i];
    adv_check("words of a block changed under its slow readers", nbad == 0 && nreaders <= MAXREADERS,
              "%u (%d readers)", nbad, nreaders);
}

/* ------------------------------------------------------------ memory */

static void case_mem_ctx(void)
{
    for (int k = 0; k < 3; k++) {
        use(ctx);
        CUdeviceptr p = filled(PT, 1000);               /* A's block, on A's stream */
        R(cuStreamSynchronize(PT));
        use(ctx_b);
        read_free(p, 1000, PT);                         /* read and freed on B's stream */
        use(ctx);
        second_user("second user's block (A's stream)", PT);
    }
    check_readers();
}

static void *mem_first_thread(void *arg)
{
    (void)arg;
    use(ctx);
    read_free(filled(PT, 1000), 1000, PT);
    return NULL;
}

static void case_mem_threads(void)
{
    for (int k = 0; k < 3; k++) {
        pthread_t t;
        pthread_create(&t, NULL, mem_first_thread, NULL);
        pthread_join(t, NULL);                          /* its reader still runs */
        second_user("second user's block (another thread's stream)", PT);
    }
    check_readers();
}

/* ------------------------------------------------------------ variants */

static CUdeviceptr a, b, acc;
static uint32_t ha[N], hb[N], model[N];
static CUdeviceptr in;
static uint64_t n_words = N;
static void *args[] = { &in, &acc, &n_words };
static CUgraph g;
static CUgraphNode node;
static CUgraphExec exec;
static CUstream vs = PT;                        /* the stream the variants cases use in A */
static CUstream vs_b = PT;                      /* in B */

static void variants_setup(void)
{
    adv_order_buffers(N, &a, &b, &acc, ha, hb, model);
    in = a;
    exec = adv_one_node_exec(PT, f_mad, args, &g, &node);
}

static void variants_teardown(void)
{
    use(ctx);
    adv_order_done(exec, g, a, b, acc, model, N);
}

/* Step k's first launch: on A's stream, held, with input a. */
static void launch_a(void)
{
    use(ctx);
    R(cuLaunchHostFunc(vs, slow_host, NULL));
    in = a;
    ADV_SET_KERNEL(exec, node, f_mad, args);
    R(cuGraphLaunch(exec, vs));
}

/* The step's result (after both launches were synchronized). */
static int step_ok(void) { return adv_order_step_ok(acc, model, ha, hb, N); }

/* STEPS steps of launch_a() then second(), the step's launches awaited. */
static void variants_steps(void (*second)(void))
{
    variants_setup();
    int good = 0;
    for (int k = 0; k < STEPS; k++) {
        launch_a();
        second();
        R(cuStreamSynchronize(vs));                     /* A current */
        good += step_ok();
    }
    adv_check("steps whose launches ran in launch order", good == STEPS, "%d of %d", good, STEPS);
    variants_teardown();
}

/* The second launch on B's stream (input b). */
static void second_on_b(void)
{
    in = b;
    ADV_SET_KERNEL(exec, node, f_mad, args);
    use(ctx_b);
    R(cuGraphLaunch(exec, vs_b));                       /* B's stream */
    R(cuStreamSynchronize(vs_b));
    use(ctx);
}

static void case_variants_ctx(void) { variants_steps(second_on_b); }

/* The same on the legacy default streams of A and B (also one per context). */
static void case_variants_legacy(void)
{
    vs = vs_b = CU_STREAM_LEGACY;
    case_variants_ctx();
}

/* The same on a named stream of A and one of B (the control). */
static void case_variants_named(void)
{
    MUST(cuStreamCreate(&vs, CU_STREAM_NON_BLOCKING));
    use(ctx_b);
    MUST(cuStreamCreate(&vs_b, CU_STREAM_NON_BLOCKING));
    use(ctx);
    case_variants_ctx();
    R(cuStreamDestroy(vs));
    use(ctx_b);
    R(cuStreamDestroy(vs_b));
    use(ctx);
}

static void *variants_second(void *arg)
{
    (void)arg;
    use(ctx);
    in = b;
    ADV_SET_KERNEL(exec, node, f_mad, args);
    R(cuGraphLaunch(exec, PT));                         /* this thread's stream */
    R(cuStreamSynchronize(PT));
    return NULL;
}

/* The second launch from another thread of A, on its per-thread stream. */
static void second_thread(void)
{
    pthread_t t;
    pthread_create(&t, NULL, variants_second, NULL);
    pthread_join(t, NULL);
}

static void case_variants_threads(void) { variants_steps(second_thread); }

/* ------------------------------------------------------------ switch */

static void case_switch(void)
{
    variants_setup();
    /* context B's own exec on its own accumulator */
    use(ctx_b);
    CUdeviceptr b_in, b_acc;
    uint32_t hbi[N], bmodel[N];
    for (uint32_t i = 0; i < N; i++) {
        hbi[i] = 3u * i + 5u;
        bmodel[i] = 2u * i;
    }
    MUST(cuMemAlloc(&b_in, N * 4));
    MUST(cuMemAlloc(&b_acc, N * 4));
    MUST(cuMemcpyHtoD(b_in, hbi, sizeof hbi));
    MUST(cuMemcpyHtoD(b_acc, bmodel, sizeof bmodel));
    void *bargs[] = { &b_in, &b_acc, &n_words };
    CUgraph gb;
    CUgraphNode nb;
    CUgraphExec eb = adv_one_node_exec(PT, fb_mad, bargs, &gb, &nb);
    int good = 0;
    for (int k = 0; k < STEPS; k++) {
        launch_a();                                     /* A's stream, held */
        if (k % 2 == 0) read_free(filled(PT, 1000), 1000, PT);   /* behind the held launch */
        use(ctx_b);
        R(cuGraphLaunch(eb, PT));                       /* B's stream */
        CUdeviceptr q = filled(PT, 2000);
        R(cuMemFreeAsync(q, PT));
        use(ctx);
        in = b;
        ADV_SET_KERNEL(exec, node, f_mad, args);
        R(cuGraphLaunch(exec, PT));                     /* A's stream again */
        if (k % 2 == 0) second_user("second user's block (A's stream, after switches)", PT);
        R(cuStreamSynchronize(PT));
        good += step_ok();
        for (uint32_t i = 0; i < N; i++) bmodel[i] = bmodel[i] * 3u + hbi[i];
    }
    adv_check("steps whose launches ran in launch order", good == STEPS, "%d of %d", good, STEPS);
    check_readers();
    use(ctx_b);
    R(cuCtxSynchronize());
    adv_check_words("context B's accumulator", b_acc, bmodel, N);
    R(cuGraphExecDestroy(eb));
    R(cuGraphDestroy(gb));
    R(cuMemFree(b_in));
    R(cuMemFree(b_acc));
    variants_teardown();
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "mem_ctx", "mem_threads", "variants_ctx", "variants_threads",
                                         "switch", "variants_legacy", "variants_named", NULL };
    static void (*const run[])(void) = { case_mem_ctx, case_mem_threads, case_variants_ctx,
                                         case_variants_threads, case_switch, case_variants_legacy,
                                         case_variants_named };
    int which = adv_case(argc, argv, names);
    CUmodule mod;
    adv_open(&ctx, &mod);
    f_fill = adv_fn(mod, "fill_u32");
    f_slow = adv_fn(mod, "sleep_count");
    f_mad = adv_fn(mod, "mad_u32");
    cur = ctx;
    MUST(cuMemAlloc(&bad, 4 * MAXREADERS));
    MUST(cuMemsetD32(bad, 0, MAXREADERS));
    CUdevice dev;
    MUST(cuDeviceGet(&dev, 0));
    if (which != 1 && which != 3) {
        MUST(cuCtxCreate(&ctx_b, NULL, 0, dev));     /* pushed: current */
        char path[PATH_MAX + 64];
        CUmodule mod_b;
        adv_path("adv_kernels.so", path, sizeof path);
        MUST(cuModuleLoad(&mod_b, path));
        fb_fill = adv_fn(mod_b, "fill_u32");
        fb_slow = adv_fn(mod_b, "sleep_count");
        fb_mad = adv_fn(mod_b, "mad_u32");
        use(ctx);
    }
    run[which]();
    use(ctx);
    R(cuMemFree(bad));
    if (ctx_b) R(cuCtxDestroy(ctx_b));
    return adv_finish();
}
