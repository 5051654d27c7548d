/*
 * tests/e2e/adv_threads.c: round 12, valid multi-threaded driver-API
 * programs against the library's shared state: the capture records (one
 * table for every thread's captures), the placement and free verdicts while
 * other threads capture, the launch order of one exec launched from several
 * threads, and the waits the library makes while another thread holds the
 * device. Each case orders its threads by host flags (or, where the case is
 * about what a thread may see of another's capture, by what the driver
 * answers: cuStreamIsCapturing), so its output is the same in every run.
 *
 *   begin_race    thread A begins a GLOBAL capture on s1; thread B, which
 *                 polls cuStreamIsCapturing(s1) until it reads ACTIVE,
 *                 launches fill(buf, v) into s1 (work enqueued from any thread
 *                 into a capturing stream is captured); A then adds
 *                 add(buf, 3) and ends the capture. Each of 200 steps
 *                 changes v and cuGraphExecUpdate's the exec; A launches it
 *                 and checks buf. A third thread captures its own graph on
 *                 s3 meanwhile (relaxed), as a program with several capturing
 *                 threads does.
 *   end_race      the same, but B waits (cuStreamIsCapturing) for the end of
 *                 A's capture and then launches fill(buf2, v) on s1, which
 *                 runs at once (not captured); A's graph has one node.
 *   join          A's capture forks to B: A records ev1 in it, B (another
 *                 thread) makes s2 wait on ev1, launches fill(b2, v2) on s2
 *                 and records ev2; A waits on ev2, launches mad(b2, b1) and
 *                 ends the capture (each step new values, an update).
 *   order         one exec mad(in[k], acc) pointed at three inputs in turn
 *                 (served by variants) and launched by two threads in strict
 *                 alternation, each on its own stream: the driver orders
 *                 launches of one exec in call order, whatever the thread.
 *   captures      four threads capture at once (GLOBAL, THREAD_LOCAL,
 *                 RELAXED, RELAXED), each its own graph on its own stream,
 *                 updating and launching its exec; a fifth thread, in
 *                 THREAD_LOCAL mode, allocates, launches on, copies and frees
 *                 memory (cuMemAlloc/cuMemFree, cuMemAllocAsync/cuMemFreeAsync)
 *                 meanwhile.
 *   free_modes    A begins a capture (GLOBAL, THREAD_LOCAL or RELAXED); B,
 *                 in GLOBAL, THREAD_LOCAL or RELAXED mode, frees a placed
 *                 block (cuMemAlloc or cuMemAllocAsync memory) or allocates:
 *                 every combination; the results and A's capture status.
 *   free_held     a stream is held by a host function waiting on a host flag;
 *                 thread C's cuMemFree of a placed block waits for it (the
 *                 implicit synchronization); meanwhile A makes hooked calls
 *                 that must not wait for C (allocations, a capture, an
 *                 update and launches, pointer queries), then sets the flag.
 * Usage: adv_threads CASE
 */
#include "adv_common.h"

#include <sched.h>

#define W 256u

static CUcontext ctx;
static CUmodule mod;
static CUfunction f_fill, f_add, f_mad;
static uint64_t nw = W;

static void wait_for(int *flag, int v)
{
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < v) sched_yield();
}

static void set_flag(int *flag, int v) { __atomic_store_n(flag, v, __ATOMIC_RELEASE); }

/* Polls the driver until s's capture status is `want` (not counted: the
 * number of polls varies). */
static void poll_status(CUstream s, CUstreamCaptureStatus want)
{
    CUstreamCaptureStatus st;
    while (cuStreamIsCapturing(s, &st) == CUDA_SUCCESS && st != want) {
    }
}

static void set_mode(CUstreamCaptureMode m)
{
    MUST(cuThreadExchangeStreamCaptureMode(&m));
}

