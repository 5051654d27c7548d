/*
 * tests/e2e/adv_green.c: programs that partition the device with green
 * contexts (CUDA 12.4+), as inference servers do, and give the library's
 * context-keyed machinery (placement per context, the recorder's per-stream
 * context, the variants' order event, CUkernel resolution) a context that
 * is the primary one for memory and another one for streams.
 *   alloc        temporaries allocated and freed each step with the green
 *                context's converted context current, used by kernels on a
 *                green stream; the last one freed with the primary context
 *                current (the memory is the primary context's, and so is its
 *                CU_POINTER_ATTRIBUTE_CONTEXT); then stream-ordered
 *                temporaries on the green stream and the green context's
 *                default stream, some freed on a primary stream;
 *   capture      each step allocates a temporary, re-captures on a green
 *                stream a graph joined by a stream of the primary context
 *                through events (fork and join), cuGraphExecUpdate + launch;
 *                the step's value repeats every other step (an update that
 *                changes nothing);
 *   rotate       one exec launched on a green stream with its input rotating
 *                over three buffers (cuGraphExecKernelNodeSetParams), so that
 *                skip_profiled may serve it with variants, launched in turn
 *                on a stream of the primary context (the order of launches
 *                over two streams of two contexts);
 *   kernel       a CUkernel (cuLibraryLoadFromFile, cuLibraryGetKernel)
 *                launched eagerly and captured on a green stream, re-captured
 *                and updated each step;
 *   destroy      the green context destroyed (its streams first) after it
 *                captured and allocated; the primary context goes on: frees
 *                the memory made under the green context, allocates, captures
 *                and updates again, and a second green context is made;
 *   reverse      the program releases its own retain of the primary context
 *                while a green context holds it, works on the green context
 *                alone, destroys it (the primary context goes inactive: its
 *                memory is freed), then retains the primary context again
 *                and runs the steps once more;
 *   survive      an exec instantiated and launched on a green stream with its
 *                input rotating (variants) outlives the green context: the
 *                rotation goes on with launches on a primary stream;
 *   threads      two green contexts, each driven by a thread of its own
 *                (temporaries, re-capture, update, launch on its stream, then
 *                stream-ordered temporaries on its default stream) while a
 *                third does the same on the primary context;
 *   relife       three lives of the primary context, each ended by the
 *                destruction of the green context that held it last while an
 *                exec instantiated under the green context (its input
 *                rotating: variants) is still alive: the teardown destroys it;
 *   capend       a green context destroyed while one of its streams captures
 *                (the driver invalidates that capture; the stream is left to
 *                leak, as documented); the primary context then allocates,
 *                captures and updates as before;
 *   cycle        (a 256 MiB device) five lives of the primary context, each
 *                ended by the destruction of a green context that held it
 *                last: the program retains it, makes a green context,
 *                releases it, allocates 80 MiB under the green context and
 *                never frees them (the context's teardown does);
 *   churn        (a 256 MiB device) eight green contexts one after the other,
 *                each allocating 3 x 40 MiB under its converted context,
 *                freeing two while it lives and the third after its end (the
 *                primary context current), then 200 MiB at once.
 * Usage: adv_green alloc|capture|rotate|kernel|destroy|reverse|survive|threads|relife|capend|cycle|churn
 */
#include "adv_common.h"

#define N 256

static CUcontext primary;
static CUmodule mod;
static CUfunction f_fill, f_add, f_mad;
static uint64_t n = N;
/* The captures' mode: thread-local where threads capture at once (a global capture forbids
 * other threads' allocations). */
static CUstreamCaptureMode cap_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static void load_kernels(void);

/* acc (device, n words) and its host model, set to i. */
static void acc_init(CUdeviceptr *acc, uint32_t *model)
{
    MUST(cuMemAlloc(acc, N * 4));
    for (uint32_t i = 0; i < N; i++) model[i] = i;
    MUST(cuMemcpyHtoD(*acc, model, N * 4));
}

/* The model of one step: tmp = v + i (+ 5 where joined); acc = acc * 3 + tmp. */
static void model_step(uint32_t *model, uint32_t v, int joined)
{
    for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + v + i + (joined ? 5u : 0u);
}

/* `steps` steps on stream s (join: a stream that joins each capture through events,
 * NULL: none): a temporary allocated with the current context, a graph captured on s
 * (fill the temporary, [join: +5 on the other stream], mad into acc), instantiated at the
 * first step and updated at the others, launched; the temporary freed. */
