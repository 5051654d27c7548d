/*
 * tests/e2e/adv_funcs.c: issue 10, class 9 (stale function handles). The
 * program loads 64 modules holding version 1 of a kernel (2 arguments),
 * runs each once through a graph, and unloads them; then loads version 2
 * (3 arguments, loaded as many times, the first reused handle taken) and
 * updates only the new third argument, step after step,
 * with cuGraphExecKernelNodeSetParams. The driver may hand the new
 * CUfunction a handle value it handed out before; anything a library
 * remembers about a handle (its parameter layout) must die with the module.
 *
 * Checks: every version 1 run; every version 2 step's output. It also says
 * on stderr whether the new CUfunction is a handle value seen before (the
 * runner needs that of the baseline: without it the case tests nothing).
 * Usage: adv_funcs [STEPS]  (default 10)
 */
#include "adv_common.h"

#define MODULES 64

static CUstream s;
static CUdeviceptr out;

static uint32_t read_out(void)
{
    uint32_t v = 0;
    R(cuStreamSynchronize(s));
    R(cuMemcpyDtoH(&v, out, 4));
    return v;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    CUcontext ctx;
    CUmodule mods[MODULES];
    char p1[PATH_MAX + 64], p2[PATH_MAX + 64];
    adv_open(&ctx, NULL);
    adv_path("adv_ver1.so", p1, sizeof p1);
    adv_path("adv_ver2.so", p2, sizeof p2);
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&out, 4));

    int good1 = 0;
    CUfunction seen[MODULES];
    for (int m = 0; m < MODULES; m++) {
        CUfunction f;
        CUgraph g;
        CUgraphNode node;
        uint32_t a = 100u + (uint32_t)m;
        void *args[] = { &out, &a };
        MUST(cuModuleLoad(&mods[m], p1));
        MUST(cuModuleGetFunction(&f, mods[m], "versioned"));
        seen[m] = f;
        CUgraphExec exec = adv_one_node_exec(s, f, args, &g, &node);
        R(cuGraphLaunch(exec, s));
        good1 += read_out() == a;
        R(cuGraphExecDestroy(exec));
        R(cuGraphDestroy(g));
    }
    adv_check("version 1 runs", good1 == MODULES, "%d of %d", good1, MODULES);
    for (int m = 0; m < MODULES; m++) R(cuModuleUnload(mods[m]));

    CUfunction f2 = NULL;
    CUgraph g;
    CUgraphNode node;
    uint32_t a = 7, b = 0;
    void *args[] = { &out, &a, &b };
    /* Version 2 is loaded MODULES times (a fixed count, so the digest does
     * not depend on it); the first whose function handle is one version 1
     * had is used, so that reuse does not depend on one malloc's luck. */
    CUmodule v2[MODULES];
    CUfunction last = NULL;
    for (int m = 0; m < MODULES; m++) {
        MUST(cuModuleLoad(&v2[m], p2));
        MUST(cuModuleGetFunction(&last, v2[m], "versioned"));
        for (int j = 0; j < MODULES && !f2; j++)
            if (seen[j] == last) f2 = last;
    }
    fprintf(stderr, "note: new function handle reused: %s\n", f2 ? "yes" : "no");
    if (!f2) f2 = last;
    CUgraphExec exec = adv_one_node_exec(s, f2, args, &g, &node);
    int good2 = 0;
    for (int st = 0; st < steps; st++) {
        b = (uint32_t)st + 1;
        ADV_SET_KERNEL(exec, node, f2, args);
        R(cuGraphLaunch(exec, s));
        good2 += read_out() == 7000u + b;
    }
    adv_check("version 2 steps whose new argument arrived", good2 == steps, "%d of %d", good2,
              steps);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    for (int m = 0; m < MODULES; m++) R(cuModuleUnload(v2[m]));
    R(cuMemFree(out));
    R(cuStreamDestroy(s));
    return adv_finish();
}
