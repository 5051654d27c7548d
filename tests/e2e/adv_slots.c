/*
 * tests/e2e/adv_slots.c: round 7, valid programs against the slots of
 * aliasing (STABLEGRAPH_ALIAS, core/slots.c): a slot maps a second time the
 * physical memory of the buffer an exec variant was last pointed at, and
 * keeps it mapped until the variant is pointed elsewhere or goes. Every case
 * runs on a 256 MiB device: a one-node exec (mad_u32) is pointed at three
 * 48 MiB inputs in turn (cuGraphExecKernelNodeSetParams, then cuGraphLaunch),
 * 9 steps, then:
 *   free_create   the inputs are freed while the exec lives on (as a program
 *                 keeps its graphs between phases); then the program's own
 *                 cuMemCreate of 224 MiB, which the device holds once the
 *                 inputs are gone (memory the library does not place: it
 *                 must give the inputs' physical memory back);
 *   free_pool     the same with cuMemAllocFromPoolAsync of 224 MiB from the
 *                 device's default pool, written and read back;
 *   free_realloc  the same with cuMemAlloc of 200 MiB (placed where the
 *                 inputs were: a control), which the exec then runs on;
 *   streams       the stream is held (cuStreamWaitValue32 on a host flag)
 *                 and the exec, pointed at one input, is launched on it and
 *                 on 9 more streams (the driver orders launches of one exec);
 *                 the flag is set, every stream synchronized; then the exec
 *                 is destroyed, the inputs freed, and cuMemCreate of 224 MiB
 *                 as in free_create.
 * Checks: the accumulator, the allocation (and the result on it).
 * Usage: adv_slots free_create|free_pool|free_realloc|streams
 */
#include "adv_common.h"

#define MIB ((size_t)1 << 20)
#define INPUTS 3
#define IN_BYTES (48 * MIB)
#define BIG_BYTES (200 * MIB)
#define OWN_BYTES (224 * MIB)
#define WORDS 1024u
#define STEPS 9
#define STREAMS 10

static CUfunction mad;
static CUstream s;
static CUdeviceptr in[INPUTS], acc;
static uint32_t model[WORDS], hin[INPUTS][WORDS];
static uint64_t n = WORDS;
static CUgraph g;
static CUgraphNode node;
static CUgraphExec exec;

/* Points the exec at input k; launches it on stream t. */
static void step(int k, CUstream t)
{
    void *args[] = { &in[k], &acc, &n };
    ADV_SET_KERNEL(exec, node, mad, args);
    R(cuGraphLaunch(exec, t));
    for (uint32_t i = 0; i < WORDS; i++) model[i] = model[i] * 3u + hin[k][i];
}

/* Launches on STREAMS streams behind a held first one, then releases. */
static void many_streams(void)
{
    CUstream t[STREAMS];
    CUdeviceptr dflag;
    volatile uint32_t *flag;
    MUST(cuMemHostAlloc((void **)&flag, 4, CU_MEMHOSTALLOC_DEVICEMAP));
    *flag = 0;
    MUST(cuMemHostGetDevicePointer(&dflag, (void *)flag, 0));
    t[0] = s;
    for (int i = 1; i < STREAMS; i++) MUST(cuStreamCreate(&t[i], CU_STREAM_NON_BLOCKING));
    R(cuStreamWaitValue32(s, dflag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    for (int i = 0; i < STREAMS; i++) step(1, t[i]);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);   /* the emulated driver polls it atomically */
    for (int i = 0; i < STREAMS; i++) R(cuStreamSynchronize(t[i]));
    adv_check_words("accumulator after the launches on 10 streams", acc, model, WORDS);
    for (int i = 1; i < STREAMS; i++) R(cuStreamDestroy(t[i]));
    R(cuMemFreeHost((void *)flag));
    R(cuGraphExecDestroy(exec));
    exec = NULL;
}

/* The program's own VMM allocation of OWN_BYTES. */
static void own_create(void)
{
    CUdevice dev;
    MUST(cuCtxGetDevice(&dev));
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, dev } };
    CUmemGenericAllocationHandle h;
    CUresult r = R(cuMemCreate(&h, OWN_BYTES, &prop, 0));
    adv_check("own cuMemCreate of 224 MiB after freeing the inputs", r == CUDA_SUCCESS, "%s",
              adv_err(r));
    if (r == CUDA_SUCCESS) R(cuMemRelease(h));
}

