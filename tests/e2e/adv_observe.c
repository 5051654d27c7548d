/*
 * tests/e2e/adv_observe.c: round 13, valid programs against what
 * always_update does that off does not. always_update places nothing and
 * skips nothing, but keeps exec records, reads graphs back, and runs
 * skip_profiled's state machine in simulation (profiled.c, p->sim): every
 * one of those must leave the program exactly where off leaves it.
 *   sim    one exec rotated among three inputs by whole-graph updates (under
 *          the free-variant costs the simulation "buys" variants at the
 *          decision), then, in simulated VARIANTS state, each exec-side event
 *          the observer hears: a per-node setter (before_forward: the
 *          simulated leave), an upload on another stream, a launch into a
 *          stream capture (launch_captured), an unrelated module unloaded
 *          (content_lost), cuGraphNodeSetEnabled (fix), and the rotation
 *          again after each;
 *   capture   thread B holds a GLOBAL capture open while thread A
 *          instantiates, updates (graphs the library reads back) and
 *          launches (checking its results in RELAXED mode); B's capture
 *          must stay valid. Then A, in its own GLOBAL
 *          capture, instantiates and updates another exec (library calls
 *          made in relaxed mode) and calls cuMemAlloc: the driver must still
 *          refuse it (the thread's mode restored after the library's calls).
 * After each step the exec is launched and the accumulator checked.
 * Usage: adv_observe sim|capture
 */
#include "adv_common.h"

#define N 64u

static CUfunction mad;
static CUstream s, s2;
static CUdeviceptr in[3], acc;
static uint32_t hin[3][N], model[N];
static uint64_t n = N;

/* Captures mad(in[a]) on st into *g. */
static void capture_one(CUstream st, int a, CUgraph *g)
{
    void *aa[] = { &in[a], &acc, &n };
    MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, st, aa, NULL));
    MUST(cuStreamEndCapture(st, g));
}

/* Points exec at in[a] by a whole-graph update (a fresh capture). */
static void update_to(CUgraphExec exec, int a)
{
    CUgraph h;
    CUgraphExecUpdateResultInfo info;
    capture_one(s, a, &h);
    R(cuGraphExecUpdate(exec, h, &info));
    R(cuGraphDestroy(h));
}

/* Set while another thread's GLOBAL capture is open: cuStreamSynchronize
 * would be refused there (and invalidate it), cuStreamQuery of a stream
 * that does not capture is not; it is polled outside R() (its count varies). */
static int polling;

/* Launches exec, which runs mad(in[a]), on st and checks. */
static void run(CUgraphExec exec, CUstream st, int a, const char *what)
{
    R(cuGraphLaunch(exec, st));
    if (polling) {
        CUresult q;
        while ((q = cuStreamQuery(st)) == CUDA_ERROR_NOT_READY) adv_sleep_us(50);
        R(q);
    } else {
        R(cuStreamSynchronize(st));
    }
    for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + hin[a][i];
    /* the synchronous copy back is unsafe in A's GLOBAL mode while B's GLOBAL
     * capture is open: A reads in RELAXED mode, and back */
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (polling) R(cuThreadExchangeStreamCaptureMode(&m));
    adv_check_words(what, acc, model, N);
    if (polling) R(cuThreadExchangeStreamCaptureMode(&m));
}

static void rotate(CUgraphExec exec, int steps, const char *what)
{
    char name[96];
    for (int k = 0; k < steps; k++) {
        update_to(exec, k % 3);
        snprintf(name, sizeof name, "%s, step %d", what, k);
        run(exec, s, k % 3, name);
    }
}

