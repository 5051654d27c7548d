/*
 * adv_evnodes.c: round 28, graphs that hold event record and wait nodes
 * (PyTorch records and waits on torch.cuda.Event(external=True) during
 * capture; programs build them with cuGraphAddEventRecordNode /
 * cuGraphAddEventWaitNode): valid programs whose graph updates change only
 * the event a node records or waits on, every kernel staying the same. The
 * driver's exec records (or waits on) the new event after such an update; a
 * library that skipped it leaves the exec on the old one, which the checks
 * below see without any race: the launch stream, or the stream feeding the
 * graph, is held by a host flag (cuStreamWaitValue32 on pinned memory) while
 * the program looks.
 *
 * Record steps: graph { acc = 0 (memset); acc += s (add_u32); acc = acc * 3
 * + in (mad_u32); record node of the step's event }, launched behind the
 * hold; then, before the host releases it: the step's event must be pending
 * and the last step's (when another) complete; stream 2 waits on the step's
 * event and computes out = 0 * 3 + acc (mad_u32), which must see the graph's
 * acc. Wait steps: stream 2, held, fills src with the step's value and
 * records the step's event; graph { acc = 0; wait node of the step's event;
 * acc = acc * 3 + src } launched on the free stream must see that src. The
 * step's event alternates between two events, every third step repeating the
 * last step's (an update the library may skip).
 *
 * Cases:
 *   record   each step builds the record graph anew (explicit calls), then
 *            cuGraphExecUpdate + launch;
 *   wait     the same with the wait graph;
 *   capture  each step captures { memset, kernels, external wait
 *            (CU_EVENT_WAIT_EXTERNAL), kernel, external record
 *            (CU_EVENT_RECORD_EXTERNAL) }, both events changing, and updates;
 *   execset  one record graph; cuGraphExecEventRecordNodeSetEvent (in the
 *            second half the generic cuGraphExecNodeSetParams) each step,
 *            and every fourth step a cuGraphExecUpdate from the graph
 *            unchanged since instantiation (its own event must come back);
 *   same     the record graph rebuilt each step with the same event and
 *            values: skipping is allowed, the results must be right either
 *            way and the report must account for every update.
 * Usage: adv_evnodes record|wait|capture|execset|same
 */
#include "adv_common.h"

#define N 128
#define STEPS 8

static CUcontext ctx;
static CUfunction f_add, f_mad, f_fill;
static CUdeviceptr acc, in, src, out;
static CUstream st, st2;
static CUevent ev[2];
static volatile uint32_t *flag;         /* pinned: the hold (cuStreamWaitValue32) */
static CUdeviceptr dflag;

/* The step's event: alternates, every third step repeating the last one's. */
static int step_ev(int k) { return (k % 3 == 2 ? k - 1 : k) % 2; }

/* { acc = 0; acc += s; acc = acc * 3 + in }: the last node in *last. */
static CUgraph record_body(uint32_t s, CUgraphNode *last)
{
    CUgraph g;
    CUgraphNode ms, k;
    MUST(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = { .dst = acc, .value = 0, .elementSize = 4, .width = N, .height = 1 };
    MUST(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, ctx));
    uint64_t n = N;
    void *a1[] = { &acc, &s, &n }, *a2[] = { &in, &acc, &n };
    k = adv_add_kernel(g, &ms, 1, f_add, a1);
    *last = adv_add_kernel(g, &k, 1, f_mad, a2);
    return g;
}

static CUgraph record_graph(uint32_t s, CUevent e, CUgraphNode *rec)
{
    CUgraphNode last, r;
    CUgraph g = record_body(s, &last);
    MUST(cuGraphAddEventRecordNode(&r, g, &last, 1, e));
    if (rec) *rec = r;
    return g;
}

/* { acc = 0; wait node of e; acc = acc * 3 + src } */
static CUgraph wait_graph(CUevent e)
{
    CUgraph g;
    CUgraphNode ms, w;
    MUST(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = { .dst = acc, .value = 0, .elementSize = 4, .width = N, .height = 1 };
    MUST(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, ctx));
    MUST(cuGraphAddEventWaitNode(&w, g, &ms, 1, e));
    uint64_t n = N;
    void *a[] = { &src, &acc, &n };
    adv_add_kernel(g, &w, 1, f_mad, a);
    return g;
}

/* Holds stream s until the host releases hold number h (release(h)). */
static void hold(CUstream s, uint32_t h) { R(cuStreamWaitValue32(s, dflag, h, CU_STREAM_WAIT_VALUE_GEQ)); }
static void release(uint32_t h) { __atomic_store_n(flag, h, __ATOMIC_RELEASE); }

