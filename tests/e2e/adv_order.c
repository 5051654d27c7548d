/*
 * tests/e2e/adv_order.c: issue 10, class 3 (launch order across streams).
 * cuGraphLaunch orders each launch behind every earlier launch of the same
 * exec, whatever the stream. Each step the program holds stream s1 with a
 * slow host function, launches the exec (acc = acc * 3 + in) on s1 with
 * input A, points the exec at input B (cuGraphExecKernelNodeSetParams) and
 * launches it on s2. The s2 launch must run after the s1 one; a library
 * that serves the two states from different driver execs loses that order.
 * A second exec launched on one stream only is the control.
 *
 * Checks: acc after every step equals the host's model (A then B).
 * Usage: adv_order [STEPS]  (default 8)
 */
#include "adv_common.h"

#define N 1024u

static void CUDA_CB slow_host(void *arg)
{
    (void)arg;
    adv_sleep_us(20000);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 8;
    CUcontext ctx;
    CUmodule mod;
    CUstream s1, s2;
    CUdeviceptr a, b, acc;
    adv_open(&ctx, &mod);
    CUfunction mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&a, N * 4));
    MUST(cuMemAlloc(&b, N * 4));
    MUST(cuMemAlloc(&acc, N * 4));
    uint32_t ha[N], hb[N], model[N];
    for (uint32_t i = 0; i < N; i++) {
        ha[i] = 7u * i + 1u;
        hb[i] = 0x1000u + 13u * i;
        model[i] = i;
    }
    MUST(cuMemcpyHtoD(a, ha, sizeof ha));
    MUST(cuMemcpyHtoD(b, hb, sizeof hb));
    MUST(cuMemcpyHtoD(acc, model, sizeof model));

    CUdeviceptr in = a;
    uint64_t n = N;
    void *args[] = { &in, &acc, &n };
    CUgraph g;
    CUgraphNode node;
    CUgraphExec exec = adv_one_node_exec(s1, mad, args, &g, &node);
    int good_steps = 0;
    for (int st = 0; st < steps; st++) {
        R(cuLaunchHostFunc(s1, slow_host, NULL));
        in = a;
        ADV_SET_KERNEL(exec, node, mad, args);
        R(cuGraphLaunch(exec, s1));
        in = b;
        ADV_SET_KERNEL(exec, node, mad, args);
        R(cuGraphLaunch(exec, s2));
        R(cuStreamSynchronize(s1));
        R(cuStreamSynchronize(s2));
        for (uint32_t i = 0; i < N; i++) model[i] = (model[i] * 3u + ha[i]) * 3u + hb[i];
        uint32_t *got = adv_read(acc, N);
        good_steps += got && memcmp(got, model, sizeof model) == 0;
        free(got);
    }
    adv_check("steps whose launches ran in launch order", good_steps == steps, "%d of %d",
              good_steps, steps);
    adv_check_words("accumulator", acc, model, N);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    R(cuMemFree(a));
    R(cuMemFree(b));
    R(cuMemFree(acc));
    R(cuStreamDestroy(s1));
    R(cuStreamDestroy(s2));
    return adv_finish();
}
