/*
 * tests/e2e/adv_enabled.c: issue 10, class 4 (exec state that variants do
 * not carry). A graph of three kernel nodes on one buffer (A: p += 1,
 * B: p += 100, C: p = p * 3 + in); the program disables B in the exec with
 * cuGraphNodeSetEnabled, then each step feeds C another input and launches:
 *   recapture  re-captures the same graph with the step's input and updates
 *              the exec with cuGraphExecUpdate (the enabled state of the
 *              exec's nodes is not part of the graph: it stays);
 *   setparams  cuGraphExecKernelNodeSetParams on C.
 * A library that launches variants instantiated from a clone of the graph
 * (every node enabled) runs B again.
 *
 * Checks: the buffer after every step equals the host's model (B never
 * runs); cuGraphNodeGetEnabled still says 0 at the end.
 * Usage: adv_enabled recapture|setparams [STEPS]  (default 10)
 */
#include "adv_common.h"

#define N 256u

static CUfunction f_add, f_mad;

/* Records A, B, C on s (capturing). */
static void record(CUstream s, CUdeviceptr *p, CUdeviceptr *in)
{
    static uint32_t one = 1, hundred = 100;
    static uint64_t n = N;
    void *a[] = { p, &one, &n }, *b[] = { p, &hundred, &n }, *c[] = { in, p, &n };
    R(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s, a, NULL));
    R(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s, b, NULL));
    R(cuLaunchKernel(f_mad, 1, 1, 1, 1, 1, 1, 0, s, c, NULL));
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "recapture", "setparams", NULL };
    int which = adv_case(argc, argv, cases);
    int steps = argc > 2 ? atoi(argv[2]) : 10;
    CUcontext ctx;
    CUmodule mod;
    CUstream s;
    CUdeviceptr p, in[2];
    adv_open(&ctx, &mod);
    f_add = adv_fn(mod, "add_u32");
    f_mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&p, N * 4));
    uint32_t hin[2][N], model[N];
    for (int k = 0; k < 2; k++) {
        MUST(cuMemAlloc(&in[k], N * 4));
        for (uint32_t i = 0; i < N; i++) hin[k][i] = (uint32_t)k * 0x10000u + 5u * i;
        MUST(cuMemcpyHtoD(in[k], hin[k], sizeof hin[k]));
    }
    for (uint32_t i = 0; i < N; i++) model[i] = i;
    MUST(cuMemcpyHtoD(p, model, sizeof model));

    CUdeviceptr cur = in[0];
    CUgraph g;
    CUgraphExec exec;
    CUgraphNode nodes[3];
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    record(s, &p, &cur);
    MUST(cuStreamEndCapture(s, &g));
    adv_chain_nodes(g, nodes, 3);
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    MUST(cuGraphNodeSetEnabled(exec, nodes[1], 0));

    int good = 0;
    for (int st = 0; st < steps; st++) {
        int k = st % 2;
        cur = in[k];
        if (which == 0) {
            CUgraph g2;
            CUgraphExecUpdateResultInfo info;
            R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
            record(s, &p, &cur);
            R(cuStreamEndCapture(s, &g2));
            R(cuGraphExecUpdate(exec, g2, &info));
            R(cuGraphDestroy(g2));
        } else {
            uint64_t n = N;
            void *c[] = { &cur, &p, &n };
            ADV_SET_KERNEL(exec, nodes[2], f_mad, c);
        }
        R(cuGraphLaunch(exec, s));
        R(cuStreamSynchronize(s));
        for (uint32_t i = 0; i < N; i++) model[i] = (model[i] + 1u) * 3u + hin[k][i];
        uint32_t *got = adv_read(p, N);
        good += got && memcmp(got, model, sizeof model) == 0;
        free(got);
    }
    adv_check("steps without the disabled node", good == steps, "%d of %d", good, steps);
    adv_check_words("buffer", p, model, N);
    unsigned en = 7;
    R(cuGraphNodeGetEnabled(exec, nodes[1], &en));
    adv_check("node still disabled", en == 0, "enabled = %u", en);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    R(cuMemFree(p));
    R(cuMemFree(in[0]));
    R(cuMemFree(in[1]));
    R(cuStreamDestroy(s));
    return adv_finish();
}
