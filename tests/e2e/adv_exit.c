/*
 * tests/e2e/adv_exit.c: the process exits while other threads are inside
 * the library or waiting in the driver through it (round 19). Without the
 * library every case exits with its results printed; with it, the exit
 * handler (core/process.c, at_exit: the report and the summary) runs while
 * a thread holds a stream the host never releases (cuStreamWaitValue32 on a
 * pinned flag) and another thread is blocked in a hooked call, or is busy
 * capturing, updating and launching. The job before it engages the library
 * (placed temporaries, re-captures whose updates are decided).
 *   free_wait    a thread's cuMemFree of a placed block waits (the implicit
 *                synchronization) for the held stream; main exits;
 *   sync_wait    a thread's cuStreamSynchronize of the held stream;
 *   capture_wait a thread captures (relaxed mode) on a stream of its own,
 *                then waits in cuEventSynchronize for an event behind the
 *                held stream, its capture still in progress;
 *   launch_wait  a thread launches the job's exec (updated each time) on the
 *                held stream 50 times, then synchronizes it;
 *   alloc_wait   256 MiB device: 192 MiB allocated by cuMemAllocAsync on the
 *                held stream, used and freed there; a thread's 160 MiB
 *                cuMemAlloc finds the device full (the driver's answer:
 *                CUDA_ERROR_OUT_OF_MEMORY; the library's may wait);
 *   stdio_wait   a thread waits in fgets() on a pipe no one writes to (it
 *                holds that FILE's lock: any fflush(NULL) waits for it);
 *                main exits (the report written to one of the process's
 *                descriptors, STABLEGRAPH_REPORT=/dev/fd/N, flushed the
 *                program's streams first);
 *   busy         a thread re-captures, updates, launches and synchronizes
 *                in a loop on its own stream, without end, while main exits;
 *   hostfn_exit  main prints its results, then a host function on a stream
 *                calls exit() while main waits in cuStreamSynchronize of the
 *                held stream;
 *   thread_exit  main prints its results and frees a placed block in use on
 *                the held stream (cuMemFree waits); another thread calls
 *                exit();
 *   stdout_held  main prints its results, then a thread takes stdout's lock
 *                (flockfile) and waits for good while a thread's cuMemFree
 *                waits; main exits (the report to a descriptor of the
 *                process flushes stdout only if its lock is free within
 *                100 ms);
 *   quick_exit   as free_wait, but main ends with quick_exit(): no handler
 *                runs, no report is written (not a case of the runner: it
 *                wants a report; tests/e2e/test_correctness.sh runs it
 *                apart).
 * Nothing a blocked or busy thread does is printed: the output is main's.
 * Usage: adv_exit CASE
 */
#include "adv_common.h"

#define N 64
#define MiB ((size_t)1 << 20)

static CUcontext ctx;
static CUmodule mod;
static CUfunction add;
static CUstream held, w;
static CUdeviceptr dflag, blk;
static volatile uint32_t *flag;
static CUgraphExec job_exec;

