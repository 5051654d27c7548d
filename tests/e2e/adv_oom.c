/*
 * tests/e2e/adv_oom.c: out-of-memory errors the driver would not give
 * (round 21). The device's memory is mostly taken by blocks the program
 * allocated with cuMemAlloc (placed by the library) and then freed: without
 * the library the device has that memory back; with it, the arenas keep the
 * chunks mapped. Then the program makes a call that takes device memory
 * other than an allocation and prints its CUresult (adv_common.h). Without
 * the library every call succeeds; the library must give its chunks back
 * and make the call once more, as it does for an allocation.
 * The emulated driver charges these calls to the device (docs/emulator.md,
 * "Device memory"); the runner sets CUDAEMU_DEVICE_MEMORY=256M and
 * CUDAEMU_MODULE_BYTES, CUDAEMU_CTX_BYTES and CUDAEMU_EXEC_BYTES to 16M.
 *   module          cuModuleLoad, cuModuleLoadData, cuModuleLoadDataEx and
 *                   cuModuleLoadFatBinary, each on a squeezed device; a
 *                   kernel of the last one computes
 *   library         cuLibraryLoadFromFile and cuLibraryLoadData, then a
 *                   kernel of the library (cuLibraryGetKernel)
 *   context         cuCtxCreate on a squeezed device, a block of the new
 *                   context written and read back
 *   primary         the primary context's first retain
 *                   (cuDevicePrimaryCtxRetain activates it) while another
 *                   context's arena holds the memory
 *   limit           cuCtxSetLimit raising the malloc heap, the printf FIFO
 *                   and the stack size, each read back with cuCtxGetLimit
 *   observed_launch re-captures of fill(t), mad(in_k, acc) with k rotating,
 *                   each updating one exec, launched on a squeezed device:
 *                   an exec's first launch takes its device memory
 *                   (CUDAEMU_EXEC_BYTES), the program's exec's and, under
 *                   skip_profiled, each variant's; under skip_profiled
 *                   the exec has an observer (its launches go through
 *                   core/profiled.c)
 *   lazy_function   lazy loading (the runner adds CUDAEMU_FUNC_BYTES=16M):
 *                   cuModuleGetFunction of two kernels of a loaded module,
 *                   each on a squeezed device (the function's code is loaded
 *                   then), the first one launched
 *   lazy_kernel     the same for a library's kernels: cuKernelGetFunction
 *                   of a kernel looked up with no context current, and
 *                   cuModuleGetFunction of the library's module
 *                   (cuLibraryGetModule)
 *   lazy_launch     the CUDA runtime's way: cuLibraryGetKernel on a
 *                   squeezed device, then the CUkernel launched at once (its
 *                   first launch in the context loads it)
 *   headroom_launch a CUkernel looked up with no context current (so loaded
 *                   nowhere), then, on a squeezed device, launched outside a
 *                   capture: its first launch in the context loads it, and
 *                   that launch goes straight to the driver (the runner sets
 *                   CUDAEMU_FUNC_BYTES=12M: more than squeeze leaves free,
 *                   less than the 256 MiB device's headroom of 16 MiB)
 *   pool            control: cuMemAllocFromPoolAsync (never placed) from
 *                   the default pool on a squeezed device (retried before
 *                   the round)
 * Before the fix, with the library: module, library, context, primary and
 * limit got CUDA_ERROR_OUT_OF_MEMORY from every such call (module 4,
 * library 2, limit 3, the others 1) under skip_temp and skip_profiled;
 * observed_launch got it from all 9 launches under skip_profiled (skip_temp
 * retried its launches already). pool passed before. Added later
 * (2026-12-07, library of cf74331): lazy_function and lazy_kernel got
 * CUDA_ERROR_OUT_OF_MEMORY from each function taken (2 each) under both
 * policies, lazy_launch from the launch; headroom_launch from the launch
 * (no retry could see that launch then; the headroom covers it, and since
 * the launch filter, core/memory.h, the general path retries it).
 * Usage: adv_oom CASE
 */
#include "adv_common.h"

#define MIB ((size_t)1 << 20)
#define N 256
#define STEPS 9

