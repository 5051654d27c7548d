/*
 * test_unsafe.c: the "potentially unsafe" calls during stream capture, every
 * combination of the capture's mode, the caller's thread mode and whose
 * thread captures (cuThreadExchangeStreamCaptureMode, CUDA driver API):
 *
 *   - the capturing thread itself, capture not RELAXED, caller not RELAXED:
 *     refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, the capture is
 *     invalidated (cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
 *   - another thread's GLOBAL capture, caller in GLOBAL mode: the same;
 *   - a RELAXED capture, a RELAXED caller, a THREAD_LOCAL caller facing
 *     another thread's capture, any caller facing another thread's
 *     THREAD_LOCAL capture: the call runs and the capture stays valid.
 *
 * Each unsafe call is checked to do nothing when refused (a refused free
 * keeps the block, a refused copy writes nothing).
 */
#include "graph_util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ calls */

/* One unsafe call: `run` makes it (on whichever thread), `check` verifies
 * afterwards, on the main thread, that it took effect (done == 1) or that
 * nothing changed (done == 0); `reset` prepares the next round. `ctx_wide`:
 * the call synchronizes the whole context, which is invalid in every mode
 * while a stream of the context captures (CUDA Programming Guide,
 * "Prohibited and Unhandled Operations"). */
typedef struct unsafe_call {
    const char *name;
    CUresult (*run)(void);
    int (*check)(int done);
    void (*reset)(void);
    int ctx_wide;
} unsafe_call;

static CUdeviceptr u_dev;       /* a live cuMemAlloc block, N_ELEMS words */
static void *u_host;            /* a live cuMemAllocHost block */
static CUdeviceptr u_new;       /* what an allocating call returned */
static void *u_new_host;
static uint32_t u_src[N_ELEMS], u_dst[N_ELEMS];

static int dev_alive(CUdeviceptr p)
{
    CUdeviceptr base;
    size_t size;
    return cuMemGetAddressRange(&base, &size, p) == CUDA_SUCCESS;
}

static int host_alive(void *p)
{
    CUdeviceptr d;
    return p && cuMemHostGetDevicePointer(&d, p, 0) == CUDA_SUCCESS;
}

static void reset_none(void) {}

static CUresult run_alloc(void) { u_new = 0; return cuMemAlloc(&u_new, 4096); }
static int check_alloc(int done)
{
    int ok = done ? u_new && dev_alive(u_new) : u_new == 0;
    if (u_new) cuMemFree(u_new);
    u_new = 0;
    return ok;
}

static CUresult run_free(void) { return cuMemFree(u_dev); }
static int check_free(int done) { return dev_alive(u_dev) == !done; }
static void reset_free(void)
{
    if (!dev_alive(u_dev)) CHECK_CU(cuMemAlloc(&u_dev, N_ELEMS * sizeof(uint32_t)), CUDA_SUCCESS);
}

static CUresult run_alloc_host(void) { u_new_host = NULL; return cuMemAllocHost(&u_new_host, 4096); }
static CUresult run_host_alloc(void) { u_new_host = NULL; return cuMemHostAlloc(&u_new_host, 4096, 0); }
static int check_alloc_host(int done)
{
    int ok = done ? host_alive(u_new_host) : u_new_host == NULL;
    if (u_new_host) cuMemFreeHost(u_new_host);
    u_new_host = NULL;
    return ok;
}

static CUresult run_free_host(void) { return cuMemFreeHost(u_host); }
static int check_free_host(int done) { return host_alive(u_host) == !done; }
static void reset_free_host(void)
{
    if (!host_alive(u_host)) CHECK_CU(cuMemAllocHost(&u_host, 4096), CUDA_SUCCESS);
}

/* Synchronous copies and memsets: u_dev holds 0 before each round. */
static void reset_dev_zero(void)
{
    reset_free();
    CHECK_CU(cuMemsetD32(u_dev, 0, N_ELEMS), CUDA_SUCCESS);
    memset(u_dst, 0, sizeof u_dst);
    for (int i = 0; i < N_ELEMS; i++) u_src[i] = 7;
}
static CUresult run_htod(void) { return cuMemcpyHtoD(u_dev, u_src, sizeof u_src); }
static int check_dev_7(int done) { return gu_all(u_dev, done ? 7 : 0); }
static CUresult run_memset(void) { return cuMemsetD32(u_dev, 7, N_ELEMS); }
static CUresult run_dtoh(void) { return cuMemcpyDtoH(u_dst, u_dev, sizeof u_dst); }
static void reset_dev_seven(void)
{
    reset_free();
    CHECK_CU(cuMemsetD32(u_dev, 7, N_ELEMS), CUDA_SUCCESS);
    memset(u_dst, 0, sizeof u_dst);
}
static int check_dst_7(int done) { return u_dst[0] == (done ? 7u : 0u) && u_dst[N_ELEMS - 1] == u_dst[0]; }

