/*
 * adv_condsw.c: round 37, graphs whose conditional nodes have several
 * bodies: an IF with an ELSE body (size 2) and a SWITCH (size n, body[v]
 * when the value v < n, none otherwise), what XLA/JAX command buffers build
 * for lax.cond and lax.switch (CUDA 12.8+). The value is set by a kernel
 * before the conditional node: cond_set(h, v) takes it as an argument,
 * cond_step(scratch, 0, flag, h, 1) reads it from device memory (h =
 * --flag[0]), so a graph can pick another body without a parameter change.
 * A library that skipped an update because the body the value takes did
 * not change, or that placed a temporary only a body names where another
 * one still lives, would compute other numbers; one that cloned or
 * instantiated such a graph (variants under skip_profiled) would get errors
 * the program never sees without it.
 *
 * Cases (every step's result read back and compared with a host model):
 *   switch_temps  each step: two temporaries (cuMemAlloc; sizes shifting)
 *                 filled from the host, the graph built anew: acc = 0;
 *                 cond_set(h, v); SWITCH h (size 3) { 0: acc = acc*3 + t0,
 *                 acc += s0; 1: acc += s1, acc = acc*3 + t1; 2: acc = s2 +
 *                 i }; acc += 1; cuGraphExecUpdate + launch, then the
 *                 temporaries freed (cuMemFree) before the next step. v runs
 *                 0,1,2,3 (3: no body), the scalars change on some steps and
 *                 repeat the last step's on others (adv_rep);
 *   ifelse_temps  the same with IF/ELSE h { then: acc = acc*3 + t0, acc +=
 *                 s0 } { else: acc += s1, acc = acc*3 + t1 }, v taken or not;
 *   untaken       one graph: acc = 0; cond_step sets h from flag (written
 *                 by the host between steps); IF/ELSE h { acc += a } { acc +=
 *                 b }; acc += 1; cuGraphExecUpdate + launch every step. The
 *                 host flips flag every third step; in between, the scalar
 *                 of the body not taken changes (cuGraphKernelNodeSetParams
 *                 of the body's node), and the step that flips the flag
 *                 changes nothing: the body taken then must have the scalar
 *                 of the last update (a library that compared the graph
 *                 without its bodies would have skipped those updates);
 *   untaken_switch  the same with SWITCH h (size 3), the value (0, 1, 2)
 *                 taking the next body every third step;
 *   profiled      one graph: acc = acc*3 + in[k] (mad_u32); cond_set(h, v);
 *                 SWITCH h (size 3) { acc += 1 } { acc += 2 } { acc += 5 },
 *                 launched 40 times with the input rotating over three
 *                 buffers and v over 0..3, by cuGraphExecKernelNodeSetParams
 *                 and every fourth step by cuGraphKernelNodeSetParams +
 *                 cuGraphExecUpdate (what buys variants for a graph without
 *                 a conditional node).
 * Usage: adv_condsw switch_temps|ifelse_temps|untaken|untaken_switch|profiled
 */
#include "adv_common.h"

#define N 128
#define STEPS 12

static CUcontext ctx;
static CUfunction f_add, f_mad, f_fill, f_step, f_set;
static CUdeviceptr acc;

/* add_u32(acc, v, N) */
static CUgraphNode add_add(CUgraph g, const CUgraphNode *deps, size_t nd, uint32_t v)
{
    return adv_add_kernel3(g, deps, nd, f_add, &acc, &v, N);
}

/* acc = 0 (a memset node) in g. */
static CUgraphNode add_zero(CUgraph g)
{
    CUgraphNode m;
    CUDA_MEMSET_NODE_PARAMS p = { .dst = acc, .value = 0, .elementSize = 4, .width = N, .height = 1 };
    MUST(cuGraphAddMemsetNode(&m, g, NULL, 0, &p, ctx));
    return m;
}

static void launch_check(CUgraphExec e, CUstream st, const char *what, int k, const uint32_t *want)
{
    R(cuGraphLaunch(e, st));
    adv_step_check(st, what, k, acc, want, N);
}

/* The first or the only update of the exec with g (built anew each step):
 * the exec reads the handle of the graph it was last updated from, so the
 * previous graph goes only now. */
static void exec_take(CUgraphExec *e, CUgraph g, CUgraph *prev)
{
    if (!*e) MUST(cuGraphInstantiateWithFlags(e, g, 0));
    else adv_update(*e, g);
    if (*prev) MUST(cuGraphDestroy(*prev));
    *prev = g;
}