static void steps_on(const char *label, CUstream s, CUstream join, int steps, CUdeviceptr acc, uint32_t *model)
{
    CUgraphExec exec = NULL;
    CUevent fork = NULL, back = NULL;
    uint32_t five = 5;
    if (join) {
        MUST(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
        MUST(cuEventCreate(&back, CU_EVENT_DISABLE_TIMING));
    }
    for (int k = 0; k < steps; k++) {
        uint32_t v = adv_val(k, 2, 0, 100);
        CUdeviceptr tmp = 0;
        CUgraph g = NULL;
        MUST(cuMemAlloc(&tmp, N * 4));
        MUST(cuStreamBeginCapture(s, cap_mode));
        ADV_LAUNCH(f_fill, s, &tmp, &v, &n);
        if (join) {
            R(cuEventRecord(fork, s));
            R(cuStreamWaitEvent(join, fork, 0));
            ADV_LAUNCH(f_add, join, &tmp, &five, &n);
            R(cuEventRecord(back, join));
            R(cuStreamWaitEvent(s, back, 0));
        }
        ADV_LAUNCH(f_mad, s, &tmp, &acc, &n);
        R(cuStreamEndCapture(s, &g));
        if (!exec) R(cuGraphInstantiateWithFlags(&exec, g, 0));
        else adv_update(exec, g);
        R(cuGraphLaunch(exec, s));
        R(cuStreamSynchronize(s));
        R(cuGraphDestroy(g));
        R(cuMemFree(tmp));
        model_step(model, v, join != NULL);
    }
    char name[96];
    snprintf(name, sizeof name, "%s accumulator", label);
    adv_check_words(name, acc, model, N);
    R(cuGraphExecDestroy(exec));
    if (join) {
        R(cuEventDestroy(fork));
        R(cuEventDestroy(back));
    }
}

/* ------------------------------------------------------------ alloc */

static void case_alloc(void)
{
    CUcontext cc;
    CUstream gs;
    CUgreenCtx g = adv_green_make(&cc, &gs);
    MUST(cuCtxSetCurrent(cc));
    CUdeviceptr acc;
    uint32_t model[N];
    acc_init(&acc, model);
    CUdeviceptr last = 0;
    for (int k = 0; k < 12; k++) {
        CUdeviceptr t1, t2;
        uint32_t v = 10u + (uint32_t)k;
        MUST(cuMemAlloc(&t1, N * 4));
        MUST(cuMemAlloc(&t2, 3 * N * 4));
        ADV_LAUNCH(f_fill, gs, &t1, &v, &n);
        ADV_LAUNCH(f_fill, gs, &t2, &v, &n);
        ADV_LAUNCH(f_add, gs, &t2, &v, &n);
        ADV_LAUNCH(f_mad, gs, &t1, &acc, &n);
        ADV_LAUNCH(f_mad, gs, &t2, &acc, &n);
        R(cuStreamSynchronize(gs));
        for (uint32_t i = 0; i < N; i++) model[i] = (model[i] * 3u + v + i) * 3u + 2u * v + i;
        R(cuMemFree(t1));
        if (k == 11) last = t2;
        else R(cuMemFree(t2));
    }
    adv_check_words("green accumulator", acc, model, N);
    /* stream-ordered: on the green stream, on the green context's default stream, and
     * freed on a stream of the primary context after an event */
    CUstream ps;
    CUevent ev;
    MUST(cuCtxSetCurrent(primary));
    MUST(cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    MUST(cuCtxSetCurrent(cc));
    for (int k = 0; k < 9; k++) {
        CUdeviceptr t = 0;
        uint32_t v = 50u + (uint32_t)k;
        CUstream on = k % 3 == 1 ? NULL : gs;
        if (on == NULL) R(cuStreamSynchronize(gs));     /* acc: the default stream after gs */
        if (R(cuMemAllocAsync(&t, 2 * N * 4, on)) != CUDA_SUCCESS) continue;
        ADV_LAUNCH(f_fill, on, &t, &v, &n);
        ADV_LAUNCH(f_mad, on, &t, &acc, &n);
        for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + v + i;
        if (k % 3 == 2) {
            R(cuEventRecord(ev, on));
            R(cuStreamWaitEvent(ps, ev, 0));
            R(cuMemFreeAsync(t, ps));
            R(cuEventRecord(ev, ps));
            R(cuStreamWaitEvent(gs, ev, 0));
        } else {
            R(cuMemFreeAsync(t, on));
        }
        if (on == NULL) R(cuStreamSynchronize(NULL));
    }
    R(cuStreamSynchronize(gs));
    R(cuStreamSynchronize(ps));
    adv_check_words("stream-ordered accumulator", acc, model, N);
    R(cuEventDestroy(ev));
    CUcontext owner = NULL;
    R(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, last));
    printf("context of memory made under the green context: %s\n",
           owner == primary ? "the primary" : owner == cc ? "the converted" : "another");
    /* the memory is the primary context's: read and freed with it current */
    MUST(cuCtxSetCurrent(primary));
    uint32_t want[N];
    for (uint32_t i = 0; i < N; i++) want[i] = 2u * 21u + i;
    adv_check_words("last temporary, primary current", last, want, N);
    R(cuMemFree(last));
    R(cuMemFree(acc));
    R(cuStreamDestroy(gs));
    R(cuStreamDestroy(ps));
    R(cuGreenCtxDestroy(g));
}

/* ------------------------------------------------------------ capture */

static void case_capture(void)
{
    CUcontext cc;
    CUstream gs, ps;
    CUgreenCtx g = adv_green_make(&cc, NULL);
    MUST(cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));      /* the primary context's */
    MUST(cuCtxSetCurrent(cc));
    MUST(cuStreamCreate(&gs, CU_STREAM_NON_BLOCKING));      /* the green context's */
    CUdeviceptr acc;
    uint32_t model[N];
    acc_init(&acc, model);
    steps_on("green, joined by the primary", gs, ps, 12, acc, model);
    steps_on("green alone", gs, NULL, 9, acc, model);
    MUST(cuCtxSetCurrent(primary));
    steps_on("primary, joined by the green", ps, gs, 9, acc, model);
    R(cuMemFree(acc));
    R(cuStreamDestroy(gs));
    R(cuStreamDestroy(ps));
    R(cuGreenCtxDestroy(g));
}

