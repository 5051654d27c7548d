/*
 * tests/e2e/adv_threads2.c: round 39, the shared state rounds 34-38 added,
 * under several threads: the set of graphs holding user objects
 * (core/graph_uobj.c, uo_lock) and the records' uobj mark, the owners cache
 * of sg_ctx_owner and the primary contexts read without table_lock
 * (core/contexts.c), cuGreenCtxDestroy as a primary-context drop, and the
 * refusal of updates naming freed operands (core/graph_update.c). Each
 * thread drives its own objects (graphs are not thread-safe: each graph is
 * one thread's), so the program is valid and its output (each thread's lines
 * printed after all ended, in thread order) is the same in every run.
 *
 *   uobj      four threads at once, each its own exec of mad(in, acc) on its
 *             own stream, 8 steps. objects: each step a new graph (the same
 *             node) with a fresh user object moved in, the exec updated from
 *             it, the graph destroyed, launched: the step's object is held by
 *             the exec, the step before's destroyed. mixed: the same, objects
 *             on odd steps only (an even step's update from a graph holding
 *             none releases the exec's). skip: identical updates from fresh
 *             graphs holding none (the library answers them). variants: the
 *             exec rotated over three inputs by exec setters (variants).
 *   uchurn    two threads: one creates graphs, moves an object into each,
 *             clones and destroys them (the marks come and go, 60 times),
 *             while the other, 16 times, instantiates an exec from a graph
 *             holding none and updates it from an identical graph holding a
 *             fresh object: each update must reach the driver (the object
 *             held by the exec, destroyed with it).
 *   green     two threads allocate, launch on and free temporaries under
 *             their own green contexts' converted contexts (cuMemAlloc and
 *             stream-ordered), while a third creates a green context, uses
 *             it and destroys it, six times (each destruction forgets every
 *             owner the library learned and clears the launch filter while
 *             the others launch), and a fourth allocates under the primary
 *             context; host flags make the first three destructions fall
 *             between the launching threads' steps 4 and 8.
 *   refuse    two threads update their execs (memset(b) -> mad(in, b) ->
 *             memcpy(out <- b); the second's memset in a child graph) from
 *             graphs naming a buffer freed just before (refused; the exec
 *             then runs what it held) and from graphs over a live buffer
 *             (accepted), while a third allocates and frees blocks of 64 KiB
 *             and more (they cannot land on a freed 1 KiB buffer: every
 *             small buffer was made before the threads start, between live
 *             fences, so no address is reused in either run).
 * Usage: adv_threads2 uobj|uchurn|green|refuse
 */
#include "adv_common.h"

#include <stdatomic.h>

#define N 256u
#define STEPS 8
#define NOBJ 64

static CUcontext primary;
static CUmodule mod;
static CUfunction f_fill, f_add, f_mad;
static uint64_t n = N;

/* ------------------------------------------------------------ user objects */

static atomic_int runs[NOBJ];
static atomic_int next_obj;

static void CUDA_CB dtor(void *p) { atomic_fetch_add((atomic_int *)p, 1); }