static void case_sim(void)
{
    CUgraph g, cg;
    CUgraphNode node;
    CUgraphExec exec;
    size_t one = 1;
    capture_one(s, 0, &g);
    MUST(cuGraphGetNodes(g, &node, &one));
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    rotate(exec, 9, "rotation");
    /* a per-node setter (the exec's own node handle) */
    void *a1[] = { &in[1], &acc, &n };
    ADV_SET_KERNEL(exec, node, mad, a1);
    run(exec, s, 1, "after a setter");
    rotate(exec, 6, "rotation after the setter");
    /* an upload on another stream, then a launch there */
    R(cuGraphUpload(exec, s2));
    run(exec, s2, 2, "after an upload on another stream");
    rotate(exec, 6, "rotation after the upload");
    /* a launch into a capture: runs nothing now; the captured graph runs it */
    update_to(exec, 1);
    MUST(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUresult r = R(cuGraphLaunch(exec, s2));
    R(cuStreamEndCapture(s2, &cg));
    printf("launch into a capture: %s\n", adv_err(r));
    if (r == CUDA_SUCCESS && cg) {
        CUgraphExec ce;
        if (R(cuGraphInstantiateWithFlags(&ce, cg, 0)) == CUDA_SUCCESS) {
            run(ce, s2, 1, "the captured launch");
            R(cuGraphExecDestroy(ce));
        }
    }
    if (cg) R(cuGraphDestroy(cg));
    rotate(exec, 6, "rotation after the captured launch");
    /* an unrelated module loaded and unloaded */
    char path[PATH_MAX + 64];
    CUmodule m2;
    adv_path("adv_kernels.so", path, sizeof path);
    MUST(cuModuleLoad(&m2, path));
    R(cuModuleUnload(m2));
    run(exec, s, 2, "after an unrelated module unloaded");
    rotate(exec, 6, "rotation after the unload");
    /* a node disabled and enabled again */
    R(cuGraphNodeSetEnabled(exec, node, 0));
    R(cuGraphLaunch(exec, s));          /* runs nothing */
    R(cuStreamSynchronize(s));
    adv_check_words("disabled node", acc, model, N);
    R(cuGraphNodeSetEnabled(exec, node, 1));
    run(exec, s, 2, "enabled again");
    rotate(exec, 6, "rotation after the node was enabled again");
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
}

/* capture: B's GLOBAL capture held open while A works. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase;
static CUcontext ctx;
static CUstream sb;

static void wait_phase(int p)
{
    pthread_mutex_lock(&mu);
    while (phase < p) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void set_phase(int p)
{
    pthread_mutex_lock(&mu);
    phase = p;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void *thread_b(void *arg)
{
    (void)arg;
    CUgraph g = NULL;
    CUgraphExec e;
    static CUdeviceptr b_acc;
    static uint64_t nb = N;
    R(cuCtxSetCurrent(ctx));
    MUST(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&b_acc, N * 4));
    MUST(cuMemsetD32(b_acc, 0, N));
    void *a[] = { &in[2], &b_acc, &nb };
    MUST(cuStreamBeginCapture(sb, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, sb, a, NULL));
    set_phase(1);
    wait_phase(2);
    R(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, sb, a, NULL));
    printf("B's capture after A's work: %s\n", adv_capture_status(sb));
    CUresult r = R(cuStreamEndCapture(sb, &g));
    if (r == CUDA_SUCCESS && g && R(cuGraphInstantiateWithFlags(&e, g, 0)) == CUDA_SUCCESS) {
        R(cuGraphLaunch(e, sb));
        R(cuStreamSynchronize(sb));
        uint32_t want[N];
        for (uint32_t i = 0; i < N; i++) want[i] = (hin[2][i] * 3u) + hin[2][i];
        adv_check_words("B's captured graph", b_acc, want, N);
        R(cuGraphExecDestroy(e));
    }
    if (g) R(cuGraphDestroy(g));
    R(cuMemFree(b_acc));
    R(cuStreamDestroy(sb));
    return NULL;
}

static void case_capture(void)
{
    pthread_t tb;
    CUgraph g, g2, cg = NULL;
    CUgraphExec exec, e2;
    if (pthread_create(&tb, NULL, thread_b, NULL) != 0) exit(2);
    wait_phase(1);
    polling = 1;
    /* A, in GLOBAL mode, while B's GLOBAL capture is open: graph calls the
     * library answers with read-backs (cuStreamSynchronize of A's own,
     * non-capturing, non-blocking stream is allowed) */
    capture_one(s, 0, &g);
    R(cuGraphInstantiateWithFlags(&exec, g, 0));
    for (int k = 0; k < 8; k++) {
        update_to(exec, k % 3);
        run(exec, s, k % 3, "A while B captures");
    }
    polling = 0;
    set_phase(2);
    pthread_join(tb, NULL);
    /* A's own GLOBAL capture: another exec instantiated and updated in it */
    capture_one(s2, 1, &g2);
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuGraphInstantiateWithFlags(&e2, g2, 0));
    CUgraph h;
    CUgraphExecUpdateResultInfo info;
    capture_one(s2, 2, &h);
    R(cuGraphExecUpdate(e2, h, &info));
    R(cuGraphDestroy(h));
    CUdeviceptr p = 0;
    CUresult r = R(cuMemAlloc(&p, 4096));    /* unsafe in a GLOBAL capture: refused */
    printf("cuMemAlloc in the own GLOBAL capture: %s; capture %s\n", adv_err(r),
           adv_capture_status(s));
    R(cuStreamEndCapture(s, &cg));
    if (cg) R(cuGraphDestroy(cg));
    if (r == CUDA_SUCCESS) R(cuMemFree(p));
    run(e2, s2, 2, "the exec updated during the capture");
    run(exec, s, 7 % 3, "A's exec after the capture");
    R(cuGraphExecDestroy(e2));
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g2));
    R(cuGraphDestroy(g));
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "sim", "capture", NULL };
    int which = adv_case(argc, argv, cases);
    CUmodule mod;
    adv_open(&ctx, &mod);
    mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&acc, N * 4));
    for (int k = 0; k < 3; k++) {
        MUST(cuMemAlloc(&in[k], N * 4));
        for (uint32_t i = 0; i < N; i++) hin[k][i] = (uint32_t)(k + 1) * 1000u + i * (uint32_t)(k + 7);
        MUST(cuMemcpyHtoD(in[k], hin[k], sizeof hin[k]));
    }
    MUST(cuMemsetD32(acc, 0, N));
    memset(model, 0, sizeof model);
    if (which == 0) case_sim();
    else case_capture();
    for (int k = 0; k < 3; k++) R(cuMemFree(in[k]));
    R(cuMemFree(acc));
    R(cuStreamDestroy(s2));
    R(cuStreamDestroy(s));
    return adv_finish();
}