/* Updates *exec from g (instantiates it the first time); returns 0 on success. */
static int update_or_instantiate(CUgraphExec *exec, CUgraph g)
{
    if (!*exec) return R(cuGraphInstantiateWithFlags(exec, g, 0)) != CUDA_SUCCESS;
    CUgraphExecUpdateResultInfo info;
    return R(cuGraphExecUpdate(*exec, g, &info)) != CUDA_SUCCESS;
}

/* ------------------------------------------------------------ begin_race, end_race */

#define RACE_STEPS 200
static CUstream s1, s3;
static CUdeviceptr buf, buf2, buf3;
static int go, done, stop;

/* v for step k: repeats every other step, so that some updates change
 * nothing (skipped) and the others change only B's node */
static uint32_t race_v(int k) { return (uint32_t)(k / 2) * 7u + 1u; }

static void race_b(void *arg)
{
    int end = *(int *)arg;
    for (int k = 0; k < RACE_STEPS; k++) {
        wait_for(&go, k + 1);
        poll_status(s1, end ? CU_STREAM_CAPTURE_STATUS_NONE : CU_STREAM_CAPTURE_STATUS_ACTIVE);
        uint32_t v = race_v(k);
        void *args[] = { end ? &buf2 : &buf, &v, &nw };
        R(cuLaunchKernel(f_fill, 1, 1, 1, 1, 1, 1, 0, s1, args, NULL));
        if (end) R(cuStreamSynchronize(s1));
        set_flag(&done, k + 1);
    }
}

/* Captures its own graph on s3 (relaxed: its capture does not concern the
 * others' calls) and asks the driver about it (cuStreamGetCaptureInfo, not
 * counted: how many times varies) until A is done, as a thread that builds
 * a graph while others do. */
static void race_c(void *arg)
{
    (void)arg;
    CUgraphExec exec = NULL;
    CUgraph g = NULL;
    uint32_t v = 4;
    void *a1[] = { &buf3, &v, &nw };
    set_mode(CU_STREAM_CAPTURE_MODE_RELAXED);
    R(cuStreamBeginCapture(s3, CU_STREAM_CAPTURE_MODE_RELAXED));
    R(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s3, a1, NULL));
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        CUstreamCaptureStatus st;
        cuStreamGetCaptureInfo(s3, &st, NULL, NULL, NULL, NULL, NULL);
    }
    R(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s3, a1, NULL));
    R(cuStreamEndCapture(s3, &g));
    if (g && update_or_instantiate(&exec, g) == 0) R(cuGraphLaunch(exec, s3));
    R(cuStreamSynchronize(s3));
    uint32_t want[W];
    for (uint32_t i = 0; i < W; i++) want[i] = 8;
    adv_check_words("race: the relaxed capturing thread's result", buf3, want, W);
    if (g) R(cuGraphDestroy(g));
    R(cuGraphExecDestroy(exec));
}

