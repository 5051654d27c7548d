/*
 * tests/e2e/adv_record.c: issue 11, capture-time records (core/record.h).
 * The library decides graph updates on fingerprints recorded while the
 * program builds its graphs; each case below builds graphs in a way the
 * recorder must follow exactly, or must notice it did not follow (and read
 * the graph back). A record that missed a change would skip an update the
 * program needs: the results show it.
 *
 * Every case runs STEPS steps of: (re)build the graph, bring one exec to it
 * (cuGraphExecUpdate, instantiating on the first step), launch, check the
 * buffer against a host model. The graph is a chain of add_u32(buf, v, n)
 * kernels (buf[i] += v); v changes on some steps only, so that some updates
 * change nothing (the library may skip them) and others change one node.
 * Cases:
 *   chain        one stream's capture, re-captured every step;
 *   fork_join    the chain split across two streams by events (fork, join);
 *   explicit     cuGraphCreate + cuGraphAddKernelNode / AddEmptyNode /
 *                AddDependencies; each step cuGraphKernelNodeSetParams on one
 *                node, and at step 5 cuGraphKernelNodeSetAttribute (priority);
 *   setparams    a captured graph kept across steps, changed each step by
 *                cuGraphKernelNodeSetParams on a node handle from
 *                cuGraphGetNodes (a captured node's handle: the recorder does
 *                not know it and must stop trusting the record);
 *   clone        a captured graph, cloned each step (cuGraphClone), the clone
 *                used for the update;
 *   update_deps  a capture that calls cuStreamUpdateCaptureDependencies
 *                (not modeled: read back);
 *   foreign_node a capture into whose graph the program adds an empty node
 *                with cuGraphAddEmptyNode (the graph from
 *                cuStreamGetCaptureInfo): the record misses it (read back);
 *   priority     the capture on a stream created with a priority (read back);
 *   stream_attr  captures on a stream whose priority the program sets with
 *                cuStreamSetAttribute (-1 at step 4, back to 0 at step 8),
 *                instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY:
 *                the captured kernels take the stream's priority, and the
 *                driver refuses the updates of steps 4 and 8 (a node's
 *                priority changed); a skipped update would accept them;
 *   stream_copy  the same, the priority copied onto the stream from another
 *                one with cuStreamCopyAttributes;
 *   remove_deps  the explicit graph, unchanged but at step 6, where
 *                cuGraphRemoveDependencies removes the empty node's edge: the
 *                driver refuses that update (topology changed);
 *   copy_attrs   the same, the change at step 6 being
 *                cuGraphKernelNodeCopyAttributes (node 4's priority onto node
 *                3; instantiated with USE_NODE_PRIORITY: refused). In both,
 *                the record's counts were checked at step 1 and nothing the
 *                recorder models changes the graph after: a call it did not
 *                hook would go unseen, and the update be skipped;
 *   launch_ex    the chain captured with node 3 launched by cuLaunchKernelEx
 *                with a priority attribute (-1 from step 4, 0 again from step
 *                8) and node 5 by cuLaunchCooperativeKernel; instantiated with
 *                USE_NODE_PRIORITY: the driver refuses the updates of steps 4
 *                and 8. The recorder models both calls (no read-back): a record
 *                without the launch's attributes would skip those updates;
 *   capinfo      a captured graph kept across steps; the program names its
 *                nodes by the handles cuStreamGetCaptureInfo gives after each
 *                launch (the recorder learns them: no read-back at all). Each
 *                step: cuGraphKernelNodeSetParams on node 2 (the graph), the
 *                update, then cuGraphExecKernelNodeSetParams on node 5 (the
 *                exec) with node (step % 8)'s scalar; a handle mapped to the
 *                wrong node would skip an update the result needs.
 *   event_reuse  the chain, with an event recorded into the capture and
 *                destroyed during it; a new event (the emulated driver gives
 *                it the destroyed one's handle value) is waited on by a
 *                stream outside the capture, which then runs a kernel of its
 *                own: the wait joins nothing (the new event was never
 *                recorded), so the capture's graph is the chain alone. A
 *                recorder that kept the destroyed event's capture state
 *                counted that kernel in the capture (count mismatch: read
 *                back).
 * Usage: adv_record CASE
 */
#include "adv_common.h"

#define N 256
#define K 8
#define STEPS 12

static CUfunction f_add;
static CUdeviceptr buf;
static uint32_t model[N];
static uint64_t nwords = N;
static unsigned long long inst_flags;   /* cuGraphInstantiateWithFlags's */

/* The scalar of node k at step s: changes every third step for node 2 only. */
static uint32_t v_of(int k, int s) { return (uint32_t)(k + 1) + (k == 2 ? (uint32_t)(s / 3) * 100u : 0u); }

