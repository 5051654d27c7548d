/*
 * test_order.c: orderings the emulated driver must keep.
 *
 *   - Launches of one graph exec on different streams (cuGraphLaunch: "Each
 *     launch is ordered behind both any previous work in hStream and any
 *     previous launches of hGraphExec"): a launch on s2 does not start before
 *     the previous launch on s1 finished, while s1 is held by a sleeping host
 *     function or by cuStreamWaitValue32 on a host flag.
 *   - cuStreamWaitValue32 / cuStreamWriteValue32 on pinned host memory
 *     (cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister) reached through
 *     cuMemHostGetDevicePointer: the stream blocks until the host writes.
 *
 * Every case runs twice: without CUDAEMU_KERNEL_DELAY_US, then (the program
 * re-executes itself) with CUDAEMU_KERNEL_DELAY_US=2000.
 */
#include "graph_util.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#define HOLD_US 150000

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void host_sleep(void *arg)
{
    (void)arg;
    usleep(HOLD_US);
}

/* An exec of one affine node on x; *node gets the node. */
static CUgraphExec affine_exec(CUgraph *g, CUgraphNode *node, CUdeviceptr x, uint32_t mul, uint32_t add)
{
    gu_args a;
    gu_kp_affine(&a, x, mul, add);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_affine, &a);
    CUgraphExec e = NULL;
    CHECK_CU(cuGraphCreate(g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddKernelNode(node, *g, NULL, 0, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, *g, 0), CUDA_SUCCESS);
    return e;
}

static void set_affine(CUgraphExec e, CUgraphNode node, CUdeviceptr x, uint32_t mul, uint32_t add)
{
    gu_args a;
    gu_kp_affine(&a, x, mul, add);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_affine, &a);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e, node, &kp), CUDA_SUCCESS);
}

/* s1: a host function sleeping HOLD_US, then launch 1 (x = x + 5); s2: launch
 * 2 (x = x * 3). Launch 2 waits for launch 1: x = (1 + 5) * 3 = 18, never
 * 1 * 3 + 5 = 8, and s2 cannot be done before the host function. */
TEST(exec_launch_waits_for_host_function)
{
    CUstream s1, s2;
    CHECK_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr x = gu_alloc();
    CHECK_CU(cuMemsetD32(x, 1, N_ELEMS), CUDA_SUCCESS);
    CUgraph g;
    CUgraphNode node;
    CUgraphExec e = affine_exec(&g, &node, x, 1, 5);
    double t0 = now_ms();
    CHECK_CU(cuLaunchHostFunc(s1, host_sleep, NULL), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s1), CUDA_SUCCESS);
    set_affine(e, node, x, 3, 0);
    CHECK_CU(cuGraphLaunch(e, s2), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s2), CUDA_SUCCESS);
    double waited = now_ms() - t0;
    CHECK(waited >= HOLD_US / 1000.0 * 0.9);
    CHECK_CU(cuStreamQuery(s1), CUDA_SUCCESS);       /* launch 2 done, so launch 1 was */
    CHECK(gu_all(x, 18));
    /* The same on the per-thread and legacy default streams. */
    CHECK_CU(cuMemsetD32(x, 1, N_ELEMS), CUDA_SUCCESS);
    set_affine(e, node, x, 1, 5);
    CHECK_CU(cuLaunchHostFunc(CU_STREAM_PER_THREAD, host_sleep, NULL), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    set_affine(e, node, x, 3, 0);
    CHECK_CU(cuGraphLaunch(e, s2), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s2), CUDA_SUCCESS);
    CHECK(gu_all(x, 18));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s1), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(x), CUDA_SUCCESS);
}

/* s1 waits on a host flag (pinned host memory); launch 2 on s2 does not run
 * until the host releases s1 and launch 1 ran. Ten launches alternate. */
TEST(exec_launch_waits_for_wait_value)
{
    CUstream s[2];
    CHECK_CU(cuStreamCreate(&s[0], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    uint32_t *flag = NULL;
    CUdeviceptr dflag = 0;
    CHECK_CU(cuMemHostAlloc((void **)&flag, 4096, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    CHECK_CU(cuMemHostGetDevicePointer(&dflag, flag, 0), CUDA_SUCCESS);
    __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
    CUdeviceptr x = gu_alloc();
    CHECK_CU(cuMemsetD32(x, 1, N_ELEMS), CUDA_SUCCESS);
    CUgraph g;
    CUgraphNode node;
    CUgraphExec e = affine_exec(&g, &node, x, 2, 0);
    CHECK_CU(cuStreamWaitValue32(s[0], dflag, 1, CU_STREAM_WAIT_VALUE_EQ), CUDA_SUCCESS);
    uint32_t want = 1;
    for (int i = 0; i < 10; i++) {
        uint32_t add = (uint32_t)i;
        set_affine(e, node, x, 2, add);
        CHECK_CU(cuGraphLaunch(e, s[i % 2]), CUDA_SUCCESS);
        want = want * 2 + add;
    }
    usleep(50000);
    CHECK_CU(cuStreamQuery(s[1]), CUDA_ERROR_NOT_READY);    /* held behind s[0]'s launch */
    CHECK(gu_all(x, 1));
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);            /* the host releases s[0] */
    CHECK_CU(cuStreamSynchronize(s[1]), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s[0]), CUDA_SUCCESS);
    CHECK(gu_all(x, want));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s[0]), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s[1]), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeHost(flag), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(x), CUDA_SUCCESS);
}