/* A new object (one reference, the program's); *id its counter's index. */
static CUuserObject uo_new(int *id)
{
    CUuserObject o;
    *id = atomic_fetch_add(&next_obj, 1);
    if (*id >= NOBJ) {
        printf("set-up failed: too many objects\n");
        exit(2);
    }
    MUST(cuUserObjectCreate(&o, &runs[*id], dtor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    return o;
}

/* Object id is held: not destroyed 20 ms after the call that could have done it. */
static void check_held(const char *what, int k, int id)
{
    char name[64];
    adv_sleep_us(20000);
    snprintf(name, sizeof name, "%s_step%d_object_held", what, k);
    int r = atomic_load(&runs[id]);
    adv_check(name, r == 0, "destructor runs: %d", r);
}

/* Object id is held by nothing: destroyed once (within 3 s, not again 20 ms later). */
static void check_ran(const char *what, int k, int id)
{
    char name[64];
    for (int t = 0; t < 3000 && atomic_load(&runs[id]) == 0; t++) adv_sleep_us(1000);
    adv_sleep_us(20000);
    snprintf(name, sizeof name, "%s_step%d_object_destroyed", what, k);
    int r = atomic_load(&runs[id]);
    adv_check(name, r == 1, "destructor runs: %d", r);
}

typedef struct uthr {
    int kind;                    /* 0 objects, 1 mixed, 2 skip, 3 variants, 4 churn */
    const char *what;
    CUstream s;
    CUdeviceptr in[3], acc;
    uint32_t hin[3][N], model[N];
} uthr;

static void uthr_init(uthr *u, int kind, const char *what, uint32_t seed)
{
    u->kind = kind;
    u->what = what;
    MUST(cuStreamCreate(&u->s, CU_STREAM_NON_BLOCKING));
    for (int b = 0; b < 3; b++) {
        for (uint32_t i = 0; i < N; i++) u->hin[b][i] = seed * 1000u + (uint32_t)b * 77u + i;
        MUST(cuMemAlloc(&u->in[b], N * 4));
        MUST(cuMemcpyHtoD(u->in[b], u->hin[b], N * 4));
    }
    for (uint32_t i = 0; i < N; i++) u->model[i] = i ^ seed;
    MUST(cuMemAlloc(&u->acc, N * 4));
    MUST(cuMemcpyHtoD(u->acc, u->model, N * 4));
}

static void uthr_free(uthr *u)
{
    for (int b = 0; b < 3; b++) R(cuMemFree(u->in[b]));
    R(cuMemFree(u->acc));
    R(cuStreamDestroy(u->s));
}

/* A new graph of one node, mad(in[b], acc); *nd the node. */
static CUgraph mad_graph(uthr *u, int b, CUgraphNode *nd)
{
    CUgraph g;
    void *args[] = { &u->in[b], &u->acc, &n };
    MUST(cuGraphCreate(&g, 0));
    CUgraphNode x = adv_add_kernel(g, NULL, 0, f_mad, args);
    if (nd) *nd = x;
    return g;
}

static void model_step(uthr *u, int b)
{
    for (uint32_t i = 0; i < N; i++) u->model[i] = u->model[i] * 3u + u->hin[b][i];
}

static void check_acc(uthr *u, int k)
{
    adv_step_check(u->s, u->what, k, u->acc, u->model, N);
}

/* Steps of a thread whose updates come from fresh graphs (objects, mixed,
 * skip): the exec's object, if any, is checked held after each update and
 * the one it held before destroyed. */
static void updates_run(uthr *u, int steps)
{
    CUgraph g0 = mad_graph(u, 0, NULL);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g0, 0));
    R(cuGraphDestroy(g0));
    int held = -1;                   /* the object the exec holds */
    for (int k = 0; k < steps; k++) {
        CUgraph g = mad_graph(u, 0, NULL);
        int id = -1;
        int with = u->kind == 0 || (u->kind == 1 && k % 2 == 1);
        if (with) MUST(cuGraphRetainUserObject(g, uo_new(&id), 1, CU_GRAPH_USER_OBJECT_MOVE));
        adv_update(e, g);
        R(cuGraphDestroy(g));
        R(cuGraphLaunch(e, u->s));
        model_step(u, 0);
        check_acc(u, k);
        if (held >= 0) check_ran(u->what, k, held);
        if (id >= 0) check_held(u->what, k, id);
        held = id;
    }
    R(cuGraphExecDestroy(e));
    if (held >= 0) check_ran(u->what, steps, held);
}

/* The exec rotated over three inputs by exec setters. */
static void variants_run(uthr *u)
{
    CUgraphNode nd;
    CUgraph g = mad_graph(u, 0, &nd);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int k = 0; k < 3 * STEPS; k++) {
        int b = k % 3;
        void *args[] = { &u->in[b], &u->acc, &n };
        R(ADV_SET_KERNEL(e, nd, f_mad, args));
        R(cuGraphLaunch(e, u->s));
        model_step(u, b);
        if (k % 6 == 5) check_acc(u, k);
    }
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g));
}

/* churn: each step a new exec from a graph holding none, updated from an
 * identical graph holding a fresh object (the update must reach the driver:
 * the exec holds the object), destroyed (the object goes). */