static CUcontext ctx;
static CUmodule mod;
static CUdevice dev;

/* Takes all but 8 MiB of what the device reports free with 4 MiB
 * cuMemAlloc blocks (placed by the library), then frees them: the memory is
 * the device's again, or the arenas'. The calls are not counted (R): how
 * many fit is not a result. */
static void squeeze(void)
{
    static CUdeviceptr b[512];
    size_t fr = 0, total = 0;
    MUST(cuMemGetInfo(&fr, &total));
    size_t n = fr > 8 * MIB ? (fr - 8 * MIB) / (4 * MIB) : 0;
    if (n > 512) n = 512;
    for (size_t i = 0; i < n; i++)
        if (cuMemAlloc(&b[i], 4 * MIB) != CUDA_SUCCESS) {
            printf("squeeze: block %zu of %zu failed\n", i, n);
            exit(2);
        }
    for (size_t i = 0; i < n; i++)
        if (cuMemFree(b[i]) != CUDA_SUCCESS) {
            printf("squeeze: free %zu failed\n", i);
            exit(2);
        }
}

/* The whole file at path, malloc'd. */
static void *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { printf("cannot open %s\n", path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc((size_t)n);
    if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) { printf("cannot read %s\n", path); exit(2); }
    fclose(f);
    return p;
}

/* fill(p, v, N) with f, then the words checked. */
static void use_fill(const char *name, CUfunction f, CUstream s)
{
    CUdeviceptr p;
    uint32_t want[N], v = 77;
    uint64_t n = N;
    MUST(cuMemAlloc(&p, N * 4));
    for (int i = 0; i < N; i++) want[i] = v + (uint32_t)i;
    void *a[] = { &p, &v, &n };
    R(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, a, NULL));
    R(cuStreamSynchronize(s));
    adv_check_words(name, p, want, N);
    MUST(cuMemFree(p));
}

/* A block of the current context set to v and read back. */
static void use_block(const char *name, uint32_t v)
{
    CUdeviceptr p;
    uint32_t want[N];
    for (int i = 0; i < N; i++) want[i] = v;
    MUST(cuMemAlloc(&p, N * 4));
    R(cuMemsetD32(p, v, N));
    adv_check_words(name, p, want, N);
    MUST(cuMemFree(p));
}

static void module_case(void)
{
    char path[PATH_MAX + 64];
    adv_path("adv_kernels.so", path, sizeof path);
    void *image = read_file(path);
    CUmodule m[4] = { 0 };
    squeeze();
    R(cuModuleLoad(&m[0], path));
    squeeze();
    R(cuModuleLoadData(&m[1], image));
    squeeze();
    R(cuModuleLoadDataEx(&m[2], image, 0, NULL, NULL));
    squeeze();
    R(cuModuleLoadFatBinary(&m[3], image));
    CUfunction f;
    if (m[3] && R(cuModuleGetFunction(&f, m[3], "fill_u32")) == CUDA_SUCCESS) use_fill("module kernel", f, NULL);
    for (int i = 0; i < 4; i++)
        if (m[i]) R(cuModuleUnload(m[i]));
    free(image);
}

