/*
 * tests/e2e/adv_reuse.c: round 40, handle values a driver gives out again.
 * A real driver's handles are addresses of its objects (or recycled ids), so
 * the value of a destroyed object is commonly the next object's; the
 * emulator does the same, last freed first (docs/emulator.md, "Reuse of
 * freed handle values"). Each case destroys an object and makes one that
 * gets its value (checked: without the library the program fails to set up,
 * status 2, if the value is not reused; with it, the library may hold values
 * of its own, so a value not reused there is only noted on stderr), then
 * uses the new object so that any state the library kept for the old one
 * would give a wrong result, a wrong update decision or an error:
 *   cycle      explicit graph, exec and update graph made, used and
 *              destroyed five times; each time the graphs, their nodes and
 *              the exec get the last time's values, and the new exec's first
 *              update is the very graph the old exec was last updated to
 *              (an update the library would skip if it took the new exec for
 *              the old one) while the new exec holds another value;
 *   ctxend     the same in created contexts: each context (and its exec,
 *              never destroyed by the program) ended by cuCtxDestroy; the
 *              next cuCtxCreate gets the context's value, its exec the
 *              exec's, its buffers are new; each context also allocates
 *              stream-ordered memory on a stream of its own, eagerly and in a
 *              capture (allocation and free nodes), and leaves that stream
 *              and exec to its end every other time;
 *   childexec  an exec instantiated from a child graph node's embedded graph
 *              (cuGraphChildGraphNodeGetGraph), a node of it set in the exec;
 *              the parent destroyed (the embedded graph and its node die with
 *              it, no cuGraphDestroy), a new graph and node get their values:
 *              the driver refuses that node in the exec's setter (it is not
 *              one of the exec's nodes); the exec is then updated from the
 *              new graph and launched;
 *   childuobj  a user object retained by a child graph node's embedded
 *              graph; the parent destroyed; a new graph (cuGraphCreate) gets
 *              the embedded graph's value, holds no user object, and its
 *              exec is updated from identical graphs (updates the library may
 *              answer itself: none is a graph holding user objects);
 *   childclone as childuobj, the new graph a clone (cuGraphClone) of a graph
 *              holding no user object;
 *   capchild   as childexec, the embedded graph filled by a capture into it
 *              (cuStreamBeginCaptureToGraph) rather than by its node;
 *   nodereuse  a node of an instantiated graph destroyed (cuGraphDestroyNode)
 *              and a new node of the same graph given its value: the exec's
 *              setter must refuse the new node, and an update from the graph
 *              applies the new node;
 *   green      green contexts made one after another, each getting the last
 *              one's value (and its converted context's): memory allocated
 *              under the converted context, a capture on a green stream,
 *              instantiate, launch, update; the exec outlives nothing.
 *   ctxkinds   contexts of both kinds on one value: a green context's
 *              converted context destroyed and its value given to a created
 *              context, and back, four times; each allocates (blocks report
 *              their context: the primary one for memory made under a
 *              converted context), captures and launches.
 *   window     (CUDAEMU_DESTROY_DELAY_US: the emulator's cuGraphDestroy
 *              returns late) one thread destroys a graph while another makes
 *              one on its value and retains a user object into it; the
 *              second's exec is then updated from a graph holding none, which
 *              must move the object's reference away (the driver's update).
 *   windowrec  the same with no user object: the second thread's exec is
 *              updated from identical graphs (the graph's record, made by its
 *              cuGraphCreate, must survive the other thread's destroy).
 *   windownode one thread destroys a node of a graph (cuGraphDestroyNode
 *              returning late) while another adds a node (which gets its
 *              value) to another graph; the first graph, a node fewer, is
 *              instantiated and its exec updated from a graph of its two old
 *              nodes: a topology change the driver refuses.
 *   windowexec one thread destroys an exec (cuGraphExecDestroy returning
 *              late) while another instantiates a graph (its exec gets the
 *              value), then updates its exec from graphs like the first
 *              exec's and its own.
 *   windowctx  one thread destroys a created context that placed memory
 *              (cuCtxDestroy returning late) while another creates a context
 *              (which gets the value) and allocates in it; the second then
 *              runs a kernel on its memory and reads it back.
 *   variants   an exec whose input rotates over three buffers (skip_profiled
 *              buys variants for it) destroyed with its graph, five times:
 *              each new graph and exec get the last ones' values and rotate
 *              inputs of their own, of another kernel every other time.
 * Usage: adv_reuse cycle|ctxend|childexec|childuobj|childclone|capchild|nodereuse|green|ctxkinds|
 *   windowctxexec (round 44) one thread destroys a created context holding an
 *              exec (left to the context's end) while another creates a
 *              context and instantiates an exec in it (both get the values),
 *              then updates it from identical graphs.
 *        window|windowrec|windownode|windowexec|windowctx|variants|windowctxexec|windowcap
 *   windowcap  (round 44's follow-up) one thread destroys a created context
 *              while another creates a context (it gets the value) and
 *              begins a capture on a stream of it; the capture, and two more
 *              of the same work, must be recorded (identical updates skipped).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "adv_common.h"

#define N 16

static CUfunction k_fill, k_prim;   /* k_prim: the primary context's */
static CUmodule m_prim;

static CUfunction adv_fn_of_prim(const char *name) { return adv_fn(m_prim, name); }

