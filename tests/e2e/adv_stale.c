/*
 * tests/e2e/adv_stale.c: issue 10, class 8 (stale handles). The per-node
 * exec updates name a node of the graph the exec was instantiated from;
 * once that graph is destroyed its node handles are stale and the driver
 * refuses them (CUDA_ERROR_INVALID_VALUE), even when the parameters are the
 * exec's own. A library that answers an update without the driver must
 * not turn that error into success.
 *   same      instantiate, launch, cuGraphDestroy, then
 *             cuGraphExecKernelNodeSetParams with the parameters the exec
 *             already holds;
 *   changed   the node's input rotates among 3 buffers for 8 steps (the
 *             library's profiling and generations), then cuGraphDestroy,
 *             then an update to the next buffer of the rotation;
 *   foreign   (the control) a node of another, live graph.
 * After the updates the exec is launched and its output checked: a refused
 * update leaves the exec as it was.
 * Usage: adv_stale same|changed|foreign
 */
#include "adv_common.h"

#define N 512u

int main(int argc, char **argv)
{
    static const char *const cases[] = { "same", "changed", "foreign", NULL };
    int which = adv_case(argc, argv, cases);
    CUcontext ctx;
    CUmodule mod;
    CUstream s;
    CUdeviceptr in[3], out;
    adv_open(&ctx, &mod);
    CUfunction mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&out, N * 4));
    uint32_t hin[3][N], model[N];
    for (int k = 0; k < 3; k++) {
        MUST(cuMemAlloc(&in[k], N * 4));
        for (uint32_t i = 0; i < N; i++) hin[k][i] = (uint32_t)k * 1000u + i;
        MUST(cuMemcpyHtoD(in[k], hin[k], sizeof hin[k]));
    }
    for (uint32_t i = 0; i < N; i++) model[i] = 0;
    MUST(cuMemsetD32(out, 0, N));

    CUdeviceptr cur = in[0];
    uint64_t n = N;
    void *args[] = { &cur, &out, &n };
    CUgraph g, other = NULL;
    CUgraphNode node, onode;
    CUgraphExec exec = adv_one_node_exec(s, mad, args, &g, &node);
    int k = 0;
    int steps = which == 1 ? 8 : 1;
    for (int st = 0; st < steps; st++) {
        k = st % 3;
        cur = in[k];
        ADV_SET_KERNEL(exec, node, mad, args);
        R(cuGraphLaunch(exec, s));
        R(cuStreamSynchronize(s));
        for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + hin[k][i];
    }

    CUresult r;
    if (which == 2) {
        CUgraphExec oexec = adv_one_node_exec(s, mad, args, &other, &onode);
        R(cuGraphExecDestroy(oexec));
        r = ADV_SET_KERNEL(exec, onode, mad, args);
    } else {
        R(cuGraphDestroy(g));
        g = NULL;
        if (which == 1) cur = in[(k + 1) % 3];
        r = ADV_SET_KERNEL(exec, node, mad, args);
    }
    printf("update naming a node the exec does not have: %s\n", adv_err(r));
    /* What the exec holds now: the update's input if it was applied. */
    int applied_k = k;
    for (int j = 0; j < 3; j++)
        if (r == CUDA_SUCCESS && cur == in[j]) applied_k = j;
    R(cuGraphLaunch(exec, s));
    R(cuStreamSynchronize(s));
    for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + hin[applied_k][i];
    adv_check_words("output after the update", out, model, N);
    R(cuGraphExecDestroy(exec));
    if (g) R(cuGraphDestroy(g));
    if (other) R(cuGraphDestroy(other));
    for (int j = 0; j < 3; j++) R(cuMemFree(in[j]));
    R(cuMemFree(out));
    R(cuStreamDestroy(s));
    return adv_finish();
}
