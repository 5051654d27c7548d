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
    uint32_t ha[N], hb[N], model[N];
    adv_order_buffers(N, &a, &b, &acc, ha, hb, model);

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
        good_steps += adv_order_step_ok(acc, model, ha, hb, N);
    }
    adv_check("steps whose launches ran in launch order", good_steps == steps, "%d of %d",
              good_steps, steps);
    adv_order_done(exec, g, a, b, acc, model, N);
    R(cuStreamDestroy(s1));
    R(cuStreamDestroy(s2));
    return adv_finish();
}