/* ------------------------------------------------------------ rotate */

/* One exec mad(in[b], acc) captured on a green stream, its input to rotate over in[3]. */
typedef struct rot {
    CUcontext cc;
    CUgreenCtx g;
    CUstream gs, ps;     /* a stream of the green context, one of the primary context */
    CUdeviceptr in[3], acc;
    uint32_t hin[3 * N], model[N];
    CUgraph gr;
    CUgraphNode node;
    CUgraphExec exec;
} rot;

static void rot_begin(rot *r)
{
    r->g = adv_green_make(&r->cc, &r->gs);
    MUST(cuStreamCreate(&r->ps, CU_STREAM_NON_BLOCKING));
    MUST(cuCtxSetCurrent(r->cc));
    adv_mad_buffers(N, r->in, r->hin, &r->acc, r->model);
    void *args[] = { &r->in[0], &r->acc, &n };
    r->exec = adv_one_node_exec(r->gs, f_mad, args, &r->gr, &r->node);
}

/* Step k: the input set to in[k % 3] and the exec launched on s. */
static void rot_step(rot *r, int k, CUstream s)
{
    int b = k % 3;
    void *a[] = { &r->in[b], &r->acc, &n };
    ADV_SET_KERNEL(r->exec, r->node, f_mad, a);
    R(cuGraphLaunch(r->exec, s));
    for (uint32_t i = 0; i < N; i++) r->model[i] = r->model[i] * 3u + r->hin[b * N + i];
}

static void rot_end(rot *r, const char *what)
{
    adv_check_words(what, r->acc, r->model, N);
    R(cuGraphExecDestroy(r->exec));
    R(cuGraphDestroy(r->gr));
    for (int i = 0; i < 3; i++) R(cuMemFree(r->in[i]));
    R(cuMemFree(r->acc));
    MUST(cuCtxSetCurrent(primary));
    if (r->g) {
        R(cuStreamDestroy(r->gs));
        R(cuGreenCtxDestroy(r->g));
    }
    R(cuStreamDestroy(r->ps));
}

