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
 * Round 25 (the launch filter, the headroom; each CUkernel of its own
 * library load, looked up with no context current):
 *   unload_reuse    a kernel launched, its library unloaded, the next
 *                   library's kernel at the same handle value launched first
 *                   on a squeezed device (CUDAEMU_FUNC_BYTES=24M: more than
 *                   the headroom), after a module function
 *   stale_headroom  one free with room, then squeeze; a first launch beside
 *                   a capture on another stream, then one into a capture
 *                   (CUDAEMU_FUNC_BYTES=12M: only the headroom covers them)
 *   ctx_switches    first launches after cuCtxCreate, after cuCtxDestroy of
 *                   the current context, after cuDevicePrimaryCtxReset and
 *                   the last cuDevicePrimaryCtxRelease (retained again, no
 *                   switch), and one with no context current (24M)
 *   launch_variants first launches through cuLaunchKernelEx,
 *                   cuLaunchCooperativeKernel and the _ptsz variants of the
 *                   three (cuGetProcAddress, per-thread flag) (24M)
 *   threads         4 threads' first launches at once in 2 contexts, each
 *                   switching to the other after (the runner: 20M)
 * Before the fix, with the library: module, library, context, primary and
 * limit got CUDA_ERROR_OUT_OF_MEMORY from every such call (module 4,
 * library 2, limit 3, the others 1) under skip_temp and skip_profiled;
 * observed_launch got it from all 9 launches under skip_profiled (skip_temp
 * retried its launches already). pool passed before. Added later
 * (2026-12-07, library of cf74331): lazy_function and lazy_kernel got
 * CUDA_ERROR_OUT_OF_MEMORY from each function taken (2 each) under both
 * policies, lazy_launch from the launch; headroom_launch from the launch
 * (no retry could see that launch then; the headroom covers it, and since
 * the launch filter, core/memory.h, the general path retries it). Round 25
 * (library of 1254557): unload_reuse got CUDA_ERROR_OUT_OF_MEMORY from the
 * second kernel's launch, stale_headroom from the launch beside the capture
 * (both policies), threads from one thread's launch in 1 of 4 runs; the
 * others passed.
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

/* The launch entry points (launch_via): cuLaunchKernel, then those reached
 * through cuGetProcAddress as a program built for the per-thread default
 * stream reaches them (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: the
 * _ptsz variants). */
enum { VIA_PLAIN, VIA_EX, VIA_COOP, VIA_PTSZ, VIA_EX_PTSZ, VIA_COOP_PTSZ, VIA_N };
static const char *const via_names[VIA_N] = { "cuLaunchKernel", "cuLaunchKernelEx",
                                              "cuLaunchCooperativeKernel", "cuLaunchKernel_ptsz",
                                              "cuLaunchKernelEx_ptsz", "cuLaunchCooperativeKernel_ptsz" };

/* f(a) with grid and block 1x1x1 on s through entry point `via`. */
static CUresult launch_via(int via, CUfunction f, CUstream s, void **a)
{
    static const char *const sym[VIA_N] = { NULL, "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
                                            "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel" };
    CUlaunchConfig cfg = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1,
                           .blockDimZ = 1, .hStream = s };
    if (via == VIA_PLAIN) return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, a, NULL);
    void *fn = NULL;
    CUdriverProcAddressQueryResult found;
    cuuint64_t flags = via >= VIA_PTSZ ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
    MUST(cuGetProcAddress(sym[via], &fn, CUDA_VERSION, flags, &found));
    switch (via) {
    case VIA_EX:
    case VIA_EX_PTSZ:
        return ((CUresult (*)(const CUlaunchConfig *, CUfunction, void **, void **))fn)(&cfg, f, a, NULL);
    case VIA_COOP:
    case VIA_COOP_PTSZ:
        return ((CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **))fn)(f, 1, 1, 1, 1, 1, 1, 0, s, a);
    default:
        return ((CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **))fn)(f, 1, 1, 1, 1, 1, 1, 0, s, a, NULL);
    }
}

/* fill(p, v, N) with f through entry point `via`, then the words checked. */
static void use_fill_via(const char *name, CUfunction f, CUstream s, int via)
{
    CUdeviceptr p;
    uint32_t want[N], v = 77;
    uint64_t n = N;
    for (const char *c = name; *c; c++) v = v * 31u + (uint8_t)*c;   /* each call its own words */
    MUST(cuMemAlloc(&p, N * 4));
    for (int i = 0; i < N; i++) want[i] = v + (uint32_t)i;
    void *a[] = { &p, &v, &n };
    R(launch_via(via, f, s, a));
    R(cuStreamSynchronize(s));
    adv_check_words(name, p, want, N);
    MUST(cuMemFree(p));
}