/* A stream waiting on a host flag blocks until the host writes it; a write
 * value to the host flag is seen by the host once the stream got there. */
static void wait_on_host_flag(uint32_t *flag, const char *what)
{
    CUstream s;
    CUdeviceptr d = 0, x = gu_alloc();
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemHostGetDevicePointer(&d, flag, 0), CUDA_SUCCESS);
    CHECK(d != 0);
    __atomic_store_n(&flag[0], 0, __ATOMIC_RELEASE);
    __atomic_store_n(&flag[1], 0, __ATOMIC_RELEASE);
    CHECK_CU(cuMemsetD32(x, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitValue32(s, d, 3, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(x, 9, N_ELEMS, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamWriteValue32(s, d + 4, 77, CU_STREAM_WRITE_VALUE_DEFAULT), CUDA_SUCCESS);
    usleep(30000);
    CUresult q = cuStreamQuery(s);
    if (q != CUDA_ERROR_NOT_READY) printf("#   %s: the stream did not wait (%d)\n", what, (int)q);
    CHECK_CU(q, CUDA_ERROR_NOT_READY);
    CHECK(gu_all(x, 0));
    CHECK_EQ(__atomic_load_n(&flag[1], __ATOMIC_ACQUIRE), 0);
    __atomic_store_n(&flag[0], 2, __ATOMIC_RELEASE);        /* not yet >= 3 */
    usleep(20000);
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    __atomic_store_n(&flag[0], 3, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(x, 9));
    CHECK_EQ(__atomic_load_n(&flag[1], __ATOMIC_ACQUIRE), 77);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(x), CUDA_SUCCESS);
}

TEST(wait_value_on_pinned_host_memory)
{
    uint32_t *a = NULL, *b = NULL;
    CHECK_CU(cuMemHostAlloc((void **)&a, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
    wait_on_host_flag(a, "cuMemHostAlloc");
    CHECK_CU(cuMemAllocHost((void **)&b, 64), CUDA_SUCCESS);
    wait_on_host_flag(b, "cuMemAllocHost");
    CHECK_CU(cuMemFreeHost(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeHost(b), CUDA_SUCCESS);
}

TEST(wait_value_on_registered_host_memory)
{
    /* Not page-aligned, inside a larger malloc'd buffer. */
    char *buf = malloc(1 << 16);
    uint32_t *flag = (uint32_t *)(buf + 1000);
    CHECK_CU(cuMemHostRegister(flag, 64, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_SUCCESS);
    wait_on_host_flag(flag, "cuMemHostRegister");
    /* Registration errors. */
    CHECK_CU(cuMemHostRegister(flag + 4, 16, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK_CU(cuMemHostRegister(buf + 900, 200, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK_CU(cuMemHostRegister(NULL, 64, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemHostRegister(buf, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemHostRegister(buf, 64, 0x100), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFreeHost(flag), CUDA_ERROR_INVALID_VALUE);     /* not an allocation */
    CHECK_CU(cuMemHostUnregister(flag + 1), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CUmemorytype t = 0;
    CHECK_CU(cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)flag), CUDA_SUCCESS);
    CHECK_EQ(t, CU_MEMORYTYPE_HOST);
    CHECK_CU(cuMemHostUnregister(flag), CUDA_SUCCESS);
    CHECK_CU(cuMemHostUnregister(flag), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    /* Unregistered host memory is no device memory: wait value refuses it. */
    CHECK_CU(cuStreamWaitValue32(NULL, (CUdeviceptr)flag, 1, CU_STREAM_WAIT_VALUE_EQ), CUDA_ERROR_INVALID_VALUE);
    flag[0] = 5;                /* still the program's memory */
    CHECK_EQ(flag[0], 5);
    free(buf);
}

int main(int argc, char **argv)
{
    (void)argc;
    gu_setup();
    RUN(exec_launch_waits_for_host_function);
    RUN(exec_launch_waits_for_wait_value);
    RUN(wait_value_on_pinned_host_memory);
    RUN(wait_value_on_registered_host_memory);
    int rc = check_done();
    if (!getenv("CUDAEMU_KERNEL_DELAY_US")) {
        /* Again with every kernel held in flight. */
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("CUDAEMU_KERNEL_DELAY_US", "2000", 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
    }
    return rc;
}