static void run_race(int end)
{
    CUgraphExec exec = NULL;
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&buf, W * 4));
    MUST(cuMemAlloc(&buf2, W * 4));
    MUST(cuMemAlloc(&buf3, W * 4));
    MUST(cuMemsetD32(buf3, 0, W));
    adv_thread t[2] = {
        { .fn = race_b, .arg = &end, .ctx = ctx, .label = "thread B (launches into s1)" },
        { .fn = race_c, .arg = NULL, .ctx = ctx, .label = "thread C (captures on s3)" },
    };
    for (int k = 0; k < 2; k++)
        if (pthread_create(&t[k].t, NULL, adv_thread_main, &t[k]) != 0) exit(2);
    int wrong = 0, wrong2 = 0, first = -1;
    for (int k = 0; k < RACE_STEPS; k++) {
        CUgraph g = NULL;
        uint32_t three = 3;
        void *a[] = { &buf, &three, &nw };
        if (!end) set_flag(&go, k + 1);
        R(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        if (!end) wait_for(&done, k + 1);
        if (end) {                       /* the graph: fill(buf, v); add(buf, 3) */
            uint32_t v = race_v(k);
            void *f[] = { &buf, &v, &nw };
            R(cuLaunchKernel(f_fill, 1, 1, 1, 1, 1, 1, 0, s1, f, NULL));
        }
        R(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s1, a, NULL));
        if (end) set_flag(&go, k + 1);   /* B waits for the end (cuStreamIsCapturing) */
        R(cuStreamEndCapture(s1, &g));
        if (end) wait_for(&done, k + 1); /* B's fill(buf2) ran on s1, not captured */
        if (g && update_or_instantiate(&exec, g) == 0) R(cuGraphLaunch(exec, s1));
        if (g) R(cuGraphDestroy(g));
        R(cuStreamSynchronize(s1));
        uint32_t h[W], h2[W];
        R(cuMemcpyDtoH(h, buf, sizeof h));
        int bad = 0;
        for (uint32_t i = 0; i < W; i++) bad += h[i] != race_v(k) + i + 3;
        if (bad && first < 0) first = k;
        wrong += bad != 0;
        if (end) {
            R(cuMemcpyDtoH(h2, buf2, sizeof h2));
            for (uint32_t i = 0; i < W; i++) wrong2 += h2[i] != race_v(k) + i;
        }
    }
    set_flag(&stop, 1);
    for (int k = 0; k < 2; k++) pthread_join(t[k].t, NULL);
    adv_check("race: the exec's result after each step", wrong == 0, "%d of %d steps wrong, first %d",
              wrong, RACE_STEPS, first);
    if (end) adv_check("race: B's launches after the end ran", wrong2 == 0, "%d words wrong", wrong2);
    for (int k = 0; k < 2; k++) {
        printf("%s\n%.*s", t[k].label, (int)t[k].len, t[k].out);
        free(t[k].out);
    }
    R(cuGraphExecDestroy(exec));
}

/* ------------------------------------------------------------ join */

#define JOIN_STEPS 40
static CUstream s2;
static CUevent ev1, ev2;
static CUdeviceptr b1, b2;

static uint32_t join_v1(int k) { return (uint32_t)(k / 2) * 5u + 2u; }
static uint32_t join_v2(int k) { return (uint32_t)(k / 3) * 11u + 3u; }

static void join_b(void *arg)
{
    (void)arg;
    for (int k = 0; k < JOIN_STEPS; k++) {
        wait_for(&go, k + 1);
        uint32_t v = join_v2(k);
        void *a[] = { &b2, &v, &nw };
        R(cuStreamWaitEvent(s2, ev1, 0));
        R(cuLaunchKernel(f_fill, 1, 1, 1, 1, 1, 1, 0, s2, a, NULL));
        R(cuEventRecord(ev2, s2));
        set_flag(&done, k + 1);
    }
}

static void run_join(void)
{
    CUgraphExec exec = NULL;
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&ev1, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&ev2, CU_EVENT_DISABLE_TIMING));
    MUST(cuMemAlloc(&b1, W * 4));
    MUST(cuMemAlloc(&b2, W * 4));
    adv_thread t = { .fn = join_b, .ctx = ctx, .label = "thread B (joins the capture)" };
    if (pthread_create(&t.t, NULL, adv_thread_main, &t) != 0) exit(2);
    int wrong = 0, first = -1;
    for (int k = 0; k < JOIN_STEPS; k++) {
        CUgraph g = NULL;
        uint32_t v = join_v1(k);
        void *f[] = { &b1, &v, &nw };
        void *m[] = { &b2, &b1, &nw };
        R(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        R(cuLaunchKernel(f_fill, 1, 1, 1, 1, 1, 1, 0, s1, f, NULL));
        R(cuEventRecord(ev1, s1));
        set_flag(&go, k + 1);
        wait_for(&done, k + 1);
        R(cuStreamWaitEvent(s1, ev2, 0));
        R(cuLaunchKernel(f_mad, 1, 1, 1, 1, 1, 1, 0, s1, m, NULL));
        R(cuStreamEndCapture(s1, &g));
        if (g && update_or_instantiate(&exec, g) == 0) R(cuGraphLaunch(exec, s1));
        if (g) R(cuGraphDestroy(g));
        R(cuStreamSynchronize(s1));
        uint32_t h[W];
        R(cuMemcpyDtoH(h, b1, sizeof h));
        int bad = 0;
        for (uint32_t i = 0; i < W; i++) bad += h[i] != (join_v1(k) + i) * 3u + join_v2(k) + i;
        if (bad && first < 0) first = k;
        wrong += bad != 0;
    }
    pthread_join(t.t, NULL);
    adv_check("join: the exec's result after each step", wrong == 0, "%d of %d steps wrong, first %d",
              wrong, JOIN_STEPS, first);
    printf("%s\n%.*s", t.label, (int)t.len, t.out);
    free(t.out);
    R(cuGraphExecDestroy(exec));
}

