/*
 * tests/e2e/adv_endptr.c: issue 10, class 15 (one-past-the-end pointers).
 * A graph of 128 range_sum(begin, end, out) nodes splits a 1.5 MiB input
 * into 128 ranges [begin, end); the program rotates the input among three
 * buffers with cuGraphExecKernelNodeSetParams. The last range's `end` is
 * one past the end of the buffer: not inside the allocation, yet a pointer
 * of it, which must be translated exactly as its `begin` is (or the buffer
 * not aliased). range_sum answers an impossible range (end < begin, or
 * longer than any buffer) with a marker instead of reading past it.
 *
 * Checks: the 128 sums after every step equal the host's.
 * Usage: adv_endptr [STEPS]  (default 10)
 */
#include "adv_common.h"

#define WORDS (384u * 1024u)        /* 1.5 MiB */
#define NODES 128u
#define CHUNK (WORDS / NODES)
#define INPUTS 3

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    CUcontext ctx;
    CUmodule mod;
    CUstream s;
    CUdeviceptr in[INPUTS], out;
    adv_open(&ctx, &mod);
    CUfunction f = adv_fn(mod, "range_sum");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&out, NODES * 8));
    uint32_t *h = malloc(WORDS * 4);
    uint64_t want[INPUTS][NODES];
    if (!h) return 2;
    for (int k = 0; k < INPUTS; k++) {
        for (uint32_t i = 0; i < WORDS; i++) h[i] = (uint32_t)k * 0x10001u + i * 2654435761u;
        for (uint32_t j = 0; j < NODES; j++) {
            want[k][j] = 0;
            for (uint32_t i = 0; i < CHUNK; i++) want[k][j] += h[j * CHUNK + i];
        }
        MUST(cuMemAlloc(&in[k], WORDS * 4));
        MUST(cuMemcpyHtoD(in[k], h, WORDS * 4));
    }
    free(h);

    CUgraph g;
    CUgraphExec exec;
    CUgraphNode nodes[NODES];
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (uint32_t j = 0; j < NODES; j++) {
        CUdeviceptr b = in[0] + (CUdeviceptr)j * CHUNK * 4, e = b + CHUNK * 4, o = out + j * 8;
        void *args[] = { &b, &e, &o };
        MUST(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    }
    MUST(cuStreamEndCapture(s, &g));
    adv_chain_nodes(g, nodes, NODES);
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));

    int good = 0;
    uint64_t last = 0;
    for (int st = 0; st < steps; st++) {
        int k = st % INPUTS;
        for (uint32_t j = 0; j < NODES; j++) {
            CUdeviceptr b = in[k] + (CUdeviceptr)j * CHUNK * 4, e = b + CHUNK * 4, o = out + j * 8;
            void *args[] = { &b, &e, &o };
            ADV_SET_KERNEL(exec, nodes[j], f, args);
        }
        R(cuGraphLaunch(exec, s));
        R(cuStreamSynchronize(s));
        uint64_t got[NODES];
        if (R(cuMemcpyDtoH(got, out, sizeof got)) == CUDA_SUCCESS) {
            good += memcmp(got, want[k], sizeof got) == 0;
            last = got[NODES - 1];
        }
    }
    adv_check("steps whose 128 range sums are right", good == steps, "%d of %d", good, steps);
    adv_check("last range (its end one past the buffer)",
              last == want[(steps - 1) % INPUTS][NODES - 1], "%016llx", (unsigned long long)last);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    for (int k = 0; k < INPUTS; k++) R(cuMemFree(in[k]));
    R(cuMemFree(out));
    R(cuStreamDestroy(s));
    return adv_finish();
}