/* The value `now` must be the value `was` had: the case's premise. */
static void reused(const void *now, const void *was, const char *what)
{
    if (now == was) return;
    if (!getenv("LD_PRELOAD")) {
        printf("set-up failed: the %s's value was not reused (%p, was %p)\n", what, now, was);
        exit(2);
    }
    fprintf(stderr, "adv_reuse: the %s's value was not reused under the library\n", what);
}

/* A graph of one node fill_u32(buf, v, N); *node its node. */
static CUgraph fill_graph(CUdeviceptr buf, uint32_t v, CUgraphNode *node)
{
    CUgraph g;
    MUST(cuGraphCreate(&g, 0));
    CUgraphNode n = adv_add_kernel3(g, NULL, 0, k_fill, &buf, &v, N);
    if (node) *node = n;
    return g;
}

static void want_fill(const char *name, CUdeviceptr buf, uint32_t v)
{
    uint32_t w[N];
    for (uint32_t i = 0; i < N; i++) w[i] = v + i;
    R(cuCtxSynchronize());
    adv_check_words(name, buf, w, N);
}

/* One life: graph g (fill v0), exec e, launched; updated to u (fill v1),
 * launched. Returns with everything destroyed but what keep_exec keeps. */
static void life(int k, CUdeviceptr buf, uint32_t v0, uint32_t v1, CUgraph *g, CUgraphNode *n, CUgraph *u,
                 CUgraphExec *e, int destroy_exec)
{
    char name[64];
    *g = fill_graph(buf, v0, n);
    MUST(cuGraphInstantiateWithFlags(e, *g, 0));
    R(cuGraphLaunch(*e, NULL));
    snprintf(name, sizeof name, "life%d_first", k);
    want_fill(name, buf, v0);
    *u = fill_graph(buf, v1, NULL);
    adv_update(*e, *u);
    R(cuGraphLaunch(*e, NULL));
    snprintf(name, sizeof name, "life%d_updated", k);
    want_fill(name, buf, v1);
    R(cuGraphDestroy(*u));
    if (destroy_exec) R(cuGraphExecDestroy(*e));
    R(cuGraphDestroy(*g));      /* last: the next graph gets its value */
}

/* Each life's first update is the graph the last life's exec was updated to
 * (v1 of life k is v1 of life k-1 on odd lives), its instantiation another. */
static uint32_t v0_of(int k) { return 1000u + 100u * (uint32_t)k; }
static uint32_t v1_of(int k) { return 7u + 100u * (uint32_t)(k / 2); }

static void case_cycle(void)
{
    CUdeviceptr buf;
    MUST(cuMemAlloc(&buf, N * 4));
    CUgraph g = NULL, u = NULL, pg = NULL, pu = NULL;
    CUgraphNode n = NULL, pn = NULL;
    CUgraphExec e = NULL, pe = NULL;
    for (int k = 0; k < 5; k++) {
        life(k, buf, v0_of(k), v1_of(k), &g, &n, &u, &e, 1);
        if (k) {
            reused(g, pg, "graph");
            reused(u, pu, "update graph");
            reused(n, pn, "node");
            reused(e, pe, "exec");
        }
        pg = g, pu = u, pn = n, pe = e;
    }
    R(cuMemFree(buf));
}

static void case_ctxend(void)
{
    CUcontext prim, c = NULL, pc = NULL, cur;
    CUdevice dev;
    MUST(cuCtxGetCurrent(&prim));
    MUST(cuDeviceGet(&dev, 0));
    CUgraph g, u;
    CUgraphNode n;
    CUgraphExec e = NULL, pe = NULL, pe2 = NULL;
    for (int k = 0; k < 5; k++) {
        MUST(cuCtxCreate(&c, NULL, 0, dev));
        if (k) reused(c, pc, "context");
        CUmodule mod;
        char path[PATH_MAX + 64];
        adv_path("adv_kernels.so", path, sizeof path);
        MUST(cuModuleLoad(&mod, path));
        k_fill = adv_fn(mod, "fill_u32");
        CUdeviceptr buf, tmp;
        MUST(cuMemAlloc(&tmp, 1 << 20));             /* a temporary: placed by the library */
        MUST(cuMemAlloc(&buf, N * 4));
        R(cuMemFree(tmp));
        life(k, buf, v0_of(k), v1_of(k), &g, &n, &u, &e, 0);   /* the exec is left to the context */
        if (k) reused(pe2 && e == pe2 ? pe : e, pe, "exec");   /* (a teardown frees both, in any order) */
        /* stream-ordered memory on a stream of the context, eager and captured (allocation and
         * free nodes); the stream is destroyed on even lives, left to the context on odd ones,
         * and so is the second exec */
        CUstream st;
        MUST(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
        CUdeviceptr a;
        uint32_t v = 300u + (uint32_t)k;
        uint64_t cnt = N;
        MUST(cuMemAllocAsync(&a, (size_t)(k + 1) << 20, st));
        ADV_LAUNCH(k_fill, st, &a, &v, &cnt);
        R(cuMemcpyDtoDAsync(buf, a, N * 4, st));
        R(cuMemFreeAsync(a, st));
        R(cuStreamSynchronize(st));
        want_fill("ctx_async", buf, v);
        CUgraph cg;
        CUgraphExec e2;
        v = 400u + (uint32_t)k;
        MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuMemAllocAsync(&a, 1 << 20, st));
        ADV_LAUNCH(k_fill, st, &a, &v, &cnt);
        R(cuMemcpyDtoDAsync(buf, a, N * 4, st));
        R(cuMemFreeAsync(a, st));
        MUST(cuStreamEndCapture(st, &cg));
        MUST(cuGraphInstantiateWithFlags(&e2, cg, 0));
        R(cuGraphLaunch(e2, st));
        R(cuStreamSynchronize(st));
        want_fill("ctx_captured", buf, v);
        R(cuGraphDestroy(cg));
        if (k % 2 == 0) {
            R(cuGraphExecDestroy(e2));
            R(cuStreamDestroy(st));
            e2 = NULL;
        }
        pc = c, pe = e, pe2 = e2;
        MUST(cuCtxDestroy(c));
        MUST(cuCtxGetCurrent(&cur));
        if (cur != prim) MUST(cuCtxSetCurrent(prim));
    }
}

