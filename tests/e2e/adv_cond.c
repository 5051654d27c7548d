/*
 * adv_cond.c: round 33, graphs that hold conditional nodes (IF and WHILE with
 * one body; CUDA 12.4's device-side control flow, which frameworks use for
 * loops that stay on the device). A conditional node's body is a graph the
 * driver owns; the node's value is set by kernels (cond_step, cond_set:
 * cudaemu_set_conditional, the emulated cudaGraphSetConditional). A graph
 * holding one may not be cloned nor instantiated twice: a library that
 * tried (variants under skip_profiled) would get errors the program never
 * sees without it; one that skipped an update changing only a body's kernel
 * would compute other numbers.
 *
 * Cases:
 *   while_args  each step builds the graph anew: acc = 0, cnt = loops
 *               (memsets); WHILE h { acc += s; cnt -= 1, h = cnt }; acc += 1,
 *               so acc[i] = loops * s + 1; cuGraphExecUpdate + launch. s and
 *               loops change on some steps, every third step repeats the
 *               last one's values (adv_rep);
 *   if          each step builds the graph anew: acc = 0; cond_set(h, v);
 *               IF h { acc += s }; acc += 1, v (taken or not) and s changing
 *               between steps (some repeated);
 *   profiled    one graph: cnt = loops (memset); acc = acc * 3 + in[k]
 *               (mad_u32); WHILE h { acc += 1; cnt -= 1, h = cnt }, launched
 *               many times with the input rotating over three buffers, by
 *               cuGraphExecKernelNodeSetParams and every fourth step by
 *               cuGraphKernelNodeSetParams + cuGraphExecUpdate (what buys
 *               variants for a graph without a conditional node).
 * Usage: adv_cond while_args|if|profiled
 */
#include "adv_common.h"

#define N 256
#define STEPS 12

static CUcontext ctx;
static CUfunction f_add, f_mad, f_step, f_set;
static CUdeviceptr acc, cnt;

/* f_add(p, v, N) */
static CUgraphNode add_add(CUgraph g, const CUgraphNode *deps, size_t nd, uint32_t v)
{
    uint64_t n = N;
    void *args[] = { &acc, &v, &n };
    return adv_add_kernel(g, deps, nd, f_add, args);
}

/* A conditional node of type t (one body) on h in g after deps; its body graph. */
static CUgraph add_cond(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
                        CUgraphConditionalHandle h, CUgraphConditionalNodeType t)
{
    CUgraph body = NULL;
    *out = adv_add_cond(g, deps, nd, ctx, h, t, 1, &body);
    return body;
}

/* A memset node of `width` words of value v at d in g after deps. */
static CUgraphNode add_memset(CUgraph g, const CUgraphNode *deps, size_t nd, CUdeviceptr d, uint32_t v,
                              size_t width)
{
    CUgraphNode m;
    CUDA_MEMSET_NODE_PARAMS p = { .dst = d, .value = v, .elementSize = 4, .width = width, .height = 1 };
    MUST(cuGraphAddMemsetNode(&m, g, deps, nd, &p, ctx));
    return m;
}

/* WHILE h (default 1, re-applied per launch) { cond_step(acc, s, cnt, h) }
 * in g after deps. */
