/*
 * test_loadmem.c: the device memory that calls other than allocations take
 * (docs/emulator.md, "Device memory"; round 21), with
 * CUDAEMU_DEVICE_MEMORY=256M and CUDAEMU_MODULE_BYTES, CUDAEMU_CTX_BYTES,
 * CUDAEMU_EXEC_BYTES 16M each (the program re-executes itself to set them):
 *   a module or library load takes 16 MiB until unloaded;
 *   a context takes 16 MiB from its creation (a primary one: from its first
 *     retain) until destroyed (released for the last time);
 *   cuCtxSetLimit takes the raise of the stack (per thread, for 1024
 *     threads), printf FIFO and malloc heap above their defaults, gives back
 *     a lowering, and gives it all back with the context;
 *   a graph exec takes 16 MiB at its first launch or upload until destroyed;
 *   lazy loading (CUDA_MODULE_LOADING unset, and CUDAEMU_FUNC_BYTES=1M): a
 *     function takes 1 MiB of its context's device when a handle of it is
 *     first taken there (cuModuleGetFunction, cuKernelGetFunction, a launch
 *     of a CUkernel) until it ends; under CUDA_MODULE_LOADING=EAGER (a child
 *     run) nothing;
 * each beyond what is left fails with CUDA_ERROR_OUT_OF_MEMORY and changes
 * nothing (no handle, no limit, no launch). The module is mod_graph.so.
 */
#include "graph_util.h"

#include <stdlib.h>
#include <sys/wait.h>

#define MIB ((size_t)1 << 20)
#define TOTAL (256 * MIB)

static CUdevice dev;
static char path[PATH_MAX + 64];

static size_t free_mem(void)
{
    size_t f = 0, t = 0;
    CHECK_CU(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    CHECK_EQ(t, TOTAL);
    return f;
}

/* A cuMemAlloc block leaving `left` bytes of the device free. */
static CUdeviceptr fill_to(size_t left)
{
    CUdeviceptr p = 0;
    CHECK_CU(cuMemAlloc(&p, free_mem() - left), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), left);
    return p;
}

TEST(start)
{
    /* the primary context, the test's module and its 4 functions (gu_setup) */
    CHECK_EQ(free_mem(), TOTAL - 36 * MIB);
}