static void case_childexec(CUdeviceptr buf, int capture)
{
    CUgraph c0, p, child, g2, g3;
    CUgraphNode cn, n, n2, n3;
    if (capture) {
        MUST(cuGraphCreate(&c0, 0));               /* an empty child, filled by a capture */
    } else {
        c0 = fill_graph(buf, 1, NULL);
    }
    MUST(cuGraphCreate(&p, 0));
    MUST(cuGraphAddChildGraphNode(&cn, p, NULL, 0, c0));
    R(cuGraphDestroy(c0));
    MUST(cuGraphChildGraphNodeGetGraph(cn, &child));
    if (capture) {
        CUstream st;
        uint32_t one_v = 1;
        uint64_t cnt = N;
        MUST(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
        MUST(cuStreamBeginCaptureToGraph(st, child, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
        ADV_LAUNCH(k_fill, st, &buf, &one_v, &cnt);
        CUgraph out;
        MUST(cuStreamEndCapture(st, &out));
        if (out != child) {
            printf("set-up failed: the capture ended in another graph\n");
            exit(2);
        }
        R(cuStreamDestroy(st));
    }
    size_t one = 1;
    MUST(cuGraphGetNodes(child, &n, &one));
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, child, 0));
    R(cuGraphLaunch(e, NULL));
    want_fill("child_exec_first", buf, 1);
    uint32_t v = 2;
    uint64_t cnt = N;
    void *args[] = { &buf, &v, &cnt };
    ADV_SET_KERNEL(e, n, k_fill, args);
    R(cuGraphLaunch(e, NULL));
    want_fill("child_exec_set", buf, 2);
    /* the parent goes, and with it the embedded graph and its node */
    R(cuGraphDestroy(p));
    g2 = fill_graph(buf, 5, &n2);          /* the parent's value, the child node's */
    g3 = fill_graph(buf, 2, &n3);          /* the embedded graph's, its node's */
    reused(g3, child, "embedded graph");
    reused(n3, n, "embedded graph's node");
    /* n3 is not a node of the graph e was instantiated from: refused */
    v = 3;
    ADV_SET_KERNEL(e, n3, k_fill, args);
    v = 2;
    ADV_SET_KERNEL(e, n3, k_fill, args);   /* the value the exec holds: refused all the same */
    R(cuGraphLaunch(e, NULL));
    want_fill("child_exec_after_refusal", buf, 2);
    /* an update from the new graph (the same shape) is valid */
    R(cuGraphDestroy(g3));
    g3 = fill_graph(buf, 9, NULL);
    adv_update(e, g3);
    R(cuGraphLaunch(e, NULL));
    want_fill("child_exec_updated", buf, 9);
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g3));
    R(cuGraphDestroy(g2));
}

static void case_nodereuse(CUdeviceptr buf)
{
    CUgraphNode n, n2, m;
    CUgraph g = fill_graph(buf, 1, &n);
    uint32_t v = 40;
    uint64_t cnt = N;
    m = adv_add_kernel3(g, &n, 1, k_fill, &buf, &v, N);     /* fill 40 after fill 1 */
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    R(cuGraphLaunch(e, NULL));
    want_fill("node_first", buf, 40);
    void *args[] = { &buf, &v, &cnt };
    v = 41;
    ADV_SET_KERNEL(e, m, k_fill, args);     /* the library learns m */
    R(cuGraphLaunch(e, NULL));
    want_fill("node_set", buf, 41);
    R(cuGraphDestroyNode(m));
    n2 = adv_add_kernel3(g, &n, 1, k_fill, &buf, &(uint32_t){ 41 }, N);
    reused(n2, m, "node");
    /* not the exec's node: refused, even with the parameters it holds */
    ADV_SET_KERNEL(e, n2, k_fill, args);
    R(cuGraphLaunch(e, NULL));
    want_fill("node_after_refusal", buf, 41);
    v = 42;
    R(cuGraphDestroyNode(n2));
    n2 = adv_add_kernel3(g, &n, 1, k_fill, &buf, &v, N);
    reused(n2, m, "node");
    adv_update(e, g);                       /* the same shape: valid, applies 42 */
    R(cuGraphLaunch(e, NULL));
    want_fill("node_updated", buf, 42);
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g));
}

static atomic_int dtors;
static void CUDA_CB count_dtor(void *p)
{
    (void)p;
    atomic_fetch_add(&dtors, 1);
}

