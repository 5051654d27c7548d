/*
 * tests/e2e/adv_launchstate.c: round 43, launch state that lives outside the
 * captured call, and edge data. Each step rebuilds a two-kernel graph
 * (fill_u32(a, v) then add_u32(a, 7)) whose calls are the same in every
 * step; what changes, every two steps, is state the calls do not carry:
 *   pdl:      the add launched by cuLaunchKernelEx with
 *             CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 1 or 0
 *             (captured: a programmatic edge from the fill, or a full one);
 *   pdl_fork: the same with the add on a second stream joined by events;
 *   edges:    an explicit graph, the edge added by cuGraphAddDependencies_v2
 *             with programmatic edge data or with none;
 *   addnode:  the add node made by cuGraphAddNode_v2 with that edge data;
 *   clone:    the edges graph cloned (cuGraphClone), the clone updating;
 *   capgraph: the add captured by cuStreamBeginCaptureToGraph into a graph
 *             holding the fill, the dependency given with that edge data;
 *   updeps:   the capture's dependency set replaced by
 *             cuStreamUpdateCaptureDependencies_v2 with that edge data;
 *   prio_mid: the stream's priority set by cuStreamSetAttribute after the
 *             capture began (the add takes it), the exec instantiated with
 *             CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
 *   copy_mid: the same by cuStreamCopyAttributes from a stream created with
 *             priority -1 or from one created without;
 *   prio_side: the priority of the second stream of pdl_fork's capture set
 *             (cuStreamSetAttribute) before the capture; USE_NODE_PRIORITY;
 *   prio_ptds: the priority of the per-thread default stream
 *             (CU_STREAM_PER_THREAD) set before a capture on it;
 *   green:    captured on one of two streams of a green context made by
 *             cuGreenCtxStreamCreate, with priority -1 or 0; USE_NODE_PRIORITY;
 *   funcattr: an explicit graph whose fill asks for more dynamic shared
 *             memory than the default, the function's maximum
 *             (cuFuncSetAttribute) raised or lowered after the update, before
 *             the launch (which the driver then refuses).
 * The fill's value changes every third step. The exec is updated to each
 * step's graph (cuGraphExecUpdate_v2); a refusal is printed with its result
 * and the exec instantiated again. A library that trusted a record missing
 * this state would skip an update the driver refuses (TOPOLOGY_CHANGED for
 * an edge's data, ATTRIBUTES_CHANGED for a priority), and leave the exec
 * with the other edge or priority.
 *
 * Checks: the buffer after each step's launch (untouched where the launch was
 * refused); the edges of each step's
 * graph that are programmatic, as the driver reports them.
 * Usage: adv_launchstate CASE [STEPS]  (default 12)
 */
#include "adv_common.h"

#define N 256u

enum { C_PDL, C_PDL_FORK, C_EDGES, C_ADDNODE, C_CAPGRAPH, C_UPDEPS, C_PRIO_MID, C_COPY_MID, C_FUNCATTR, C_CLONE, C_PRIO_SIDE, C_PRIO_PTDS, C_GREEN };
static CUstream green_hi, green_lo;     /* C_GREEN: priority -1 and 0 */

static CUfunction k_fill, k_add;
static CUdeviceptr a;
static uint32_t fill_v, add_v = 7;
static uint64_t n_elems = N;
static int shmem_dflt;                  /* the fill's default maximum of dynamic shared memory */
static void *fill_args[] = { &a, &fill_v, &n_elems };
static void *add_args[] = { &a, &add_v, &n_elems };

static CUgraphEdgeData edge_data(int programmatic)
{
    CUgraphEdgeData d;
    memset(&d, 0, sizeof d);
    if (programmatic) {
        d.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
        d.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    }
    return d;
}

/* The add, launched by cuLaunchKernelEx on s, programmatic or not. */
static void launch_add(CUstream s, int programmatic)
{
    CUlaunchAttribute at;
    memset(&at, 0, sizeof at);
    at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    at.value.programmaticStreamSerializationAllowed = (unsigned)programmatic;
    CUlaunchConfig cfg = launch_config_1x1(s, &at, 1);
    R(cuLaunchKernelEx(&cfg, k_add, add_args, NULL));
}