static int fixed_vals;   /* the graph keeps step 0's scalars (case_unmodeled) */

static void model_step(int s)
{
    for (int k = 0; k < K; k++)
        for (int i = 0; i < N; i++) model[i] += v_of(k, fixed_vals ? 0 : s);
}

static void launch_add(CUstream s, uint32_t *v)
{
    void *args[] = { &buf, v, &nwords };
    MUST(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
}

static uint32_t vals[K];

/* Case launch_ex: node 3 by cuLaunchKernelEx (its priority from the step),
 * node 5 by cuLaunchCooperativeKernel, the others by cuLaunchKernel. */
static void capture_launch_ex(CUstream s, int step)
{
    for (int k = 0; k < K; k++) {
        vals[k] = v_of(k, step);
        void *args[] = { &buf, &vals[k], &nwords };
        if (k == 0 && step == 0) {   /* during the capture: the library's general path */
            CUresult r = R(cuLaunchKernelEx(NULL, f_add, args, NULL));
            adv_check("cuLaunchKernelEx without a configuration is refused", r == CUDA_ERROR_INVALID_VALUE,
                      "%d", (int)r);
        }
        if (k == 3) {
            CUlaunchAttribute at;
            memset(&at, 0, sizeof at);
            at.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
            at.value.priority = step >= 4 && step < 8 ? -1 : 0;
            CUlaunchConfig cfg = launch_config_1x1(s, &at, 1);
            MUST(cuLaunchKernelEx(&cfg, f_add, args, NULL));
        } else if (k == 5) {
            MUST(cuLaunchCooperativeKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s, args));
        } else {
            launch_add(s, &vals[k]);
        }
    }
}

static void capture_chain(CUstream s, int step)
{
    for (int k = 0; k < K; k++) {
        vals[k] = v_of(k, step);
        launch_add(s, &vals[k]);
    }
}

static void capture_fork_join(CUstream s, CUstream side, CUevent fork, CUevent join, int step)
{
    for (int k = 0; k < K; k++) vals[k] = v_of(k, step);
    launch_add(s, &vals[0]);
    MUST(cuEventRecord(fork, s));
    MUST(cuStreamWaitEvent(side, fork, 0));
    for (int k = 1; k < K / 2; k++) launch_add(side, &vals[k]);     /* same buffer: a chain */
    MUST(cuEventRecord(join, side));
    MUST(cuStreamWaitEvent(s, join, 0));
    for (int k = K / 2; k < K; k++) launch_add(s, &vals[k]);
}

/* Brings *exec to g (instantiates on the first call), launches, checks. */
static void run_step(CUgraphExec *exec, CUgraph g, CUstream s, int step)
{
    if (!*exec) {
        MUST(cuGraphInstantiateWithFlags(exec, g, inst_flags));
    } else {
        CUgraphExecUpdateResultInfo info;
        CUresult r = R(cuGraphExecUpdate(*exec, g, &info));
        if (r != CUDA_SUCCESS) {
            printf("step %d: update refused (%d): instantiating again\n", step, (int)info.result);
            MUST(cuGraphExecDestroy(*exec));
            MUST(cuGraphInstantiateWithFlags(exec, g, inst_flags));
        }
    }
    MUST(cuGraphLaunch(*exec, s));
    MUST(cuStreamSynchronize(s));
    model_step(step);
    adv_check_words("buffer", buf, model, N);
}

static void kparams(CUDA_KERNEL_NODE_PARAMS *p, void **args)
{
    memset(p, 0, sizeof *p);
    p->func = f_add;
    p->gridDimX = p->gridDimY = p->gridDimZ = 1;
    p->blockDimX = p->blockDimY = p->blockDimZ = 1;
    p->kernelParams = args;
}

/* The explicit graph of cases explicit, remove_deps and copy_attrs: the
 * chain's K kernels (step 0's scalars, arguments in args), and an empty node
 * the first depends on. */
static CUgraph build_explicit(CUgraphNode nodes[K], CUgraphNode *empty, void *args[K][3])
{
    CUgraph g;
    CUDA_KERNEL_NODE_PARAMS p;
    MUST(cuGraphCreate(&g, 0));
    for (int k = 0; k < K; k++) {
        vals[k] = v_of(k, 0);
        args[k][0] = &buf;
        args[k][1] = &vals[k];
        args[k][2] = &nwords;
        kparams(&p, args[k]);
        MUST(cuGraphAddKernelNode(&nodes[k], g, k ? &nodes[k - 1] : NULL, k ? 1 : 0, &p));
    }
    MUST(cuGraphAddEmptyNode(empty, g, NULL, 0));
    MUST(cuGraphAddDependencies(g, empty, &nodes[0], NULL, 1));
    return g;
}