/* ------------------------------------------------------------ order */

#define ORDER_STEPS 60
#define OW 4096u
static CUdeviceptr oin[3], oacc;
static uint32_t ohin[3][OW], omodel[OW];
static CUgraphExec oexec;
static CUgraphNode onode;
static int turn;
static uint64_t onw = OW;

static void order_thread(void *arg)
{
    int me = *(int *)arg;
    CUstream s;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int k = me; k < ORDER_STEPS; k += 2) {
        wait_for(&turn, k);
        int i = k % 3;
        void *args[] = { &oin[i], &oacc, &onw };
        ADV_SET_KERNEL(oexec, onode, f_mad, args);
        R(cuGraphLaunch(oexec, s));
        set_flag(&turn, k + 1);
    }
    R(cuStreamSynchronize(s));
    wait_for(&turn, ORDER_STEPS);       /* the other thread's last launch was made */
    R(cuStreamDestroy(s));
}

static void run_order(void)
{
    CUgraph g;
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 3; i++) {
        MUST(cuMemAlloc(&oin[i], OW * 4));
        for (uint32_t j = 0; j < OW; j++) ohin[i][j] = (uint32_t)i * 1000003u + j * 17u;
        MUST(cuMemcpyHtoD(oin[i], ohin[i], sizeof ohin[i]));
    }
    MUST(cuMemAlloc(&oacc, OW * 4));
    MUST(cuMemsetD32(oacc, 1, OW));
    for (uint32_t j = 0; j < OW; j++) omodel[j] = 1;
    void *args[] = { &oin[0], &oacc, &onw };
    oexec = adv_one_node_exec(s1, f_mad, args, &g, &onode);
    R(cuGraphLaunch(oexec, s1));
    R(cuStreamSynchronize(s1));
    for (uint32_t j = 0; j < OW; j++) omodel[j] = omodel[j] * 3u + ohin[0][j];
    for (int k = 0; k < ORDER_STEPS; k++)
        for (uint32_t j = 0; j < OW; j++) omodel[j] = omodel[j] * 3u + ohin[k % 3][j];
    int ids[2] = { 0, 1 };
    adv_thread t[2] = {
        { .fn = order_thread, .arg = &ids[0], .ctx = ctx, .label = "thread 0 (even steps)" },
        { .fn = order_thread, .arg = &ids[1], .ctx = ctx, .label = "thread 1 (odd steps)" },
    };
    adv_threads(t, 2);
    adv_check_words("order: the accumulator after 60 launches from two threads", oacc, omodel, OW);
    R(cuGraphExecDestroy(oexec));
    R(cuGraphDestroy(g));
}

/* ------------------------------------------------------------ captures */

#define CAP_THREADS 4
#define CAP_STEPS 40
static const CUstreamCaptureMode cap_modes[CAP_THREADS] = {
    CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
    CU_STREAM_CAPTURE_MODE_RELAXED, CU_STREAM_CAPTURE_MODE_RELAXED,
};
static CUdeviceptr cin[CAP_THREADS][3], cacc[CAP_THREADS], ctmp[CAP_THREADS];

