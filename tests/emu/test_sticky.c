/*
 * test_sticky.c: sticky errors of the emulated driver (docs/emulator.md,
 * "Sticky errors: a faulting kernel"). A kernel of mod_sticky.so calls
 * cudaemu_fault(code): the launch ends there, the work queued behind it does
 * not run (host functions are not called, stream callbacks get the error),
 * the synchronizing calls report the error, and from then on every entry
 * point that needs the context answers it; device queries and the context
 * stack still answer. CUDA_ERROR_ASSERT stands for its context until the
 * context's teardown; CUDA_ERROR_ILLEGAL_ADDRESS for the whole process (the
 * last case, since nothing recovers from it). Kernels: mod_sticky.so.
 */
#include <cuda.h>

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "emu_test.h"

static CUcontext ctx;
static CUmodule mod;
static CUdevice dev;
static CUfunction f_fault, f_fill;

static int gate;                    /* the host function hold() waits for it */
static int host_called;             /* marker() ran */
static CUresult cb_status = (CUresult)-1;

static void CUDA_CB hold(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&gate, __ATOMIC_ACQUIRE)) usleep(200);
}
static void CUDA_CB marker(void *arg) { (void)arg; __atomic_store_n(&host_called, 1, __ATOMIC_RELEASE); }
static void CUDA_CB callback(CUstream s, CUresult status, void *arg)
{
    (void)s, (void)arg;
    __atomic_store_n(&cb_status, status, __ATOMIC_RELEASE);
}

/* The primary context current and clean (after a reset) with the module. */
static void open_all(void)
{
    CHECK_CU(emu_test_open("mod_sticky.so", &ctx, &mod), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&f_fault, mod, "fault"), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&f_fill, mod, "fill_u32"), CUDA_SUCCESS);
}

static CUresult launch(CUfunction f, CUstream s, void **args)
{
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

TEST(setup) { open_all(); }

/* A plain launch faults with CUDA_ERROR_ASSERT behind a held host function:
 * everything queued after it returns CUDA_SUCCESS; once released, the
 * synchronization and every later call of the context report the error. */
TEST(assert_in_a_launch)
{
    CUstream s;
    CUevent e;
    CUdeviceptr p, q;
    int code = CUDA_ERROR_ASSERT;
    uint32_t v = 7;
    uint64_t n = 4;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&p, 16), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(p, 0, 4), CUDA_SUCCESS);
    q = p + 8;
    void *fa[] = { &p, &code };
    void *fi[] = { &q, &v, &n };
    n = 2;
    __atomic_store_n(&gate, 0, __ATOMIC_RELEASE);
    CHECK_CU(cuLaunchHostFunc(s, hold, NULL), CUDA_SUCCESS);
    CHECK_CU(launch(f_fault, s, fa), CUDA_SUCCESS);
    CHECK_CU(launch(f_fill, s, fi), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(e, s), CUDA_SUCCESS);
    CHECK_CU(cuLaunchHostFunc(s, marker, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamAddCallback(s, callback, NULL, 0), CUDA_SUCCESS);
    CHECK_CU(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_ERROR_ASSERT);
    volatile uint32_t *w = (uint32_t *)(uintptr_t)p;
    CHECK_EQ(w[0], 1u);             /* the kernel ran up to the fault */
    CHECK_EQ(w[1], 0u);             /* and not past it */
    CHECK_EQ(w[2], 0u);             /* the kernel behind it did not run */
    /* The synchronize may report the fault before the stream's worker has
     * run what follows it (the driver promises no order there): the
     * callback's status is awaited, not assumed (ThreadSanitizer saw the
     * read race with the callback's write). */
    for (int i = 0; i < 2000 && __atomic_load_n(&cb_status, __ATOMIC_ACQUIRE) == (CUresult)-1; i++)
        usleep(1000);
    CHECK_EQ(__atomic_load_n(&host_called, __ATOMIC_ACQUIRE), 0);
    CHECK_EQ((int)__atomic_load_n(&cb_status, __ATOMIC_ACQUIRE), (int)CUDA_ERROR_ASSERT);
    /* the context is unusable */
    CUdeviceptr r;
    size_t fr, tot;
    CUgraph g;
    CUstream s2;
    uint32_t h[4];
    CHECK_CU(cuMemAlloc(&r, 64), CUDA_ERROR_ASSERT);
    CHECK_CU(cuMemFree(p), CUDA_ERROR_ASSERT);
    CHECK_CU(cuMemAllocAsync(&r, 64, s), CUDA_ERROR_ASSERT);
    CHECK_CU(cuMemcpyDtoH(h, p, sizeof h), CUDA_ERROR_ASSERT);
    CHECK_CU(cuMemGetInfo(&fr, &tot), CUDA_ERROR_ASSERT);
    CHECK_CU(launch(f_fill, s, fi), CUDA_ERROR_ASSERT);
    CHECK_CU(cuEventQuery(e), CUDA_ERROR_ASSERT);
    CHECK_CU(cuEventSynchronize(e), CUDA_ERROR_ASSERT);
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_ASSERT);
    CHECK_CU(cuCtxSynchronize(), CUDA_ERROR_ASSERT);
    CHECK_CU(cuStreamCreate(&s2, 0), CUDA_ERROR_ASSERT);
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_ERROR_ASSERT);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ASSERT);
    /* what needs no usable context still answers */
    CUcontext cur = NULL;
    CUdevice d = -1;
    int attr = 0, ver = 0;
    const char *name = NULL;
    CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == ctx);
    CHECK_CU(cuCtxGetDevice(&d), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), CUDA_SUCCESS);
    CHECK_CU(cuDriverGetVersion(&ver), CUDA_SUCCESS);
    CHECK_CU(cuGetErrorName(CUDA_ERROR_ASSERT, &name), CUDA_SUCCESS);
    /* the way out of an assert: the context's teardown */
    CHECK_CU(cuDevicePrimaryCtxReset(dev), CUDA_SUCCESS);
    open_all();
    CHECK_CU(cuMemAlloc(&r, 64), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(r), CUDA_SUCCESS);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
}