static CUresult run_ctx_sync(void) { return cuCtxSynchronize(); }
static int check_nothing(int done) { (void)done; return 1; }

static CUmemGenericAllocationHandle u_handle;
static CUresult run_mem_create(void)
{
    size_t gran = 0;
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CUresult r = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) return r;
    u_handle = 0;
    return cuMemCreate(&u_handle, gran, &prop, 0);
}
static int check_mem_create(int done)
{
    CUmemAllocationProp prop;
    int ok = done ? cuMemGetAllocationPropertiesFromHandle(&prop, u_handle) == CUDA_SUCCESS : u_handle == 0;
    if (u_handle) cuMemRelease(u_handle);
    u_handle = 0;
    return ok;
}

static const unsafe_call calls[] = {
    { "cuMemAlloc", run_alloc, check_alloc, reset_none, 0 },
    { "cuMemFree", run_free, check_free, reset_free, 0 },
    { "cuMemAllocHost", run_alloc_host, check_alloc_host, reset_none, 0 },
    { "cuMemHostAlloc", run_host_alloc, check_alloc_host, reset_none, 0 },
    { "cuMemFreeHost", run_free_host, check_free_host, reset_free_host, 0 },
    { "cuMemcpyHtoD", run_htod, check_dev_7, reset_dev_zero, 0 },
    { "cuMemcpyDtoH", run_dtoh, check_dst_7, reset_dev_seven, 0 },
    { "cuMemsetD32", run_memset, check_dev_7, reset_dev_zero, 0 },
    { "cuCtxSynchronize", run_ctx_sync, check_nothing, reset_none, 1 },
    { "cuMemCreate", run_mem_create, check_mem_create, reset_none, 0 },
};
#define NCALLS (sizeof calls / sizeof calls[0])

/* ---------------------------------------------------------------- threads */

typedef struct job {
    const unsafe_call *call;
    int set_mode;
    CUstreamCaptureMode mode;
    CUresult result;
} job;

static CUresult run_in_mode(job *j)
{
    CUstreamCaptureMode m = j->mode;
    if (j->set_mode && cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS) return CUDA_ERROR_UNKNOWN;
    CUresult r = j->call->run();
    if (j->set_mode) cuThreadExchangeStreamCaptureMode(&m);   /* restore */
    return r;
}

static void *job_main(void *arg)
{
    job *j = arg;
    cuCtxSetCurrent(g_ctx);
    j->result = run_in_mode(j);
    return NULL;
}

/* One cell of the matrix: capture in `cap_mode` on this thread; the call is
 * made on this thread (other_thread == 0) or another one, whose thread mode
 * is `caller_mode`. `refused` says what the documented rules give. */