static void launch(CUfunction f, CUstream s, void **args)
{
    R(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
}

/* Priority -1 (high) or 0 for the kernels launched on s from now on. */
static void set_priority(CUstream s, int high)
{
    CUstreamAttrValue v;
    memset(&v, 0, sizeof v);
    v.priority = high ? -1 : 0;
    R(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
}

/* This step's graph. */
static CUgraph build(int which, int on, CUstream s, CUstream side, CUstream hi, CUstream lo, CUevent ev[2])
{
    CUgraph g = NULL;
    CUgraphNode f, k;
    CUgraphEdgeData d = edge_data(on);
    CUDA_KERNEL_NODE_PARAMS fp = adv_kernel_params(k_fill, fill_args), ap = adv_kernel_params(k_add, add_args);
    switch (which) {
    case C_PDL:
        R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        launch(k_fill, s, fill_args);
        launch_add(s, on);
        R(cuStreamEndCapture(s, &g));
        break;
    case C_PDL_FORK:
    case C_PRIO_SIDE:
        if (which == C_PRIO_SIDE) set_priority(side, on);
        R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        launch(k_fill, s, fill_args);
        R(cuEventRecord(ev[0], s));
        R(cuStreamWaitEvent(side, ev[0], 0));
        if (which == C_PDL_FORK) launch_add(side, on);
        else launch(k_add, side, add_args);
        R(cuEventRecord(ev[1], side));
        R(cuStreamWaitEvent(s, ev[1], 0));
        R(cuStreamEndCapture(s, &g));
        break;
    case C_FUNCATTR:
        fp.sharedMemBytes = (unsigned)shmem_dflt + 1024;
        /* fall through */
    case C_EDGES:
    case C_CLONE:
        R(cuGraphCreate(&g, 0));
        R(cuGraphAddKernelNode(&f, g, NULL, 0, &fp));
        R(cuGraphAddKernelNode(&k, g, NULL, 0, &ap));
        R(cuGraphAddDependencies_v2(g, &f, &k, on && which != C_FUNCATTR ? &d : NULL, 1));
        if (which == C_CLONE) {
            CUgraph o = g;
            R(cuGraphClone(&g, o));
            R(cuGraphDestroy(o));
        }
        break;
    case C_ADDNODE: {
        R(cuGraphCreate(&g, 0));
        R(cuGraphAddKernelNode(&f, g, NULL, 0, &fp));
        CUgraphNodeParams np;
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_KERNEL;
        np.kernel.func = k_add;
        np.kernel.gridDimX = np.kernel.gridDimY = np.kernel.gridDimZ = 1;
        np.kernel.blockDimX = np.kernel.blockDimY = np.kernel.blockDimZ = 1;
        np.kernel.kernelParams = add_args;
        R(cuGraphAddNode_v2(&k, g, &f, &d, 1, &np));
        break;
    }
    case C_CAPGRAPH:
        R(cuGraphCreate(&g, 0));
        R(cuGraphAddKernelNode(&f, g, NULL, 0, &fp));
        R(cuStreamBeginCaptureToGraph(s, g, &f, &d, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        launch(k_add, s, add_args);
        R(cuStreamEndCapture(s, &g));
        break;
    case C_UPDEPS: {
        R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        launch(k_fill, s, fill_args);
        CUstreamCaptureStatus st;
        const CUgraphNode *deps = NULL;
        size_t nd = 0;
        R(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &nd));
        f = nd == 1 && deps ? deps[0] : NULL;
        R(cuStreamUpdateCaptureDependencies_v2(s, &f, &d, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
        launch(k_add, s, add_args);
        R(cuStreamEndCapture(s, &g));
        break;
    }
    case C_PRIO_PTDS:
        set_priority(CU_STREAM_PER_THREAD, on);
        R(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL));
        launch(k_fill, CU_STREAM_PER_THREAD, fill_args);
        launch(k_add, CU_STREAM_PER_THREAD, add_args);
        R(cuStreamEndCapture(CU_STREAM_PER_THREAD, &g));
        break;
    case C_GREEN: {
        CUstream gs = on ? green_hi : green_lo;
        R(cuStreamBeginCapture(gs, CU_STREAM_CAPTURE_MODE_GLOBAL));
        launch(k_fill, gs, fill_args);
        launch(k_add, gs, add_args);
        R(cuStreamEndCapture(gs, &g));
        break;
    }
    case C_PRIO_MID:
    case C_COPY_MID: {
        R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        launch(k_fill, s, fill_args);
        if (which == C_PRIO_MID) {
            set_priority(s, on);
        } else {
            R(cuStreamCopyAttributes(s, on ? hi : lo));
        }
        launch(k_add, s, add_args);
        R(cuStreamEndCapture(s, &g));
        break;
    }
    }
    return g;
}

/* How many of g's edges are programmatic. */
static int programmatic_edges(CUgraph g)
{
    CUgraphNode from[4], to[4];
    CUgraphEdgeData d[4];
    size_t n = 4;
    int k = 0;
    if (R(cuGraphGetEdges_v2(g, from, to, d, &n)) != CUDA_SUCCESS) return -1;
    for (size_t i = 0; i < n && i < 4; i++) k += d[i].type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    return k;
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "pdl", "pdl_fork", "edges", "addnode", "capgraph", "updeps",
                                         "prio_mid", "copy_mid", "funcattr", "clone", "prio_side",
                                         "prio_ptds", "green", NULL };
    int which = adv_case(argc, argv, cases);
    int steps = argc > 2 ? atoi(argv[2]) : 12;
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    k_fill = adv_fn(mod, "fill_u32");
    k_add = adv_fn(mod, "add_u32");
    CUstream s, side, hi, lo;
    CUevent ev[2];
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreateWithPriority(&hi, CU_STREAM_NON_BLOCKING, -1));
    MUST(cuStreamCreate(&lo, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&ev[0], CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&ev[1], CU_EVENT_DISABLE_TIMING));
    MUST(cuMemAlloc(&a, N * sizeof(uint32_t)));
    MUST(cuFuncGetAttribute(&shmem_dflt, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k_fill));
    int prio = which == C_PRIO_MID || which == C_COPY_MID || which == C_PRIO_SIDE || which == C_PRIO_PTDS ||
               which == C_GREEN;
    CUgreenCtx green = NULL;
    if (which == C_GREEN) {
        CUcontext cc;
        green = adv_green_make(&cc, &green_lo);
        MUST(cuGreenCtxStreamCreate(&green_hi, green, CU_STREAM_NON_BLOCKING, -1));
    }
    cuuint64_t iflags = prio ? CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY : 0;
    CUgraphExec exec = NULL;
    int good = 0, edges_ok = 0, refused = 0;
    for (int st = 0; st < steps; st++) {
        int on = (st / 2) % 2;
        fill_v = 100u + (uint32_t)(st / 3);
        CUgraph g = build(which, on, s, side, hi, lo, ev);
        if (!g) continue;
        int pe = programmatic_edges(g);
        edges_ok += pe == (which >= C_PRIO_MID && which != C_CLONE ? 0 : on);
        int ran = 1;
        if (exec) {
            CUgraphExecUpdateResultInfo info;
            memset(&info, 0, sizeof info);
            if (R(cuGraphExecUpdate_v2(exec, g, &info)) != CUDA_SUCCESS) {
                printf("step %d: update refused, result %d\n", st, (int)info.result);
                refused++;
                R(cuGraphExecDestroy(exec));
                exec = NULL;
            }
        }
        if (!exec && R(cuGraphInstantiateWithFlags(&exec, g, iflags)) != CUDA_SUCCESS) exec = NULL;
        if (which == C_FUNCATTR)
            R(cuFuncSetAttribute(k_fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 on ? shmem_dflt : shmem_dflt + 1024));
        R(cuMemsetD32(a, 0, N));
        if (exec) ran = R(cuGraphLaunch(exec, s)) == CUDA_SUCCESS;
        R(cuStreamSynchronize(s));
        uint32_t h[N];
        R(cuMemcpyDtoH(h, a, sizeof h));
        int ok = 1;
        for (uint32_t i = 0; i < N; i++) ok &= h[i] == (ran ? fill_v + i + add_v : 0);
        good += ok;
        R(cuGraphDestroy(g));
    }
    adv_check("steps whose launch gave fill + add", good == steps, "%d of %d", good, steps);
    adv_check("graphs whose programmatic edges are the step's", edges_ok == steps, "%d of %d", edges_ok, steps);
    printf("updates refused: %d\n", refused);
    if (exec) R(cuGraphExecDestroy(exec));
    R(cuMemFree(a));
    R(cuEventDestroy(ev[0]));
    R(cuEventDestroy(ev[1]));
    R(cuStreamDestroy(s));
    R(cuStreamDestroy(side));
    R(cuStreamDestroy(hi));
    R(cuStreamDestroy(lo));
    if (green) {
        R(cuStreamDestroy(green_hi));
        R(cuStreamDestroy(green_lo));
        R(cuGreenCtxDestroy(green));
    }
    return adv_finish();
}