static void want_acc(uint32_t *want, uint32_t s)
{
    for (int i = 0; i < N; i++) want[i] = s * 3u + 100u + (uint32_t)i;
}

/* A record step's launch and checks: the exec e must record ev_now (the
 * last step's event ev_last, when another, stays complete). */
static void record_step(CUgraphExec e, const char *what, int k, CUevent ev_now, CUevent ev_last, uint32_t s)
{
    char name[64];
    uint32_t h = (uint32_t)k * 2u + 1u, want[N];
    uint64_t n = N;
    hold(st, h);
    R(cuGraphLaunch(e, st));
    CUresult q_now = cuEventQuery(ev_now), q_last = ev_last ? cuEventQuery(ev_last) : CUDA_SUCCESS;
    snprintf(name, sizeof name, "%s_step%d_events", what, k);
    adv_check(name, q_now == CUDA_ERROR_NOT_READY && q_last == CUDA_SUCCESS,
              "step's event pending: %s, last step's event complete: %s", q_now == CUDA_ERROR_NOT_READY ? "yes" : "no",
              q_last == CUDA_SUCCESS ? "yes" : "no");
    R(cuMemsetD32Async(out, 0, N, st2));
    R(cuStreamWaitEvent(st2, ev_now, 0));
    ADV_LAUNCH(f_mad, st2, &acc, &out, &n);            /* out = 0 * 3 + acc */
    release(h);
    R(cuStreamSynchronize(st2));
    R(cuStreamSynchronize(st));
    want_acc(want, s);
    snprintf(name, sizeof name, "%s_step%d_acc", what, k);
    adv_check_words(name, acc, want, N);
    snprintf(name, sizeof name, "%s_step%d_stream2", what, k);
    adv_check_words(name, out, want, N);
}

/* The graph just launched on st waits for work stream 2 holds: st must
 * still be busy 20 ms later (a graph that did not wait is done by then, and
 * would have read src before stream 2 wrote it). */
static void check_held(const char *what, int k)
{
    char name[64];
    CUresult q = CUDA_SUCCESS;
    for (int i = 0; i < 20 && (q = cuStreamQuery(st)) == CUDA_ERROR_NOT_READY; i++) adv_sleep_us(1000);
    snprintf(name, sizeof name, "%s_step%d_waits", what, k);
    adv_check(name, q == CUDA_ERROR_NOT_READY, "launch stream held by the wait node: %s",
              q == CUDA_ERROR_NOT_READY ? "yes" : adv_err(q));
}

/* A wait step: stream 2, held, fills src with v + i and records ev_now; the
 * exec e, launched on st, must wait for it. */
static void wait_step(CUgraphExec e, const char *what, int k, CUevent ev_now)
{
    char name[64];
    uint32_t h = (uint32_t)k * 2u + 2u, v = 1000u + (uint32_t)k * 10u, want[N];
    uint64_t n = N;
    hold(st2, h);
    ADV_LAUNCH(f_fill, st2, &src, &v, &n);
    R(cuEventRecord(ev_now, st2));
    R(cuGraphLaunch(e, st));
    check_held(what, k);
    release(h);
    R(cuStreamSynchronize(st));
    R(cuStreamSynchronize(st2));
    for (int i = 0; i < N; i++) want[i] = v + (uint32_t)i;
    snprintf(name, sizeof name, "%s_step%d", what, k);
    adv_check_words(name, acc, want, N);
}

static void case_record(int same)
{
    CUgraphExec e = NULL;
    for (int k = 0; k < STEPS; k++) {
        int x = same ? 0 : step_ev(k), last = same ? 0 : step_ev(k ? k - 1 : 0);
        uint32_t s = 10u;                            /* the kernels never change */
        CUgraph g = record_graph(s, ev[x], NULL);
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else adv_update(e, g);
        record_step(e, same ? "same" : "record", k, ev[x], k && last != x ? ev[last] : NULL, s);
        MUST(cuGraphDestroy(g));
    }
    MUST(cuGraphExecDestroy(e));
}

static void case_wait(void)
{
    CUgraphExec e = NULL;
    for (int k = 0; k < STEPS; k++) {
        CUgraph g = wait_graph(ev[step_ev(k)]);
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else adv_update(e, g);
        wait_step(e, "wait", k, ev[step_ev(k)]);
        MUST(cuGraphDestroy(g));
    }
    MUST(cuGraphExecDestroy(e));
}

/* The captured graph: memset acc; wait (external) on ew; acc = acc * 3 +
 * src; acc += s; record (external) of er. With src = v + i: acc = v + i +
 * s. */
