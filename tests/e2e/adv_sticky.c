/*
 * tests/e2e/adv_sticky.c: a kernel faults under the library (round 16).
 * A job runs 8 steps: a temporary from cuMemAllocAsync (placed, the same
 * address each step), a re-capture of fill(t), mad(in_k, acc), mad(t, acc),
 * fault_if(flag) with the input rotating among three buffers (updates the
 * library skips or serves with exec variants), the temporary freed by
 * cuMemFreeAsync. Then the stream is held for the host, and behind it a
 * kernel faults (emulator: cudaemu_fault, a sticky error), with a launch,
 * frees and allocations queued around it. Once released, the program calls
 * a list of entry points and prints each CUresult (adv_common.h): with the
 * library every call must answer what the driver answers (the sticky error,
 * from the driver: never a success the library made up, never another
 * code), nothing may hang, and the process must exit as without it.
 *   graph    the fault in a node of the graph launch (CUDA_ERROR_ASSERT)
 *   launch   the fault in a plain cuLaunchKernel after the graph launches
 *   illegal  the graph's fault is CUDA_ERROR_ILLEGAL_ADDRESS (the whole
 *            process is unusable: cuDevicePrimaryCtxReset does not help)
 *   reset    the graph's fault (CUDA_ERROR_ASSERT), the list, then
 *            cuDevicePrimaryCtxReset and the whole job again in the new
 *            context: the library must place and skip again, and compute
 *            right
 *   free_first  a plain launch faults (CUDA_ERROR_ASSERT) after writing a
 *            note in managed memory; the host polls the note (no driver
 *            call), waits 200 ms for the fault to stand, and its first
 *            call is the cuMemFreeAsync of a placed block: the library's
 *            own event record meets the fault first (before the fix it
 *            quarantined the block and answered CUDA_SUCCESS), then the
 *            list
 * Usage: adv_sticky CASE
 */
#include "adv_common.h"

#define N 1024                      /* words per buffer */
#define STEPS 8

static CUcontext ctx;
static CUmodule mod;
static CUdevice dev;

typedef struct job {
    CUstream s;
    CUdeviceptr in[3], acc, flag, one, keep, keep_async;
    CUfunction fill, mad, fault_if, fault_note;
    CUgraph g;
    CUgraphExec exec;
    uint32_t want[N];
    int code;
} job;