/* switch_temps (sw) and ifelse_temps. */
static void case_temps(CUstream st, int sw)
{
    CUgraphExec e = NULL;
    CUgraph prev = NULL;
    static uint32_t ht[2][N], want[N];
    for (int k = 0; k < STEPS; k++) {
        int r = adv_rep(k);
        uint32_t v = sw ? (uint32_t)(k % 4) : (k % 4 == 1 ? 0u : (uint32_t)k + 1u);
        uint32_t s[3] = { 10u + (uint32_t)r / 2u * 7u, 20u + (uint32_t)r / 3u * 11u, 1000u + (uint32_t)r * 3u };
        /* the temporaries, of sizes that shift the placement of the second */
        CUdeviceptr t[2];
        MUST(cuMemAlloc(&t[0], N * 4 + (size_t)(k % 3) * 4096));
        MUST(cuMemAlloc(&t[1], N * 4));
        for (int b = 0; b < 2; b++) {
            for (uint32_t i = 0; i < N; i++) ht[b][i] = 0x100u * (uint32_t)(b + 1) + (uint32_t)r * 31u + 7u * i;
            MUST(cuMemcpyHtoD(t[b], ht[b], N * 4));
        }
        CUgraph g, body[3];
        CUgraphConditionalHandle h;
        MUST(cuGraphCreate(&g, 0));
        MUST(cuGraphConditionalHandleCreate(&h, g, ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
        CUgraphNode z = add_zero(g);
        void *sargs[] = { &h, &v };
        CUgraphNode set = adv_add_kernel(g, &z, 1, f_set, sargs);
        CUgraphNode cn = adv_add_cond(g, &set, 1, ctx, h, sw ? CU_GRAPH_COND_TYPE_SWITCH : CU_GRAPH_COND_TYPE_IF,
                                  sw ? 3 : 2, body);
        CUgraphNode a = adv_add_kernel3(body[0], NULL, 0, f_mad, &t[0], &acc, N);
        add_add(body[0], &a, 1, s[0]);
        a = add_add(body[1], NULL, 0, s[1]);
        adv_add_kernel3(body[1], &a, 1, f_mad, &t[1], &acc, N);
        if (sw) {
            uint64_t n = N;
            void *fargs[] = { &acc, &s[2], &n };
            adv_add_kernel(body[2], NULL, 0, f_fill, fargs);
        }
        add_add(g, &cn, 1, 1);
        exec_take(&e, g, &prev);
        int taken = sw ? (v < 3 ? (int)v : -1) : (v ? 0 : 1);
        for (uint32_t i = 0; i < N; i++) {
            uint32_t x = 0;
            if (taken == 0) x = x * 3u + ht[0][i] + s[0];
            if (taken == 1) x = (x + s[1]) * 3u + ht[1][i];
            if (taken == 2) x = s[2] + i;
            want[i] = x + 1u;
        }
        launch_check(e, st, sw ? "switch_temps" : "ifelse_temps", k, want);
        MUST(cuMemFree(t[1]));          /* the exec names them until the next update */
        MUST(cuMemFree(t[0]));
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(prev));
}

/* untaken (IF/ELSE) and untaken_switch (SWITCH of three): one graph, so
 * that nothing but a body changes between updates (a graph built anew has a
 * new handle, which the value's kernel names). */
static void case_untaken(CUstream st, int sw)
{
    unsigned nb = sw ? 3 : 2;
    CUdeviceptr flag, scratch;
    MUST(cuMemAlloc(&flag, 4));
    MUST(cuMemAlloc(&scratch, 4));
    static uint32_t want[N];
    uint32_t sc[3] = { 100, 200, 300 };
    uint64_t n = N;
    CUgraph g, body[3];
    CUgraphConditionalHandle h;
    MUST(cuGraphCreate(&g, 0));
    MUST(cuGraphConditionalHandleCreate(&h, g, ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNode z = add_zero(g);
    uint32_t zero = 0;
    uint64_t one = 1;
    void *cargs[] = { &scratch, &zero, &flag, &h, &one };
    CUgraphNode set = adv_add_kernel(g, &z, 1, f_step, cargs);
    CUgraphNode cn = adv_add_cond(g, &set, 1, ctx, h, sw ? CU_GRAPH_COND_TYPE_SWITCH : CU_GRAPH_COND_TYPE_IF, nb, body);
    CUgraphNode bk[3];
    for (unsigned b = 0; b < nb; b++) bk[b] = add_add(body[b], NULL, 0, sc[b]);
    add_add(g, &cn, 1, 1);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int k = 0; k < 2 * STEPS; k++) {
        unsigned tb = (unsigned)(k / 3) % nb;   /* the body taken: another every third step */
        /* between those steps only a body not taken changes (the next one
         * to be taken); the step that takes another body changes nothing */
        if (k % 3 != 0) {
            unsigned ub = (tb + 1) % nb;
            sc[ub] += 7u + ub;
            void *args[] = { &acc, &sc[ub], &n };
            CUDA_KERNEL_NODE_PARAMS p = adv_kernel_params(f_add, args);
            R(cuGraphKernelNodeSetParams(bk[ub], &p));
        }
        uint32_t v = sw ? tb : tb == 0, fv = v + 1;  /* cond_step sets h = --flag[0] */
        MUST(cuMemcpyHtoD(flag, &fv, 4));
        adv_update(e, g);
        for (uint32_t i = 0; i < N; i++) want[i] = sc[tb] + 1u;
        launch_check(e, st, sw ? "untaken_switch" : "untaken", k, want);
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    MUST(cuMemFree(flag));
    MUST(cuMemFree(scratch));
}

#define PSTEPS 40

static void case_profiled(CUstream st)
{
    CUdeviceptr in[3];
    static uint32_t hin[3][N], model[N];
    static const uint32_t adds[3] = { 1, 2, 5 };
    adv_mad_buffers(N, in, &hin[0][0], &acc, model);
    uint64_t n = N;
    CUgraph g, body[3];
    CUgraphConditionalHandle h;
    MUST(cuGraphCreate(&g, 0));
    MUST(cuGraphConditionalHandleCreate(&h, g, ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
    void *margs[] = { &in[0], &acc, &n };
    CUgraphNode mad = adv_add_kernel(g, NULL, 0, f_mad, margs);
    uint32_t v = 0;
    void *sargs[] = { &h, &v };
    CUgraphNode set = adv_add_kernel(g, &mad, 1, f_set, sargs);
    adv_add_cond(g, &set, 1, ctx, h, CU_GRAPH_COND_TYPE_SWITCH, 3, body);
    for (int b = 0; b < 3; b++) add_add(body[b], NULL, 0, adds[b]);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int k = 0; k < PSTEPS; k++) {
        int b = k % 3;
        v = (uint32_t)(k / 3 % 4);
        void *args[] = { &in[b], &acc, &n };
        if (k % 4 == 3) {
            CUDA_KERNEL_NODE_PARAMS p = adv_kernel_params(f_mad, args);
            R(cuGraphKernelNodeSetParams(mad, &p));
            p = adv_kernel_params(f_set, sargs);
            R(cuGraphKernelNodeSetParams(set, &p));
            adv_update(e, g);
        } else {
            R(ADV_SET_KERNEL(e, mad, f_mad, args));
            R(ADV_SET_KERNEL(e, set, f_set, sargs));
        }
        R(cuGraphLaunch(e, st));
        for (int i = 0; i < N; i++) model[i] = model[i] * 3u + hin[b][i] + (v < 3 ? adds[v] : 0u);
        if (k % 8 == 7) adv_step_check(st, "profiled", k, acc, model, N);
    }
    R(cuStreamSynchronize(st));
    adv_check_words("profiled_end", acc, model, N);
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    for (int b = 0; b < 3; b++) MUST(cuMemFree(in[b]));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "switch_temps", "ifelse_temps", "untaken", "untaken_switch", "profiled",
                                         NULL };
    static const char *const kernels[] = { "add_u32", "mad_u32", "fill_u32", "cond_step", "cond_set" };
    CUfunction *const fns[] = { &f_add, &f_mad, &f_fill, &f_step, &f_set };
    int which = adv_case(argc, argv, names);
    CUmodule mod;
    CUstream st;
    adv_open(&ctx, &mod);
    for (int i = 0; i < 5; i++) *fns[i] = adv_fn(mod, kernels[i]);
    if (which != 4) MUST(cuMemAlloc(&acc, N * sizeof(uint32_t)));   /* profiled: adv_mad_buffers */
    MUST(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    switch (which) {
    case 0: case_temps(st, 1); break;
    case 1: case_temps(st, 0); break;
    case 2: case_untaken(st, 0); break;
    case 3: case_untaken(st, 1); break;
    default: case_profiled(st); break;
    }
    MUST(cuStreamDestroy(st));
    MUST(cuMemFree(acc));
    return adv_finish();
}
