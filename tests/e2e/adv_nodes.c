/*
 * tests/e2e/adv_nodes.c: issue 10, class 11 (node parameters the library
 * cannot read). The exec is a chain of a memset node, a memcpy node and two
 * kernel nodes:
 *   memset  scratch[m] = 100 + m            (cuMemsetD32Async)
 *   memcpy  out = in[m]                     (cuMemcpyDtoDAsync)
 *   kernel  acc = acc * 3 + out             (mad_u32)
 *   kernel  acc = acc * 3 + src             (mad_u32)
 * Each step points the last kernel at another of three `src` buffers
 * (cuGraphExecKernelNodeSetParams); at step 4 the program re-captures the
 * graph with m = 1 (other memset and memcpy operands) and updates the exec
 * with cuGraphExecUpdate; then the per-node updates go on.
 * The runner also runs it with the driver's cuGraphMemcpyNodeGetParams and
 * cuGraphMemsetNodeGetParams failing (CUDAEMU_FAIL): the program never calls
 * them, so its results must not change. A library that cannot read the
 * memset and memcpy nodes must forward, never assume "unchanged" (an exec
 * variant instantiated from the graph of instantiation time would run the
 * operands of m = 0 again).
 *
 * Checks: acc after every step, and both scratch buffers at the end.
 * Usage: adv_nodes [STEPS]  (default 14)
 */
#include "adv_common.h"

#define N 1024u
#define SWITCH 4

static CUfunction mad;
static CUstream s;
static CUdeviceptr in[2], scratch[2], src[3], out, acc;

/* Records the chain for memset/memcpy operands m and kernel source k. */
static void record(int m, int k)
{
    uint64_t n = N;
    R(cuMemsetD32Async(scratch[m], 100u + (uint32_t)m, N, s));
    R(cuMemcpyDtoDAsync(out, in[m], N * 4, s));
    ADV_LAUNCH(mad, s, &out, &acc, &n);
    ADV_LAUNCH(mad, s, &src[k], &acc, &n);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 14;
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint32_t hin[2][N], hsrc[3][N], model[N];
    for (int m = 0; m < 2; m++) {
        MUST(cuMemAlloc(&in[m], N * 4));
        MUST(cuMemAlloc(&scratch[m], N * 4));
        for (uint32_t i = 0; i < N; i++) hin[m][i] = (uint32_t)m * 0x3000u + 11u * i;
        MUST(cuMemcpyHtoD(in[m], hin[m], sizeof hin[m]));
        MUST(cuMemsetD32(scratch[m], 0, N));
    }
    for (int k = 0; k < 3; k++) {
        MUST(cuMemAlloc(&src[k], N * 4));
        for (uint32_t i = 0; i < N; i++) hsrc[k][i] = (uint32_t)k * 0x777u + 3u * i;
        MUST(cuMemcpyHtoD(src[k], hsrc[k], sizeof hsrc[k]));
    }
    MUST(cuMemAlloc(&out, N * 4));
    MUST(cuMemAlloc(&acc, N * 4));
    MUST(cuMemsetD32(acc, 0, N));
    for (uint32_t i = 0; i < N; i++) model[i] = 0;

    CUgraph g;
    CUgraphExec exec;
    CUgraphNode nodes[4];
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    record(0, 0);
    MUST(cuStreamEndCapture(s, &g));
    adv_chain_nodes(g, nodes, 4);
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));

    int good = 0, m = 0;
    for (int st = 0; st < steps; st++) {
        int k = st % 3;
        if (st == SWITCH) {
            CUgraph g2;
            CUgraphExecUpdateResultInfo info;
            m = 1;
            R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
            record(m, k);
            R(cuStreamEndCapture(s, &g2));
            R(cuGraphExecUpdate(exec, g2, &info));
            R(cuGraphDestroy(g2));
        } else {
            uint64_t n = N;
            void *args[] = { &src[k], &acc, &n };
            ADV_SET_KERNEL(exec, nodes[3], mad, args);
        }
        R(cuGraphLaunch(exec, s));
        R(cuStreamSynchronize(s));
        for (uint32_t i = 0; i < N; i++) model[i] = (model[i] * 3u + hin[m][i]) * 3u + hsrc[k][i];
        uint32_t *got = adv_read(acc, N);
        good += got && memcmp(got, model, sizeof model) == 0;
        free(got);
    }
    adv_check("steps with the exec's memset and memcpy operands", good == steps, "%d of %d", good,
              steps);
    adv_check_words("accumulator", acc, model, N);
    uint32_t want[N];
    for (int j = 0; j < 2; j++) {
        for (uint32_t i = 0; i < N; i++) want[i] = 100u + (uint32_t)j;
        adv_check_words(j ? "scratch 1 (memset from step 4 on)" : "scratch 0 (memset before)",
                        scratch[j], want, N);
    }
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    for (int j = 0; j < 2; j++) {
        R(cuMemFree(in[j]));
        R(cuMemFree(scratch[j]));
    }
    for (int j = 0; j < 3; j++) R(cuMemFree(src[j]));
    R(cuMemFree(out));
    R(cuMemFree(acc));
    R(cuStreamDestroy(s));
    return adv_finish();
}