/* Captures fill(t), mad(in_k, acc), mad(t, acc), fault_if(flag, code) on s. */
static CUresult capture(job *j, CUdeviceptr t, int k, CUgraph *g)
{
    uint32_t five = 5;
    uint64_t n = N;
    void *a1[] = { &t, &five, &n }, *a2[] = { &j->in[k], &j->acc, &n }, *a3[] = { &t, &j->acc, &n };
    void *a4[] = { &j->flag, &j->code };
    CUresult r = R(cuStreamBeginCapture(j->s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    if (r != CUDA_SUCCESS) return r;
    R(cuLaunchKernel(j->fill, 1, 1, 1, 1, 1, 1, 0, j->s, a1, NULL));
    R(cuLaunchKernel(j->mad, 1, 1, 1, 1, 1, 1, 0, j->s, a2, NULL));
    R(cuLaunchKernel(j->mad, 1, 1, 1, 1, 1, 1, 0, j->s, a3, NULL));
    R(cuLaunchKernel(j->fault_if, 1, 1, 1, 1, 1, 1, 0, j->s, a4, NULL));
    return R(cuStreamEndCapture(j->s, g));
}

/* One step k: a temporary, a re-capture, an update (or the instantiation),
 * a launch, the temporary freed in stream order. want[] follows. */
static void step(job *j, int k)
{
    CUdeviceptr t;
    CUgraph g;
    MUST(cuMemAllocAsync(&t, N * 4, j->s));
    MUST(capture(j, t, k % 3, &g));
    if (!j->exec) {
        MUST(cuGraphInstantiateWithFlags(&j->exec, g, 0));
    } else {
        CUgraphExecUpdateResultInfo info;
        MUST(cuGraphExecUpdate(j->exec, g, &info));
        MUST(cuGraphDestroy(j->g));
    }
    j->g = g;
    MUST(cuGraphLaunch(j->exec, j->s));
    MUST(cuMemFreeAsync(t, j->s));
    for (uint32_t i = 0; i < N; i++)
        j->want[i] = (j->want[i] * 3u + (i * 7u + (uint32_t)(k % 3) * 0x100u)) * 3u + 5u + i;
}

/* The buffers, the kernels and STEPS steps; a check of the result. */
static void run_job(job *j, int code)
{
    uint32_t h[N];
    memset(j, 0, sizeof *j);
    j->code = code;
    j->fill = adv_fn(mod, "fill_u32");
    j->mad = adv_fn(mod, "mad_u32");
    j->fault_if = adv_fn(mod, "fault_if");
    j->fault_note = adv_fn(mod, "fault_note");
    MUST(cuStreamCreate(&j->s, CU_STREAM_NON_BLOCKING));
    for (int k = 0; k < 3; k++) {
        for (uint32_t i = 0; i < N; i++) h[i] = i * 7u + (uint32_t)k * 0x100u;
        MUST(cuMemAlloc(&j->in[k], N * 4));
        MUST(cuMemcpyHtoD(j->in[k], h, N * 4));
    }
    MUST(cuMemAlloc(&j->acc, N * 4));
    MUST(cuMemsetD32(j->acc, 0, N));
    MUST(cuMemAlloc(&j->flag, 4));
    MUST(cuMemsetD32(j->flag, 0, 1));
    MUST(cuMemAlloc(&j->one, 4));
    MUST(cuMemsetD32(j->one, 1, 1));
    for (int k = 0; k < STEPS; k++) step(j, k);
    MUST(cuStreamSynchronize(j->s));
    adv_check_words("job", j->acc, j->want, N);
}

/* The fault: the stream held for the host; behind the hold, a launch whose
 * kernel faults (graph: the flag set, then the graph launched; launch: a
 * plain fault_if launch after it, or fault_note(note) if note is set), a
 * temporary freed in stream order, more launches, an event; blocks
 * allocated and kept. Then the release. */
static void fault(job *j, int in_graph, CUdeviceptr note, CUevent *e)
{
    CUdeviceptr t;
    CUgraph g;
    CUgraphExecUpdateResultInfo info;
    MUST(cuMemAlloc(&j->keep, N * 4));
    MUST(cuMemAllocAsync(&j->keep_async, N * 4, j->s));
    MUST(cuEventCreate(e, CU_EVENT_DISABLE_TIMING));
    MUST(cuLaunchHostFunc(j->s, adv_gate_wait, NULL));
    if (in_graph) MUST(cuMemsetD32Async(j->flag, 1, 1, j->s));
    MUST(cuMemAllocAsync(&t, N * 4, j->s));
    MUST(capture(j, t, STEPS % 3, &g));
    MUST(cuGraphExecUpdate(j->exec, g, &info));
    MUST(cuGraphDestroy(j->g));
    j->g = g;
    MUST(cuGraphLaunch(j->exec, j->s));
    if (!in_graph) {
        void *a[] = { note ? &note : &j->one, &j->code };
        MUST(cuLaunchKernel(note ? j->fault_note : j->fault_if, 1, 1, 1, 1, 1, 1, 0, j->s, a, NULL));
    }
    MUST(cuMemFreeAsync(t, j->s));
    MUST(cuGraphLaunch(j->exec, j->s));
    MUST(cuEventRecord(*e, j->s));
    MUST(cuGraphLaunch(j->exec, j->s));
    adv_release();
}

/* Every call after the fault, each CUresult printed by R(). */
static void after(job *j, CUevent e)
{
    CUdeviceptr p = 0, base = 0;
    size_t fr = 0, total = 0, size = 0;
    unsigned mt = 0;
    uint32_t h[4];
    CUgraph g2 = NULL;
    CUgraphNode nodes[4];
    size_t nn = 4;
    CUgraphExecUpdateResultInfo info;
    R(cuStreamSynchronize(j->s));
    R(cuEventQuery(e));
    R(cuEventSynchronize(e));
    R(cuStreamQuery(j->s));
    R(cuMemAlloc(&p, N * 4));
    R(cuMemAlloc(&p, 64));
    R(cuMemFree(j->keep));
    R(cuMemAllocAsync(&p, N * 4, j->s));
    R(cuMemFreeAsync(j->keep_async, j->s));
    R(cuMemGetInfo(&fr, &total));
    R(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, j->in[0]));
    R(cuMemGetAddressRange(&base, &size, j->in[0] + 4));
    R(cuMemcpyDtoH(h, j->acc, sizeof h));
    R(cuMemsetD32(j->acc, 0, 4));
    R(cuGraphGetNodes(j->g, nodes, &nn));
    R(cuGraphExecUpdate(j->exec, j->g, &info));
    CUDA_KERNEL_NODE_PARAMS kp;     /* the exec's own parameters again */
    if (nn == 4 && R(cuGraphKernelNodeGetParams(nodes[0], &kp)) == CUDA_SUCCESS)
        R(cuGraphExecKernelNodeSetParams(j->exec, nodes[0], &kp));
    R(cuGraphLaunch(j->exec, j->s));
    R(cuStreamBeginCapture(j->s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuStreamEndCapture(j->s, &g2));
    R(cuStreamSynchronize(j->s));
    R(cuCtxSynchronize());
    R(cuGraphExecDestroy(j->exec));
    R(cuGraphDestroy(j->g));
    R(cuEventDestroy(e));
    R(cuStreamDestroy(j->s));
    CUcontext cur = NULL;
    CUdevice d = -1;
    R(cuCtxGetCurrent(&cur));
    R(cuCtxGetDevice(&d));
    adv_check("current context", cur == ctx && d == dev, "unchanged");
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "graph", "launch", "illegal", "reset", "free_first", NULL };
    int c = adv_case(argc, argv, names);
    static job j;
    CUevent e;
    adv_open(&ctx, &mod);
    MUST(cuDeviceGet(&dev, 0));
    run_job(&j, c == 2 ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_ERROR_ASSERT);
    CUdeviceptr note = 0;
    if (c == 4) {
        MUST(cuMemAllocManaged(&note, 4, CU_MEM_ATTACH_GLOBAL));
        *(volatile uint32_t *)(uintptr_t)note = 0;
    }
    fault(&j, c != 1 && c != 4, note, &e);
    if (c == 4) {
        while (!__atomic_load_n((uint32_t *)(uintptr_t)note, __ATOMIC_ACQUIRE)) adv_sleep_us(1000);
        adv_sleep_us(200000);
        R(cuMemFreeAsync(j.keep_async, j.s));
    }
    after(&j, e);
    if (c == 2 || c == 3) {
        CUdeviceptr p;
        R(cuDevicePrimaryCtxReset(dev));
        R(cuDevicePrimaryCtxRetain(&ctx, dev));
        R(cuCtxSetCurrent(ctx));
        R(cuMemAlloc(&p, 64));
        if (c == 3) {
            char path[PATH_MAX + 64];
            adv_path("adv_kernels.so", path, sizeof path);
            MUST(cuModuleLoad(&mod, path));
            run_job(&j, CUDA_ERROR_ASSERT);
        }
    }
    return adv_finish();
}