static void case_childuobj(CUdeviceptr buf, int clone)
{
    CUgraph c0, p, child, g2, g3, orig = NULL;
    CUgraphNode cn;
    if (clone) orig = fill_graph(buf, 3, NULL);   /* made first: its value is not the one to reuse */
    c0 = fill_graph(buf, 1, NULL);
    MUST(cuGraphCreate(&p, 0));
    MUST(cuGraphAddChildGraphNode(&cn, p, NULL, 0, c0));
    R(cuGraphDestroy(c0));
    MUST(cuGraphChildGraphNodeGetGraph(cn, &child));
    CUuserObject o;
    MUST(cuUserObjectCreate(&o, NULL, count_dtor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    MUST(cuGraphRetainUserObject(child, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    R(cuGraphDestroy(p));                  /* the embedded graph and its reference go */
    MUST(cuGraphCreate(&g2, 0));           /* the parent's value */
    if (clone) {                           /* the embedded graph's value, a clone of a graph of none */
        MUST(cuGraphClone(&g3, orig));
        R(cuGraphDestroy(orig));
    } else {
        g3 = fill_graph(buf, 3, NULL);     /* the embedded graph's: no user object */
    }
    reused(g3, child, "embedded graph");
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g3, 0));
    for (int k = 0; k < 6; k++) {
        CUgraph u = fill_graph(buf, 3 + (uint32_t)(k / 3), NULL);   /* changes once */
        adv_update(e, u);
        R(cuGraphDestroy(u));
        R(cuGraphLaunch(e, NULL));
        char name[32];
        snprintf(name, sizeof name, "uobj_free_step%d", k);
        want_fill(name, buf, 3 + (uint32_t)(k / 3));
    }
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g3));
    R(cuGraphDestroy(g2));
    for (int i = 0; i < 2000 && atomic_load(&dtors) == 0; i++) adv_sleep_us(1000);
    adv_check("user_object_destroyed", atomic_load(&dtors) == 1, "%d destructor calls", atomic_load(&dtors));
}

static void case_green(void)
{
    CUgreenCtx g = NULL, pg = NULL;
    CUcontext cc = NULL, pcc = NULL, prim;
    MUST(cuCtxGetCurrent(&prim));
    for (int k = 0; k < 4; k++) {
        CUstream gs;
        g = adv_green_make(&cc, &gs);
        if (k) {
            reused(g, pg, "green context");
            reused(cc, pcc, "converted context");
        }
        MUST(cuCtxSetCurrent(cc));
        CUdeviceptr buf, tmp;
        MUST(cuMemAlloc(&tmp, (size_t)(k + 1) << 20));
        MUST(cuMemAlloc(&buf, N * 4));
        CUgraph cg, ug;
        CUgraphExec e;
        uint32_t v = v0_of(k);
        uint64_t cnt = N;
        MUST(cuStreamBeginCapture(gs, CU_STREAM_CAPTURE_MODE_GLOBAL));
        ADV_LAUNCH(k_fill, gs, &tmp, &v, &cnt);
        ADV_LAUNCH(k_fill, gs, &buf, &v, &cnt);
        MUST(cuStreamEndCapture(gs, &cg));
        MUST(cuGraphInstantiateWithFlags(&e, cg, 0));
        R(cuGraphLaunch(e, gs));
        R(cuStreamSynchronize(gs));
        want_fill("green_first", buf, v);
        v = v1_of(k);
        MUST(cuStreamBeginCapture(gs, CU_STREAM_CAPTURE_MODE_GLOBAL));
        ADV_LAUNCH(k_fill, gs, &tmp, &v, &cnt);
        ADV_LAUNCH(k_fill, gs, &buf, &v, &cnt);
        MUST(cuStreamEndCapture(gs, &ug));
        adv_update(e, ug);
        R(cuGraphLaunch(e, gs));
        R(cuStreamSynchronize(gs));
        want_fill("green_updated", buf, v);
        R(cuGraphExecDestroy(e));
        R(cuGraphDestroy(ug));
        R(cuGraphDestroy(cg));
        R(cuMemFree(tmp));
        R(cuMemFree(buf));
        R(cuStreamDestroy(gs));
        MUST(cuCtxSetCurrent(prim));
        pg = g, pcc = cc;
        MUST(cuGreenCtxDestroy(g));
    }
}

/* The windows (the emulator's cuemuDestroyDelay: its destroys return late
 * once they gave the value back). Thread A sets a long delay and runs
 * win_destroy; thread B waits until A's call is in flight (win_open), makes
 * an object on the value A's destroy freed, ends the delay (win_closed) and
 * waits for A's return before it uses the object: anything A's destroy did
 * to the value's state after the driver returned falls on B's object. The
 * delay lasts until B ends it (10 s at most), whatever the load. */
static atomic_int win_destroying, win_destroyed;
static void (*win_destroy)(void);
static CUresult (*win_delay)(unsigned long long us);

static void win_a(void *arg)
{
    (void)arg;
    MUST(win_delay(10000000));
    atomic_store(&win_destroying, 1);
    win_destroy();
    atomic_store(&win_destroyed, 1);
}

static void win_open(void)
{
    while (!atomic_load(&win_destroying)) adv_sleep_us(100);
    adv_sleep_us(20000);                   /* A's value is free, A's call not back */
}

static void win_closed(const char *what)
{
    adv_check("window_open", !atomic_load(&win_destroyed), "%s while the destroy was in flight", what);
    MUST(win_delay(0));                    /* A's destroy returns now */
    while (!atomic_load(&win_destroyed)) adv_sleep_us(1000);
}

/* Runs A (destroy) and B (b(barg)) as two threads with ctx current. */
static void win_run(const char *name, CUcontext ctx, void (*destroy)(void), void (*b)(void *), void *barg)
{
    win_delay = (CUresult(*)(unsigned long long))dlsym(RTLD_DEFAULT, "cuemuDestroyDelay");
    if (!win_delay) {
        printf("set-up failed: %s needs the emulated driver's cuemuDestroyDelay\n", name);
        exit(2);
    }
    win_destroy = destroy;
    adv_thread t[2] = { { .fn = win_a, .ctx = ctx }, { .fn = b, .arg = barg, .ctx = ctx } };
    snprintf(t[0].label, sizeof t[0].label, "%s: thread A (destroys):", name);
    snprintf(t[1].label, sizeof t[1].label, "%s: thread B (makes):", name);
    adv_threads(t, 2);
}