static void cap_thread(void *arg)
{
    int me = *(int *)arg;
    CUstream s;
    CUgraphExec exec = NULL;
    uint32_t model[W], hin[3][W];
    /* this thread's own calls in its capture's mode (the GLOBAL one never
     * meets another GLOBAL capture) */
    set_mode(cap_modes[me]);
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 3; i++) {
        for (uint32_t j = 0; j < W; j++) hin[i][j] = (uint32_t)(me * 3 + i) * 7919u + j;
        R(cuMemcpyHtoD(cin[me][i], hin[i], sizeof hin[i]));
    }
    R(cuMemsetD32(cacc[me], 0, W));
    for (uint32_t j = 0; j < W; j++) model[j] = 0;
    for (int k = 0; k < CAP_STEPS; k++) {
        /* fill(tmp, v); mad(in[i], acc); mad(tmp, acc): pointer and scalar
         * changes, some steps the same as the last */
        int i = (k / 2) % 3;
        uint32_t v = (uint32_t)(k / 3);
        void *f[] = { &ctmp[me], &v, &nw };
        void *m1[] = { &cin[me][i], &cacc[me], &nw };
        void *m2[] = { &ctmp[me], &cacc[me], &nw };
        CUgraph g = NULL;
        R(cuStreamBeginCapture(s, cap_modes[me]));
        R(cuLaunchKernel(f_fill, 1, 1, 1, 1, 1, 1, 0, s, f, NULL));
        R(cuLaunchKernel(f_mad, 1, 1, 1, 1, 1, 1, 0, s, m1, NULL));
        R(cuLaunchKernel(f_mad, 1, 1, 1, 1, 1, 1, 0, s, m2, NULL));
        R(cuStreamEndCapture(s, &g));
        if (g && update_or_instantiate(&exec, g) == 0) R(cuGraphLaunch(exec, s));
        if (g) R(cuGraphDestroy(g));
        for (uint32_t j = 0; j < W; j++) {
            model[j] = model[j] * 3u + hin[i][j];
            model[j] = model[j] * 3u + v + j;
        }
        if (k % 8 == 7) R(cuStreamSynchronize(s));
    }
    R(cuStreamSynchronize(s));
    adv_check_words("captures: this thread's accumulator", cacc[me], model, W);
    R(cuGraphExecDestroy(exec));
    R(cuStreamDestroy(s));
}

static void alloc_thread(void *arg)
{
    (void)arg;
    CUstream s;
    int bad = 0;
    set_mode(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);   /* others' GLOBAL capture does not concern it */
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int k = 0; k < 60; k++) {
        size_t words = 64u << (k % 5);
        CUdeviceptr p;
        int async = k % 2;
        CUresult r = async ? R(cuMemAllocAsync(&p, words * 4, s)) : R(cuMemAlloc(&p, words * 4));
        if (r != CUDA_SUCCESS) continue;
        uint32_t v = (uint32_t)k * 13u;
        uint64_t n = words;
        void *a[] = { &p, &v, &n };
        R(cuLaunchKernel(f_fill, 1, 1, 1, 1, 1, 1, 0, s, a, NULL));
        uint32_t *h = malloc(words * 4);
        R(cuMemcpyDtoHAsync(h, p, words * 4, s));
        R(cuStreamSynchronize(s));
        for (uint32_t j = 0; j < words; j++) bad += h[j] != v + j;
        free(h);
        if (async) R(cuMemFreeAsync(p, s));
        else R(cuMemFree(p));
    }
    R(cuStreamSynchronize(s));
    adv_check("captures: the allocating thread's buffers", bad == 0, "%d words wrong", bad);
    R(cuStreamDestroy(s));
}