static void case_rotate(void)
{
    rot r;
    rot_begin(&r);
    CUevent ev;
    MUST(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    for (int k = 0; k < 30; k++) {
        /* every fourth launch on the primary context's stream, ordered after the green
         * stream's by an event, and the green stream after it */
        CUstream on = k % 4 == 3 ? r.ps : r.gs;
        if (on == r.ps) {
            R(cuEventRecord(ev, r.gs));
            R(cuStreamWaitEvent(r.ps, ev, 0));
        }
        rot_step(&r, k, on);
        if (on == r.ps) R(cuStreamSynchronize(r.ps));
        if (k % 5 == 4) R(cuStreamSynchronize(r.gs));
    }
    R(cuStreamSynchronize(r.gs));
    R(cuEventDestroy(ev));
    rot_end(&r, "rotated accumulator");
}

/* ------------------------------------------------------------ kernel */

static void case_kernel(void)
{
    char path[PATH_MAX + 64];
    CUlibrary lib;
    CUkernel kfill, kmad;
    adv_path("adv_kernels.so", path, sizeof path);
    MUST(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0));
    MUST(cuLibraryGetKernel(&kfill, lib, "fill_u32"));
    MUST(cuLibraryGetKernel(&kmad, lib, "mad_u32"));
    CUcontext cc;
    CUstream gs;
    CUgreenCtx g = adv_green_make(&cc, &gs);
    MUST(cuCtxSetCurrent(cc));
    CUdeviceptr acc;
    uint32_t model[N];
    acc_init(&acc, model);
    CUgraphExec exec = NULL;
    for (int k = 0; k < 12; k++) {
        uint32_t v = adv_val(k, 2, 0, 40);
        CUdeviceptr tmp;
        CUgraph gr;
        MUST(cuMemAlloc(&tmp, N * 4));
        /* an eager launch of the CUkernel, then a capture of both */
        ADV_LAUNCH((CUfunction)kfill, gs, &tmp, &v, &n);
        MUST(cuStreamBeginCapture(gs, CU_STREAM_CAPTURE_MODE_GLOBAL));
        ADV_LAUNCH((CUfunction)kfill, gs, &tmp, &v, &n);
        ADV_LAUNCH((CUfunction)kmad, gs, &tmp, &acc, &n);
        R(cuStreamEndCapture(gs, &gr));
        if (!exec) R(cuGraphInstantiateWithFlags(&exec, gr, 0));
        else adv_update(exec, gr);
        R(cuGraphLaunch(exec, gs));
        R(cuStreamSynchronize(gs));
        R(cuGraphDestroy(gr));
        R(cuMemFree(tmp));
        model_step(model, v, 0);
    }
    adv_check_words("kernel accumulator", acc, model, N);
    R(cuGraphExecDestroy(exec));
    R(cuMemFree(acc));
    MUST(cuCtxSetCurrent(primary));
    R(cuStreamDestroy(gs));
    R(cuGreenCtxDestroy(g));
    R(cuLibraryUnload(lib));
}

/* ------------------------------------------------------------ destroy */

static void case_destroy(void)
{
    CUcontext cc;
    CUstream gs, ps;
    CUgreenCtx g = adv_green_make(&cc, &gs);
    MUST(cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));
    MUST(cuCtxSetCurrent(cc));
    CUdeviceptr acc, kept, held;
    uint32_t model[N], v = 77;
    acc_init(&acc, model);
    MUST(cuMemAlloc(&kept, N * 4));
    ADV_LAUNCH(f_fill, gs, &kept, &v, &n);
    steps_on("green before its end", gs, NULL, 6, acc, model);
    MUST(cuMemAlloc(&held, 2 * N * 4));       /* made under the green context, freed after it */
    R(cuStreamDestroy(gs));
    MUST(cuCtxSetCurrent(primary));
    R(cuGreenCtxDestroy(g));
    /* the primary context goes on with memory made under the green one */
    uint32_t want[N];
    for (uint32_t i = 0; i < N; i++) want[i] = 77u + i;
    adv_check_words("memory made under the green context", kept, want, N);
    R(cuMemFree(held));
    steps_on("primary after the green's end", ps, NULL, 9, acc, model);
    R(cuMemFree(kept));
    /* a second green context (its converted context may take the first one's value) */
    CUstream gs2;
    CUgreenCtx g2 = adv_green_make(&cc, &gs2);
    MUST(cuCtxSetCurrent(cc));
    steps_on("second green", gs2, ps, 9, acc, model);
    MUST(cuCtxSetCurrent(primary));
    R(cuStreamDestroy(gs2));
    R(cuGreenCtxDestroy(g2));
    steps_on("primary at the end", ps, NULL, 3, acc, model);
    R(cuMemFree(acc));
    R(cuStreamDestroy(ps));
}