TEST(module_loads)
{
    size_t base = free_mem();
    void *image = emu_test_read_file(path, NULL);
    CHECK(image != NULL);
    CUmodule a, b, c, d;
    CHECK_CU(cuModuleLoad(&a, path), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 16 * MIB);
    CHECK_CU(cuModuleLoadData(&b, image), CUDA_SUCCESS);
    CHECK_CU(cuModuleLoadDataEx(&c, image, 0, NULL, NULL), CUDA_SUCCESS);
    CHECK_CU(cuModuleLoadFatBinary(&d, image), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 64 * MIB);
    CHECK_CU(cuModuleUnload(b), CUDA_SUCCESS);
    CHECK_CU(cuModuleUnload(c), CUDA_SUCCESS);
    CHECK_CU(cuModuleUnload(d), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 16 * MIB);
    /* a failed load takes nothing */
    CHECK_CU(cuModuleLoad(&b, "/nonexistent/mod.so"), CUDA_ERROR_FILE_NOT_FOUND);
    CHECK_EQ(free_mem(), base - 16 * MIB);
    /* beyond what is left: refused, nothing loaded, nothing taken */
    CUdeviceptr p = fill_to(8 * MIB);
    CUmodule none = (CUmodule)0x1;
    CHECK_CU(cuModuleLoad(&none, path), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuModuleLoadData(&none, image), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuModuleLoadDataEx(&none, image, 0, NULL, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuModuleLoadFatBinary(&none, image), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(none == (CUmodule)0x1);
    CHECK_EQ(free_mem(), 8 * MIB);
    CHECK_CU(cuModuleUnload(a), CUDA_SUCCESS);                   /* gives its 16 MiB back */
    CHECK_EQ(free_mem(), 24 * MIB);
    CHECK_CU(cuModuleLoad(&a, path), CUDA_SUCCESS);
    CHECK_CU(cuModuleUnload(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base);
    free(image);
}

TEST(library_loads)
{
    size_t base = free_mem();
    void *image = emu_test_read_file(path, NULL);
    CHECK(image != NULL);
    CUlibrary a, b;
    CHECK_CU(cuLibraryLoadFromFile(&a, path, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    CHECK_CU(cuLibraryLoadData(&b, image, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 32 * MIB);
    CHECK_CU(cuLibraryUnload(b), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 16 * MIB);
    CUdeviceptr p = fill_to(8 * MIB);
    CUlibrary none = (CUlibrary)0x1;
    CHECK_CU(cuLibraryLoadFromFile(&none, path, NULL, NULL, 0, NULL, NULL, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuLibraryLoadData(&none, image, NULL, NULL, 0, NULL, NULL, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(none == (CUlibrary)0x1);
    CHECK_EQ(free_mem(), 8 * MIB);
    CHECK_CU(cuLibraryUnload(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base);
    free(image);
}

TEST(created_contexts)
{
    size_t base = free_mem();
    CUcontext c, cur;
    CHECK_CU(cuCtxCreate(&c, NULL, 0, dev), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 16 * MIB);
    CHECK_CU(cuCtxDestroy(c), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base);
    CUdeviceptr p = fill_to(8 * MIB);
    c = (CUcontext)0x1;
    CHECK_CU(cuCtxCreate(&c, NULL, 0, dev), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(c == (CUcontext)0x1);
    CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);               /* nothing pushed */
    CHECK(cur == g_ctx);
    CHECK_EQ(free_mem(), 8 * MIB);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base);
}

TEST(limits)
{
    size_t base = free_mem(), v = 0;
    CHECK_CU(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
    CHECK_EQ(v, 8 * MIB);
    CHECK_CU(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
    CHECK_EQ(v, 1024);
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 24 * MIB), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 16 * MIB);
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024 + 16 * 1024), CUDA_SUCCESS);   /* x 1024 threads */
    CHECK_EQ(free_mem(), base - 32 * MIB);
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 3 * MIB), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 34 * MIB);
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 512), CUDA_SUCCESS);   /* below the default: 0 */
    CHECK_EQ(free_mem(), base - 18 * MIB);
    CHECK_CU(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
    CHECK_EQ(v, 512);
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH, 4), CUDA_ERROR_UNSUPPORTED_LIMIT);
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT, 4096), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 18 * MIB);
    /* beyond what is left: refused, the limit as it was */
    CUdeviceptr p = fill_to(8 * MIB);
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 40 * MIB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
    CHECK_EQ(v, 24 * MIB);
    CHECK_EQ(free_mem(), 8 * MIB);
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MIB), CUDA_SUCCESS);       /* lowered: back */
    CHECK_EQ(free_mem(), 24 * MIB);
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 1 * MIB), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base);
    /* a created context's limits go with it */
    CUcontext c;
    CHECK_CU(cuCtxCreate(&c, NULL, 0, dev), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 40 * MIB), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 48 * MIB);
    CHECK_CU(cuCtxDestroy(c), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base);
}