static void run_captures(void)
{
    for (int t = 0; t < CAP_THREADS; t++) {
        for (int i = 0; i < 3; i++) MUST(cuMemAlloc(&cin[t][i], W * 4));
        MUST(cuMemAlloc(&cacc[t], W * 4));
        MUST(cuMemAlloc(&ctmp[t], W * 4));
    }
    /* placed blocks freed and a few left for the allocating thread's frees */
    int ids[CAP_THREADS];
    adv_thread t[CAP_THREADS + 1];
    memset(t, 0, sizeof t);
    for (int k = 0; k < CAP_THREADS; k++) {
        ids[k] = k;
        t[k] = (adv_thread){ .fn = cap_thread, .arg = &ids[k], .ctx = ctx };
        snprintf(t[k].label, sizeof t[k].label, "capturing thread %d (mode %d)", k, (int)cap_modes[k]);
    }
    t[CAP_THREADS] = (adv_thread){ .fn = alloc_thread, .ctx = ctx, .label = "allocating thread" };
    adv_threads(t, CAP_THREADS + 1);
}

/* ------------------------------------------------------------ free_modes */

static const char *const mode_names[] = { "GLOBAL", "THREAD_LOCAL", "RELAXED" };
static const CUstreamCaptureMode modes[] = { CU_STREAM_CAPTURE_MODE_GLOBAL,
                                             CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                             CU_STREAM_CAPTURE_MODE_RELAXED };
static int fm_op, fm_mode;      /* what B does next */
static CUdeviceptr fm_ptr;
static CUresult fm_rc;

/* B: op 0 cuMemFree(fm_ptr), 1 cuMemAlloc (then freed after the capture by
 * A), in mode fm_mode, once per go. */
static void fm_b(void *arg)
{
    (void)arg;
    for (int k = 1;; k++) {
        wait_for(&go, k);
        if (fm_op < 0) return;
        CUstreamCaptureMode m = modes[fm_mode];
        MUST(cuThreadExchangeStreamCaptureMode(&m));
        if (fm_op == 0) fm_rc = R(cuMemFree(fm_ptr));
        else fm_rc = R(cuMemAlloc(&fm_ptr, 4096));
        MUST(cuThreadExchangeStreamCaptureMode(&m));
        set_flag(&done, k);
    }
}

static void run_free_modes(void)
{
    CUstream s, sa;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&buf, W * 4));
    adv_thread t = { .fn = fm_b, .ctx = ctx, .label = "thread B" };
    if (pthread_create(&t.t, NULL, adv_thread_main, &t) != 0) exit(2);
    int k = 0;
    for (int op = 0; op < 3; op++)
        for (int am = 0; am < 3; am++)
            for (int bm = 0; bm < 3; bm++) {
                CUdeviceptr p = 0;
                if (op == 0) MUST(cuMemAlloc(&p, 8192));
                if (op == 2) {
                    MUST(cuMemAllocAsync(&p, 8192, sa));
                    MUST(cuStreamSynchronize(sa));
                }
                fm_ptr = p;
                fm_op = op == 1;
                fm_mode = bm;
                uint32_t v = (uint32_t)k;
                void *a[] = { &buf, &v, &nw };
                CUgraph g = NULL;
                R(cuStreamBeginCapture(s, modes[am]));
                R(cuLaunchKernel(f_fill, 1, 1, 1, 1, 1, 1, 0, s, a, NULL));
                set_flag(&go, ++k);
                wait_for(&done, k);
                const char *st = adv_capture_status(s);
                CUresult e = R(cuStreamEndCapture(s, &g));
                printf("%s by a %s thread during a %s capture: %s; capture %s, end %s\n",
                       op == 0 ? "cuMemFree (cuMemAlloc block)" : op == 1 ? "cuMemAlloc" :
                       "cuMemFree (cuMemAllocAsync block)", mode_names[bm], mode_names[am],
                       adv_err(fm_rc), st, adv_err(e));
                if (g) R(cuGraphDestroy(g));
                if (op == 1 && fm_rc == CUDA_SUCCESS) R(cuMemFree(fm_ptr));
                if (op != 1 && fm_rc != CUDA_SUCCESS) R(cuMemFree(p));
            }
    fm_op = -1;
    set_flag(&go, ++k);
    pthread_join(t.t, NULL);
    printf("%s\n%.*s", t.label, (int)t.len, t.out);
    free(t.out);
    adv_check("free_modes: done", 1, "%d combinations", k - 1);
}