static void case_explicit(CUstream s)
{
    CUgraphNode nodes[K], empty;
    void *args[K][3];
    CUDA_KERNEL_NODE_PARAMS p;
    CUgraphExec exec = NULL;
    CUgraph g = build_explicit(nodes, &empty, args);
    for (int step = 0; step < STEPS; step++) {
        vals[2] = v_of(2, step);
        kparams(&p, args[2]);
        MUST(cuGraphKernelNodeSetParams(nodes[2], &p));
        if (step == 5) {
            CUkernelNodeAttrValue a;
            memset(&a, 0, sizeof a);
            a.priority = 1;
            MUST(cuGraphKernelNodeSetAttribute(nodes[4], CU_LAUNCH_ATTRIBUTE_PRIORITY, &a));
        }
        run_step(&exec, g, s, step);
    }
    MUST(cuGraphExecDestroy(exec));
    MUST(cuGraphDestroy(g));
}

/* Cases remove_deps (which 11) and copy_attrs (12). */
static void case_unmodeled(CUstream s, int which)
{
    CUgraphNode nodes[K], empty;
    void *args[K][3];
    CUgraphExec exec = NULL;
    CUgraph g = build_explicit(nodes, &empty, args);
    CUkernelNodeAttrValue a;
    memset(&a, 0, sizeof a);
    a.priority = -1;
    MUST(cuGraphKernelNodeSetAttribute(nodes[4], CU_LAUNCH_ATTRIBUTE_PRIORITY, &a));
    fixed_vals = 1;
    for (int step = 0; step < STEPS; step++) {
        if (step == 6 && which == 11) MUST(cuGraphRemoveDependencies(g, &empty, &nodes[0], NULL, 1));
        if (step == 6 && which == 12) MUST(cuGraphKernelNodeCopyAttributes(nodes[3], nodes[4]));
        run_step(&exec, g, s, step);
    }
    MUST(cuGraphExecDestroy(exec));
    MUST(cuGraphDestroy(g));
}

static void case_setparams(CUstream s)
{
    CUgraph g;
    CUgraphNode nodes[K];
    CUgraphExec exec = NULL;
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    capture_chain(s, 0);
    MUST(cuStreamEndCapture(s, &g));
    adv_chain_nodes(g, nodes, K);
    for (int step = 0; step < STEPS; step++) {
        static uint32_t v2;
        v2 = v_of(2, step);
        void *args[] = { &buf, &v2, &nwords };
        CUDA_KERNEL_NODE_PARAMS p;
        kparams(&p, args);
        MUST(cuGraphKernelNodeSetParams(nodes[2], &p));
        run_step(&exec, g, s, step);
    }
    MUST(cuGraphExecDestroy(exec));
    MUST(cuGraphDestroy(g));
}

/* Case capinfo: the scalar the exec's node 5 is given at step s, node
 * (s % K)'s own: a handle mapped to node j instead of 5 would compare equal
 * at step j and skip an update the result needs. */
static uint32_t x_of(int s) { return v_of(s % K, 0); }

static void case_capinfo(CUstream s)
{
    CUgraph g;
    CUgraphNode nodes[K];
    CUgraphExec exec = NULL;
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int k = 0; k < K; k++) {
        vals[k] = v_of(k, 0);
        launch_add(s, &vals[k]);
        CUstreamCaptureStatus st;
        const CUgraphNode *deps = NULL;
        size_t nd = 0;
        MUST(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &nd));
        if (!adv_check("capture info names the launch", st == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
                       nd == 1 && deps, "status %d, %zu nodes", (int)st, nd))
            exit(adv_finish());
        nodes[k] = deps[0];
    }
    MUST(cuStreamEndCapture(s, &g));
    for (int step = 0; step < STEPS; step++) {
        static uint32_t v2, x5;
        v2 = v_of(2, step);
        void *args[] = { &buf, &v2, &nwords };
        CUDA_KERNEL_NODE_PARAMS p;
        kparams(&p, args);
        MUST(cuGraphKernelNodeSetParams(nodes[2], &p));
        if (!exec) {
            MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
        } else {
            CUgraphExecUpdateResultInfo info;
            MUST(cuGraphExecUpdate(exec, g, &info));   /* node 5 back to the graph's */
        }
        x5 = x_of(step);
        void *args5[] = { &buf, &x5, &nwords };
        kparams(&p, args5);
        MUST(cuGraphExecKernelNodeSetParams(exec, nodes[5], &p));
        MUST(cuGraphLaunch(exec, s));
        MUST(cuStreamSynchronize(s));
        model_step(step);
        for (int i = 0; i < N; i++) model[i] += x5 - v_of(5, step);
        adv_check_words("buffer", buf, model, N);
    }
    MUST(cuGraphExecDestroy(exec));
    MUST(cuGraphDestroy(g));
}