TEST(graph_execs)
{
    CUfunction fill = k_fill;
    CUstream s;
    CUgraph g;
    CUgraphNode node;
    CUgraphExec a, b;
    CUdeviceptr out;
    uint32_t v = 7, got[4];
    uint64_t n = 4;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&out, 16), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(out, 0, 4), CUDA_SUCCESS);
    size_t base = free_mem();
    void *args[] = { &out, &v, &n };
    CUDA_KERNEL_NODE_PARAMS kp = { .func = fill, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1,
                                   .blockDimY = 1, .blockDimZ = 1, .kernelParams = args };
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddKernelNode(&node, g, NULL, 0, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&a, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&b, g, 0), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base);                                   /* instantiation: nothing */
    CHECK_CU(cuGraphLaunch(a, s), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 16 * MIB);
    CHECK_CU(cuGraphLaunch(a, s), CUDA_SUCCESS);                  /* only the first */
    CHECK_CU(cuGraphUpload(b, s), CUDA_SUCCESS);                  /* or the upload */
    CHECK_EQ(free_mem(), base - 32 * MIB);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(b), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 16 * MIB);
    /* beyond what is left: refused, nothing runs */
    CHECK_CU(cuGraphInstantiateWithFlags(&b, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(out, 0, 4), CUDA_SUCCESS);
    CUdeviceptr p = fill_to(8 * MIB);
    CHECK_CU(cuGraphLaunch(b, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(got, out, 16), CUDA_SUCCESS);
    CHECK_EQ(got[0], 0);
    CHECK_EQ(free_mem(), 8 * MIB);
    CHECK_CU(cuGraphLaunch(a, s), CUDA_SUCCESS);                  /* charged already */
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(b, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(got, out, 16), CUDA_SUCCESS);
    CHECK_EQ(got[3], 7);
    CHECK_CU(cuGraphExecDestroy(a), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(b), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base);
    CHECK_CU(cuMemFree(out), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(lazy_functions)
{
    CUmoduleLoadingMode mode;
    CHECK_CU(cuModuleGetLoadingMode(&mode), CUDA_SUCCESS);
    CHECK_EQ(mode, CU_MODULE_LAZY_LOADING);
    size_t base = free_mem();
    CUmodule m;
    CUfunction f, f2, none = (CUfunction)0x1;
    CUfunctionLoadingState st;
    CHECK_CU(cuModuleLoad(&m, path), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 16 * MIB);                      /* no function loaded yet */
    CHECK_CU(cuModuleGetFunction(&f, m, "fill_u32"), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 17 * MIB);
    CHECK_CU(cuFuncIsLoaded(&st, f), CUDA_SUCCESS);
    CHECK_EQ(st, CU_FUNCTION_LOADING_STATE_LOADED);
    CHECK_CU(cuModuleGetFunction(&f2, m, "fill_u32"), CUDA_SUCCESS);   /* loaded once */
    CHECK(f2 == f);
    CHECK_CU(cuFuncLoad(f), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&f2, m, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    CHECK_EQ(free_mem(), base - 17 * MIB);
    /* beyond what is left: refused, nothing loaded; a loaded one still given */
    CUdeviceptr p = fill_to(0);
    CHECK_CU(cuModuleGetFunction(&none, m, "add_u32"), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(none == (CUfunction)0x1);
    CHECK_CU(cuModuleGetFunction(&f2, m, "fill_u32"), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), 0);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&f2, m, "add_u32"), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 18 * MIB);
    CHECK_CU(cuModuleUnload(m), CUDA_SUCCESS);                  /* the module and its functions back */
    CHECK_EQ(free_mem(), base);
}

/* A library's kernel loads into each context apart: at cuKernelGetFunction
 * or at its first launch there. */
TEST(lazy_kernels)
{
    CUstream s;
    CUdeviceptr out;
    uint32_t v = 9, got[4] = { 0 };
    uint64_t n = 4;
    void *args[] = { &out, &v, &n };
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&out, 16), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(out, 0, 4), CUDA_SUCCESS);
    size_t base = free_mem();
    CUlibrary lib;
    CUkernel k, k2;
    CUfunction f, none = (CUfunction)0x1;
    CHECK_CU(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    CHECK_CU(cuLibraryGetKernel(&k, lib, "affine_u32"), CUDA_SUCCESS);   /* of no context: nothing */
    CHECK_CU(cuLibraryGetKernel(&k2, lib, "fill_u32"), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 16 * MIB);
    CHECK_CU(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
    CHECK_CU(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 17 * MIB);
    /* beyond what is left: cuKernelGetFunction and a launch of the CUkernel
     * are refused, nothing runs */
    CUdeviceptr p = fill_to(0);
    CHECK_CU(cuKernelGetFunction(&none, k2), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(none == (CUfunction)0x1);
    CHECK_CU(cuLaunchKernel((CUfunction)(void *)k2, 1, 1, 1, 1, 1, 1, 0, s, args, NULL),
             CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(got, out, 16), CUDA_SUCCESS);
    CHECK_EQ(got[0], 0);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuLaunchKernel((CUfunction)(void *)k2, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(got, out, 16), CUDA_SUCCESS);
    CHECK_EQ(got[3], 9);
    CHECK_EQ(free_mem(), base - 18 * MIB);
    /* another context loads its own; its teardown gives them back */
    CUcontext c;
    CHECK_CU(cuCtxCreate(&c, NULL, 0, dev), CUDA_SUCCESS);
    CHECK_CU(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 35 * MIB);                      /* its 16 MiB and the function */
    CHECK_CU(cuCtxDestroy(c), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 18 * MIB);
    CHECK_CU(cuLibraryUnload(lib), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base);
    CHECK_CU(cuMemFree(out), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* CUDA_MODULE_LOADING=EAGER (this program run again with argument "eager"):
 * the functions came with the module; taking them takes nothing. Returns
 * the number of failed checks. */
static int eager_child(void)
{
    CUmoduleLoadingMode mode;
    CUmodule m;
    CUfunction f;
    CUkernel k;
    CUlibrary lib;
    size_t base = free_mem();
    CHECK_CU(cuModuleGetLoadingMode(&mode), CUDA_SUCCESS);
    CHECK_EQ(mode, CU_MODULE_EAGER_LOADING);
    CHECK_CU(cuModuleLoad(&m, path), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&f, m, "add_u32"), CUDA_SUCCESS);
    CHECK_CU(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    CHECK_CU(cuLibraryGetKernel(&k, lib, "add_u32"), CUDA_SUCCESS);
    CHECK_CU(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base - 32 * MIB);
    CHECK_CU(cuLibraryUnload(lib), CUDA_SUCCESS);
    CHECK_CU(cuModuleUnload(m), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base);
    return check_done();
}

TEST(eager_loading)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char *argv[] = { "test_loadmem", "eager", NULL };
        setenv("CUDA_MODULE_LOADING", "EAGER", 1);
        dup2(2, 1);                 /* its TAP lines are comments of this run */
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Last: the primary context is released (its module goes with it). */
TEST(primary_context)
{
    CUcontext c1, prim;
    unsigned flags;
    int active;
    size_t base = free_mem();
    CHECK_CU(cuCtxCreate(&c1, NULL, 0, dev), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);      /* inactive: context and module back */
    CHECK_EQ(free_mem(), base + 20 * MIB);                        /* (and the module's 4 functions) */
    CUdeviceptr p = fill_to(8 * MIB);
    prim = (CUcontext)0x1;
    CHECK_CU(cuDevicePrimaryCtxRetain(&prim, dev), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(prim == (CUcontext)0x1);
    CHECK_CU(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
    CHECK_EQ(active, 0);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRetain(&prim, dev), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base + 4 * MIB);
    CHECK_CU(cuDevicePrimaryCtxRetain(&prim, dev), CUDA_SUCCESS);     /* a second retain: nothing */
    CHECK_EQ(free_mem(), base + 4 * MIB);
    CHECK_CU(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), base + 20 * MIB);
    CHECK_CU(cuCtxDestroy(c1), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), TOTAL);
}

int main(int argc, char **argv)
{
    const char *have = getenv("CUDAEMU_FUNC_BYTES");
    if (!have || strcmp(have, "1M") != 0) {
        setenv("CUDAEMU_DEVICE_MEMORY", "256M", 1);
        setenv("CUDAEMU_MODULE_BYTES", "16M", 1);
        setenv("CUDAEMU_CTX_BYTES", "16M", 1);
        setenv("CUDAEMU_EXEC_BYTES", "16M", 1);
        setenv("CUDAEMU_FUNC_BYTES", "1M", 1);
        unsetenv("CUDA_MODULE_LOADING");
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    gu_setup();
    SETUP_CU(cuCtxGetDevice(&dev));
    if (emu_test_module_path("mod_graph.so", path, sizeof path)) return 1;
    if (argc > 1 && strcmp(argv[1], "eager") == 0) return eager_child();
    RUN(start);
    RUN(module_loads);
    RUN(library_loads);
    RUN(created_contexts);
    RUN(limits);
    RUN(graph_execs);
    RUN(lazy_functions);
    RUN(lazy_kernels);
    RUN(eager_loading);
    RUN(primary_context);
    return check_done();
}