/* A fault in the second of three kernel nodes ends the graph launch there. */
TEST(assert_in_a_graph)
{
    CUstream s;
    CUgraph g;
    CUgraphExec x;
    CUdeviceptr p;
    int code = CUDA_ERROR_ASSERT;
    uint32_t v1 = 5, v3 = 9;
    uint64_t n = 2;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&p, 32), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(p, 0, 8), CUDA_SUCCESS);
    CUdeviceptr a = p, b = p + 8, c = p + 16;
    void *k1[] = { &a, &v1, &n }, *k2[] = { &b, &code }, *k3[] = { &c, &v3, &n };
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(launch(f_fill, s, k1), CUDA_SUCCESS);
    CHECK_CU(launch(f_fault, s, k2), CUDA_SUCCESS);
    CHECK_CU(launch(f_fill, s, k3), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&x, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(x, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_ERROR_ASSERT);
    volatile uint32_t *w = (uint32_t *)(uintptr_t)p;
    CHECK(w[0] == 5 && w[1] == 5);  /* node 1 ran */
    CHECK(w[2] == 1 && w[3] == 0);  /* node 2 up to its fault */
    CHECK(w[4] == 0 && w[5] == 0);  /* node 3 did not run */
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphLaunch(x, s), CUDA_ERROR_ASSERT);
    CHECK_CU(cuGraphExecUpdate(x, g, &info), CUDA_ERROR_ASSERT);
    CHECK_CU(cuGraphExecDestroy(x), CUDA_ERROR_ASSERT);
    CHECK_CU(cuDevicePrimaryCtxReset(dev), CUDA_SUCCESS);
    open_all();
}

/* An assert poisons its own context only. */
TEST(assert_is_per_context)
{
    CUcontext other;
    CUdeviceptr p, r;
    int code = CUDA_ERROR_ASSERT;
    CHECK_CU(cuCtxCreate(&other, NULL, 0, dev), CUDA_SUCCESS);   /* pushed current */
    CHECK_CU(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&p, 16), CUDA_SUCCESS);
    void *fa[] = { &p, &code };
    CHECK_CU(launch(f_fault, NULL, fa), CUDA_SUCCESS);
    CHECK_CU(cuCtxSynchronize(), CUDA_ERROR_ASSERT);
    CHECK_CU(cuCtxSetCurrent(other), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&r, 16), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(r), CUDA_SUCCESS);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_CU(cuCtxDestroy(other), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&r, 16), CUDA_ERROR_ASSERT);
    CHECK_CU(cuDevicePrimaryCtxReset(dev), CUDA_SUCCESS);
    open_all();
}

/* An illegal address leaves the process unusable: no teardown helps, no
 * other context works. (Last: nothing runs after it.) */
TEST(illegal_address_is_per_process)
{
    CUdeviceptr p, r;
    CUcontext other;
    int code = CUDA_ERROR_ILLEGAL_ADDRESS;
    CHECK_CU(cuMemAlloc(&p, 16), CUDA_SUCCESS);
    void *fa[] = { &p, &code };
    CHECK_CU(launch(f_fault, NULL, fa), CUDA_SUCCESS);
    CHECK_CU(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_CU(cuMemAlloc(&r, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_CU(cuDevicePrimaryCtxReset(dev), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&r, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_CU(cuCtxCreate(&other, NULL, 0, dev), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&r, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_EQ(emu_test_violations(), 0);
}

int main(void)
{
    emu_test_stderr_begin();
    RUN(setup);
    RUN(assert_in_a_launch);
    RUN(assert_in_a_graph);
    RUN(assert_is_per_context);
    RUN(illegal_address_is_per_process);
    return check_done();
}