/* window, windowrec: A destroys a graph; B makes a graph on its value.
 * window: B retains a user object into it, instantiates an exec from it and
 * updates the exec from an identical graph holding no object and back from
 * the graph, three times: each update moves the exec's reference (the
 * driver's), so after the graph is destroyed the exec holds the object until
 * it is destroyed (a mark A's destroy forgot after the forward: the updates
 * answered by the library, the object released early). windowrec: no object;
 * the exec is updated from identical graphs, which compare with the graph's
 * record (made by its cuGraphCreate) if A's destroy left it. */
static CUgraph win_ga;
static int win_obj;                        /* window (1) or windowrec (0) */

static void win_graph_destroy(void) { R(cuGraphDestroy(win_ga)); }

static void win_b(void *arg)
{
    CUdeviceptr buf = *(CUdeviceptr *)arg;
    win_open();
    CUgraph g = fill_graph(buf, 60, NULL);
    reused(g, win_ga, "destroyed graph");
    CUgraphExec e;
    if (!win_obj) {
        win_closed("made");
        MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        for (int k = 0; k < 6; k++) {
            CUgraph u = fill_graph(buf, 60 + (uint32_t)(k / 3), NULL);
            adv_update(e, u);
            R(cuGraphDestroy(u));
            R(cuGraphLaunch(e, NULL));
            want_fill(k < 3 ? "windowrec_launch_a" : "windowrec_launch_b", buf, 60 + (uint32_t)(k / 3));
        }
        R(cuGraphExecDestroy(e));
        R(cuGraphDestroy(g));
        return;
    }
    CUuserObject o;
    MUST(cuUserObjectCreate(&o, NULL, count_dtor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    MUST(cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    win_closed("made and marked");
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int k = 0; k < 3; k++) {          /* away, back, away, ...: each moves the reference */
        CUgraph u = fill_graph(buf, 60, NULL);
        adv_update(e, u);
        R(cuGraphDestroy(u));
        adv_update(e, g);
    }
    R(cuGraphLaunch(e, NULL));
    want_fill("window_launch", buf, 60);
    R(cuGraphDestroy(g));                  /* the exec holds the object now */
    adv_sleep_us(50000);
    adv_check("window_object_held", atomic_load(&dtors) == 0,
              "the last update gave the exec the graph's reference: %d destructor calls", atomic_load(&dtors));
    R(cuGraphExecDestroy(e));              /* its last reference */
    for (int i = 0; i < 2000 && atomic_load(&dtors) == 0; i++) adv_sleep_us(1000);
    adv_check("window_object_released", atomic_load(&dtors) == 1, "%d destructor calls", atomic_load(&dtors));
}

static void case_window(CUcontext ctx, CUdeviceptr buf, int obj)
{
    win_obj = obj;
    win_ga = fill_graph(buf, 1, NULL);
    win_run(obj ? "window" : "windowrec", ctx, win_graph_destroy, win_b, &buf);
}

/* windownode: A destroys a node of graph GA (instantiated once before: its
 * record's counts were checked); B adds a node to another graph (it gets the
 * node's value). GA, one node fewer, is then instantiated and its exec
 * updated from a graph of GA's old two nodes: a change of topology the
 * driver refuses (CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED). */
static CUgraphNode win_na;
static CUdeviceptr win_buf2;

static void win_node_destroy(void) { R(cuGraphDestroyNode(win_na)); }

static void winnode_b(void *arg)
{
    CUdeviceptr buf = *(CUdeviceptr *)arg;
    win_open();
    CUgraphNode nb;
    CUgraph g = fill_graph(buf, 80, &nb);
    reused(nb, win_na, "destroyed node");
    win_closed("added");
    R(cuGraphDestroy(g));
}

static void case_windownode(CUcontext ctx, CUdeviceptr buf)
{
    MUST(cuMemAlloc(&win_buf2, N * 4));
    R(cuMemsetD32(win_buf2, 0, N));
    CUgraph ga = fill_graph(buf, 10, NULL);
    win_na = adv_add_kernel3(ga, NULL, 0, k_fill, &win_buf2, &(uint32_t){ 20 }, N);
    CUgraphExec e0;
    MUST(cuGraphInstantiateWithFlags(&e0, ga, 0));
    R(cuGraphExecDestroy(e0));
    win_run("windownode", ctx, win_node_destroy, winnode_b, &buf);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, ga, 0));
    R(cuGraphLaunch(e, NULL));
    want_fill("windownode_one_node", buf, 10);
    CUgraph u = fill_graph(buf, 10, NULL);                 /* GA as it was: two nodes */
    adv_add_kernel3(u, NULL, 0, k_fill, &win_buf2, &(uint32_t){ 20 }, N);
    adv_update(e, u);                                      /* refused: topology changed */
    R(cuGraphLaunch(e, NULL));
    R(cuCtxSynchronize());
    uint32_t zero[N] = { 0 };
    adv_check_words("windownode_second_untouched", win_buf2, zero, N);
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(u));
    R(cuGraphDestroy(ga));
    R(cuMemFree(win_buf2));
}

/* windowexec: A destroys an exec; B instantiates another graph (its exec
 * gets the value), then updates its exec from graphs like A's exec's and
 * its own. */
