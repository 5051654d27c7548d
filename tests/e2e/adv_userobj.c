/*
 * tests/e2e/adv_userobj.c: round 34, user objects (cuUserObjectCreate,
 * cuGraphRetainUserObject with CU_GRAPH_USER_OBJECT_MOVE): the lifetime of a
 * resource tied to a graph. The programming guide's rules ("CUDA User
 * Objects"): a graph, each of its clones and each exec instantiated from it
 * hold references; cuGraphExecUpdate replaces the exec's with the new
 * graph's; released references are held until the launches that had them
 * finished; the destructor runs asynchronously once the last one goes. A
 * library that answers an update itself leaves the exec with the old
 * graph's references (the new object dies with its graph: early; the old one
 * lives as long as the exec: late); one whose variants or clone hold
 * references the program's handles would not keeps objects alive.
 *
 * Each object's destructor counts its runs. The program checks only what
 * the rules guarantee: an object some handle (or pending launch) still
 * holds has not been destroyed (its count is 0, looked at 20 ms after the
 * call that could have released it); one no handle holds is destroyed once
 * (waited for up to 3 s: the destructor's thread is asynchronous).
 * Every case computes acc = acc * 3 + in[b] (mad_u32), b rotating over
 * three inputs where variants are to be bought, and checks acc.
 *
 * Cases:
 *   destroyed   a captured graph, an object moved into the capture's graph
 *               (cuStreamGetCaptureInfo); the exec rotated by exec setters
 *               (buys variants); the graph destroyed (the exec holds the
 *               object), then the exec: the destructor runs;
 *   recapture   each step captures the same work anew, with a fresh object
 *               moved in (none every third step), cuGraphExecUpdate (the
 *               update is identical: skip_temp answers it), the graph
 *               destroyed: the step's object is held by the exec, the
 *               previous step's is released;
 *   variants    one explicit graph, the exec rotated by exec setters (buys
 *               variants); every fourth step from step 7 an object is moved
 *               into the graph, the node set and the exec updated, the graph's
 *               reference released: the exec holds the object until the
 *               next such update; at the end a launch held pending (a host
 *               function on the stream), the exec and graph destroyed: the
 *               destructor waits for the launch;
 *   pending     an object in the graph from the start, variants bought by
 *               rotation, then the pending launch of `variants`;
 *   late        an object moved into the graph after the exec was
 *               instantiated (the exec does not hold it), the exec rotated
 *               (buys variants), then the graph's reference released: no
 *               handle holds the object, the destructor runs while the exec
 *               lives (a library clone of the graph taken after the retain
 *               would hold it).
 * Usage: adv_userobj destroyed|recapture|variants|pending|late
 */
#include "adv_common.h"

#include <stdatomic.h>

#define N 256u
#define STEPS 24
#define NOBJ 64

static CUfunction mad;
static CUstream s;
static CUdeviceptr in[3], acc;
static uint32_t hin[3][N], model[N];
static uint64_t n = N;
static atomic_int runs[NOBJ];

static void CUDA_CB dtor(void *p) { atomic_fetch_add((atomic_int *)p, 1); }