/* Cases stream_attr and stream_copy: the priority of stream s from step 4
 * (-1) and from step 8 (0), set directly or copied from stream side. */
static void stream_priority(int which, CUstream s, CUstream side, int step)
{
    if (step != 4 && step != 8) return;
    CUstreamAttrValue v;
    memset(&v, 0, sizeof v);
    v.priority = step == 4 ? -1 : 0;
    MUST(cuStreamSetAttribute(which == 9 ? s : side, CU_STREAM_ATTRIBUTE_PRIORITY, &v));
    if (which == 10) MUST(cuStreamCopyAttributes(s, side));
    CUstreamAttrValue got;
    MUST(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_PRIORITY, &got));
    adv_check("the stream's priority is the one set", got.priority == v.priority, "%d, not %d",
              got.priority, v.priority);
}

/* One capture of the chain with what the case adds to it. */
/* Case event_reuse, during the capture of s: an event recorded into it and
 * destroyed, then a new one waited on by side, which runs a kernel on a
 * scratch buffer outside the capture (synchronized after the capture). */
static CUdeviceptr scratch;
static uint32_t scratch_model[N];

static void event_reuse(CUstream s, CUstream side)
{
    CUevent t, t2;
    MUST(cuEventCreate(&t, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventRecord(t, s));
    MUST(cuEventDestroy(t));
    MUST(cuEventCreate(&t2, CU_EVENT_DISABLE_TIMING));
    MUST(cuStreamWaitEvent(side, t2, 0));
    uint32_t v = 7;
    void *args[] = { &scratch, &v, &nwords };
    MUST(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, side, args, NULL));
    for (int i = 0; i < N; i++) scratch_model[i] += v;
    MUST(cuEventDestroy(t2));
}

static void capture_case(int which, CUstream s, CUstream side, CUevent fork, CUevent join, int step,
                         CUgraph *g)
{
    if (which == 9 || which == 10) stream_priority(which, s, side, step);
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    if (which == 1) {
        capture_fork_join(s, side, fork, join, step);
    } else if (which == 13) {
        capture_launch_ex(s, step);
    } else {
        capture_chain(s, step);
    }
    if (which == 14) event_reuse(s, side);
    if (which == 5 || which == 6) {
        CUstreamCaptureStatus st;
        const CUgraphNode *deps = NULL;
        size_t nd = 0;
        CUgraph cg = NULL;
        MUST(cuStreamGetCaptureInfo(s, &st, NULL, &cg, &deps, NULL, &nd));
        if (which == 5) {
            CUgraphNode keep[8];
            for (size_t i = 0; i < nd && i < 8; i++) keep[i] = deps[i];
            MUST(cuStreamUpdateCaptureDependencies(s, keep, NULL, nd, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
        } else {
            CUgraphNode e;
            MUST(cuGraphAddEmptyNode(&e, cg, NULL, 0));
        }
    }
    MUST(cuStreamEndCapture(s, g));
    if (which == 14) {
        MUST(cuStreamSynchronize(side));
        adv_check_words("scratch", scratch, scratch_model, N);
    }
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "chain", "fork_join", "explicit", "setparams", "clone",
                                         "update_deps", "foreign_node", "priority", "capinfo",
                                         "stream_attr", "stream_copy", "remove_deps", "copy_attrs",
                                         "launch_ex", "event_reuse", NULL };
    int which = adv_case(argc, argv, cases);
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    f_add = adv_fn(mod, "add_u32");
    CUstream s, side;
    CUevent fork, join;
    if (which == 9 || which == 10 || which == 12 || which == 13) inst_flags = CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    if (which == 7) MUST(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -1));
    else MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    MUST(cuMemAlloc(&buf, N * sizeof(uint32_t)));
    MUST(cuMemsetD32(buf, 0, N));
    MUST(cuMemAlloc(&scratch, N * sizeof(uint32_t)));
    MUST(cuMemsetD32(scratch, 0, N));

    if (which == 2) {
        case_explicit(s);
    } else if (which == 3) {
        case_setparams(s);
    } else if (which == 8) {
        case_capinfo(s);
    } else if (which == 11 || which == 12) {
        case_unmodeled(s, which);
    } else {
        CUgraphExec exec = NULL;
        for (int step = 0; step < STEPS; step++) {
            CUgraph g, use;
            capture_case(which, s, side, fork, join, step, &g);
            use = g;
            if (which == 4) MUST(cuGraphClone(&use, g));
            run_step(&exec, use, s, step);
            if (use != g) MUST(cuGraphDestroy(use));
            MUST(cuGraphDestroy(g));
        }
        MUST(cuGraphExecDestroy(exec));
    }
    MUST(cuMemFree(buf));
    MUST(cuMemFree(scratch));
    MUST(cuStreamDestroy(s));
    MUST(cuStreamDestroy(side));
    return adv_finish();
}
