/*
 * tests/e2e/adv_nodes.c: issue 10, class 11 (node parameters the library
 * cannot read). Each step the program re-captures a graph of a memset node,
 * a memcpy node and two kernel nodes whose operands rotate among three
 * buffer sets, and updates its exec with cuGraphExecUpdate:
 *   memset  scratch[k] = 100                (cuMemsetD32Async)
 *   memcpy  out = in[k]                     (cuMemcpyDtoDAsync)
 *   kernel  acc = acc * 3 + out             (mad_u32)
 *   kernel  acc = acc * 3 + scratch[k]      (mad_u32)
 * The runner also runs it with the driver's cuGraphMemcpyNodeGetParams and
 * cuGraphMemsetNodeGetParams failing (CUDAEMU_FAIL): the program never calls
 * them, so its results must not change; a library that cannot read a node
 * must forward, never assume "unchanged".
 *
 * Checks: acc after every step equals the host's model.
 * Usage: adv_nodes [STEPS]  (default 12)
 */
#include "adv_common.h"

#define N 1024u

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 12;
    CUcontext ctx;
    CUmodule mod;
    CUstream s;
    CUdeviceptr in[3], scratch[3], out, acc;
    adv_open(&ctx, &mod);
    CUfunction mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint32_t hin[3][N], model[N];
    for (int k = 0; k < 3; k++) {
        MUST(cuMemAlloc(&in[k], N * 4));
        MUST(cuMemAlloc(&scratch[k], N * 4));
        for (uint32_t i = 0; i < N; i++) hin[k][i] = (uint32_t)k * 0x3000u + 11u * i;
        MUST(cuMemcpyHtoD(in[k], hin[k], sizeof hin[k]));
        MUST(cuMemsetD32(scratch[k], 0, N));
    }
    MUST(cuMemAlloc(&out, N * 4));
    MUST(cuMemAlloc(&acc, N * 4));
    MUST(cuMemsetD32(acc, 0, N));
    for (uint32_t i = 0; i < N; i++) model[i] = 0;

    CUgraphExec exec = NULL;
    int good = 0;
    for (int st = 0; st < steps; st++) {
        int k = st % 3;
        uint64_t n = N;
        CUgraph g;
        R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        R(cuMemsetD32Async(scratch[k], 100u, N, s));
        R(cuMemcpyDtoDAsync(out, in[k], N * 4, s));
        ADV_LAUNCH(mad, s, &out, &acc, &n);
        ADV_LAUNCH(mad, s, &scratch[k], &acc, &n);
        R(cuStreamEndCapture(s, &g));
        if (!exec) {
            R(cuGraphInstantiateWithFlags(&exec, g, 0));
        } else {
            CUgraphExecUpdateResultInfo info;
            R(cuGraphExecUpdate(exec, g, &info));
        }
        R(cuGraphDestroy(g));
        R(cuGraphLaunch(exec, s));
        R(cuStreamSynchronize(s));
        for (uint32_t i = 0; i < N; i++)
            model[i] = (model[i] * 3u + hin[k][i]) * 3u + 100u;
        uint32_t *got = adv_read(acc, N);
        good += got && memcmp(got, model, sizeof model) == 0;
        free(got);
    }
    adv_check("steps with the step's memset and memcpy operands", good == steps, "%d of %d", good,
              steps);
    adv_check_words("accumulator", acc, model, N);
    R(cuGraphExecDestroy(exec));
    for (int k = 0; k < 3; k++) {
        R(cuMemFree(in[k]));
        R(cuMemFree(scratch[k]));
    }
    R(cuMemFree(out));
    R(cuMemFree(acc));
    R(cuStreamDestroy(s));
    return adv_finish();
}
