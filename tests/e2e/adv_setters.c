/*
 * tests/e2e/adv_setters.c: round 30, per-node setters and explicit graph
 * edits. A graph built with explicit calls, a chain
 *   M  memset  acc[i] = v                      (4-byte elements, one row)
 *   A  add_u32 (acc, inc, N)                   acc[i] += inc
 *   B  mad_u32 (in[k], acc, N)                 acc[i] = acc[i] * 3 + in[k][i]
 *   C  memcpy  cp[d] = acc                     (1D, device to device)
 * is instantiated once and launched every step; each launch's acc and
 * cp[d] depend only on what the exec holds, which the host models: a setter
 * or update that returns CUDA_SUCCESS changes the model as the driver
 * changes the exec (an update from the graph: every node takes the graph's
 * values; a refused one, whatever its result code, changes nothing), so a
 * call the library answers without doing what the driver would do shows as
 * a wrong result. Cases:
 *   graph_edit  each step edits the graph node by node (the kernel setter
 *               v1 and v2 on A and B, the generic cuGraphNodeSetParams on M
 *               and B, cuGraphKernelNodeSetAttribute on A, A's arguments by
 *               `extra`; every third step edits nothing), then
 *               cuGraphExecUpdate_v2 + launch: the record must follow
 *               every edit;
 *   deps        edges removed and added back (also `_v2` with default edge
 *               data), an edge added that changes the topology (the update
 *               is refused), a node destroyed and another added in its
 *               place, each followed by an update + launch;
 *   execset     exec setters (kernel v1 / v2, generic kernel and memset,
 *               memset, memcpy) each step, and every other step an update
 *               from the graph unchanged since instantiation, which must
 *               bring the exec back (skipping it would be wrong); run under
 *               skip_profiled with variants bought;
 *   refused     graph setters the driver refuses (a kernel setter on the
 *               memset node, a memset pitch below its row, a type change by
 *               cuGraphNodeSetParams, an unknown attribute, a duplicate edge,
 *               removing an edge that is not there) must leave the record as
 *               it was: the next update (nothing changed: skippable) and a
 *               real change after it;
 *   extra       A's arguments set by `extra` (the same bytes as the exec
 *               holds, then others), by kernelParams again: identical
 *               except for the form (skippable), and a real change;
 *   enabled     A disabled in the exec (cuGraphNodeSetEnabled), the graph's
 *               A changed and the exec updated while it is disabled, enabled
 *               again: the updated parameters run;
 *   kern        A set by the v2 / v3 struct's `kern` and `ctx` (func NULL):
 *               add_u32 of a library (cuLibraryLoadFromFile) in the current
 *               context, in the primary context named, in a second context
 *               (its function's context changes: the driver refuses the
 *               update and the exec setter), and by `func` with a `ctx` CUDA
 *               ignores; graph setters and exec setters, every third step
 *               nothing changed.
 * Usage: adv_setters graph_edit|deps|execset|refused|extra|enabled|kern
 */
#include "adv_common.h"

/* The v1 entry points (cuda.h maps these names to the _v2 ones). */
#undef cuGraphKernelNodeSetParams
#undef cuGraphExecKernelNodeSetParams
#undef cuGraphAddDependencies
#undef cuGraphRemoveDependencies
CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v1 *);
CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v1 *);
CUresult CUDAAPI cuGraphAddDependencies(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t);
CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t);

#define N 64u
#define STEPS 12

static CUcontext ctx;
static CUmodule mod;
static CUstream s;
static CUfunction add, mad;
static CUdeviceptr in[3], acc, cp[2];
static uint32_t hin[3][N];
static uint64_t n = N;
static CUgraph g;
static CUgraphNode nM, nA, nB, nC;
static CUgraphExec exec;
static int step;

/* One state of the chain: the graph's, or the exec's. */
typedef struct state {
    uint32_t v, inc;
    int k, d, a_on;
} state;
static state gs, es;           /* the graph's and the exec's */

/* Argument storage: the driver copies the values at the call. */
static uint32_t a_inc;
static CUdeviceptr b_in;

static CUDA_MEMSET_NODE_PARAMS memset_params(uint32_t v)
{
    return (CUDA_MEMSET_NODE_PARAMS){ .dst = acc, .pitch = N * 4, .value = v, .elementSize = 4,
                                      .width = N, .height = 1 };
}

static CUDA_MEMCPY3D copy_params(int d) { return adv_copy_1d(cp[d], acc, N * 4); }

static void *a_args[] = { &acc, &a_inc, &n };
static void *b_args[] = { &b_in, &acc, &n };