static CUgraphExec win_ea;

static void win_exec_destroy(void) { R(cuGraphExecDestroy(win_ea)); }

static void winexec_b(void *arg)
{
    CUdeviceptr buf = *(CUdeviceptr *)arg;
    CUgraph gb = fill_graph(buf, 60, NULL);
    win_open();
    CUgraphExec eb;
    MUST(cuGraphInstantiateWithFlags(&eb, gb, 0));
    reused(eb, win_ea, "destroyed exec");
    win_closed("instantiated");
    R(cuGraphLaunch(eb, NULL));
    want_fill("windowexec_own", buf, 60);
    for (int k = 0; k < 4; k++) {          /* A's exec's graph, then B's own, twice each */
        uint32_t v = k < 2 ? 10 : 60;
        CUgraph u = fill_graph(buf, v, NULL);
        adv_update(eb, u);
        R(cuGraphDestroy(u));
        R(cuGraphLaunch(eb, NULL));
        want_fill(k < 2 ? "windowexec_as_a" : "windowexec_as_b", buf, v);
    }
    R(cuGraphExecDestroy(eb));
    R(cuGraphDestroy(gb));
}

static void case_windowexec(CUcontext ctx, CUdeviceptr buf)
{
    CUgraph ga = fill_graph(buf, 10, NULL);
    MUST(cuGraphInstantiateWithFlags(&win_ea, ga, 0));
    R(cuGraphLaunch(win_ea, NULL));
    want_fill("windowexec_a", buf, 10);
    win_run("windowexec", ctx, win_exec_destroy, winexec_b, &buf);
    R(cuGraphDestroy(ga));
}

/* windowctx: A destroys a created context that placed memory; B creates a
 * context (it gets the value), allocates in it and, once A returned, runs a
 * kernel on that memory and reads it back. */
static CUcontext win_ca;

/* A created context with the kernels loaded; *fill its fill_u32. */
static CUcontext ctx_with_kernels(CUfunction *fill)
{
    CUcontext c;
    CUdevice dev;
    char path[PATH_MAX + 64];
    CUmodule mod;
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuCtxCreate(&c, NULL, 0, dev));
    adv_path("adv_kernels.so", path, sizeof path);
    MUST(cuModuleLoad(&mod, path));
    *fill = adv_fn(mod, "fill_u32");
    return c;
}

static void win_ctx_destroy(void) { R(cuCtxDestroy(win_ca)); }

static void winctx_b(void *arg)
{
    (void)arg;
    win_open();
    CUfunction fill;
    CUcontext cb = ctx_with_kernels(&fill);
    reused(cb, win_ca, "destroyed context");
    CUdeviceptr tmp, buf;
    MUST(cuMemAlloc(&tmp, 3 << 20));
    MUST(cuMemAlloc(&buf, N * 4));
    win_closed("allocated");
    uint32_t v = 70;
    uint64_t cnt = N;
    ADV_LAUNCH(fill, NULL, &tmp, &v, &cnt);
    R(cuMemcpyDtoD(buf, tmp, N * 4));
    want_fill("windowctx_memory", buf, 70);
    R(cuMemFree(tmp));
    R(cuMemFree(buf));
    MUST(cuCtxDestroy(cb));
}

static void case_windowctx(CUcontext ctx)
{
    CUfunction fill;
    win_ca = ctx_with_kernels(&fill);
    CUdeviceptr a, b;
    MUST(cuMemAlloc(&a, 3 << 20));             /* placed: the context's arena */
    MUST(cuMemAlloc(&b, 1 << 20));
    uint32_t v = 5;
    uint64_t cnt = N;
    ADV_LAUNCH(fill, NULL, &a, &v, &cnt);
    R(cuMemFree(b));                           /* a is left to the context's end */
    R(cuCtxSynchronize());
    MUST(cuCtxPopCurrent(NULL));
    win_run("windowctx", ctx, win_ctx_destroy, winctx_b, NULL);
}

/* windowcap: A destroys a created context; B, while A's cuCtxDestroy is in
 * flight, creates a context (it gets the value) and begins a capture on a
 * stream of it, then, once A returned, captures the rest, instantiates,
 * launches, and re-captures the same work twice, each an identical update:
 * the library must record B's captures (a teardown of A's context by value
 * after the driver returned ended B's first one in the library, which then
 * no longer counted it as in progress and read its graph back). */
static void capture_fill2(CUstream s, CUfunction fill, CUdeviceptr buf, uint32_t v, int first_half_only,
                          CUgraph *out)
{
    uint64_t cnt = N;
    uint32_t w = v + 1;
    if (first_half_only != 2) {
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
        ADV_LAUNCH(fill, s, &buf, &v, &cnt);
    }
    if (first_half_only == 1) return;
    ADV_LAUNCH(fill, s, &buf, &w, &cnt);
    MUST(cuStreamEndCapture(s, out));
}

