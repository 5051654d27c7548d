/*
 * adv_child.c: round 26, graphs that hold child graph nodes (XLA/JAX nest
 * command buffers so): valid programs whose graph updates change only what
 * is inside a child graph, the outer graph staying the same. A library that
 * skipped such an update (or a launch that ran stale child parameters)
 * computes other numbers than the driver alone.
 *
 * Every step's graph: acc = 0 (memset); the child graph node
 * { acc += s (add_u32); acc = acc * 3 + in (mad_u32) }; acc += 1 (add_u32),
 * so acc[i] = s * 3 + in[i] + 1, with `in` one of two input buffers (a
 * pointer) and s a scalar, both changing from step to step inside the child
 * only, and some steps repeating the last step's values.
 *
 * Cases:
 *   args      each step builds the child graph and its parent anew, then
 *             cuGraphExecUpdate + launch;
 *   inplace   one parent; each step changes the embedded graph in place
 *             (cuGraphChildGraphNodeGetGraph, cuGraphKernelNodeSetParams),
 *             updates, then changes it again to other values before the
 *             launch (the exec must run what the update gave it);
 *   execset   cuGraphExecChildGraphNodeSetParams with a new child graph each
 *             step, and every fourth step a cuGraphExecUpdate from the
 *             parent unchanged since instantiation (the exec was moved away
 *             from it by the setter: the update must bring it back);
 *   capture   the parent (memset, child node with s = 0 and the step's
 *             input) gets its last kernel, acc += a scalar changing every
 *             fourth step, by a capture into it (cuStreamBeginCaptureToGraph,
 *             depending on the child node);
 *   temps     the child's mad_u32 reads a temporary cuMemAlloc'd each step,
 *             filled by a kernel in the child and freed after the step (the
 *             library may place it at the same address each step, so that
 *             an update may be skippable): the results must be right either
 *             way; the report says which.
 * Usage: adv_child args|inplace|execset|capture|temps
 */
#include "adv_common.h"

#define N 256
#define STEPS 12

static CUcontext ctx;
static CUfunction f_add, f_mad, f_fill;
static CUdeviceptr acc, in_buf[2];
static uint32_t in_host[2][N];

/* The step's values: the input buffer and the scalar (every third step
 * repeats the previous step's). */
static int step_in(int k) { return (k % 3 == 2 ? k - 1 : k) / 2 % 2; }
static uint32_t step_s(int k) { return 10u + (uint32_t)(k % 3 == 2 ? k - 1 : k) * 7u; }

/* f(p, v, N): add_u32 or fill_u32. */
static CUgraphNode add_pv(CUgraph g, const CUgraphNode *deps, size_t nd, CUfunction f, CUdeviceptr p, uint32_t v)
{
    uint64_t n = N;
    void *args[] = { &p, &v, &n };
    return adv_add_kernel(g, deps, nd, f, args);
}

/* mad_u32(in, acc, N) */
static CUgraphNode add_mad(CUgraph g, const CUgraphNode *deps, size_t nd, CUdeviceptr in)
{
    uint64_t n = N;
    void *args[] = { &in, &acc, &n };
    return adv_add_kernel(g, deps, nd, f_mad, args);
}

/* The child graph { acc += s; acc = acc * 3 + in }. */
static CUgraph make_child(CUdeviceptr in, uint32_t s)
{
    CUgraph c;
    MUST(cuGraphCreate(&c, 0));
    CUgraphNode k = add_pv(c, NULL, 0, f_add, acc, s);
    add_mad(c, &k, 1, in);
    return c;
}

/* The parent { acc = 0; child; acc += 1 } (last: 0 leaves the last kernel
 * out); *cn = the child graph node. */