static CUDA_KERNEL_NODE_PARAMS a_params(uint32_t inc)
{
    a_inc = inc;
    return adv_kernel_params(add, a_args);
}

static CUDA_KERNEL_NODE_PARAMS b_params(int k)
{
    b_in = in[k];
    return adv_kernel_params(mad, b_args);
}

static void build(void)
{
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    add = adv_fn(mod, "add_u32");
    mad = adv_fn(mod, "mad_u32");
    for (int k = 0; k < 3; k++) {
        MUST(cuMemAlloc(&in[k], N * 4));
        for (uint32_t i = 0; i < N; i++) hin[k][i] = 0x100u * (uint32_t)(k + 1) + 7u * i;
        MUST(cuMemcpyHtoD(in[k], hin[k], sizeof hin[k]));
    }
    MUST(cuMemAlloc(&acc, N * 4));
    MUST(cuMemAlloc(&cp[0], N * 4));
    MUST(cuMemAlloc(&cp[1], N * 4));
    gs = (state){ .v = 5, .inc = 10, .k = 0, .d = 0, .a_on = 1 };
    MUST(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = memset_params(gs.v);
    MUST(cuGraphAddMemsetNode(&nM, g, NULL, 0, &m, ctx));
    CUDA_KERNEL_NODE_PARAMS ka = a_params(gs.inc);
    MUST(cuGraphAddKernelNode(&nA, g, &nM, 1, &ka));
    CUDA_KERNEL_NODE_PARAMS kb = b_params(gs.k);
    MUST(cuGraphAddKernelNode(&nB, g, &nA, 1, &kb));
    CUDA_MEMCPY3D c = copy_params(gs.d);
    MUST(cuGraphAddMemcpyNode(&nC, g, &nB, 1, &c, ctx));
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    es = gs;
}

/* An update from g: the exec takes the graph's state where it succeeds. */
static void update(void)
{
    CUgraphExecUpdateResultInfo info;
    CUresult r = R(cuGraphExecUpdate_v2(exec, g, &info));
    if (r != CUDA_SUCCESS) {
        printf("step %d: update result %d\n", step, (int)info.result);
        return;
    }
    int on = es.a_on;          /* the enabled state is the exec's own */
    es = gs;
    es.a_on = on;
}

/* Launches the exec and checks acc and cp[d] against the exec's model. */
static void launch_check(void)
{
    uint32_t want[N];
    char name[64];
    for (uint32_t i = 0; i < N; i++) want[i] = (es.v + (es.a_on ? es.inc : 0u)) * 3u + hin[es.k][i];
    MUST(cuMemsetD32(cp[es.d], 0, N));
    if (R(cuGraphLaunch(exec, s)) != CUDA_SUCCESS) return;
    MUST(cuStreamSynchronize(s));
    snprintf(name, sizeof name, "step%d_acc", step);
    adv_check_words(name, acc, want, N);
    snprintf(name, sizeof name, "step%d_copy", step);
    adv_check_words(name, cp[es.d], want, N);
}

/* cuGraphKernelNodeSetParams (v1) of A; the graph's state follows success. */
static void set_a_v1(uint32_t inc)
{
    CUDA_KERNEL_NODE_PARAMS k = a_params(inc);
    CUDA_KERNEL_NODE_PARAMS_v1 k1 = { .func = k.func, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                      .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                                      .kernelParams = k.kernelParams };
    if (R(cuGraphKernelNodeSetParams(nA, &k1)) == CUDA_SUCCESS) gs.inc = inc;
}

/* A's arguments by `extra` (one packed buffer: p, v, n at 0, 8, 16). */
static void set_a_extra(uint32_t inc, int exec_side)
{
    unsigned char buf[24];
    size_t size = sizeof buf;
    memset(buf, 0, sizeof buf);
    memcpy(buf, &acc, 8);
    memcpy(buf + 8, &inc, 4);
    memcpy(buf + 16, &n, 8);
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                      CU_LAUNCH_PARAM_END };
    CUDA_KERNEL_NODE_PARAMS k = adv_kernel_params(add, NULL);
    k.extra = extra;
    if (exec_side) {
        if (R(cuGraphExecKernelNodeSetParams_v2(exec, nA, &k)) == CUDA_SUCCESS) es.inc = inc;
    } else if (R(cuGraphKernelNodeSetParams_v2(nA, &k)) == CUDA_SUCCESS) {
        gs.inc = inc;
    }
}

/* The generic form of B's parameters (v3 struct: func set, kern and ctx
 * NULL) or of M's. */
