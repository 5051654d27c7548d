/*
 * tests/e2e/adv_teardown.c: issue 10, class 13 (context teardown). A
 * context's execs, streams, events and memory go with it; a program may
 * tear a context down with all of that still alive. Here the program runs
 * an exec of 128 kernel nodes over rotating 1 MiB inputs long enough for
 * the library's generations (and, where it aliases, slots) to exist, then,
 * without destroying anything:
 *   primary_reset  cuDevicePrimaryCtxReset;
 *   ctx_destroy    (the exec lives in a context of cuCtxCreate)
 *                  cuCtxDestroy.
 * Afterwards it starts again in a fresh context (module, buffers, stream,
 * a captured graph, launches over rotating inputs again) and checks the
 * results, so whatever the library kept of the dead context must not get in
 * the way. The runner also checks that the report counts the dead
 * context's exec as destroyed.
 *
 * Checks: the accumulator before the teardown and after the restart.
 * Usage: adv_teardown primary_reset|ctx_destroy
 */
#include "adv_common.h"

#define WORDS (256u * 1024u)        /* 1 MiB */
#define NODES 128u
#define CHUNK (WORDS / NODES)
#define INPUTS 3
#define STEPS 10

static uint32_t *hin, *model;

/* One round in the current context: module, inputs, accumulator, an exec
 * whose nodes are pointed at input (step % INPUTS) each step; checks the
 * accumulator. Frees nothing when `keep` (the teardown does). */
static void round_in_context(const char *label, int keep)
{
    CUmodule mod;
    CUstream s;
    CUdeviceptr in[INPUTS], acc;
    char path[PATH_MAX + 64];
    adv_path("adv_kernels.so", path, sizeof path);
    MUST(cuModuleLoad(&mod, path));
    CUfunction mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&acc, WORDS * 4));
    MUST(cuMemsetD32(acc, 1, WORDS));
    for (int k = 0; k < INPUTS; k++) {
        MUST(cuMemAlloc(&in[k], WORDS * 4));
        MUST(cuMemcpyHtoD(in[k], hin + (size_t)k * WORDS, WORDS * 4));
    }
    for (uint32_t i = 0; i < WORDS; i++) model[i] = 1;

    CUgraph g;
    CUgraphExec exec;
    CUgraphNode nodes[NODES];
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (uint32_t j = 0; j < NODES; j++) {
        CUdeviceptr a = in[0] + (CUdeviceptr)j * CHUNK * 4, b = acc + (CUdeviceptr)j * CHUNK * 4;
        uint64_t n = CHUNK;
        void *args[] = { &a, &b, &n };
        MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    }
    MUST(cuStreamEndCapture(s, &g));
    adv_chain_nodes(g, nodes, NODES);
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    for (int st = 0; st < STEPS; st++) {
        int k = st % INPUTS;
        for (uint32_t j = 0; j < NODES; j++) {
            CUdeviceptr a = in[k] + (CUdeviceptr)j * CHUNK * 4, b = acc + (CUdeviceptr)j * CHUNK * 4;
            uint64_t n = CHUNK;
            void *args[] = { &a, &b, &n };
            ADV_SET_KERNEL(exec, nodes[j], mad, args);
        }
        R(cuGraphLaunch(exec, s));
        for (uint32_t i = 0; i < WORDS; i++) model[i] = model[i] * 3u + hin[(size_t)k * WORDS + i];
    }
    R(cuStreamSynchronize(s));
    adv_check_words(label, acc, model, WORDS);
    if (keep) {
        /* a launch still queued when the context goes */
        R(cuGraphLaunch(exec, s));
        return;
    }
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    for (int k = 0; k < INPUTS; k++) R(cuMemFree(in[k]));
    R(cuMemFree(acc));
    R(cuStreamDestroy(s));
    R(cuModuleUnload(mod));
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "primary_reset", "ctx_destroy", NULL };
    int which = adv_case(argc, argv, cases);
    CUcontext primary, ctx;
    CUdevice dev;
    hin = malloc((size_t)INPUTS * WORDS * 4);
    model = malloc(WORDS * 4);
    if (!hin || !model) return 2;
    for (int k = 0; k < INPUTS; k++)
        for (uint32_t i = 0; i < WORDS; i++)
            hin[(size_t)k * WORDS + i] = (uint32_t)k * 0x01000193u + i * 0x9e3779b1u;
    adv_open(&primary, NULL);
    MUST(cuDeviceGet(&dev, 0));
    if (which == 0) {
        round_in_context("accumulator before cuDevicePrimaryCtxReset", 1);
        R(cuDevicePrimaryCtxReset(dev));
        MUST(cuDevicePrimaryCtxRetain(&primary, dev));
        MUST(cuCtxSetCurrent(primary));
        round_in_context("accumulator in the new primary context", 0);
    } else {
        MUST(cuCtxCreate(&ctx, NULL, 0, dev));
        round_in_context("accumulator before cuCtxDestroy", 1);
        R(cuCtxDestroy(ctx));
        MUST(cuCtxSetCurrent(primary));
        round_in_context("accumulator in the primary context afterwards", 0);
    }
    free(hin);
    free(model);
    return adv_finish();
}