static CUgraphNode add_loop(CUgraph g, const CUgraphNode *deps, size_t nd, uint32_t s)
{
    CUgraphConditionalHandle h;
    CUgraphNode cn;
    MUST(cuGraphConditionalHandleCreate(&h, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraph body = add_cond(&cn, g, deps, nd, h, CU_GRAPH_COND_TYPE_WHILE);
    uint64_t n = N;
    void *args[] = { &acc, &s, &cnt, &h, &n };
    adv_add_kernel(body, NULL, 0, f_step, args);
    return cn;
}

/* Launches e, waits, checks that every word of acc is want. */
static void launch_want(CUgraphExec e, CUstream st, const char *what, int k, uint32_t want)
{
    uint32_t w[N];
    for (int i = 0; i < N; i++) w[i] = want;
    R(cuGraphLaunch(e, st));
    adv_step_check(st, what, k, acc, w, N);
}

static void case_while_args(CUstream st)
{
    CUgraphExec e = NULL;
    CUgraph prev = NULL;
    for (int k = 0; k < STEPS; k++) {
        int r = adv_rep(k);
        uint32_t s = 10u + (uint32_t)r / 2u * 7u, loops = 2u + (uint32_t)r / 4u;
        CUgraph g;
        CUgraphNode ms[2];
        MUST(cuGraphCreate(&g, 0));
        ms[0] = add_memset(g, NULL, 0, acc, 0, N);
        ms[1] = add_memset(g, NULL, 0, cnt, loops, 1);
        CUgraphNode cn = add_loop(g, ms, 2, s);
        add_add(g, &cn, 1, 1);
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else adv_update(e, g);
        launch_want(e, st, "while_args", k, loops * s + 1u);
        /* the exec reads the handle of the graph it was last updated from:
         * that graph stays until the next update */
        if (prev) MUST(cuGraphDestroy(prev));
        prev = g;
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(prev));
}

static void case_if(CUstream st)
{
    CUgraphExec e = NULL;
    CUgraph prev = NULL;
    for (int k = 0; k < STEPS; k++) {
        int r = adv_rep(k);
        uint32_t v = r % 4 == 3 ? 0u : (uint32_t)r + 1u, s = 20u + (uint32_t)r / 2u * 5u;
        CUgraph g;
        CUgraphConditionalHandle h;
        CUgraphNode cn;
        MUST(cuGraphCreate(&g, 0));
        MUST(cuGraphConditionalHandleCreate(&h, g, ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
        CUgraphNode ms = add_memset(g, NULL, 0, acc, 0, N);
        void *sargs[] = { &h, &v };
        CUgraphNode set = adv_add_kernel(g, &ms, 1, f_set, sargs);
        CUgraph body = add_cond(&cn, g, &set, 1, h, CU_GRAPH_COND_TYPE_IF);
        add_add(body, NULL, 0, s);
        add_add(g, &cn, 1, 1);
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else adv_update(e, g);
        launch_want(e, st, "if", k, (v ? s : 0u) + 1u);
        if (prev) MUST(cuGraphDestroy(prev));
        prev = g;
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(prev));
}

#define PSTEPS 40
#define LOOPS 3u

static void case_profiled(CUstream st)
{
    CUdeviceptr in[3];
    static uint32_t hin[3][N], model[N];
    adv_mad_buffers(N, in, &hin[0][0], &acc, model);
    uint64_t n = N;
    CUgraph g;
    CUgraphNode mad;
    MUST(cuGraphCreate(&g, 0));
    CUgraphNode ms = add_memset(g, NULL, 0, cnt, LOOPS, 1);
    void *margs[] = { &in[0], &acc, &n };
    mad = adv_add_kernel(g, &ms, 1, f_mad, margs);
    add_loop(g, &mad, 1, 1);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int k = 0; k < PSTEPS; k++) {
        int b = k % 3;
        void *args[] = { &in[b], &acc, &n };
        if (k % 4 == 3) {
            CUDA_KERNEL_NODE_PARAMS p = adv_kernel_params(f_mad, args);
            R(cuGraphKernelNodeSetParams(mad, &p));
            adv_update(e, g);
        } else {
            R(ADV_SET_KERNEL(e, mad, f_mad, args));
        }
        R(cuGraphLaunch(e, st));
        for (int i = 0; i < N; i++) model[i] = model[i] * 3u + hin[b][i] + LOOPS;
        if (k % 8 == 7) adv_step_check(st, "profiled", k, acc, model, N);
    }
    R(cuStreamSynchronize(st));
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    for (int b = 0; b < 3; b++) MUST(cuMemFree(in[b]));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "while_args", "if", "profiled", NULL };
    static void (*const run[])(CUstream) = { case_while_args, case_if, case_profiled };
    static const char *const kernels[] = { "add_u32", "mad_u32", "cond_step", "cond_set" };
    CUfunction *const fns[] = { &f_add, &f_mad, &f_step, &f_set };
    int which = adv_case(argc, argv, names);
    CUmodule mod;
    CUstream st;
    adv_open(&ctx, &mod);
    for (int i = 0; i < 4; i++) *fns[i] = adv_fn(mod, kernels[i]);
    MUST(cuMemAlloc(&cnt, sizeof(uint32_t)));
    if (which != 2) MUST(cuMemAlloc(&acc, N * sizeof(uint32_t)));   /* profiled: adv_mad_buffers */
    MUST(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    run[which](st);
    MUST(cuStreamDestroy(st));
    MUST(cuMemFree(cnt));
    MUST(cuMemFree(acc));
    return adv_finish();
}