/* OWN_BYTES from the default pool, written and read back. */
static void pool_alloc(void)
{
    CUdevice dev;
    CUmemoryPool pool;
    CUdeviceptr q = 0;
    MUST(cuCtxGetDevice(&dev));
    MUST(cuDeviceGetDefaultMemPool(&pool, dev));
    CUresult r = R(cuMemAllocFromPoolAsync(&q, OWN_BYTES, pool, s));
    uint32_t got[2] = { 0, 0 };
    if (r == CUDA_SUCCESS) {
        R(cuMemsetD32Async(q, 77, OWN_BYTES / 4, s));
        R(cuMemcpyDtoHAsync(&got[0], q, 4, s));
        R(cuMemcpyDtoHAsync(&got[1], q + OWN_BYTES - 4, 4, s));
        R(cuMemFreeAsync(q, s));
        R(cuStreamSynchronize(s));
    }
    adv_check("pool allocation of 224 MiB after freeing the inputs",
              r == CUDA_SUCCESS && got[0] == 77 && got[1] == 77, "%s", adv_err(r));
}

/* cuMemAlloc of BIG_BYTES; the exec runs on its last words. */
static void realloc_big(void)
{
    CUdeviceptr big = 0;
    CUresult r = R(cuMemAlloc(&big, BIG_BYTES));
    adv_check("200 MiB allocated after freeing the inputs", r == CUDA_SUCCESS, "%s", adv_err(r));
    if (r != CUDA_SUCCESS) return;
    uint32_t w[WORDS];
    for (uint32_t i = 0; i < WORDS; i++) w[i] = i * 7u;
    CUdeviceptr tail = big + BIG_BYTES - WORDS * 4;
    R(cuMemcpyHtoD(tail, w, WORDS * 4));
    void *args[] = { &tail, &acc, &n };
    ADV_SET_KERNEL(exec, node, mad, args);
    R(cuGraphLaunch(exec, s));
    R(cuStreamSynchronize(s));
    for (uint32_t i = 0; i < WORDS; i++) model[i] = model[i] * 3u + w[i];
    adv_check_words("accumulator after a launch on the new buffer", acc, model, WORDS);
    R(cuMemFree(big));
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "free_create", "free_pool", "free_realloc", "streams",
                                         NULL };
    int which = adv_case(argc, argv, cases);
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&acc, WORDS * 4));
    MUST(cuMemsetD32(acc, 1, WORDS));
    for (uint32_t i = 0; i < WORDS; i++) model[i] = 1;
    for (int k = 0; k < INPUTS; k++) {
        MUST(cuMemAlloc(&in[k], IN_BYTES));
        for (uint32_t i = 0; i < WORDS; i++)
            hin[k][i] = (uint32_t)k * 0x01000193u + i * 0x9e3779b1u;
        MUST(cuMemcpyHtoD(in[k], hin[k], sizeof hin[k]));
    }
    void *args0[] = { &in[0], &acc, &n };
    exec = adv_one_node_exec(s, mad, args0, &g, &node);
    for (int st = 0; st < STEPS; st++) step(st % INPUTS, s);
    R(cuStreamSynchronize(s));
    adv_check_words("accumulator after the steps", acc, model, WORDS);

    if (which == 3) many_streams();
    for (int k = 0; k < INPUTS; k++) R(cuMemFree(in[k]));
    switch (which) {
    case 1: pool_alloc(); break;
    case 2: realloc_big(); break;
    default: own_create(); break;
    }
    if (exec) R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    R(cuMemFree(acc));
    R(cuStreamDestroy(s));
    return adv_finish();
}