static void use_fill(const char *name, CUfunction f, CUstream s) { use_fill_via(name, f, s, VIA_PLAIN); }

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

/* ------------------------------------------------------------ round 25 */

/* The library's kernel fill_u32, loaded again (its own CUlibrary: another
 * CUkernel) and looked up with no context current. */
static CUkernel fresh_kernel(CUlibrary *lib)
{
    load_kernels(NULL, lib);
    return lookup_nowhere(*lib, "fill_u32");
}

/* A library unloaded and another loaded: the driver gives the new kernel
 * the freed handle value (the emulator's pools do, as real drivers reuse
 * freed objects' addresses: docs/emulator.md), a kernel never loaded in
 * this context. Its first launch there, on a squeezed device, takes
 * CUDAEMU_FUNC_BYTES (the runner sets more than the headroom). */
static void unload_reuse(void)
{
    CUlibrary l1, l2;
    CUfunction other = adv_fn(mod, "fill_u32");
    CUkernel k1 = fresh_kernel(&l1);
    use_fill("first library's kernel", (CUfunction)(void *)k1, NULL);
    R(cuLibraryUnload(l1));
    CUkernel k2 = fresh_kernel(&l2);
    /* (stderr: a baseline's `needs`, not a result) */
    fprintf(stderr, "r25: %s\n", k1 == k2 ? "kernel handle value reused" : "new kernel handle value");
    squeeze();
    /* another function launched first: the lookup's context switches are
     * behind, the thread launches from this context's table again */
    use_fill("module function", other, NULL);
    use_fill("second library's kernel, same handle value", (CUfunction)(void *)k2, NULL);
    R(cuLibraryUnload(l2));
}

/* The headroom's sampling: one free while the device has room (the next
 * query of the driver is then 64 frees away), then squeeze's 50-odd blocks
 * allocated and freed. Then a CUkernel's first launch in the context where
 * no retry can see it (design.md, "Headroom": the headroom covers it; the
 * runner sets CUDAEMU_FUNC_BYTES below the headroom, more than squeeze
 * leaves free): uncaptured on one stream while another captures (such a
 * launch goes to the driver as it is), then captured (the node loads the
 * kernel), the graph launched. */
static void stale_headroom(void)
{
    static const char *const what[2] = { "kernel launched first while another stream captures",
                                         "kernel launched first into a capture" };
    CUstream s1, s2;
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    use_block("a free with room", 0x12345678u);
    for (int captured = 0; captured < 2; captured++) {
        CUlibrary l;
        CUgraph g;
        CUgraphExec e;
        CUdeviceptr p;
        uint32_t want[N], v = 77u + (uint32_t)captured;
        uint64_t n = N;
        CUkernel k = fresh_kernel(&l);
        squeeze();
        MUST(cuMemAlloc(&p, N * 4));
        for (int i = 0; i < N; i++) want[i] = v + (uint32_t)i;
        void *a[] = { &p, &v, &n };
        MUST(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_RELAXED));
        R(cuLaunchKernel((CUfunction)(void *)k, 1, 1, 1, 1, 1, 1, 0, captured ? s1 : s2, a, NULL));
        if (R(cuStreamEndCapture(s1, &g)) == CUDA_SUCCESS) {
            if (captured && R(cuGraphInstantiateWithFlags(&e, g, 0)) == CUDA_SUCCESS) {
                R(cuGraphLaunch(e, s1));
                R(cuStreamSynchronize(s1));
                R(cuGraphExecDestroy(e));
            }
            R(cuGraphDestroy(g));
        }
        R(cuStreamSynchronize(s2));
        adv_check_words(what[captured], p, want, N);
        MUST(cuMemFree(p));
        R(cuLibraryUnload(l));
    }
    R(cuStreamDestroy(s1));
    R(cuStreamDestroy(s2));
}

/* The thread's current context changed by calls other than cuCtxSetCurrent,
 * Push and Pop, each followed by a CUkernel's first launch in the context
 * that is current then, on a squeezed device (CUDAEMU_FUNC_BYTES more than
 * the headroom): cuCtxCreate (the new context current), cuCtxDestroy of the
 * current context (the one below it current again), cuCtxSetCurrent(NULL),
 * cuDevicePrimaryCtxReset and the last cuDevicePrimaryCtxRelease of the
 * current primary context (same handle, its kernels unloaded), each
 * retained again without a switch. */