static CUgraph make_parent(CUgraph child, CUgraphNode *cn, int last)
{
    CUgraph g;
    CUgraphNode ms, c;
    MUST(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = { .dst = acc, .value = 0, .elementSize = 4, .width = N, .height = 1 };
    MUST(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, ctx));
    MUST(cuGraphAddChildGraphNode(&c, g, &ms, 1, child));
    if (last) add_pv(g, &c, 1, f_add, acc, 1);
    if (cn) *cn = c;
    return g;
}

/* Launches exec, waits, checks acc against want[] (check "<what>_step<k>"). */
static void launch_want(CUgraphExec e, CUstream st, const char *what, int k, const uint32_t *want)
{
    char name[64];
    R(cuGraphLaunch(e, st));
    R(cuStreamSynchronize(st));
    snprintf(name, sizeof name, "%s_step%d", what, k);
    adv_check_words(name, acc, want, N);
}

/* launch_want with the host's s * 3 + in + 1 (in: 0 or 1). */
static void launch_check(CUgraphExec e, CUstream st, const char *what, int k, int in, uint32_t s)
{
    uint32_t want[N];
    for (int i = 0; i < N; i++) want[i] = s * 3u + in_host[in][i] + 1u;
    launch_want(e, st, what, k, want);
}

static void case_args(CUstream st)
{
    CUgraphExec e = NULL;
    for (int k = 0; k < STEPS; k++) {
        CUgraph c = make_child(in_buf[step_in(k)], step_s(k));
        CUgraph g = make_parent(c, NULL, 1);
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else adv_update(e, g);
        launch_check(e, st, "args", k, step_in(k), step_s(k));
        MUST(cuGraphDestroy(g));
        MUST(cuGraphDestroy(c));
    }
    MUST(cuGraphExecDestroy(e));
}

/* Sets the embedded graph's two kernels to in and s (the graph's nodes in
 * creation order: cuGraphGetNodes does not promise it, adv_chain_nodes does). */
static void set_inner(CUgraph emb, CUdeviceptr in, uint32_t s)
{
    CUgraphNode kn[2];
    adv_chain_nodes(emb, kn, 2);
    uint64_t n = N;
    void *a1[] = { &acc, &s, &n }, *a2[] = { &in, &acc, &n };
    CUDA_KERNEL_NODE_PARAMS p1 = adv_kernel_params(f_add, a1), p2 = adv_kernel_params(f_mad, a2);
    R(cuGraphKernelNodeSetParams(kn[0], &p1));
    R(cuGraphKernelNodeSetParams(kn[1], &p2));
}