static CUgraphNodeParams generic_b(int k)
{
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_KERNEL;
    CUDA_KERNEL_NODE_PARAMS kb = b_params(k);
    memcpy(&p.kernel, &kb, sizeof kb);
    return p;
}

static CUgraphNodeParams generic_m(uint32_t v)
{
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_MEMSET;
    p.memset = (CUDA_MEMSET_NODE_PARAMS_v2){ .dst = acc, .pitch = N * 4, .value = v, .elementSize = 4,
                                             .width = N, .height = 1, .ctx = ctx };
    return p;
}

static void graph_edit(void)
{
    for (step = 0; step < STEPS * 2; step++) {
        if (step % 3 != 2) {
            switch (step % 4) {
            case 0:
                set_a_v1(10u + (uint32_t)step);
                break;
            case 1: {
                CUDA_KERNEL_NODE_PARAMS kb = b_params((step / 4) % 3);
                if (R(cuGraphKernelNodeSetParams_v2(nB, &kb)) == CUDA_SUCCESS) gs.k = (step / 4) % 3;
                break;
            }
            case 2: {
                CUgraphNodeParams p = generic_m(100u + (uint32_t)step);
                if (R(cuGraphNodeSetParams(nM, &p)) == CUDA_SUCCESS) gs.v = 100u + (uint32_t)step;
                p = generic_b((step + 1) % 3);
                if (R(cuGraphNodeSetParams(nB, &p)) == CUDA_SUCCESS) gs.k = (step + 1) % 3;
                break;
            }
            default: {
                CUkernelNodeAttrValue v;
                memset(&v, 0, sizeof v);
                v.priority = step % 2 ? -1 : 0;
                R(cuGraphKernelNodeSetAttribute(nA, CU_KERNEL_NODE_ATTRIBUTE_PRIORITY, &v));
                set_a_extra(gs.inc + (step % 8 == 3 ? 1u : 0u), 0);
                break;
            }
            }
        }
        update();
        launch_check();
    }
}

static void deps(void)
{
    CUgraphEdgeData ed;
    memset(&ed, 0, sizeof ed);
    for (step = 0; step < STEPS; step++) {
        switch (step % 6) {
        case 0:       /* the same topology again: M -> A removed and added back */
            R(cuGraphRemoveDependencies(g, &nM, &nA, 1));
            R(cuGraphAddDependencies(g, &nM, &nA, 1));
            set_a_v1(20u + (uint32_t)step);
            break;
        case 1:       /* with default edge data (_v2) */
            R(cuGraphRemoveDependencies_v2(g, &nA, &nB, &ed, 1));
            R(cuGraphAddDependencies_v2(g, &nA, &nB, &ed, 1));
            break;
        case 2:       /* an edge more: the driver refuses the update */
            R(cuGraphAddDependencies(g, &nM, &nB, 1));
            set_a_v1(30u + (uint32_t)step);
            break;
        case 3:       /* and gone again: accepted */
            R(cuGraphRemoveDependencies(g, &nM, &nB, 1));
            break;
        case 4: {     /* A destroyed, another in its place, once at the end (the
                       * update is refused or not: as the driver says) */
            if (step != STEPS - 2) break;
            R(cuGraphDestroyNode(nA));
            CUDA_KERNEL_NODE_PARAMS ka = a_params(40u + (uint32_t)step);
            CUgraphNode d[1] = { nM };
            if (R(cuGraphAddKernelNode(&nA, g, d, 1, &ka)) == CUDA_SUCCESS) {
                gs.inc = 40u + (uint32_t)step;
                R(cuGraphRemoveDependencies(g, &nM, &nB, 1));    /* there is none: refused */
                R(cuGraphAddDependencies(g, &nA, &nB, 1));
            }
            break;
        }
        default:
            break;
        }
        update();
        launch_check();
    }
}

/* The exec's setters; the graph stays as instantiated and every other step
 * brings the exec back to it. */