/* A new object i (one reference, the program's). */
static CUuserObject uo_new(int i)
{
    CUuserObject o;
    MUST(cuUserObjectCreate(&o, &runs[i], dtor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    return o;
}

/* Object i is held: not destroyed 20 ms after the call that could have done it. */
static void check_held(const char *what, int k, int i)
{
    char name[64];
    adv_sleep_us(20000);
    snprintf(name, sizeof name, "%s_step%d_object%d_held", what, k, i);
    int r = atomic_load(&runs[i]);
    adv_check(name, r == 0, "destructor runs: %d", r);
}

/* Object i is held by nothing: destroyed once (within 3 s, and not again
 * 20 ms later). */
static void check_ran(const char *what, int k, int i)
{
    char name[64];
    for (int t = 0; t < 3000 && atomic_load(&runs[i]) == 0; t++) adv_sleep_us(1000);
    adv_sleep_us(20000);
    snprintf(name, sizeof name, "%s_step%d_object%d_destroyed", what, k, i);
    int r = atomic_load(&runs[i]);
    adv_check(name, r == 1, "destructor runs: %d", r);
}

/* acc = acc * 3 + in[b] on the host. */
static void model_step(int b)
{
    for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + hin[b][i];
}

/* Captures mad(in[b], acc) on s; the capture's graph gets object i's
 * reference (i < 0: none). */
static CUgraph capture(int b, int i)
{
    CUgraph g, cg = NULL;
    CUstreamCaptureStatus st;
    void *args[] = { &in[b], &acc, &n };
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    MUST(cuStreamGetCaptureInfo(s, &st, NULL, &cg, NULL, NULL, NULL));
    if (i >= 0) MUST(cuGraphRetainUserObject(cg, uo_new(i), 1, CU_GRAPH_USER_OBJECT_MOVE));
    MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    MUST(cuStreamEndCapture(s, &g));
    return g;
}

/* The exec pointed at input b (exec setter), launched. */
static void rotate_step(CUgraphExec e, CUgraphNode nd, int b)
{
    void *args[] = { &in[b], &acc, &n };
    R(ADV_SET_KERNEL(e, nd, mad, args));
    R(cuGraphLaunch(e, s));
    model_step(b);
}

static void check_acc(const char *what, int k)
{
    char name[64];
    R(cuStreamSynchronize(s));
    snprintf(name, sizeof name, "%s_step%d_acc", what, k);
    adv_check_words(name, acc, model, N);
}

/* A launch of e held pending behind a host function; e and g destroyed
 * while it is: object i (held only by e) must outlive the launch. */
static void pending_end(const char *what, CUgraphExec e, CUgraph g, int i)
{
    MUST(cuLaunchHostFunc(s, adv_gate_wait, NULL));
    R(cuGraphLaunch(e, s));
    model_step(0);                   /* the exec's input at its last launch */
    R(cuGraphExecDestroy(e));
    if (g) R(cuGraphDestroy(g));
    check_held(what, STEPS, i);
    adv_release();
    check_acc(what, STEPS);
    check_ran(what, STEPS, i);
}

static void case_destroyed(void)
{
    CUgraph g = capture(0, 0);
    CUgraphNode nd;
    size_t one = 1;
    MUST(cuGraphGetNodes(g, &nd, &one));
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int k = 0; k < STEPS; k++) {
        rotate_step(e, nd, k % 3);
        if (k % 8 == 7) check_acc("destroyed", k);
    }
    R(cuStreamSynchronize(s));
    R(cuGraphDestroy(g));                /* the exec still holds the object */
    check_held("destroyed", STEPS, 0);
    R(cuGraphExecDestroy(e));
    check_ran("destroyed", STEPS, 0);
}

static void case_recapture(void)
{
    CUgraphExec e = NULL;
    int prev = -1;
    for (int k = 0; k < 12; k++) {
        int i = k % 3 == 2 ? -1 : k;
        CUgraph g = capture(0, i);
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else adv_update(e, g);
        R(cuGraphDestroy(g));
        R(cuGraphLaunch(e, s));
        model_step(0);
        check_acc("recapture", k);
        /* the exec let the previous graph's object go at this update (its
         * launch is done), and holds this one's */
        if (prev >= 0) check_ran("recapture", k, prev);
        if (i >= 0) check_held("recapture", k, i);
        prev = i;
    }
    R(cuGraphExecDestroy(e));
    if (prev >= 0) check_ran("recapture", 12, prev);
}

/* An explicit graph *g of one node *nd, mad(in[0], acc); object i's
 * reference moved into it (i < 0: none); its exec. */
static CUgraphExec mad_exec(CUgraph *g, CUgraphNode *nd, int i)
{
    void *args[] = { &in[0], &acc, &n };
    CUgraphExec e;
    MUST(cuGraphCreate(g, 0));
    *nd = adv_add_kernel(*g, NULL, 0, mad, args);
    if (i >= 0) MUST(cuGraphRetainUserObject(*g, uo_new(i), 1, CU_GRAPH_USER_OBJECT_MOVE));
    MUST(cuGraphInstantiateWithFlags(&e, *g, 0));
    return e;
}

static void case_variants(void)
{
    CUgraph g;
    CUgraphNode nd;
    CUgraphExec e = mad_exec(&g, &nd, -1);
    int held = -1;
    for (int k = 0; k < STEPS; k++) {
        int b = k % 3;
        if (k % 4 != 3 || k < 7) {      /* steps 0-6: variants bought (skip_profiled) */
            rotate_step(e, nd, b);
        } else {
            void *a[] = { &in[b], &acc, &n };
            CUDA_KERNEL_NODE_PARAMS p = adv_kernel_params(mad, a);
            CUuserObject o = uo_new(k);
            R(cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
            R(cuGraphKernelNodeSetParams(nd, &p));
            adv_update(e, g);
            R(cuGraphReleaseUserObject(g, o, 1));   /* the exec's reference remains */
            check_held("variants", k, k);
            R(cuGraphLaunch(e, s));
            model_step(b);
            if (held >= 0) {
                R(cuStreamSynchronize(s));
                check_ran("variants", k, held);   /* the update let it go; its launches are done */
            }
            held = k;
        }
        if (k % 8 == 7) check_acc("variants", k);
    }
    /* the last launch's input (pending_end's model): in[0] */
    void *a0[] = { &in[0], &acc, &n };
    R(ADV_SET_KERNEL(e, nd, mad, a0));
    pending_end("variants", e, g, held);
}

static void case_pending(void)
{
    CUgraph g;
    CUgraphNode nd;
    CUgraphExec e = mad_exec(&g, &nd, 0);
    for (int k = 0; k < STEPS; k++) {
        rotate_step(e, nd, k % 3);
        if (k % 8 == 7) check_acc("pending", k);
    }
    void *a0[] = { &in[0], &acc, &n };
    R(ADV_SET_KERNEL(e, nd, mad, a0));
    R(cuStreamSynchronize(s));
    R(cuGraphDestroy(g));            /* only the exec holds the object now */
    pending_end("pending", e, NULL, 0);
}

static void case_late(void)
{
    CUgraph g;
    CUgraphNode nd;
    CUgraphExec e = mad_exec(&g, &nd, -1);
    CUuserObject o = uo_new(0);
    R(cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    for (int k = 0; k < STEPS; k++) {
        rotate_step(e, nd, k % 3);
        if (k % 8 == 7) check_acc("late", k);
        if (k == 12) {
            R(cuGraphReleaseUserObject(g, o, 1));   /* the graph held the only reference */
            check_ran("late", k, 0);
        }
    }
    R(cuStreamSynchronize(s));
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "destroyed", "recapture", "variants", "pending", "late", NULL };
    static void (*const run[])(void) = { case_destroyed, case_recapture, case_variants, case_pending,
                                         case_late };
    int which = adv_case(argc, argv, names);
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    adv_mad_buffers(N, in, &hin[0][0], &acc, model);
    run[which]();
    R(cuStreamSynchronize(s));
    adv_check_words("accumulator", acc, model, N);
    MUST(cuStreamDestroy(s));
    for (int b = 0; b < 3; b++) MUST(cuMemFree(in[b]));
    MUST(cuMemFree(acc));
    return adv_finish();
}
