/*
 * adv_capcond.c: round 48, conditional nodes built during a stream capture,
 * as CUDA-graph frameworks (and the CUDA samples' capturedWhileGraph) build
 * them: while a stream captures, the program asks cuStreamGetCaptureInfo_v3
 * for the capture's graph and last nodes (with their edge data), creates a
 * conditional handle for that graph, adds the conditional node there
 * (cuGraphAddNode_v2 after those nodes), makes it the stream's only
 * dependency (cuStreamUpdateCaptureDependencies_v2, SET), captures each body
 * by cuStreamBeginCaptureToGraph on another stream into the body graph the
 * node returned, ends that capture, and goes on with the outer one. The
 * library's recorder sees a graph it did not build change under a capture
 * (a node it did not record, dependencies set by hand, captures into graphs
 * it never saw created); a library that skipped an update whose graph
 * differs only inside a captured body, or only in a handle's default value,
 * or that placed a temporary a body names where another one still lives,
 * computes other numbers; one that answered a refused call itself gives
 * another result than the driver.
 *
 * Cases (every step's result read back and compared with a host model):
 *   steps    each step: two temporaries (cuMemAlloc, sizes shifting) filled
 *            from the host, then one capture: acc = 0; acc = acc*3 + t0;
 *            IF/ELSE hi (its value the handle's default, assigned per
 *            launch) { acc += a [, acc = acc*3 + t1 on topology steps] }
 *            { acc = acc*3 + t1, acc += b }; cnt = loops; WHILE hw { acc +=
 *            w; cnt -= 1, hw = cnt }; SWITCH hs (3, its value the default) { acc +=
 *            c0 } { acc += c1 } { acc += c2, acc = acc*3 + t0 }; acc += 1.
 *            cuGraphExecUpdate (a refused one: a new instantiation), launch,
 *            check, temporaries freed. Between steps: nothing changes (every
 *            third step repeats the one before), a body kernel's scalar,
 *            a body's topology, the IF handle's default;
 *   nested   the same outer capture, the WHILE body holding an IF captured
 *            the same way from inside the body's capture (a third stream):
 *            WHILE hw { acc += w; cnt -= 1, hw = cnt; cond_set(hn, v); IF hn
 *            { acc += c } };
 *   threads  two threads each running steps at once (thread-local captures,
 *            their own streams and buffers);
 *   invalid  a body capture invalidated (a wait on an event recorded
 *            outside any capture: isolation), the outer capture ended
 *            after it, the graph instantiated and launched with what the
 *            body holds; then a body capture left open while the outer
 *            capture ends (the graph may not be instantiated), then ended
 *            from a stream that joined it (unmatched) and from its own;
 *            a stream-ordered allocation in a body's capture (a memory
 *            node: refused, that capture invalidated); a body's capture
 *            ended with no graph argument, as the CUDA samples do; a
 *            stream-ordered free of a temporary in a body's capture and
 *            in the outer one (refused: no graph allocation).
 * Usage: adv_capcond steps|nested|threads|invalid
 */
#include "adv_common.h"

#define N 64
#define STEPS 12

static CUcontext ctx;
static CUfunction f_add, f_mad, f_step, f_set;

typedef struct {
    CUstream s, s2, s3;                 /* the outer capture's, the bodies', nested bodies' */
    CUdeviceptr acc, cnt;
    CUstreamCaptureMode mode;
    const char *tag;
} work;

/* The step's values (k: step; rk: the step whose values it repeats). */
typedef struct {
    uint32_t a, b, w, loops, v_if, v_sw, c[3], topo, shift;
} step_vals;

static step_vals vals_of(int k)
{
    int rk = adv_rep(k);
    step_vals v = {
        .a = adv_val(k, 4, 1, 5), .b = adv_val(k, 5, 2, 9), .w = adv_val(k, 3, 0, 2),
        .loops = 1 + (uint32_t)(rk / 2) % 3, .v_if = adv_val(k, 4, 3, 0) % 2,
        .v_sw = (uint32_t)(rk % 4), .c = { adv_val(k, 6, 4, 11), 13, adv_val(k, 5, 0, 17) },
        .topo = rk % 5 == 3, .shift = (uint32_t)(rk % 3) * 256,
    };
    return v;
}