/* Captures add_u32(p, v, N) twice on s into a graph. */
static CUgraph capture_add(CUstream s, CUdeviceptr p, uint32_t v)
{
    CUgraph g;
    uint64_t n = N;
    void *args[] = { &p, &v, &n };
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    MUST(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    MUST(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    MUST(cuStreamEndCapture(s, &g));
    return g;
}

/* The job: a temporary per step, re-captured, the exec updated and launched;
 * the last step's result checked. Leaves job_exec. */
static void job(void)
{
    uint32_t want[N];
    CUdeviceptr out;
    MUST(cuMemAlloc(&out, N * 4));
    for (int step = 0; step < 6; step++) {
        CUdeviceptr t;
        MUST(cuMemAlloc(&t, N * 4));
        MUST(cuMemsetD32Async(t, (unsigned)step, N, w));
        CUgraph g = capture_add(w, t, 5);
        if (!job_exec) {
            MUST(cuGraphInstantiateWithFlags(&job_exec, g, 0));
        } else {
            CUgraphExecUpdateResultInfo info;
            R(cuGraphExecUpdate(job_exec, g, &info));
        }
        R(cuGraphLaunch(job_exec, w));
        R(cuMemcpyDtoDAsync(out, t, N * 4, w));
        MUST(cuStreamSynchronize(w));
        MUST(cuGraphDestroy(g));
        MUST(cuMemFree(t));
        for (int i = 0; i < N; i++) want[i] = (uint32_t)step + 10;
    }
    adv_check_words("job", out, want, N);
    MUST(cuMemFree(out));
}

/* The held stream: waits for *flag >= 1 (never written), then a kernel on blk. */
static void hold(void)
{
    uint32_t v = 1;
    uint64_t n = N;
    void *args[] = { &blk, &v, &n };
    MUST(cuMemHostAlloc((void **)&flag, 4, CU_MEMHOSTALLOC_DEVICEMAP));
    *flag = 0;
    MUST(cuMemHostGetDevicePointer(&dflag, (void *)flag, 0));
    MUST(cuMemAlloc(&blk, N * 4));
    MUST(cuStreamWaitValue32(held, dflag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    MUST(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, held, args, NULL));
}

static void *free_wait(void *arg)
{
    (void)arg;
    cuMemFree(blk);
    return NULL;
}

static void *sync_wait(void *arg)
{
    (void)arg;
    cuStreamSynchronize(held);
    return NULL;
}

static void *capture_wait(void *arg)
{
    CUstream c;
    CUevent ev;
    CUdeviceptr t;
    uint32_t v = 2;
    uint64_t n = N;
    void *args[] = { &t, &v, &n };
    (void)arg;
    cuStreamCreate(&c, CU_STREAM_NON_BLOCKING);
    cuEventCreate(&ev, CU_EVENT_DEFAULT);
    cuEventRecord(ev, held);
    cuMemAlloc(&t, N * 4);
    cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED);
    cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, c, args, NULL);
    cuEventSynchronize(ev);
    return NULL;
}

static void *launch_wait(void *arg)
{
    (void)arg;
    for (uint32_t i = 0; i < 50; i++) {
        CUgraph g = capture_add(w, blk, i % 3);
        CUgraphExecUpdateResultInfo info;
        cuGraphExecUpdate(job_exec, g, &info);
        cuGraphLaunch(job_exec, held);
        cuGraphDestroy(g);
    }
    cuStreamSynchronize(held);
    return NULL;
}

static void *alloc_wait(void *arg)
{
    CUdeviceptr p;
    (void)arg;
    cuMemAlloc(&p, 160 * MiB);
    return NULL;
}

static void *stdio_wait(void *arg)
{
    int fds[2];
    char line[64];
    (void)arg;
    if (pipe(fds) != 0) return NULL;
    FILE *f = fdopen(fds[0], "r");
    if (f) fgets(line, sizeof line, f);
    return NULL;
}

static void *busy(void *arg)
{
    CUstream s;
    CUgraphExec e = NULL;
    (void)arg;
    cuCtxSetCurrent(ctx);
    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    for (uint32_t i = 0;; i++) {
        CUdeviceptr t;
        if (cuMemAlloc(&t, N * 4) != CUDA_SUCCESS) continue;
        CUgraph g = capture_add(s, t, i % 5);
        CUgraphExecUpdateResultInfo info;
        if (!e) cuGraphInstantiateWithFlags(&e, g, 0);
        else cuGraphExecUpdate(e, g, &info);
        cuGraphLaunch(e, s);
        cuStreamSynchronize(s);
        cuGraphDestroy(g);
        cuMemFree(t);
    }
    return NULL;
}

static void CUDA_CB exit_fn(void *arg)
{
    exit(*(int *)arg);
}

static void *stdout_held(void *arg)
{
    (void)arg;
    flockfile(stdout);
    pause();
    return NULL;
}

static void *exit_thread(void *arg)
{
    usleep(50000);
    exit(*(int *)arg);
}

/* Starts fn on a thread with ctx current (it never ends). */
static void start(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg) != 0) {
        printf("pthread_create failed\n");
        exit(2);
    }
}

typedef struct { void *(*fn)(void *); } ctx_start;

static void *with_ctx(void *arg)
{
    ctx_start *c = arg;
    cuCtxSetCurrent(ctx);
    return c->fn(NULL);
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "free_wait", "sync_wait", "capture_wait", "launch_wait",
                                          "alloc_wait", "stdio_wait", "busy", "hostfn_exit", "thread_exit",
                                          "stdout_held", "quick_exit", NULL };
    static ctx_start threads[] = { { free_wait }, { sync_wait }, { capture_wait },
                                   { launch_wait }, { alloc_wait }, { stdio_wait }, { busy } };
    int c = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    add = adv_fn(mod, "add_u32");
    MUST(cuStreamCreate(&held, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&w, CU_STREAM_NON_BLOCKING));
    job();
    hold();
    if (strcmp(names[c], "alloc_wait") == 0) {
        CUdeviceptr big;
        uint32_t v = 3;
        uint64_t n = N;
        void *args[] = { &big, &v, &n };
        MUST(cuMemAllocAsync(&big, 192 * MiB, held));
        R(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, held, args, NULL));
        R(cuMemFreeAsync(big, held));
    }
    static int rc;
    if (c < 7) {
        start(with_ctx, &threads[c]);
        usleep(100000);               /* the thread is blocked (or busy) by now */
        exit(adv_finish());
    }
    rc = adv_finish();
    if (strcmp(names[c], "hostfn_exit") == 0) {
        R(cuLaunchHostFunc(w, exit_fn, &rc));
        cuStreamSynchronize(held);
    } else if (strcmp(names[c], "thread_exit") == 0) {
        start(exit_thread, &rc);
        cuMemFree(blk);
    } else {
        start(with_ctx, &threads[0]);    /* free_wait */
        if (strcmp(names[c], "stdout_held") == 0) start(stdout_held, NULL);
        usleep(100000);
        if (strcmp(names[c], "quick_exit") == 0) quick_exit(rc);
        exit(rc);
    }
    printf("not reached\n");
    return 3;
}