static CUgraph capture_graph(CUevent ew, CUevent er, uint32_t s)
{
    CUgraph g;
    uint64_t n = N;
    MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuMemsetD32Async(acc, 0, N, st));
    R(cuStreamWaitEvent(st, ew, CU_EVENT_WAIT_EXTERNAL));
    ADV_LAUNCH(f_mad, st, &src, &acc, &n);
    ADV_LAUNCH(f_add, st, &acc, &s, &n);
    R(cuEventRecordWithFlags(er, st, CU_EVENT_RECORD_EXTERNAL));
    MUST(cuStreamEndCapture(st, &g));
    return g;
}

static void case_capture(void)
{
    CUgraphExec e = NULL;
    char name[64];
    for (int k = 0; k < STEPS; k++) {
        /* the wait's and the record's events: the two events, swapped at each change */
        CUevent ew = ev[step_ev(k)], er = ev[1 - step_ev(k)];
        uint32_t s = 5u, h = (uint32_t)k * 2u + 1u, v = 2000u + (uint32_t)k, want[N];
        uint64_t n = N;
        CUgraph g = capture_graph(ew, er, s);
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else adv_update(e, g);
        hold(st2, h);
        ADV_LAUNCH(f_fill, st2, &src, &v, &n);
        R(cuEventRecord(ew, st2));
        R(cuGraphLaunch(e, st));
        check_held("capture", k);
        CUresult q = cuEventQuery(er);               /* the graph waits for stream 2: pending */
        snprintf(name, sizeof name, "capture_step%d_record_pending", k);
        adv_check(name, q == CUDA_ERROR_NOT_READY, "%s", q == CUDA_ERROR_NOT_READY ? "yes" : adv_err(q));
        R(cuMemsetD32Async(out, 0, N, st2));
        R(cuStreamWaitEvent(st2, er, 0));
        ADV_LAUNCH(f_mad, st2, &acc, &out, &n);
        release(h);
        R(cuStreamSynchronize(st2));
        R(cuStreamSynchronize(st));
        for (int i = 0; i < N; i++) want[i] = v + (uint32_t)i + s;
        snprintf(name, sizeof name, "capture_step%d_acc", k);
        adv_check_words(name, acc, want, N);
        snprintf(name, sizeof name, "capture_step%d_stream2", k);
        adv_check_words(name, out, want, N);
        MUST(cuGraphDestroy(g));
    }
    MUST(cuGraphExecDestroy(e));
}

static void case_execset(void)
{
    CUgraphNode rec;
    CUgraph g = record_graph(10u, ev[0], &rec);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    int cur = 0;                                     /* the event the exec records */
    for (int k = 0; k < STEPS; k++) {
        int x = k % 4 == 3 ? 0 : step_ev(k + 1);
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_EVENT_RECORD, .eventRecord.event = ev[x] };
        if (k % 4 == 3) adv_update(e, g);                /* back to g's own event */
        else if (k >= 4) R(cuGraphExecNodeSetParams(e, rec, &np));   /* the second half */
        else R(cuGraphExecEventRecordNodeSetEvent(e, rec, ev[x]));
        record_step(e, "execset", k, ev[x], x != cur ? ev[cur] : NULL, 10u);
        cur = x;
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "record", "wait", "capture", "execset", "same", NULL };
    int which = adv_case(argc, argv, names);
    CUmodule mod;
    adv_open(&ctx, &mod);
    f_add = adv_fn(mod, "add_u32");
    f_mad = adv_fn(mod, "mad_u32");
    f_fill = adv_fn(mod, "fill_u32");
    MUST(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&st2, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&ev[0], CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&ev[1], CU_EVENT_DISABLE_TIMING));
    MUST(cuMemHostAlloc((void **)&flag, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    MUST(cuMemHostGetDevicePointer(&dflag, (void *)flag, 0));
    *flag = 0;
    CUdeviceptr *bufs[] = { &acc, &in, &src, &out };
    for (int b = 0; b < 4; b++) MUST(cuMemAlloc(bufs[b], N * sizeof(uint32_t)));
    uint32_t v = 100;
    uint64_t n = N;
    ADV_LAUNCH(f_fill, st, &in, &v, &n);            /* in[i] = 100 + i */
    MUST(cuStreamSynchronize(st));
    switch (which) {
    case 0: case_record(0); break;
    case 1: case_wait(); break;
    case 2: case_capture(); break;
    case 3: case_execset(); break;
    default: case_record(1); break;
    }
    for (int b = 0; b < 4; b++) MUST(cuMemFree(*bufs[b]));
    MUST(cuMemFreeHost((void *)flag));
    MUST(cuEventDestroy(ev[0]));
    MUST(cuEventDestroy(ev[1]));
    MUST(cuStreamDestroy(st));
    MUST(cuStreamDestroy(st2));
    return adv_finish();
}