/* ------------------------------------------------------------ free_held */

static int held_flag, in_free;

static void CUDA_CB hold_fn(void *arg)
{
    (void)arg;
    wait_for(&held_flag, 1);       /* host memory only: no driver call */
}

static void held_c(void *arg)
{
    CUdeviceptr p = *(CUdeviceptr *)arg;
    set_flag(&in_free, 1);
    R(cuMemFree(p));               /* waits for the held stream */
    set_flag(&in_free, 2);
}

static void run_free_held(void)
{
    CUstream sh, sw;
    CUdeviceptr victim, a, aa, x;
    CUgraph g;
    CUgraphExec exec = NULL;
    MUST(cuStreamCreate(&sh, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&sw, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&victim, 1 << 20));
    MUST(cuMemAlloc(&x, W * 4));
    MUST(cuMemAlloc(&a, 1 << 16));
    MUST(cuMemFree(a));           /* room in the arena */
    MUST(cuLaunchHostFunc(sh, hold_fn, NULL));
    adv_thread t = { .fn = held_c, .arg = &victim, .ctx = ctx, .label = "thread C (frees)" };
    if (pthread_create(&t.t, NULL, adv_thread_main, &t) != 0) exit(2);
    wait_for(&in_free, 1);
    adv_sleep_us(100000);          /* C is inside cuMemFree, waiting for sh */
    int still = __atomic_load_n(&in_free, __ATOMIC_ACQUIRE) == 1;
    R(cuMemAlloc(&a, 1 << 16));
    R(cuMemAllocAsync(&aa, 1 << 16, sw));
    uint32_t v = 5;
    void *f[] = { &x, &v, &nw };
    R(cuStreamBeginCapture(sw, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuLaunchKernel(f_fill, 1, 1, 1, 1, 1, 1, 0, sw, f, NULL));
    R(cuStreamEndCapture(sw, &g));
    R(cuGraphInstantiateWithFlags(&exec, g, 0));
    R(cuGraphLaunch(exec, sw));
    v = 9;
    CUgraph g2;
    R(cuStreamBeginCapture(sw, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuLaunchKernel(f_fill, 1, 1, 1, 1, 1, 1, 0, sw, f, NULL));
    R(cuStreamEndCapture(sw, &g2));
    CUgraphExecUpdateResultInfo info;
    R(cuGraphExecUpdate(exec, g2, &info));
    R(cuGraphLaunch(exec, sw));
    CUdeviceptr base;
    size_t size;
    R(cuMemGetAddressRange(&base, &size, a + 8));
    unsigned int mt = 0;
    R(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a));
    size_t fr, tot;
    R(cuMemGetInfo(&fr, &tot));
    R(cuMemFreeAsync(aa, sw));
    adv_check("free_held: C still waits in cuMemFree while A's calls return", still &&
              __atomic_load_n(&in_free, __ATOMIC_ACQUIRE) == 1, "range %zu, type %u", size, mt);
    set_flag(&held_flag, 1);
    pthread_join(t.t, NULL);
    printf("%s\n%.*s", t.label, (int)t.len, t.out);
    free(t.out);
    R(cuStreamSynchronize(sw));
    uint32_t want[W];
    for (uint32_t i = 0; i < W; i++) want[i] = 9 + i;
    adv_check_words("free_held: the updated exec's result", x, want, W);
    R(cuMemFree(a));
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    R(cuGraphDestroy(g2));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "begin_race", "end_race", "join", "order", "captures",
                                         "free_modes", "free_held", NULL };
    int c = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    f_fill = adv_fn(mod, "fill_u32");
    f_add = adv_fn(mod, "add_u32");
    f_mad = adv_fn(mod, "mad_u32");
    switch (c) {
    case 0: run_race(0); break;
    case 1: run_race(1); break;
    case 2: run_join(); break;
    case 3: run_order(); break;
    case 4: run_captures(); break;
    case 5: run_free_modes(); break;
    case 6: run_free_held(); break;
    }
    return adv_finish();
}