static void ctx_switches(void)
{
    CUlibrary l1, l2;
    CUcontext b, cur;
    CUkernel k1 = fresh_kernel(&l1), k2 = fresh_kernel(&l2);
    use_fill("kernel 1 in the primary context", (CUfunction)(void *)k1, NULL);
    MUST(cuCtxCreate(&b, NULL, 0, dev));
    squeeze();
    use_fill("kernel 1 first in a created context", (CUfunction)(void *)k1, NULL);
    use_fill("kernel 2 in the created context", (CUfunction)(void *)k2, NULL);
    MUST(cuCtxDestroy(b));
    MUST(cuCtxGetCurrent(&cur));
    adv_check("primary current after the destroy", cur == ctx, "%d", cur == ctx);
    squeeze();
    use_fill("kernel 2 first in the primary context", (CUfunction)(void *)k2, NULL);
    MUST(cuCtxSetCurrent(NULL));
    uint32_t v = 1;
    uint64_t n = 0;
    CUdeviceptr p = 0;
    void *a[] = { &p, &v, &n };
    R(cuLaunchKernel((CUfunction)(void *)k1, 1, 1, 1, 1, 1, 1, 0, NULL, a, NULL));
    MUST(cuCtxSetCurrent(ctx));
    for (int release = 0; release < 2; release++) {
        CUcontext again;
        if (release) R(cuDevicePrimaryCtxRelease(dev));
        else R(cuDevicePrimaryCtxReset(dev));
        MUST(cuDevicePrimaryCtxRetain(&again, dev));
        adv_check("primary context handle kept", again == ctx, "%d", again == ctx);
        /* kernel 2 loaded again first: the thread launches from the
         * context's table then */
        use_fill(release ? "kernel 2 after the last release" : "kernel 2 after a reset", (CUfunction)(void *)k2,
                 NULL);
        squeeze();
        use_fill(release ? "kernel 1 after the last release" : "kernel 1 after a reset", (CUfunction)(void *)k1,
                 NULL);
    }
    R(cuLibraryUnload(l1));
    R(cuLibraryUnload(l2));
}

/* Each launch entry point's first launch of a CUkernel on a squeezed device
 * (CUDAEMU_FUNC_BYTES more than the headroom). */
static void launch_variants(void)
{
    for (int via = VIA_EX; via < VIA_N; via++) {
        CUlibrary l;
        CUkernel k = fresh_kernel(&l);
        squeeze();
        use_fill_via(via_names[via], (CUfunction)(void *)k, NULL, via);
        R(cuLibraryUnload(l));
    }
}

/* Threads, each with its own CUkernel, make its first launches in two
 * contexts at once (all released by one barrier), switching between them,
 * on a squeezed device: several launches get CUDA_ERROR_OUT_OF_MEMORY at
 * once, and one thread's trim gives back what the others then find gone.
 * Each thread's lines go to its own stream, printed in thread order. */
#define THREADS 4
static CUcontext tctx[2];
static pthread_barrier_t tbar;
struct tjob { CUkernel k; int id; char *text; size_t len; };

static void *switch_thread(void *u)
{
    struct tjob *j = u;
    adv_tout = open_memstream(&j->text, &j->len);
    for (int r = 0; r < 2; r++) {
        char name[64];
        int which = (j->id + r) % 2;
        MUST(cuCtxSetCurrent(tctx[which]));
        pthread_barrier_wait(&tbar);
        snprintf(name, sizeof name, "thread %d, context %d", j->id, which);
        use_fill(name, (CUfunction)(void *)j->k, NULL);
    }
    fclose(adv_tout);
    adv_tout = NULL;
    return NULL;
}

static void threads_case(void)
{
    CUlibrary l[THREADS];
    struct tjob j[THREADS];
    pthread_t t[THREADS];
    tctx[0] = ctx;
    MUST(cuCtxCreate(&tctx[1], NULL, 0, dev));
    MUST(cuCtxSetCurrent(ctx));
    for (int i = 0; i < THREADS; i++) j[i] = (struct tjob){ fresh_kernel(&l[i]), i, NULL, 0 };
    squeeze();
    pthread_barrier_init(&tbar, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, switch_thread, &j[i]);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        fputs(j[i].text, stdout);
        free(j[i].text);
    }
    pthread_barrier_destroy(&tbar);
    for (int i = 0; i < THREADS; i++) R(cuLibraryUnload(l[i]));
    R(cuCtxDestroy(tctx[1]));
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
                                         "lazy_launch", "headroom_launch", "unload_reuse", "stale_headroom",
                                         "ctx_switches", "launch_variants", "threads", NULL };
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
    case 11: unload_reuse(); break;
    case 12: stale_headroom(); break;
    case 13: ctx_switches(); break;
    case 14: launch_variants(); break;
    case 15: threads_case(); break;
    }
    adv_check("ran", 1, "%s", argv[1]);
    return adv_finish();
}