static void launch_add(CUstream s, CUdeviceptr *acc, uint32_t v)
{
    uint64_t n = N;
    ADV_LAUNCH(f_add, s, acc, &v, &n);
}

static void launch_mad(CUstream s, CUdeviceptr *in, CUdeviceptr *acc)
{
    uint64_t n = N;
    ADV_LAUNCH(f_mad, s, in, acc, &n);
}

static void launch_set(CUstream s, CUgraphConditionalHandle h, uint32_t v)
{
    ADV_LAUNCH(f_set, s, &h, &v);
}

/* A conditional handle for the graph stream s captures into. */
static CUgraphConditionalHandle cap_handle(CUstream s, unsigned dflt, unsigned flags)
{
    CUstreamCaptureStatus st;
    CUgraph g = NULL;
    CUgraphConditionalHandle h = 0;
    R(cuStreamGetCaptureInfo_v3(s, &st, NULL, &g, NULL, NULL, NULL));
    R(cuGraphConditionalHandleCreate(&h, g, ctx, dflt, flags));
    return h;
}

/* A conditional node of type t (size bodies) on h added to the graph s
 * captures into, after s's last nodes (their edge data kept), then s's only
 * dependency; its bodies in body[]. */
static void cap_cond(CUstream s, CUgraphConditionalHandle h, CUgraphConditionalNodeType t, unsigned size,
                     CUgraph *body)
{
    CUstreamCaptureStatus st;
    CUgraph g = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *ed = NULL;
    size_t nd = 0;
    CUgraphNode node = NULL;
    memset(body, 0, size * sizeof *body);
    if (R(cuStreamGetCaptureInfo_v3(s, &st, NULL, &g, &deps, &ed, &nd)) != CUDA_SUCCESS) return;
    CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_CONDITIONAL,
                             .conditional = { .handle = h, .type = t, .size = size,
                                              .phGraph_out = body, .ctx = ctx } };
    if (R(cuGraphAddNode_v2(&node, g, deps, ed, nd, &np)) != CUDA_SUCCESS) return;
    R(cuStreamUpdateCaptureDependencies_v2(s, &node, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
}

static void body_begin(work *w, CUstream sb, CUgraph body)
{
    R(cuStreamBeginCaptureToGraph(sb, body, NULL, NULL, 0, w->mode));
}

static void body_end(CUstream sb)
{
    CUgraph got = NULL;
    R(cuStreamEndCapture(sb, &got));
}

/* Captures step k's graph on w->s (nested: the WHILE body holds an IF);
 * returns it (NULL if the capture failed). */
static CUgraph capture_step(work *w, const step_vals *v, CUdeviceptr *t0, CUdeviceptr *t1, int nested)
{
    CUgraph bi[2], bw[1], bs[3], bn[1], g = NULL;
    MUST(cuStreamBeginCapture_v2(w->s, w->mode));
    R(cuMemsetD32Async(w->acc, 0, N, w->s));
    launch_mad(w->s, t0, &w->acc);
    /* IF/ELSE: its value the handle's default, assigned at each launch */
    CUgraphConditionalHandle hi = cap_handle(w->s, v->v_if, CU_GRAPH_COND_ASSIGN_DEFAULT);
    cap_cond(w->s, hi, CU_GRAPH_COND_TYPE_IF, 2, bi);
    body_begin(w, w->s2, bi[0]);
    launch_add(w->s2, &w->acc, v->a);
    if (v->topo) launch_mad(w->s2, t1, &w->acc);
    body_end(w->s2);
    body_begin(w, w->s2, bi[1]);
    launch_mad(w->s2, t1, &w->acc);
    launch_add(w->s2, &w->acc, v->b);
    body_end(w->s2);
    /* WHILE: cnt = loops; the body counts down */
    R(cuMemsetD32Async(w->cnt, v->loops, 1, w->s));
    CUgraphConditionalHandle hw = cap_handle(w->s, 1, CU_GRAPH_COND_ASSIGN_DEFAULT);
    cap_cond(w->s, hw, CU_GRAPH_COND_TYPE_WHILE, 1, bw);
    body_begin(w, w->s2, bw[0]);
    uint64_t n = N;
    uint32_t w32 = v->w;
    ADV_LAUNCH(f_step, w->s2, &w->acc, &w32, &w->cnt, &hw, &n);
    if (nested) {
        CUgraphConditionalHandle hn = cap_handle(w->s2, 0, 0);
        launch_set(w->s2, hn, v->v_if);
        cap_cond(w->s2, hn, CU_GRAPH_COND_TYPE_IF, 1, bn);
        body_begin(w, w->s3, bn[0]);
        launch_add(w->s3, &w->acc, v->c[0]);
        body_end(w->s3);
    }
    body_end(w->s2);
    /* SWITCH of three, its value the handle's default too: no node outside
     * the bodies names a handle (a new graph has new handles), so that a
     * step changing only a body or a default leaves every other node as
     * the last step's */
    CUgraphConditionalHandle hs = cap_handle(w->s, v->v_sw, CU_GRAPH_COND_ASSIGN_DEFAULT);
    cap_cond(w->s, hs, CU_GRAPH_COND_TYPE_SWITCH, 3, bs);
    for (int b = 0; b < 3; b++) {
        body_begin(w, w->s2, bs[b]);
        launch_add(w->s2, &w->acc, v->c[b]);
        if (b == 2) launch_mad(w->s2, t0, &w->acc);
        body_end(w->s2);
    }
    launch_add(w->s, &w->acc, 1);
    if (R(cuStreamEndCapture(w->s, &g)) != CUDA_SUCCESS) return NULL;
    return g;
}

/* The host model of step k's graph, word i. */
static uint32_t model(const step_vals *v, uint32_t t0, uint32_t t1, int nested)
{
    uint32_t a = 0;
    a = a * 3 + t0;
    if (v->v_if) {
        a += v->a;
        if (v->topo) a = a * 3 + t1;
    } else {
        a = a * 3 + t1;
        a += v->b;
    }
    for (uint32_t l = 0; l < v->loops; l++) {
        a += v->w;
        if (nested && v->v_if) a += v->c[0];
    }
    if (v->v_sw < 3) {
        a += v->c[v->v_sw];
        if (v->v_sw == 2) a = a * 3 + t0;
    }
    return a + 1;
}

/* A temporary of n words (plus `extra` bytes) holding base + 7i. */
static CUdeviceptr temp_make(uint32_t *h, uint32_t base, size_t extra)
{
    CUdeviceptr d = 0;
    MUST(cuMemAlloc(&d, N * 4 + extra));
    for (int i = 0; i < N; i++) h[i] = base + 7u * (uint32_t)i;
    MUST(cuMemcpyHtoD(d, h, N * 4));
    return d;
}

static void run_steps(work *w, int nested)
{
    CUgraphExec exec = NULL;
    uint32_t h0[N], h1[N], want[N];
    for (int k = 0; k < STEPS; k++) {
        step_vals v = vals_of(k);
        CUdeviceptr t0 = temp_make(h0, 100 + (uint32_t)adv_rep(k), v.shift);
        CUdeviceptr t1 = temp_make(h1, 1000 + 3 * (uint32_t)adv_rep(k), 512 - v.shift);
        CUgraph g = capture_step(w, &v, &t0, &t1, nested);
        if (!g) {
            adv_line("%s step %d: no graph", w->tag, k);
        } else {
            CUgraphExecUpdateResultInfo info;
            if (exec && R(cuGraphExecUpdate_v2(exec, g, &info)) != CUDA_SUCCESS) {
                adv_line("%s step %d: update refused (result %d)", w->tag, k, (int)info.result);
                R(cuGraphExecDestroy(exec));
                exec = NULL;
            }
            if (!exec) MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
            R(cuGraphLaunch(exec, w->s));
            for (int i = 0; i < N; i++) want[i] = model(&v, h0[i], h1[i], nested);
            char what[48];
            snprintf(what, sizeof what, "%s%s", w->tag, nested ? "_nested" : "");
            adv_step_check(w->s, what, k, w->acc, want, N);
            R(cuGraphDestroy(g));
        }
        R(cuMemFree(t0));
        R(cuMemFree(t1));
    }
    if (exec) R(cuGraphExecDestroy(exec));
}

static void work_init(work *w, const char *tag, CUstreamCaptureMode mode)
{
    w->tag = tag;
    w->mode = mode;
    MUST(cuStreamCreate(&w->s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&w->s2, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&w->s3, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&w->acc, N * 4));
    MUST(cuMemAlloc(&w->cnt, 4));
}

static void work_done(work *w)
{
    R(cuStreamDestroy(w->s));
    R(cuStreamDestroy(w->s2));
    R(cuStreamDestroy(w->s3));
    R(cuMemFree(w->acc));
    R(cuMemFree(w->cnt));
}

static void thread_steps(void *arg)
{
    work *w = arg;
    run_steps(w, 0);
}

/* Begins w's outer capture [acc = 0], adds a conditional node of type t (one
 * body, its value the default 1, assigned per launch) and begins the body's
 * capture on w->s2; the body in bi[0]. */
static void begin_with_body(work *w, CUgraphConditionalNodeType t, CUgraph *bi, int zero_acc)
{
    MUST(cuStreamBeginCapture_v2(w->s, w->mode));
    if (zero_acc) R(cuMemsetD32Async(w->acc, 0, N, w->s));
    CUgraphConditionalHandle h = cap_handle(w->s, 1, CU_GRAPH_COND_ASSIGN_DEFAULT);
    cap_cond(w->s, h, t, 1, bi);
    body_begin(w, w->s2, bi[0]);
}

/* A body capture invalidated, and one left open: what the driver answers
 * must be what the program sees. */
static void run_invalid(work *w)
{
    uint32_t h0[N], want[N];
    CUdeviceptr t0 = temp_make(h0, 40, 0);
    CUevent ev;
    CUgraph bi[1], g = NULL;
    CUgraphExec exec = NULL;
    MUST(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventRecord(ev, w->s3));             /* outside any capture */
    /* 1: the body's capture invalidated after its first kernel */
    begin_with_body(w, CU_GRAPH_COND_TYPE_IF, bi, 1);
    launch_mad(w->s2, &t0, &w->acc);
    R(cuStreamWaitEvent(w->s2, ev, 0));         /* isolation: the body's capture invalidated */
    launch_add(w->s2, &w->acc, 5);
    adv_line("invalidated body: %s", adv_capture_status(w->s2));
    body_end(w->s2);
    launch_add(w->s, &w->acc, 1);
    if (R(cuStreamEndCapture(w->s, &g)) == CUDA_SUCCESS) {
        size_t nb = 0;
        R(cuGraphGetNodes(bi[0], NULL, &nb));
        adv_line("invalidated body holds %zu node(s)", nb);
        if (R(cuGraphInstantiateWithFlags(&exec, g, 0)) == CUDA_SUCCESS) {
            R(cuGraphLaunch(exec, w->s));
            for (int i = 0; i < N; i++) want[i] = (nb ? h0[i] : 0) + 1;
            adv_step_check(w->s, "invalid_body", 0, w->acc, want, N);
            R(cuGraphExecDestroy(exec));
            exec = NULL;
        }
        R(cuGraphDestroy(g));
        g = NULL;
    }
    /* 2: a body capture left open while the outer one ends */
    begin_with_body(w, CU_GRAPH_COND_TYPE_IF, bi, 1);
    launch_add(w->s2, &w->acc, 3);
    CUevent fork;
    MUST(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    R(cuEventRecord(fork, w->s2));
    R(cuStreamWaitEvent(w->s3, fork, 0));       /* s3 joins the body's capture */
    launch_add(w->s3, &w->acc, 4);
    R(cuStreamEndCapture(w->s, &g));            /* the outer capture ends first */
    adv_line("open body: %s, joined: %s", adv_capture_status(w->s2), adv_capture_status(w->s3));
    if (g) {
        CUresult r = R(cuGraphInstantiateWithFlags(&exec, g, 0));   /* a body still captured into */
        if (r == CUDA_SUCCESS) {
            R(cuGraphExecDestroy(exec));
            exec = NULL;
        }
    }
    CUgraph got = NULL;
    R(cuStreamEndCapture(w->s3, &got));         /* not where it began: unmatched */
    adv_line("after the wrong end: %s", adv_capture_status(w->s2));
    R(cuStreamEndCapture(w->s2, &got));
    adv_line("body capture ended: %s %s", adv_capture_status(w->s2), got ? "graph" : "no graph");
    if (g) {
        if (R(cuGraphInstantiateWithFlags(&exec, g, 0)) == CUDA_SUCCESS) {
            R(cuGraphLaunch(exec, w->s));
            for (int i = 0; i < N; i++) want[i] = 1;
            /* the body's capture was invalidated: what it holds runs (its
             * first kernel, and the joined stream's) */
            size_t nb = 0;
            R(cuGraphGetNodes(bi[0], NULL, &nb));
            for (int i = 0; i < N; i++) want[i] = (nb >= 1 ? 3u : 0u) + (nb >= 2 ? 4u : 0u);
            adv_line("open body holds %zu node(s)", nb);
            adv_step_check(w->s, "open_body", 0, w->acc, want, N);
            R(cuGraphExecDestroy(exec));
        }
        R(cuGraphDestroy(g));
    }
    /* 3: stream-ordered allocation in a body's capture: a memory node, which
     * a body may not hold (the body's capture invalidated, the outer one
     * goes on and ends with its graph) */
    g = NULL;
    begin_with_body(w, CU_GRAPH_COND_TYPE_WHILE, bi, 0);
    CUdeviceptr tmp = 0;
    R(cuMemAllocAsync(&tmp, 4096, w->s2));
    adv_line("allocation in a body: %s, outer: %s", adv_capture_status(w->s2), adv_capture_status(w->s));
    body_end(w->s2);
    R(cuStreamEndCapture(w->s, &g));
    adv_line("outer after it: %s", g ? "graph" : "no graph");
    if (g) R(cuGraphDestroy(g));
    /* 4: the body's capture ended with no graph argument (the CUDA samples'
     * capturedWhileGraph does), the graph instantiated and launched */
    g = NULL;
    begin_with_body(w, CU_GRAPH_COND_TYPE_IF, bi, 1);
    launch_mad(w->s2, &t0, &w->acc);
    R(cuStreamEndCapture(w->s2, NULL));
    if (R(cuStreamEndCapture(w->s, &g)) == CUDA_SUCCESS) {
        if (R(cuGraphInstantiateWithFlags(&exec, g, 0)) == CUDA_SUCCESS) {
            R(cuGraphLaunch(exec, w->s));
            adv_step_check(w->s, "null_end", 0, w->acc, h0, N);
            R(cuGraphExecDestroy(exec));
        }
        R(cuGraphDestroy(g));
    }
    /* 5: a stream-ordered free of a temporary (a cuMemAlloc block: placed)
     * in a body's capture: a free node a body may not hold, of memory no
     * graph allocated; then in the outer capture (not a graph allocation:
     * refused, that capture invalidated). The block stays allocated. */
    g = NULL;
    begin_with_body(w, CU_GRAPH_COND_TYPE_IF, bi, 0);
    R(cuMemFreeAsync(t0, w->s2));
    adv_line("free in a body: %s, outer: %s", adv_capture_status(w->s2), adv_capture_status(w->s));
    body_end(w->s2);
    R(cuMemFreeAsync(t0, w->s));
    adv_line("free in the outer capture: %s", adv_capture_status(w->s));
    R(cuStreamEndCapture(w->s, &g));
    if (g) R(cuGraphDestroy(g));
    uint32_t back[N];
    R(cuMemcpyDtoH(back, t0, sizeof back));
    adv_check("temp_kept", memcmp(back, h0, sizeof back) == 0, "the temporary still holds its words");
    R(cuEventDestroy(fork));
    R(cuEventDestroy(ev));
    R(cuMemFree(t0));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "steps", "nested", "threads", "invalid", NULL };
    int c = adv_case(argc, argv, names);
    CUmodule mod;
    adv_open(&ctx, &mod);
    f_add = adv_fn(mod, "add_u32");
    f_mad = adv_fn(mod, "mad_u32");
    f_step = adv_fn(mod, "cond_step");
    f_set = adv_fn(mod, "cond_set");
    if (c == 2) {
        work w[2];
        adv_thread t[2];
        for (int k = 0; k < 2; k++) {
            work_init(&w[k], k ? "t1" : "t0", CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
            t[k] = (adv_thread){ .fn = thread_steps, .arg = &w[k], .ctx = ctx };
            snprintf(t[k].label, sizeof t[k].label, "thread %d:", k);
        }
        adv_threads(t, 2);
        for (int k = 0; k < 2; k++) work_done(&w[k]);
    } else {
        work w;
        work_init(&w, c == 3 ? "invalid" : "steps", CU_STREAM_CAPTURE_MODE_GLOBAL);
        if (c == 3) run_invalid(&w);
        else run_steps(&w, c == 1);
        work_done(&w);
    }
    return adv_finish();
}