static void wincap_b(void *arg)
{
    (void)arg;
    win_open();
    CUfunction fill;
    CUcontext cb = ctx_with_kernels(&fill);
    reused(cb, win_ca, "destroyed context");
    /* the per-thread default stream: the library learns a capture's context
     * when it begins there (on a named stream, when first needed) */
    CUstream s = CU_STREAM_PER_THREAD;
    CUdeviceptr buf;
    MUST(cuMemAlloc(&buf, N * 4));
    CUgraph g[3];
    capture_fill2(s, fill, buf, 80, 1, NULL);       /* begun while A's destroy is in flight */
    win_closed("capturing");
    capture_fill2(s, fill, buf, 80, 2, &g[0]);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g[0], 0));
    for (int k = 1; k < 3; k++) {
        capture_fill2(s, fill, buf, 80, 0, &g[k]);
        adv_update(e, g[k]);
        R(cuGraphLaunch(e, s));
        R(cuStreamSynchronize(s));
        want_fill("windowcap_fill", buf, 81);
    }
    R(cuGraphExecDestroy(e));
    for (int k = 0; k < 3; k++) R(cuGraphDestroy(g[k]));
    R(cuMemFree(buf));
    MUST(cuCtxDestroy(cb));
}

static void case_windowcap(CUcontext ctx)
{
    CUfunction fill;
    win_ca = ctx_with_kernels(&fill);
    MUST(cuCtxPopCurrent(NULL));
    win_run("windowcap", ctx, win_ctx_destroy, wincap_b, NULL);
}

/* windowctxexec (round 44, found by adv_lifefuzz threads 1068): A destroys a
 * created context holding an exec it launched (left to the context's end);
 * B, while A's cuCtxDestroy is in flight, creates a context (it gets the
 * value) and instantiates four execs in it (one gets the exec's value, the
 * others those of its variants under skip_profiled), then, once A returned,
 * updates them from identical graphs and launches them:
 * updates the library may skip, if A's teardown left B's exec its record. */
static CUgraphExec win_cx_exec;

static CUgraph fill_graph_f(CUfunction f, CUdeviceptr buf, uint32_t v)
{
    CUgraph g;
    MUST(cuGraphCreate(&g, 0));
    adv_add_kernel3(g, NULL, 0, f, &buf, &v, N);
    return g;
}

static void winctxexec_b(void *arg)
{
    (void)arg;
    win_open();
    CUfunction fill;
    CUcontext cb = ctx_with_kernels(&fill);
    reused(cb, win_ca, "destroyed context");
    CUdeviceptr buf;
    MUST(cuMemAlloc(&buf, N * 4));
    CUgraph g = fill_graph_f(fill, buf, 80);
    CUgraphExec eb[4];                          /* the values of A's exec and its variants */
    int found = 0;
    for (int i = 0; i < 4; i++) {
        MUST(cuGraphInstantiateWithFlags(&eb[i], g, 0));
        found |= eb[i] == win_cx_exec;
    }
    reused(found ? win_cx_exec : eb[0], win_cx_exec, "exec the context's end destroyed");
    win_closed("instantiated");
    for (int k = 0; k < 8; k++) {
        adv_update(eb[k % 4], g);
        R(cuGraphLaunch(eb[k % 4], NULL));
        want_fill("windowctxexec_b", buf, 80);
    }
    for (int i = 0; i < 4; i++) R(cuGraphExecDestroy(eb[i]));
    R(cuGraphDestroy(g));
    R(cuMemFree(buf));
    MUST(cuCtxDestroy(cb));
}

static void case_windowctxexec(CUcontext ctx)
{
    CUfunction fill;
    win_ca = ctx_with_kernels(&fill);
    CUdeviceptr b[3];
    CUstream s[2];
    for (int k = 0; k < 3; k++) MUST(cuMemAlloc(&b[k], N * 4));
    for (int k = 0; k < 2; k++) MUST(cuStreamCreate(&s[k], CU_STREAM_NON_BLOCKING));
    CUgraph g;
    uint32_t v = 90;
    uint64_t n = N;
    MUST(cuGraphCreate(&g, 0));
    CUgraphNode node = adv_add_kernel3(g, NULL, 0, fill, &b[0], &v, N);
    MUST(cuGraphInstantiateWithFlags(&win_cx_exec, g, 0));
    for (int k = 0; k < 13; k++) {              /* rotating outputs (variants), two streams */
        void *a[] = { &b[k % 3], &v, &n };
        ADV_SET_KERNEL(win_cx_exec, node, fill, a);
        R(cuGraphLaunch(win_cx_exec, s[k % 2]));
    }
    MUST(cuGraphDestroy(g));                    /* the exec is left to the context's end */
    for (int k = 0; k < 3; k++) want_fill("windowctxexec_a", b[k], v);
    MUST(cuCtxPopCurrent(NULL));
    win_run("windowctxexec", ctx, win_ctx_destroy, winctxexec_b, NULL);
}

/* variants: an exec whose input rotates over three buffers (per-node
 * setters: skip_profiled buys variants for it), destroyed with its graph;
 * the next graph and exec get their values and rotate inputs of their own
 * into another accumulator, five times. Each life's accumulator is checked
 * against the host. */