static void fresh_execs_run(uthr *u)
{
    for (int k = 0; k < 2 * STEPS; k++) {
        CUgraph g0 = mad_graph(u, 0, NULL);
        CUgraphExec e;
        MUST(cuGraphInstantiateWithFlags(&e, g0, 0));
        R(cuGraphDestroy(g0));
        CUgraph g = mad_graph(u, 0, NULL);
        int id;
        MUST(cuGraphRetainUserObject(g, uo_new(&id), 1, CU_GRAPH_USER_OBJECT_MOVE));
        adv_update(e, g);
        R(cuGraphDestroy(g));
        R(cuGraphLaunch(e, u->s));
        model_step(u, 0);
        check_acc(u, k);
        check_held(u->what, k, id);
        R(cuGraphExecDestroy(e));
        check_ran(u->what, k, id);
    }
}

static void uthr_run(void *arg)
{
    uthr *u = arg;
    if (u->kind == 3) variants_run(u);
    else if (u->kind == 4) fresh_execs_run(u);
    else updates_run(u, STEPS);
}

static void case_uobj(void)
{
    static const char *const what[] = { "objects", "mixed", "skip", "variants" };
    uthr u[4];
    adv_thread t[4];
    memset(t, 0, sizeof t);
    for (int i = 0; i < 4; i++) {
        uthr_init(&u[i], i, what[i], (uint32_t)i + 1);
        t[i] = (adv_thread){ .fn = uthr_run, .arg = &u[i], .ctx = primary };
        snprintf(t[i].label, sizeof t[i].label, "thread %d (%s):", i, what[i]);
    }
    adv_threads(t, 4);
    for (int i = 0; i < 4; i++) uthr_free(&u[i]);
}

/* Graphs created, given an object, cloned and destroyed, 60 times (the
 * clone's reference released through its destruction). */