static void case_inplace(CUstream st)
{
    CUgraph c = make_child(in_buf[0], 1), emb;
    CUgraphNode cn;
    CUgraph g = make_parent(c, &cn, 1);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    MUST(cuGraphChildGraphNodeGetGraph(cn, &emb));
    for (int k = 0; k < STEPS; k++) {
        set_inner(emb, in_buf[step_in(k)], step_s(k));
        adv_update(e, g);
        set_inner(emb, in_buf[1 - step_in(k)], 999);   /* after the update: not in this launch */
        launch_check(e, st, "inplace", k, step_in(k), step_s(k));
        if (k % 4 == 3) set_inner(emb, in_buf[step_in(k)], step_s(k));   /* back to the exec's */
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    MUST(cuGraphDestroy(c));
}

static void case_execset(CUstream st)
{
    CUgraph c0 = make_child(in_buf[0], 5);
    CUgraphNode cn;
    CUgraph g = make_parent(c0, &cn, 1);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    launch_check(e, st, "execset_first", 0, 0, 5);
    for (int k = 0; k < STEPS; k++) {
        if (k % 4 == 3) {                          /* back to g's own child */
            adv_update(e, g);
            launch_check(e, st, "execset_update", k, 0, 5);
            continue;
        }
        CUgraph c = make_child(in_buf[step_in(k)], step_s(k));
        R(cuGraphExecChildGraphNodeSetParams(e, cn, c));
        launch_check(e, st, "execset", k, step_in(k), step_s(k));
        MUST(cuGraphDestroy(c));
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    MUST(cuGraphDestroy(c0));
}

static void case_capture(CUstream st)
{
    CUgraphExec e = NULL;
    for (int k = 0; k < STEPS; k++) {
        uint32_t s = 5u + (uint32_t)k / 4u;          /* changes less often than the child's input */
        CUgraph c = make_child(in_buf[step_in(k)], 0);
        CUgraphNode cn;
        CUgraph g = make_parent(c, &cn, 0);
        uint64_t n = N;
        MUST(cuStreamBeginCaptureToGraph(st, g, &cn, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        ADV_LAUNCH(f_add, st, &acc, &s, &n);        /* after the child node */
        MUST(cuStreamEndCapture(st, &g));
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else adv_update(e, g);
        uint32_t want[N];                            /* acc = (0 + 0) * 3 + in + s */
        for (int i = 0; i < N; i++) want[i] = in_host[step_in(k)][i] + s;
        launch_want(e, st, "capture", k, want);
        MUST(cuGraphDestroy(g));
        MUST(cuGraphDestroy(c));
    }
    MUST(cuGraphExecDestroy(e));
}

/* The child { tmp[i] = v + i (fill_u32); acc += s; acc = acc * 3 + tmp }. */
static CUgraph make_temp_child(CUdeviceptr tmp, uint32_t v, uint32_t s)
{
    CUgraph c;
    MUST(cuGraphCreate(&c, 0));
    CUgraphNode f = add_pv(c, NULL, 0, f_fill, tmp, v);
    CUgraphNode k = add_pv(c, &f, 1, f_add, acc, s);
    add_mad(c, &k, 1, tmp);
    return c;
}

static void case_temps(CUstream st)
{
    CUgraphExec e = NULL;
    for (int k = 0; k < STEPS; k++) {
        CUdeviceptr tmp;
        MUST(cuMemAlloc(&tmp, N * sizeof(uint32_t)));
        uint32_t v = k % 3 == 2 ? 500 : 500 + (uint32_t)k, s = 3;   /* every third step as the last */
        CUgraph c = make_temp_child(tmp, v, s);
        CUgraph g = make_parent(c, NULL, 1);
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else adv_update(e, g);
        uint32_t want[N];
        for (int i = 0; i < N; i++) want[i] = s * 3u + v + (uint32_t)i + 1u;
        launch_want(e, st, "temps", k, want);
        MUST(cuGraphDestroy(g));
        MUST(cuGraphDestroy(c));
        MUST(cuMemFree(tmp));
    }
    MUST(cuGraphExecDestroy(e));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "args", "inplace", "execset", "capture", "temps", NULL };
    int which = adv_case(argc, argv, names);
    CUmodule mod;
    CUstream st;
    adv_open(&ctx, &mod);
    f_add = adv_fn(mod, "add_u32");
    f_mad = adv_fn(mod, "mad_u32");
    f_fill = adv_fn(mod, "fill_u32");
    MUST(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&acc, N * sizeof(uint32_t)));
    for (int b = 0; b < 2; b++) {
        uint32_t v = b ? 7000 : 100;
        uint64_t n = N;
        MUST(cuMemAlloc(&in_buf[b], N * sizeof(uint32_t)));
        ADV_LAUNCH(f_fill, st, &in_buf[b], &v, &n);
        for (int i = 0; i < N; i++) in_host[b][i] = v + (uint32_t)i;
    }
    MUST(cuStreamSynchronize(st));
    switch (which) {
    case 0: case_args(st); break;
    case 1: case_inplace(st); break;
    case 2: case_execset(st); break;
    case 3: case_capture(st); break;
    default: case_temps(st); break;
    }
    MUST(cuMemFree(in_buf[0]));
    MUST(cuMemFree(in_buf[1]));
    MUST(cuMemFree(acc));
    MUST(cuStreamDestroy(st));
    return adv_finish();
}
