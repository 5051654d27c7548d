/*
 * tests/e2e/adv_hold.c: issue 10, class 5 (a hang inside cuGraphLaunch),
 * and the same trap in other calls that the driver never makes wait.
 *
 * A graph of 128 kernel nodes folds one 1 MiB input into a 1 MiB
 * accumulator (node j: acc[chunk j] = acc[chunk j] * 3 + in[chunk j]). After
 * a few synchronous warm-up steps (the library's profiling), the program
 * holds its stream with cuStreamWaitValue32 on a flag in pinned host memory,
 * then, without waiting for anything, does the case's work and only then
 * sets the flag:
 *   launches  queues 10 launches with 10 different inputs (more than the
 *             library keeps generations): choosing where to launch must not
 *             wait for the held work (the launches are the program's own
 *             to order);
 *   destroy   queues 2 launches, then cuGraphExecDestroy and cuGraphDestroy
 *             (the driver releases the exec when its launches are done);
 *   demote    queues 2 launches, then updates the exec with a graph of
 *             other launch dimensions (cuGraphExecUpdate: a change the
 *             library cannot serve from variants) and queues one more.
 * A library that waits on the host for the held work hangs (every run is
 * under a timeout).
 *
 * Checks: the accumulator equals the host's model.
 * Usage: adv_hold launches|destroy|demote
 */
#include "adv_common.h"

#define WORDS (256u * 1024u)        /* 1 MiB */
#define NODES 128u
#define CHUNK (WORDS / NODES)
#define INPUTS 10
#define WARMUP 5

static CUfunction f_mad;
static CUdeviceptr acc;

/* Records the NODES nodes on s (capturing) for input `in`; grid x of every
 * node is `grid` (the kernel runs the whole launch once, whatever the grid). */
static void record(CUstream s, CUdeviceptr in, unsigned grid)
{
    for (uint32_t j = 0; j < NODES; j++) {
        CUdeviceptr a = in + (CUdeviceptr)j * CHUNK * 4, b = acc + (CUdeviceptr)j * CHUNK * 4;
        uint64_t n = CHUNK;
        void *args[] = { &a, &b, &n };
        R(cuLaunchKernel(f_mad, grid, 1, 1, 1, 1, 1, 0, s, args, NULL));
    }
}

/* Points every node of exec (nodes[]) at input `in`. */
static void point_at(CUgraphExec exec, const CUgraphNode *nodes, CUdeviceptr in)
{
    for (uint32_t j = 0; j < NODES; j++) {
        CUdeviceptr a = in + (CUdeviceptr)j * CHUNK * 4, b = acc + (CUdeviceptr)j * CHUNK * 4;
        uint64_t n = CHUNK;
        void *args[] = { &a, &b, &n };
        ADV_SET_KERNEL(exec, nodes[j], f_mad, args);
    }
}

static void model_step(uint32_t *model, const uint32_t *in)
{
    for (uint32_t i = 0; i < WORDS; i++) model[i] = model[i] * 3u + in[i];
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "launches", "destroy", "demote", NULL };
    int which = adv_case(argc, argv, cases);
    CUcontext ctx;
    CUmodule mod;
    CUstream s;
    CUdeviceptr in[INPUTS], dflag;
    adv_open(&ctx, &mod);
    f_mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&acc, WORDS * 4));
    MUST(cuMemsetD32(acc, 1, WORDS));
    uint32_t *hin = malloc((size_t)INPUTS * WORDS * 4), *model = malloc(WORDS * 4);
    if (!hin || !model) return 2;
    for (int k = 0; k < INPUTS; k++) {
        MUST(cuMemAlloc(&in[k], WORDS * 4));
        for (uint32_t i = 0; i < WORDS; i++)
            hin[(size_t)k * WORDS + i] = (uint32_t)k * 0x01000193u + i * 0x9e3779b1u;
        MUST(cuMemcpyHtoD(in[k], hin + (size_t)k * WORDS, WORDS * 4));
    }
    for (uint32_t i = 0; i < WORDS; i++) model[i] = 1;
    volatile uint32_t *flag;
    MUST(cuMemHostAlloc((void **)&flag, 4, CU_MEMHOSTALLOC_DEVICEMAP));
    *flag = 0;
    MUST(cuMemHostGetDevicePointer(&dflag, (void *)flag, 0));

    CUgraph g;
    CUgraphExec exec;
    CUgraphNode nodes[NODES];
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    record(s, in[0], 1);
    MUST(cuStreamEndCapture(s, &g));
    adv_chain_nodes(g, nodes, NODES);
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));

    /* Warm-up: the library profiles these launches and decides. */
    for (int st = 0; st < WARMUP; st++) {
        int k = st % INPUTS;
        point_at(exec, nodes, in[k]);
        R(cuGraphLaunch(exec, s));
        R(cuStreamSynchronize(s));
        model_step(model, hin + (size_t)k * WORDS);
    }

    /* Hold the stream on the host flag; queue; release. */
    R(cuStreamWaitValue32(s, dflag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    int queued = which == 0 ? INPUTS : 2;
    for (int q = 0; q < queued; q++) {
        int k = (WARMUP + q) % INPUTS;
        point_at(exec, nodes, in[k]);
        R(cuGraphLaunch(exec, s));
        model_step(model, hin + (size_t)k * WORDS);
    }
    if (which == 1) {
        R(cuGraphExecDestroy(exec));
        R(cuGraphDestroy(g));
    } else if (which == 2) {
        CUgraph g2;
        CUgraphExecUpdateResultInfo info;
        CUstream cs;
        MUST(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
        R(cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
        record(cs, in[3], 2);
        R(cuStreamEndCapture(cs, &g2));
        R(cuGraphExecUpdate(exec, g2, &info));
        R(cuGraphLaunch(exec, s));
        model_step(model, hin + (size_t)3 * WORDS);
        R(cuGraphDestroy(g2));
        R(cuStreamDestroy(cs));
    }
    printf("queued behind the flag: released\n");
    fflush(stdout);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);   /* the emulated driver polls it atomically */
    R(cuStreamSynchronize(s));
    adv_check_words("accumulator", acc, model, WORDS);
    if (which != 1) {
        R(cuGraphExecDestroy(exec));
        R(cuGraphDestroy(g));
    }
    for (int k = 0; k < INPUTS; k++) R(cuMemFree(in[k]));
    R(cuMemFree(acc));
    R(cuMemFreeHost((void *)flag));
    R(cuStreamDestroy(s));
    free(hin);
    free(model);
    return adv_finish();
}