static void library_case(void)
{
    char path[PATH_MAX + 64];
    adv_path("adv_kernels.so", path, sizeof path);
    void *image = read_file(path);
    CUlibrary l[2] = { 0 };
    squeeze();
    R(cuLibraryLoadFromFile(&l[0], path, NULL, NULL, 0, NULL, NULL, 0));
    squeeze();
    R(cuLibraryLoadData(&l[1], image, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel k;
    if (l[1] && R(cuLibraryGetKernel(&k, l[1], "fill_u32")) == CUDA_SUCCESS)
        use_fill("library kernel", (CUfunction)k, NULL);
    for (int i = 0; i < 2; i++)
        if (l[i]) R(cuLibraryUnload(l[i]));
    free(image);
}

static void context_case(void)
{
    CUcontext c2 = NULL;
    squeeze();
    if (R(cuCtxCreate(&c2, NULL, 0, dev)) != CUDA_SUCCESS) return;
    use_block("new context block", 0x5a5a5a5au);
    R(cuCtxDestroy(c2));
    MUST(cuCtxSetCurrent(ctx));
}

/* Set up by hand: a created context holds the module and the squeezed
 * arena; the primary context is not active until the retain. */
static void primary_case(void)
{
    char path[PATH_MAX + 64];
    CUcontext c1, prim = NULL;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuCtxCreate(&c1, NULL, 0, dev));
    adv_path("adv_kernels.so", path, sizeof path);
    MUST(cuModuleLoad(&mod, path));
    squeeze();
    if (R(cuDevicePrimaryCtxRetain(&prim, dev)) != CUDA_SUCCESS) return;
    MUST(cuCtxSetCurrent(prim));
    use_block("primary context block", 0x0f0f0f0fu);
    R(cuDevicePrimaryCtxRelease(dev));
    MUST(cuCtxSetCurrent(c1));
    R(cuCtxDestroy(c1));
}

static void limit_case(void)
{
    static const struct { CUlimit l; size_t v; const char *name; } lim[] = {
        { CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MIB + 16 * MIB, "malloc heap" },
        { CU_LIMIT_PRINTF_FIFO_SIZE, 1 * MIB + 16 * MIB, "printf fifo" },
        { CU_LIMIT_STACK_SIZE, 1024 + 16 * 1024, "stack size" },
    };
    for (int i = 0; i < 3; i++) {
        size_t got = 0;
        squeeze();
        R(cuCtxSetLimit(lim[i].l, lim[i].v));
        R(cuCtxGetLimit(&got, lim[i].l));
        adv_check(lim[i].name, got == lim[i].v, "%zu", got);
    }
}

static void observed_launch(void)
{
    CUstream s;
    CUdeviceptr in[3], acc, t;
    uint32_t h_in[3][N], h_acc[N];
    uint64_t n = N;
    uint32_t five = 5;
    CUfunction fill = adv_fn(mod, "fill_u32"), mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < N; i++) h_in[k][i] = (uint32_t)(k * 1000003u + i * 7u + 1u);
        MUST(cuMemAlloc(&in[k], N * 4));
        MUST(cuMemcpyHtoD(in[k], h_in[k], N * 4));
    }
    MUST(cuMemAlloc(&acc, N * 4));
    MUST(cuMemAlloc(&t, N * 4));
    MUST(cuMemsetD32(acc, 0, N));
    memset(h_acc, 0, sizeof h_acc);
    CUgraphExec exec = NULL;
    for (int step = 0; step < STEPS; step++) {
        int k = step % 3;
        CUgraph g;
        void *a1[] = { &t, &five, &n }, *a2[] = { &in[k], &acc, &n }, *a3[] = { &t, &acc, &n };
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, a1, NULL));
        MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, s, a2, NULL));
        MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, s, a3, NULL));
        MUST(cuStreamEndCapture(s, &g));
        if (!exec) {
            MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
        } else {
            CUgraphExecUpdateResultInfo info;
            R(cuGraphExecUpdate(exec, g, &info));
        }
        MUST(cuGraphDestroy(g));
        squeeze();
        if (R(cuGraphLaunch(exec, s)) == CUDA_SUCCESS) {
            for (int i = 0; i < N; i++) {
                h_acc[i] = h_acc[i] * 3u + h_in[k][i];
                h_acc[i] = h_acc[i] * 3u + five + (uint32_t)i;
            }
        }
        R(cuStreamSynchronize(s));
        char name[32];
        snprintf(name, sizeof name, "acc step %d", step);
        adv_check_words(name, acc, h_acc, N);
    }
    R(cuGraphExecDestroy(exec));
    R(cuStreamDestroy(s));
}

/* adv_kernels.so loaded as a module (lib NULL) or as a library. */
static void load_kernels(CUmodule *mod_out, CUlibrary *lib_out)
{
    char path[PATH_MAX + 64];
    adv_path("adv_kernels.so", path, sizeof path);
    if (mod_out) MUST(cuModuleLoad(mod_out, path));
    if (lib_out) MUST(cuLibraryLoadFromFile(lib_out, path, NULL, NULL, 0, NULL, NULL, 0));
}