static void execset(void)
{
    state inst = gs;
    for (step = 0; step < STEPS * 2; step++) {
        int j = step % 6;
        if (j == 0) {
            CUDA_KERNEL_NODE_PARAMS k = a_params(50u + (uint32_t)step);
            CUDA_KERNEL_NODE_PARAMS_v1 k1 = { .func = add, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                              .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                                              .kernelParams = k.kernelParams };
            if (R(cuGraphExecKernelNodeSetParams(exec, nA, &k1)) == CUDA_SUCCESS) es.inc = a_inc;
        } else if (j == 1) {
            CUDA_KERNEL_NODE_PARAMS k = b_params(1 + step % 2);
            if (R(cuGraphExecKernelNodeSetParams_v2(exec, nB, &k)) == CUDA_SUCCESS) es.k = 1 + step % 2;
        } else if (j == 2) {
            CUgraphNodeParams p = generic_b(2);
            if (R(cuGraphExecNodeSetParams(exec, nB, &p)) == CUDA_SUCCESS) es.k = 2;
            p = generic_m(200u + (uint32_t)step);
            if (R(cuGraphExecNodeSetParams(exec, nM, &p)) == CUDA_SUCCESS) es.v = 200u + (uint32_t)step;
        } else if (j == 3) {
            CUDA_MEMSET_NODE_PARAMS m = memset_params(300u + (uint32_t)step);
            if (R(cuGraphExecMemsetNodeSetParams(exec, nM, &m, ctx)) == CUDA_SUCCESS) es.v = m.value;
            CUDA_MEMCPY3D c = copy_params(1);
            if (R(cuGraphExecMemcpyNodeSetParams(exec, nC, &c, ctx)) == CUDA_SUCCESS) es.d = 1;
        } else if (j == 4) {
            set_a_extra(es.inc, 1);             /* the exec's own bytes by `extra` */
        } else {
            /* the values the exec held at instantiation, by setters: then an
             * update from the graph changes nothing (skippable) */
            CUDA_KERNEL_NODE_PARAMS k = a_params(inst.inc);
            if (R(cuGraphExecKernelNodeSetParams_v2(exec, nA, &k)) == CUDA_SUCCESS) es.inc = inst.inc;
            k = b_params(inst.k);
            if (R(cuGraphExecKernelNodeSetParams_v2(exec, nB, &k)) == CUDA_SUCCESS) es.k = inst.k;
            CUDA_MEMSET_NODE_PARAMS m = memset_params(inst.v);
            if (R(cuGraphExecMemsetNodeSetParams(exec, nM, &m, ctx)) == CUDA_SUCCESS) es.v = inst.v;
            CUDA_MEMCPY3D c = copy_params(inst.d);
            if (R(cuGraphExecMemcpyNodeSetParams(exec, nC, &c, ctx)) == CUDA_SUCCESS) es.d = inst.d;
        }
        launch_check();
        if (step % 2) {
            update();
            launch_check();
        }
    }
}

static void refused(void)
{
    for (step = 0; step < STEPS; step++) {
        switch (step % 4) {
        case 0: {
            CUDA_KERNEL_NODE_PARAMS k = a_params(999);
            R(cuGraphKernelNodeSetParams_v2(nM, &k));                 /* not a kernel node */
            CUDA_MEMSET_NODE_PARAMS m = memset_params(999);
            m.height = 2;
            m.pitch = 4;                                              /* below the row */
            R(cuGraphMemsetNodeSetParams(nM, &m));
            break;
        }
        case 1: {
            CUgraphNodeParams p = generic_b(2);
            R(cuGraphNodeSetParams(nM, &p));                          /* a type change */
            CUDA_MEMCPY3D c = copy_params(1);
            c.WidthInBytes = 0x7fffffff;                              /* past the allocation */
            R(cuGraphMemcpyNodeSetParams(nC, &c));
            break;
        }
        case 2: {
            CUkernelNodeAttrValue v;
            memset(&v, 0, sizeof v);
            R(cuGraphKernelNodeSetAttribute(nA, (CUkernelNodeAttrID)0x7fff, &v));   /* no such attribute */
            R(cuGraphAddDependencies(g, &nM, &nA, 1));                 /* already there */
            R(cuGraphRemoveDependencies(g, &nA, &nM, 1));              /* not there */
            CUDA_KERNEL_NODE_PARAMS k = a_params(999);
            k.gridDimX = 0;                                           /* no grid */
            R(cuGraphKernelNodeSetParams_v2(nA, &k));
            break;
        }
        default:
            set_a_v1(60u + (uint32_t)step);                          /* a real change */
            break;
        }
        update();
        launch_check();
    }
}

static void extra(void)
{
    for (step = 0; step < STEPS; step++) {
        switch (step % 4) {
        case 0:
            set_a_extra(gs.inc, 0);              /* the same bytes */
            break;
        case 1:
            set_a_extra(gs.inc + 3u, 0);
            break;
        case 2:
            set_a_v1(gs.inc);                    /* kernelParams again, the same values */
            break;
        default: {
            CUDA_KERNEL_NODE_PARAMS k = a_params(gs.inc + 5u);
            if (R(cuGraphKernelNodeSetParams_v2(nA, &k)) == CUDA_SUCCESS) gs.inc = a_inc;
            break;
        }
        }
        update();
        launch_check();
    }
}