static void case_variants(void)
{
    CUfunction mad = adv_fn_of_prim("mad_u32"), add = adv_fn_of_prim("add_u32");
    CUstream s;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUgraph pg = NULL;
    CUgraphExec pe = NULL;
    for (int life = 0; life < 5; life++) {
        CUdeviceptr in[3], acc;
        uint32_t hin[3 * N], model[N];
        adv_mad_buffers(N, in, hin, &acc, model);
        uint64_t n = N;
        void *args[] = { &in[0], &acc, &n };
        /* odd lives: add_u32(acc, v, n) with v rotating, another kernel on the same values */
        int odd = life % 2;
        uint32_t vs[3] = { 5u + (uint32_t)life, 50u, 500u };
        void *oargs[] = { &acc, &vs[0], &n };
        CUgraph g;
        CUgraphNode node;
        CUgraphExec e = adv_one_node_exec(s, odd ? add : mad, odd ? oargs : args, &g, &node);
        if (life) {
            reused(g, pg, "graph");
            reused(e, pe, "exec");
        }
        for (int k = 0; k < 12 + life; k++) {
            int b = (k + life) % 3;
            void *a[] = { &in[b], &acc, &n };
            void *oa[] = { &acc, &vs[b], &n };
            ADV_SET_KERNEL(e, node, odd ? add : mad, odd ? oa : a);
            R(cuGraphLaunch(e, s));
            for (uint32_t i = 0; i < N; i++) model[i] = odd ? model[i] + vs[b] : model[i] * 3u + hin[b * N + i];
        }
        R(cuStreamSynchronize(s));
        adv_check_words("variants_accumulator", acc, model, N);
        R(cuGraphExecDestroy(e));
        R(cuGraphDestroy(g));
        for (int i = 0; i < 3; i++) R(cuMemFree(in[i]));
        R(cuMemFree(acc));
        pg = g, pe = e;
    }
    R(cuStreamDestroy(s));
}

/* The context a block reports (CU_POINTER_ATTRIBUTE_CONTEXT) is `want`. */
static void want_ctx(const char *name, CUdeviceptr p, CUcontext want)
{
    CUcontext got = NULL;
    R(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_CONTEXT, p));
    adv_check(name, got == want, "%s", got == want ? "its context" : "another context");
}

/* Contexts of both kinds on one value: a green context's converted context
 * (whose memory is the primary context's) destroyed, a created context gets
 * its value, then the other way round. Memory made under each, used by a
 * captured graph; each block reports its own context. */
static void case_ctxkinds(void)
{
    CUcontext prim, cc = NULL, c = NULL;
    CUdevice dev;
    MUST(cuCtxGetCurrent(&prim));
    MUST(cuDeviceGet(&dev, 0));
    for (int k = 0; k < 4; k++) {
        int green = k % 2 == 0;
        CUcontext was = green ? c : cc;
        CUgreenCtx g = NULL;
        CUstream st;
        if (green) {
            g = adv_green_make(&cc, &st);
            if (k) reused(cc, was, "context (as a converted one)");
            MUST(cuCtxSetCurrent(cc));
        } else {
            MUST(cuCtxCreate(&c, NULL, 0, dev));
            reused(c, was, "context (as a created one)");
            MUST(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
        }
        CUcontext cur = green ? cc : c, owner = green ? prim : c;
        CUmodule mod = NULL;
        k_fill = k_prim;                       /* the primary context's module serves a converted one */
        if (!green) {
            char path[PATH_MAX + 64];
            adv_path("adv_kernels.so", path, sizeof path);
            MUST(cuModuleLoad(&mod, path));
            k_fill = adv_fn(mod, "fill_u32");
        }
        CUdeviceptr tmp, buf;
        MUST(cuMemAlloc(&tmp, (size_t)(k + 1) << 20));
        MUST(cuMemAlloc(&buf, N * 4));
        want_ctx("ctxkinds_tmp", tmp, owner);
        want_ctx("ctxkinds_buf", buf, owner);
        uint32_t v = 500u + (uint32_t)k;
        uint64_t cnt = N;
        CUgraph cg;
        CUgraphExec e;
        MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        ADV_LAUNCH(k_fill, st, &tmp, &v, &cnt);
        R(cuMemcpyDtoDAsync(buf, tmp, N * 4, st));
        MUST(cuStreamEndCapture(st, &cg));
        MUST(cuGraphInstantiateWithFlags(&e, cg, 0));
        R(cuGraphLaunch(e, st));
        R(cuStreamSynchronize(st));
        want_fill("ctxkinds_graph", buf, v);
        R(cuGraphExecDestroy(e));
        R(cuGraphDestroy(cg));
        R(cuMemFree(tmp));
        R(cuStreamDestroy(st));
        if (green) {
            MUST(cuCtxSetCurrent(prim));
            R(cuMemFree(buf));                 /* the primary context's memory */
            MUST(cuGreenCtxDestroy(g));
        } else {
            R(cuMemFree(buf));
            MUST(cuCtxDestroy(cur));
            MUST(cuCtxSetCurrent(prim));
        }
    }
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "cycle",      "ctxend",   "childexec", "childuobj",
                                         "childclone", "capchild", "nodereuse", "green",
                                         "ctxkinds",   "window",   "windowrec", "windownode",
                                         "windowexec", "windowctx", "variants",  "windowctxexec", "windowcap", NULL };
    int which = adv_case(argc, argv, names);
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    k_prim = k_fill = adv_fn(mod, "fill_u32");
    m_prim = mod;
    CUdeviceptr buf;
    MUST(cuMemAlloc(&buf, N * 4));
    switch (which) {
    case 0: case_cycle(); break;
    case 1: case_ctxend(); break;
    case 2: case_childexec(buf, 0); break;
    case 3: case_childuobj(buf, 0); break;
    case 4: case_childuobj(buf, 1); break;
    case 5: case_childexec(buf, 1); break;
    case 6: case_nodereuse(buf); break;
    case 7: case_green(); break;
    case 8: case_ctxkinds(); break;
    case 9: case_window(ctx, buf, 1); break;
    case 10: case_window(ctx, buf, 0); break;
    case 11: case_windownode(ctx, buf); break;
    case 12: case_windowexec(ctx, buf); break;
    case 13: case_windowctx(ctx); break;
    case 14: case_variants(); break;
    case 15: case_windowctxexec(ctx); break;
    case 16: case_windowcap(ctx); break;
    }
    return adv_finish();
}