/* ------------------------------------------------------------ reverse */

static void case_reverse(void)
{
    CUcontext cc;
    CUstream gs;
    CUgreenCtx g = adv_green_make(&cc, &gs);
    /* the program lets its own retain go: the green context keeps the primary one */
    MUST(cuCtxSetCurrent(cc));
    MUST(cuDevicePrimaryCtxRelease(0));
    unsigned flags;
    int active = -1;
    R(cuDevicePrimaryCtxGetState(0, &flags, &active));
    printf("primary active while the green context holds it: %d\n", active);
    CUdeviceptr acc;
    uint32_t model[N];
    acc_init(&acc, model);
    steps_on("green alone", gs, NULL, 9, acc, model);
    R(cuStreamDestroy(gs));
    MUST(cuCtxSetCurrent(NULL));
    R(cuGreenCtxDestroy(g));       /* the last hold: the primary context goes, with acc */
    R(cuDevicePrimaryCtxGetState(0, &flags, &active));
    printf("primary active after the green context: %d\n", active);
    /* a new life of the primary context */
    MUST(cuDevicePrimaryCtxRetain(&primary, 0));
    MUST(cuCtxSetCurrent(primary));
    load_kernels();
    CUstream ps;
    MUST(cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));
    acc_init(&acc, model);
    steps_on("primary, second life", ps, NULL, 9, acc, model);
    CUstream gs2;
    CUgreenCtx g2 = adv_green_make(&cc, &gs2);
    MUST(cuCtxSetCurrent(cc));
    steps_on("green, second life", gs2, ps, 9, acc, model);
    MUST(cuCtxSetCurrent(primary));
    R(cuMemFree(acc));
    R(cuStreamDestroy(gs2));
    R(cuGreenCtxDestroy(g2));
    R(cuStreamDestroy(ps));
}

/* ------------------------------------------------------------ survive */

static void case_survive(void)
{
    rot r;
    rot_begin(&r);
    for (int k = 0; k < 40; k++) {
        if (k == 20) {           /* the green context ends; the rotation goes on */
            R(cuStreamSynchronize(r.gs));
            R(cuStreamDestroy(r.gs));
            MUST(cuCtxSetCurrent(primary));
            R(cuGreenCtxDestroy(r.g));
            r.g = NULL;
        }
        rot_step(&r, k, k < 20 ? r.gs : r.ps);
    }
    R(cuStreamSynchronize(r.ps));
    rot_end(&r, "accumulator across the green context's end");
}

/* ------------------------------------------------------------ threads */

typedef struct partition {
    CUgreenCtx g;        /* NULL: the primary context */
    CUcontext ctx;
    CUstream s;
    CUdeviceptr acc;
    uint32_t model[N];
} partition;

static void partition_run(void *arg)
{
    partition *p = arg;
    steps_on("on its stream", p->s, NULL, 12, p->acc, p->model);
    /* stream-ordered temporaries on its default stream (the green context's own, or the
     * primary context's legacy stream) */
    R(cuStreamSynchronize(p->s));
    for (int k = 0; k < 8; k++) {
        CUdeviceptr t = 0;
        uint32_t v = 300u + (uint32_t)k;
        if (R(cuMemAllocAsync(&t, 4 * N * 4, NULL)) != CUDA_SUCCESS) continue;
        ADV_LAUNCH(f_fill, NULL, &t, &v, &n);
        ADV_LAUNCH(f_mad, NULL, &t, &p->acc, &n);
        R(cuMemFreeAsync(t, NULL));
        for (uint32_t i = 0; i < N; i++) p->model[i] = p->model[i] * 3u + v + i;
    }
    R(cuStreamSynchronize(NULL));
    adv_check_words("default stream accumulator", p->acc, p->model, N);
}