#define CHURN 60
static void churn_run(void *arg)
{
    (void)arg;
    for (int k = 0; k < CHURN; k++) {
        CUgraph g, c = NULL;
        MUST(cuGraphCreate(&g, 0));
        CUuserObject o;
        MUST(cuUserObjectCreate(&o, &runs[NOBJ - 1], dtor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
        MUST(cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
        if (k % 2 == 0) MUST(cuGraphClone(&c, g));
        R(cuGraphDestroy(g));
        if (c) R(cuGraphDestroy(c));
    }
    for (int t = 0; t < 3000 && atomic_load(&runs[NOBJ - 1]) < CHURN; t++) adv_sleep_us(1000);
    adv_sleep_us(20000);
    int r = atomic_load(&runs[NOBJ - 1]);
    adv_check("churn_objects_destroyed", r == CHURN, "destructor runs: %d of %d", r, CHURN);
}

static void case_uchurn(void)
{
    uthr u;
    adv_thread t[2];
    memset(t, 0, sizeof t);
    uthr_init(&u, 4, "updates", 9);
    t[0] = (adv_thread){ .fn = uthr_run, .arg = &u, .ctx = primary };
    t[1] = (adv_thread){ .fn = churn_run, .arg = NULL, .ctx = primary };
    snprintf(t[0].label, sizeof t[0].label, "thread 0 (new execs updated from graphs holding an object):");
    snprintf(t[1].label, sizeof t[1].label, "thread 1 (graphs with objects made and destroyed):");
    adv_threads(t, 2);
    uthr_free(&u);
}

/* ------------------------------------------------------------ green */

typedef struct gthr {
    CUgreenCtx g;                /* NULL: the primary context */
    CUcontext ctx;
    CUstream s;
    CUdeviceptr acc;
    uint32_t model[N];
    uint32_t seed;
} gthr;

/* Host flags that make the threads overlap: the launching threads have
 * launched their kernels (each one's later launches go straight to the
 * driver) before the first green context is destroyed, and wait at step 8
 * for three destructions. */
static int g_started, g_destroyed;

static void wait_for(int *flag, int v)
{
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < v) adv_sleep_us(100);
}

/* 16 steps: temporaries (cuMemAlloc, and every fourth step cuMemAllocAsync
 * on the thread's stream) filled, folded into acc, freed. */
static void gthr_run(void *arg)
{
    gthr *p = arg;
    for (int k = 0; k < 16; k++) {
        if (k == 4) __atomic_add_fetch(&g_started, 1, __ATOMIC_RELEASE);
        if (k == 8) wait_for(&g_destroyed, 3);
        uint32_t v = p->seed * 100u + (uint32_t)k;
        CUdeviceptr t = 0;
        size_t words = N * (1u + (unsigned)k % 4u);
        if (k % 4 == 3) {
            if (R(cuMemAllocAsync(&t, words * 4, p->s)) != CUDA_SUCCESS) continue;
        } else if (R(cuMemAlloc(&t, words * 4)) != CUDA_SUCCESS) {
            continue;
        }
        ADV_LAUNCH(f_fill, p->s, &t, &v, &n);
        ADV_LAUNCH(f_mad, p->s, &t, &p->acc, &n);
        for (uint32_t i = 0; i < N; i++) p->model[i] = p->model[i] * 3u + v + i;
        if (k % 4 == 3) {
            R(cuMemFreeAsync(t, p->s));
        } else {
            R(cuStreamSynchronize(p->s));
            R(cuMemFree(t));
        }
        if (k % 8 == 7) adv_step_check(p->s, "accumulator", k, p->acc, p->model, N);
    }
    R(cuStreamSynchronize(p->s));
}

/* Six green contexts in turn: made, a temporary allocated under its
 * converted context, filled on its stream, checked, freed, destroyed. */
static void green_cycles(void *arg)
{
    (void)arg;
    wait_for(&g_started, 3);
    for (int c = 0; c < 6; c++) {
        CUcontext cc;
        CUstream gs;
        CUgreenCtx g = adv_green_make(&cc, &gs);
        MUST(cuCtxSetCurrent(cc));
        CUdeviceptr t;
        uint32_t v = 7000u + (uint32_t)c, want[N];
        MUST(cuMemAlloc(&t, 2 * N * 4));
        ADV_LAUNCH(f_fill, gs, &t, &v, &n);
        R(cuStreamSynchronize(gs));
        for (uint32_t i = 0; i < N; i++) want[i] = v + i;
        char name[64];
        snprintf(name, sizeof name, "cycle%d_temporary", c);
        adv_check_words(name, t, want, N);
        R(cuMemFree(t));
        R(cuStreamDestroy(gs));
        MUST(cuCtxSetCurrent(primary));
        R(cuGreenCtxDestroy(g));
        __atomic_add_fetch(&g_destroyed, 1, __ATOMIC_RELEASE);
    }
}

static void case_green(void)
{
    gthr p[3];
    adv_thread t[4];
    memset(t, 0, sizeof t);
    for (int i = 0; i < 3; i++) {
        gthr *q = &p[i];
        q->seed = (uint32_t)i + 1;
        if (i < 2) {
            q->g = adv_green_make(&q->ctx, &q->s);
        } else {
            q->g = NULL;
            q->ctx = primary;
        }
        MUST(cuCtxSetCurrent(q->ctx));
        if (!q->g) MUST(cuStreamCreate(&q->s, CU_STREAM_NON_BLOCKING));
        MUST(cuMemAlloc(&q->acc, N * 4));
        for (uint32_t j = 0; j < N; j++) q->model[j] = j + q->seed;
        MUST(cuMemcpyHtoD(q->acc, q->model, N * 4));
        t[i] = (adv_thread){ .fn = gthr_run, .arg = q, .ctx = q->ctx };
        snprintf(t[i].label, sizeof t[i].label, "thread %d (%s):", i, q->g ? "green" : "primary");
    }
    MUST(cuCtxSetCurrent(primary));
    t[3] = (adv_thread){ .fn = green_cycles, .arg = NULL, .ctx = primary };
    snprintf(t[3].label, sizeof t[3].label, "thread 3 (green contexts made and destroyed):");
    adv_threads(t, 4);
    for (int i = 0; i < 3; i++) {
        gthr *q = &p[i];
        MUST(cuCtxSetCurrent(q->ctx));
        adv_check_words(i < 2 ? "green accumulator" : "primary accumulator", q->acc, q->model, N);
        R(cuMemFree(q->acc));
        R(cuStreamDestroy(q->s));
        MUST(cuCtxSetCurrent(primary));
        if (q->g) R(cuGreenCtxDestroy(q->g));
    }
}

/* ------------------------------------------------------------ refuse */

#define RSTEPS 6

typedef struct rthr {
    int child;
    CUstream s;
    CUdeviceptr in, b, out;
    CUdeviceptr x[RSTEPS], fence[RSTEPS + 1];
    uint32_t hin[N];
} rthr;

/* The chain memset(buf, v) -> mad(in, buf) -> memcpy(out <- buf), its memset
 * in a child graph where r->child. */
static CUgraph chain(rthr *r, CUdeviceptr buf, uint32_t v)
{
    CUgraph g, c = NULL;
    CUgraphNode nd[3];
    MUST(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = { .dst = buf, .pitch = N * 4, .value = v, .elementSize = 4, .width = N,
                                  .height = 1 };
    if (r->child) {
        CUgraphNode cm;
        MUST(cuGraphCreate(&c, 0));
        MUST(cuGraphAddMemsetNode(&cm, c, NULL, 0, &m, primary));
        MUST(cuGraphAddChildGraphNode(&nd[0], g, NULL, 0, c));
        R(cuGraphDestroy(c));
    } else {
        MUST(cuGraphAddMemsetNode(&nd[0], g, NULL, 0, &m, primary));
    }
    void *args[] = { &r->in, &buf, &n };
    nd[1] = adv_add_kernel(g, &nd[0], 1, f_mad, args);
    CUDA_MEMCPY3D cp = adv_copy_1d(r->out, buf, N * 4);
    MUST(cuGraphAddMemcpyNode(&nd[2], g, &nd[1], 1, &cp, primary));
    return g;
}

/* Launches e and checks out = v * 3 + in. */
static void run_check(rthr *r, CUgraphExec e, uint32_t v, const char *what)
{
    uint32_t want[N];
    for (uint32_t i = 0; i < N; i++) want[i] = v * 3u + r->hin[i];
    R(cuGraphLaunch(e, r->s));
    R(cuStreamSynchronize(r->s));
    adv_check_words(what, r->out, want, N);
}

static void rthr_run(void *arg)
{
    rthr *r = arg;
    uint32_t held = 5;
    CUgraph g = chain(r, r->b, held);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    R(cuGraphDestroy(g));
    run_check(r, e, held, "instantiated");
    for (int k = 0; k < RSTEPS; k++) {
        char what[64];
        CUgraphExecUpdateResultInfo info;
        /* a graph naming x[k], freed before the update */
        CUgraph gx = chain(r, r->x[k], 100u + (uint32_t)k);
        R(cuMemFree(r->x[k]));
        memset(&info, 0, sizeof info);
        CUresult rc = R(cuGraphExecUpdate_v2(e, gx, &info));
        fprintf(ADV_OUT, "step %d, freed operand: %s, result %d, error node %s\n", k, adv_err(rc),
                (int)info.result, info.errorNode ? "set" : "none");
        R(cuGraphDestroy(gx));
        snprintf(what, sizeof what, "step%d_after_refusal", k);
        if (rc == CUDA_SUCCESS) fprintf(ADV_OUT, "step %d: accepted, not launched\n", k);
        else run_check(r, e, held, what);
        /* every other step an accepted update over the live buffer */
        if (k % 2 == 1) {
            CUgraph gb = chain(r, r->b, 200u + (uint32_t)k);
            rc = R(cuGraphExecUpdate_v2(e, gb, &info));
            if (rc == CUDA_SUCCESS) held = 200u + (uint32_t)k;
            R(cuGraphDestroy(gb));
            snprintf(what, sizeof what, "step%d_live", k);
            run_check(r, e, held, what);
        }
    }
    R(cuGraphExecDestroy(e));
}

/* Blocks of 64 KiB to 256 KiB allocated (three live at a time), filled,
 * checked, freed (3 of every 7 stream-ordered, freed so). */
static void alloc_churn(void *arg)
{
    CUstream s = arg;
    CUdeviceptr live[3] = { 0, 0, 0 };
    int async[3] = { 0, 0, 0 };
    int bad = 0, made = 0;
    for (int k = 0; k < 48; k++) {
        int slot = k % 3;
        if (live[slot]) {
            if (async[slot]) R(cuMemFreeAsync(live[slot], s));
            else R(cuMemFree(live[slot]));
            live[slot] = 0;
        }
        size_t bytes = (size_t)(64u << 10) * (1u + (unsigned)k % 4u);
        async[slot] = k % 7 < 3;
        CUresult rc = async[slot] ? R(cuMemAllocAsync(&live[slot], bytes, s)) : R(cuMemAlloc(&live[slot], bytes));
        if (rc != CUDA_SUCCESS) {
            live[slot] = 0;
            continue;
        }
        made++;
        R(cuMemsetD32Async(live[slot], 0x5a000000u + (unsigned)k, bytes / 4, s));
        uint32_t w[2];
        R(cuMemcpyDtoHAsync(&w[0], live[slot], 4, s));
        R(cuMemcpyDtoHAsync(&w[1], live[slot] + bytes - 4, 4, s));
        R(cuStreamSynchronize(s));
        bad += w[0] != 0x5a000000u + (unsigned)k || w[1] != w[0];
    }
    for (int i = 0; i < 3; i++)
        if (live[i]) R(async[i] ? cuMemFreeAsync(live[i], s) : cuMemFree(live[i]));
    R(cuStreamSynchronize(s));
    adv_check("churn_blocks", bad == 0, "%d blocks, %d wrong", made, bad);
}

static void case_refuse(void)
{
    rthr r[2];
    adv_thread t[3];
    memset(t, 0, sizeof t);
    memset(r, 0, sizeof r);
    /* every small buffer now, each freed one between live fences */
    for (int i = 0; i < 2; i++) {
        rthr *q = &r[i];
        q->child = i;
        MUST(cuStreamCreate(&q->s, CU_STREAM_NON_BLOCKING));
        for (uint32_t j = 0; j < N; j++) q->hin[j] = 11u * j + (uint32_t)i;
        MUST(cuMemAlloc(&q->in, N * 4));
        MUST(cuMemcpyHtoD(q->in, q->hin, N * 4));
        MUST(cuMemAlloc(&q->b, N * 4));
        MUST(cuMemAlloc(&q->out, N * 4));
        MUST(cuMemAlloc(&q->fence[0], N * 4));
        for (int k = 0; k < RSTEPS; k++) {
            MUST(cuMemAlloc(&q->x[k], N * 4));
            MUST(cuMemAlloc(&q->fence[k + 1], N * 4));
        }
        t[i] = (adv_thread){ .fn = rthr_run, .arg = q, .ctx = primary };
        snprintf(t[i].label, sizeof t[i].label, "thread %d (memset %s):", i, i ? "in a child graph" : "top level");
    }
    CUstream cs;
    MUST(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    t[2] = (adv_thread){ .fn = alloc_churn, .arg = cs, .ctx = primary };
    snprintf(t[2].label, sizeof t[2].label, "thread 2 (allocations of 64 KiB and more):");
    adv_threads(t, 3);
    for (int i = 0; i < 2; i++) {
        rthr *q = &r[i];
        R(cuMemFree(q->in));
        R(cuMemFree(q->b));
        R(cuMemFree(q->out));
        for (int k = 0; k <= RSTEPS; k++) R(cuMemFree(q->fence[k]));
        R(cuStreamDestroy(q->s));
    }
    R(cuStreamDestroy(cs));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "uobj", "uchurn", "green", "refuse", NULL };
    int c = adv_case(argc, argv, names);
    adv_open(&primary, &mod);
    f_fill = adv_fn(mod, "fill_u32");
    f_add = adv_fn(mod, "add_u32");
    f_mad = adv_fn(mod, "mad_u32");
    (void)f_add;
    switch (c) {
    case 0: case_uobj(); break;
    case 1: case_uchurn(); break;
    case 2: case_green(); break;
    default: case_refuse(); break;
    }
    return adv_finish();
}