/* lib's kernel `name` looked up with no context current (a library belongs
 * to none), so that nothing loads it into a context then. */
static CUkernel lookup_nowhere(CUlibrary lib, const char *name)
{
    CUcontext cur;
    CUkernel k;
    MUST(cuCtxPopCurrent(&cur));
    MUST(cuLibraryGetKernel(&k, lib, name));
    MUST(cuCtxPushCurrent(cur));
    return k;
}

static void lazy_function(void)
{
    CUmodule m;
    CUfunction f = NULL, g = NULL;
    load_kernels(&m, NULL);
    squeeze();
    if (R(cuModuleGetFunction(&f, m, "fill_u32")) == CUDA_SUCCESS) use_fill("lazily loaded kernel", f, NULL);
    squeeze();
    R(cuModuleGetFunction(&g, m, "mad_u32"));
    adv_check("second function", g != NULL, "%d", g != NULL);
    R(cuModuleUnload(m));
}

/* Nothing loads the kernel before cuKernelGetFunction. */
static void lazy_kernel(void)
{
    CUlibrary l;
    CUmodule lm;
    CUfunction f = NULL, g = NULL;
    load_kernels(NULL, &l);
    CUkernel k = lookup_nowhere(l, "fill_u32");
    squeeze();
    if (R(cuKernelGetFunction(&f, k)) == CUDA_SUCCESS) use_fill("library kernel's function", f, NULL);
    MUST(cuLibraryGetModule(&lm, l));
    squeeze();
    R(cuModuleGetFunction(&g, lm, "mad_u32"));
    adv_check("library module's function", g != NULL, "%d", g != NULL);
    R(cuLibraryUnload(l));
}

static void lazy_launch(void)
{
    CUlibrary l;
    CUkernel k;
    load_kernels(NULL, &l);
    squeeze();
    if (R(cuLibraryGetKernel(&k, l, "fill_u32")) == CUDA_SUCCESS)
        use_fill("launched CUkernel", (CUfunction)(void *)k, NULL);
    R(cuLibraryUnload(l));
}

static void headroom_launch(void)
{
    CUlibrary l;
    load_kernels(NULL, &l);
    CUkernel k = lookup_nowhere(l, "fill_u32");
    squeeze();
    use_fill("CUkernel launched first on a squeezed device", (CUfunction)(void *)k, NULL);
    R(cuLibraryUnload(l));
}

static void pool_case(void)
{
    CUmemoryPool pool;
    CUstream s;
    CUdeviceptr p = 0;
    MUST(cuDeviceGetDefaultMemPool(&pool, dev));
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    squeeze();
    if (R(cuMemAllocFromPoolAsync(&p, 16 * MIB, pool, s)) == CUDA_SUCCESS) {
        uint32_t want[N];
        for (int i = 0; i < N; i++) want[i] = 0x33333333u;
        R(cuMemsetD32Async(p, 0x33333333u, N, s));
        R(cuStreamSynchronize(s));
        adv_check_words("pool block", p, want, N);
        R(cuMemFreeAsync(p, s));
    }
    R(cuStreamSynchronize(s));
    R(cuStreamDestroy(s));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "module", "library", "context", "primary", "limit",
                                         "observed_launch", "pool", "lazy_function", "lazy_kernel",
                                         "lazy_launch", "headroom_launch", NULL };
    int c = adv_case(argc, argv, names);
    if (c != 3) {
        adv_open(&ctx, &mod);
        MUST(cuCtxGetDevice(&dev));
    }
    switch (c) {
    case 0: module_case(); break;
    case 1: library_case(); break;
    case 2: context_case(); break;
    case 3: primary_case(); break;
    case 4: limit_case(); break;
    case 5: observed_launch(); break;
    case 6: pool_case(); break;
    case 7: lazy_function(); break;
    case 8: lazy_kernel(); break;
    case 9: lazy_launch(); break;
    case 10: headroom_launch(); break;
    }
    adv_check("ran", 1, "%s", argv[1]);
    return adv_finish();
}