static void enabled(void)
{
    for (step = 0; step < STEPS; step++) {
        if (step % 4 == 0 && R(cuGraphNodeSetEnabled(exec, nA, 0)) == CUDA_SUCCESS) es.a_on = 0;
        if (step % 4 == 2 && R(cuGraphNodeSetEnabled(exec, nA, 1)) == CUDA_SUCCESS) es.a_on = 1;
        if (step % 2 == 1) set_a_v1(70u + (uint32_t)step);
        if (step % 4 == 1) {
            CUDA_MEMSET_NODE_PARAMS m = memset_params(400u + (uint32_t)step);
            if (R(cuGraphExecMemsetNodeSetParams(exec, nM, &m, ctx)) == CUDA_SUCCESS) es.v = m.value;
        }
        update();
        launch_check();
    }
}

/* A's parameters with kern (func NULL) and ctx, or func with ctx. */
static CUDA_KERNEL_NODE_PARAMS a_kern(uint32_t inc, CUfunction f, CUkernel kern, CUcontext c)
{
    CUDA_KERNEL_NODE_PARAMS k = a_params(inc);
    k.func = f;
    k.kern = kern;
    k.ctx = c;
    return k;
}

static void kern(void)
{
    char path[PATH_MAX + 64];
    CUlibrary lib;
    CUkernel kadd;
    CUcontext other;
    CUdevice dev;
    adv_path("adv_kernels.so", path, sizeof path);
    MUST(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0));
    MUST(cuLibraryGetKernel(&kadd, lib, "add_u32"));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuCtxCreate(&other, NULL, 0, dev));
    MUST(cuCtxSetCurrent(ctx));
    for (step = 0; step < STEPS * 2; step++) {
        uint32_t inc = 80u + (uint32_t)step;
        CUDA_KERNEL_NODE_PARAMS k;
        if (step % 3 == 2) {
            update();                               /* nothing changed */
            launch_check();
            continue;
        }
        switch (step % 8) {
        case 0:
        case 4:       /* kern in the current context */
            k = a_kern(inc, NULL, kadd, NULL);
            if (R(cuGraphKernelNodeSetParams_v2(nA, &k)) == CUDA_SUCCESS) gs.inc = inc;
            break;
        case 1: {     /* kern in the context named, by the generic call */
            CUgraphNodeParams p;
            memset(&p, 0, sizeof p);
            p.type = CU_GRAPH_NODE_TYPE_KERNEL;
            k = a_kern(inc, NULL, kadd, ctx);
            memcpy(&p.kernel, &k, sizeof k);
            if (R(cuGraphNodeSetParams(nA, &p)) == CUDA_SUCCESS) gs.inc = inc;
            break;
        }
        case 3:       /* func, with a ctx CUDA ignores */
            k = a_kern(inc, add, kadd, other);
            if (R(cuGraphKernelNodeSetParams_v2(nA, &k)) == CUDA_SUCCESS) gs.inc = inc;
            break;
        case 5:       /* kern in another context: the update is refused */
            k = a_kern(inc, NULL, kadd, other);
            if (R(cuGraphKernelNodeSetParams_v2(nA, &k)) == CUDA_SUCCESS) gs.inc = inc;
            break;
        case 6:       /* the exec's setter: kern in the current context, then in another */
            k = a_kern(inc, NULL, kadd, NULL);
            if (R(cuGraphExecKernelNodeSetParams_v2(exec, nA, &k)) == CUDA_SUCCESS) es.inc = inc;
            k = a_kern(inc + 1u, NULL, kadd, other);
            if (R(cuGraphExecKernelNodeSetParams_v2(exec, nA, &k)) == CUDA_SUCCESS) es.inc = inc + 1u;
            launch_check();
            k = a_kern(gs.inc, NULL, kadd, NULL);  /* back to the graph's, by kern */
            R(cuGraphKernelNodeSetParams_v2(nA, &k));
            break;
        default:      /* back to the module's function */
            set_a_v1(inc);
            break;
        }
        update();
        launch_check();
    }
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    exec = NULL;
    g = NULL;
    R(cuCtxDestroy(other));
    R(cuLibraryUnload(lib));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "graph_edit", "deps", "execset", "refused", "extra", "enabled",
                                         "kern", NULL };
    int c = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    build();
    switch (c) {
    case 0: graph_edit(); break;
    case 1: deps(); break;
    case 2: execset(); break;
    case 3: refused(); break;
    case 4: extra(); break;
    case 5: enabled(); break;
    default: kern(); break;
    }
    if (exec) R(cuGraphExecDestroy(exec));
    if (g) R(cuGraphDestroy(g));
    return adv_finish();
}