static void cell(CUstreamCaptureMode cap_mode, int other_thread, CUstreamCaptureMode caller_mode, int unsafe_refused)
{
    static const char *mode_names[] = { "GLOBAL", "THREAD_LOCAL", "RELAXED" };
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc();
    for (size_t i = 0; i < NCALLS; i++) {
        const unsafe_call *c = &calls[i];
        int refused = unsafe_refused || c->ctx_wide;
        c->reset();
        CHECK_CU(cuStreamBeginCapture_v2(s, cap_mode), CUDA_SUCCESS);
        CHECK_CU(cuMemsetD32Async(a, 1, N_ELEMS, s), CUDA_SUCCESS);
        job j = { .call = c, .set_mode = 1, .mode = caller_mode };
        if (other_thread) {
            pthread_t t;
            CHECK_EQ(pthread_create(&t, NULL, job_main, &j), 0);
            pthread_join(t, NULL);
        } else {
            j.result = run_in_mode(&j);
        }
        CUstreamCaptureStatus st;
        CHECK_CU(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
        /* Work captured after a refusal fails: the capture is invalid. */
        CUresult more = cuMemsetD32Async(a, 2, N_ELEMS, s);
        CUgraph g = (CUgraph)(uintptr_t)1;
        CUresult end = cuStreamEndCapture(s, &g);
        int ok = refused ? j.result == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED &&
                           st == CU_STREAM_CAPTURE_STATUS_INVALIDATED &&
                           more == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED &&
                           end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && g == NULL
                         : j.result == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
                           more == CUDA_SUCCESS && end == CUDA_SUCCESS && g != NULL;
        int effect = c->check(!refused);
        if (!ok || !effect)
            printf("#   %s, capture %s on %s thread, caller %s: result %d, status %d, next capture %d, "
                   "end %d, effect %s\n", c->name, mode_names[cap_mode], other_thread ? "another" : "the same",
                   mode_names[caller_mode], (int)j.result, (int)st, (int)more, (int)end,
                   effect ? "as expected" : "WRONG");
        CHECK(ok && effect);
        if (end == CUDA_SUCCESS && g) CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    }
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

#define G CU_STREAM_CAPTURE_MODE_GLOBAL
#define T CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
#define R CU_STREAM_CAPTURE_MODE_RELAXED

TEST(own_capture)
{
    cell(G, 0, G, 1);
    cell(G, 0, T, 1);
    cell(G, 0, R, 0);
    cell(T, 0, G, 1);
    cell(T, 0, T, 1);
    cell(T, 0, R, 0);
    cell(R, 0, G, 0);
    cell(R, 0, T, 0);
}

TEST(other_threads_capture)
{
    cell(G, 1, G, 1);
    cell(G, 1, T, 0);
    cell(G, 1, R, 0);
    cell(T, 1, G, 0);
    cell(T, 1, T, 0);
    cell(R, 1, G, 0);
}

/* Without any capture every call runs. */
TEST(no_capture)
{
    for (size_t i = 0; i < NCALLS; i++) {
        calls[i].reset();
        CUresult r = calls[i].run();
        if (r != CUDA_SUCCESS) printf("#   %s: %d\n", calls[i].name, (int)r);
        CHECK_CU(r, CUDA_SUCCESS);
        CHECK(calls[i].check(1));
    }
}

/* Begins a RELAXED capture on s with one node; `op` runs; returns what
 * cuStreamEndCapture gives (the graph is destroyed). */
static CUresult relaxed_capture_around(CUstream s, CUdeviceptr a, CUresult (*op)(void *), void *arg,
                                       CUresult *op_result)
{
    CUgraph g = NULL;
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(a, 1, N_ELEMS, s), CUDA_SUCCESS);
    *op_result = op(arg);
    CUresult r = cuStreamEndCapture(s, &g);
    if (g) cuGraphDestroy(g);
    return r;
}

static CUresult op_legacy_memset(void *arg) { return cuMemsetD32Async(*(CUdeviceptr *)arg, 5, N_ELEMS, NULL); }
static CUresult op_legacy_sync(void *arg) { (void)arg; return cuStreamSynchronize(CU_STREAM_LEGACY); }
static CUresult op_sync_copy(void *arg)
{
    uint32_t h[N_ELEMS];
    return cuMemcpyDtoH(h, *(CUdeviceptr *)arg, sizeof h);
}
static CUresult op_event_query(void *arg) { return cuEventQuery(*(CUevent *)arg); }

/* CUDA Programming Guide, "Prohibited and Unhandled Operations": using the
 * legacy stream while a blocking stream of its context captures, and
 * querying a captured event, are invalid in every mode, RELAXED included;
 * the capture is invalidated. */
TEST(conflicting_in_every_mode)
{
    CUstream blocking, nonblocking;
    CHECK_CU(cuStreamCreate(&blocking, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc(), b = gu_alloc();
    CUresult (*legacy_ops[])(void *) = { op_legacy_memset, op_legacy_sync, op_sync_copy };
    for (size_t i = 0; i < sizeof legacy_ops / sizeof legacy_ops[0]; i++) {
        CUresult r;
        CHECK_CU(cuMemsetD32(b, 0, N_ELEMS), CUDA_SUCCESS);
        CHECK_CU(relaxed_capture_around(blocking, a, legacy_ops[i], &b, &r), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        CHECK_CU(r, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
        CHECK(gu_all(b, 0));            /* the refused memset wrote nothing */
        /* A non-blocking capturing stream has no implicit dependency. */
        CHECK_CU(relaxed_capture_around(nonblocking, a, legacy_ops[i], &b, &r), CUDA_SUCCESS);
        CHECK_CU(r, CUDA_SUCCESS);
        CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
        if (legacy_ops[i] == op_legacy_memset) CHECK(gu_all(b, 5));
    }

    /* An event recorded in the capture in progress. */
    CUevent ev;
    CUresult r;
    CHECK_CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    CUgraph g = NULL;
    CHECK_CU(cuStreamBeginCapture_v2(nonblocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(ev, nonblocking), CUDA_SUCCESS);
    CHECK_CU(cuEventQuery(ev), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU(cuStreamEndCapture(nonblocking, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuStreamBeginCapture_v2(nonblocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(ev, nonblocking), CUDA_SUCCESS);
    CHECK_CU(cuEventSynchronize(ev), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU(cuStreamEndCapture(nonblocking, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* Once the capture ended, the event has no work behind it. */
    CHECK_CU(cuStreamBeginCapture_v2(nonblocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(ev, nonblocking), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(nonblocking, &g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuEventQuery(ev), CUDA_SUCCESS);
    /* An event recorded outside capture may be queried during one. */
    CHECK_CU(cuEventRecord(ev, blocking), CUDA_SUCCESS);
    CHECK_CU(relaxed_capture_around(nonblocking, a, op_event_query, &ev, &r), CUDA_SUCCESS);
    CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(blocking), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(nonblocking), CUDA_SUCCESS);
}

/* The other uses of the legacy stream, each refused with
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT while a blocking stream captures (and
 * changing nothing: the refused free keeps its block, the refused launch
 * takes no graph allocation), allowed while only a non-blocking one does:
 * cuStreamWaitEvent (an event recorded outside the capture, and one that
 * was never recorded), cuMemAllocAsync, cuMemFreeAsync, cuGraphLaunch,
 * cuGraphUpload. Before, the first four were accepted during the capture
 * (and a refused cuMemFreeAsync left its block marked freed). */
static CUevent l_ev, l_never;
static CUdeviceptr l_async, l_new;
static CUgraphExec l_exec;
static CUresult op_legacy_wait(void *arg) { (void)arg; return cuStreamWaitEvent(NULL, l_ev, 0); }
static CUresult op_legacy_wait_never(void *arg) { (void)arg; return cuStreamWaitEvent(CU_STREAM_LEGACY, l_never, 0); }
static CUresult op_legacy_alloc_async(void *arg) { (void)arg; return cuMemAllocAsync(&l_new, 4096, NULL); }
static CUresult op_legacy_free_async(void *arg) { (void)arg; return cuMemFreeAsync(l_async, NULL); }
static CUresult op_legacy_launch(void *arg) { (void)arg; return cuGraphLaunch(l_exec, NULL); }
static CUresult op_legacy_upload(void *arg) { (void)arg; return cuGraphUpload(l_exec, NULL); }

TEST(legacy_stream_uses)
{
    CUstream blocking, nonblocking, other;
    CHECK_CU(cuStreamCreate(&blocking, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&l_ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&l_never, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(l_ev, other), CUDA_SUCCESS);
    /* A graph with an allocation it does not free: a launch that took it
     * and was refused would make the next launch fail. */
    CUgraph g;
    CUgraphNode an;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = 0;
    ap.bytesize = 4096;
    CHECK_CU(cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiate(&l_exec, g, 0), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc();
    struct { const char *name; CUresult (*op)(void *); int alloc, free_, launch; } ops[] = {
        { "cuStreamWaitEvent", op_legacy_wait, 0, 0, 0 },
        { "cuStreamWaitEvent (never recorded)", op_legacy_wait_never, 0, 0, 0 },
        { "cuMemAllocAsync", op_legacy_alloc_async, 1, 0, 0 },
        { "cuMemFreeAsync", op_legacy_free_async, 0, 1, 0 },
        { "cuGraphLaunch", op_legacy_launch, 0, 0, 1 },
        { "cuGraphUpload", op_legacy_upload, 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        CUresult r;
        printf("#   %s\n", ops[i].name);
        if (ops[i].free_) CHECK_CU(cuMemAllocAsync(&l_async, 4096, other), CUDA_SUCCESS);
        l_new = 0;
        CHECK_CU(relaxed_capture_around(blocking, a, ops[i].op, NULL, &r), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        CHECK_CU(r, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
        CHECK(l_new == 0);
        /* Nothing changed: the block is still live, the exec still launches. */
        if (ops[i].free_) {
            CUdeviceptr base;
            size_t size;
            CHECK_CU(cuMemGetAddressRange(&base, &size, l_async), CUDA_SUCCESS);
        }
        /* Only a non-blocking stream captures: no implicit dependency. */
        CHECK_CU(relaxed_capture_around(nonblocking, a, ops[i].op, NULL, &r), CUDA_SUCCESS);
        CHECK_CU(r, CUDA_SUCCESS);
        CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
        if (ops[i].alloc) CHECK_CU(cuMemFreeAsync(l_new, NULL), CUDA_SUCCESS);
        if (ops[i].launch) CHECK_CU(cuMemFreeAsync(ap.dptr, NULL), CUDA_SUCCESS);
        CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    }
    CHECK_CU(cuGraphExecDestroy(l_exec), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(l_ev), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(l_never), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(blocking), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(nonblocking), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(other), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    CHECK_CU(cuMemAlloc(&u_dev, N_ELEMS * sizeof(uint32_t)), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocHost(&u_host, 4096), CUDA_SUCCESS);
    RUN(no_capture);
    RUN(own_capture);
    RUN(other_threads_capture);
    RUN(conflicting_in_every_mode);
    RUN(legacy_stream_uses);
    return check_done();
}