static void case_threads(void)
{
    partition part[3];
    adv_thread t[3];
    cap_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    memset(t, 0, sizeof t);
    for (int i = 0; i < 3; i++) {
        partition *p = &part[i];
        p->g = i < 2 ? adv_green_make(&p->ctx, NULL) : NULL;
        if (!p->g) p->ctx = primary;
        MUST(cuCtxSetCurrent(p->ctx));
        MUST(cuStreamCreate(&p->s, CU_STREAM_NON_BLOCKING));
        acc_init(&p->acc, p->model);
        t[i] = (adv_thread){ .fn = partition_run, .arg = p, .ctx = p->ctx };
        snprintf(t[i].label, sizeof t[i].label, "partition %d (%s):", i, p->g ? "green" : "primary");
    }
    MUST(cuCtxSetCurrent(primary));
    adv_threads(t, 3);
    for (int i = 0; i < 3; i++) {
        partition *p = &part[i];
        MUST(cuCtxSetCurrent(p->ctx));
        R(cuMemFree(p->acc));
        R(cuStreamDestroy(p->s));
        MUST(cuCtxSetCurrent(primary));
        if (p->g) R(cuGreenCtxDestroy(p->g));
    }
}

/* ------------------------------------------------------------ capend */

static void case_capend(void)
{
    CUcontext cc;
    CUstream gs, ps;
    CUgreenCtx g = adv_green_make(&cc, &gs);
    MUST(cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));
    CUdeviceptr acc;
    uint32_t model[N];
    acc_init(&acc, model);
    steps_on("primary before", ps, NULL, 6, acc, model);
    MUST(cuCtxSetCurrent(cc));
    steps_on("green before", gs, NULL, 6, acc, model);
    uint32_t v = 9;
    MUST(cuStreamBeginCapture(gs, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    ADV_LAUNCH(f_fill, gs, &acc, &v, &n);
    MUST(cuCtxSetCurrent(primary));
    R(cuGreenCtxDestroy(g));                  /* its capture ends with it, gs leaks */
    CUgraph gr = NULL;
    R(cuStreamEndCapture(gs, &gr));
    steps_on("primary after", ps, NULL, 9, acc, model);
    /* 6 MiB after the green context's end: placed only if the library no longer counts the
     * ended capture as in progress (the report check) */
    CUdeviceptr big = 0;
    v = 11;
    if (R(cuMemAlloc(&big, 6u << 20)) == CUDA_SUCCESS) {
        ADV_LAUNCH(f_fill, ps, &big, &v, &n);
        ADV_LAUNCH(f_mad, ps, &big, &acc, &n);
        R(cuStreamSynchronize(ps));
        for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + v + i;
        adv_check_words("after the 6 MiB temporary", acc, model, N);
        R(cuMemFree(big));
    }
    R(cuMemFree(acc));
    R(cuStreamDestroy(ps));
}

/* ------------------------------------------------------------ cycle */

static void load_kernels(void)
{
    char path[PATH_MAX + 64];
    adv_path("adv_kernels.so", path, sizeof path);
    MUST(cuModuleLoad(&mod, path));
    f_fill = adv_fn(mod, "fill_u32");
    f_add = adv_fn(mod, "add_u32");
    f_mad = adv_fn(mod, "mad_u32");
}

static void case_cycle(void)
{
    MUST(cuDevicePrimaryCtxRelease(0));     /* adv_open's: each life retains its own */
    for (int life = 0; life < 5; life++) {
        MUST(cuDevicePrimaryCtxRetain(&primary, 0));
        MUST(cuCtxSetCurrent(primary));
        load_kernels();
        CUcontext cc;
        CUstream gs;
        CUgreenCtx g = adv_green_make(&cc, &gs);
        MUST(cuDevicePrimaryCtxRelease(0));
        MUST(cuCtxSetCurrent(cc));
        CUdeviceptr big = 0, acc;
        uint32_t model[N], v = (uint32_t)life;
        acc_init(&acc, model);
        if (R(cuMemAlloc(&big, 80u << 20)) == CUDA_SUCCESS) {
            ADV_LAUNCH(f_fill, gs, &big, &v, &n);
            ADV_LAUNCH(f_mad, gs, &big, &acc, &n);
            for (uint32_t j = 0; j < N; j++) model[j] = model[j] * 3u + v + j;
        }
        R(cuStreamSynchronize(gs));
        char name[64];
        snprintf(name, sizeof name, "life %d accumulator", life);
        adv_check_words(name, acc, model, N);
        R(cuStreamDestroy(gs));
        MUST(cuCtxSetCurrent(NULL));
        R(cuGreenCtxDestroy(g));             /* the last hold: big and acc go with the context */
        unsigned flags;
        int active = -1;
        R(cuDevicePrimaryCtxGetState(0, &flags, &active));
        printf("life %d: primary active after the green context: %d\n", life, active);
    }
    MUST(cuDevicePrimaryCtxRetain(&primary, 0));
    MUST(cuCtxSetCurrent(primary));
}

/* ------------------------------------------------------------ relife */

static void case_relife(void)
{
    MUST(cuDevicePrimaryCtxRelease(0));     /* adv_open's: each life retains its own */
    for (int life = 0; life < 3; life++) {
        MUST(cuDevicePrimaryCtxRetain(&primary, 0));
        MUST(cuCtxSetCurrent(primary));
        load_kernels();
        rot r;
        rot_begin(&r);                       /* the exec instantiated under the green context */
        MUST(cuDevicePrimaryCtxRelease(0));  /* the green context holds the primary one */
        for (int k = 0; k < 12; k++) rot_step(&r, k, r.gs);
        R(cuStreamSynchronize(r.gs));
        char name[64];
        snprintf(name, sizeof name, "life %d accumulator", life);
        adv_check_words(name, r.acc, r.model, N);
        R(cuStreamDestroy(r.gs));
        R(cuStreamDestroy(r.ps));
        MUST(cuCtxSetCurrent(NULL));
        R(cuGreenCtxDestroy(r.g));           /* the last hold: the exec, its graph's memory go */
        R(cuGraphDestroy(r.gr));             /* a graph is not a context's */
    }
    MUST(cuDevicePrimaryCtxRetain(&primary, 0));
    MUST(cuCtxSetCurrent(primary));
}

/* ------------------------------------------------------------ churn */

static void case_churn(void)
{
    const size_t big = 40u << 20;
    CUdeviceptr acc;
    uint32_t model[N];
    acc_init(&acc, model);
    for (int r = 0; r < 8; r++) {
        CUcontext cc;
        CUstream gs;
        CUgreenCtx g = adv_green_make(&cc, &gs);
        MUST(cuCtxSetCurrent(cc));
        CUdeviceptr t[3] = { 0, 0, 0 };
        for (int i = 0; i < 3; i++) {
            uint32_t v = (uint32_t)(r * 3 + i);
            if (R(cuMemAlloc(&t[i], big)) != CUDA_SUCCESS) continue;
            ADV_LAUNCH(f_fill, gs, &t[i], &v, &n);
            ADV_LAUNCH(f_mad, gs, &t[i], &acc, &n);
            for (uint32_t j = 0; j < N; j++) model[j] = model[j] * 3u + v + j;
        }
        R(cuStreamSynchronize(gs));
        R(cuMemFree(t[0]));
        R(cuMemFree(t[1]));
        R(cuStreamDestroy(gs));
        MUST(cuCtxSetCurrent(primary));
        R(cuGreenCtxDestroy(g));
        R(cuMemFree(t[2]));          /* the primary context's memory: freed after the green's end */
    }
    adv_check_words("churn accumulator", acc, model, N);
    CUdeviceptr last = 0;
    uint32_t v = 5;
    if (R(cuMemAlloc(&last, 200u << 20)) == CUDA_SUCCESS) {
        ADV_LAUNCH(f_fill, NULL, &last, &v, &n);
        uint32_t want[N];
        for (uint32_t j = 0; j < N; j++) want[j] = 5u + j;
        adv_check_words("200 MiB after the green contexts", last, want, N);
        R(cuMemFree(last));
    }
    R(cuMemFree(acc));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "alloc", "capture", "rotate", "kernel", "destroy", "reverse", "survive", "threads", "relife", "capend", "cycle", "churn", NULL };
    int c = adv_case(argc, argv, names);
    adv_open(&primary, &mod);
    f_fill = adv_fn(mod, "fill_u32");
    f_add = adv_fn(mod, "add_u32");
    f_mad = adv_fn(mod, "mad_u32");
    switch (c) {
    case 0: case_alloc(); break;
    case 1: case_capture(); break;
    case 2: case_rotate(); break;
    case 3: case_kernel(); break;
    case 4: case_destroy(); break;
    case 5: case_reverse(); break;
    case 6: case_survive(); break;
    case 7: case_threads(); break;
    case 8: case_relife(); break;
    case 9: case_capend(); break;
    case 10: case_cycle(); break;
    default: case_churn(); break;
    }
    return adv_finish();
}
