/*
 * tests/e2e/adv_interpose.c: round 6, the interpose layer and the process
 * life cycle. The program reaches the driver as JAX, TensorFlow and the CUDA
 * runtime do: dlopen("libcuda.so.1") in main, then dlsym of
 * exact versioned names (it is not linked with libcuda: adv.mk), so the
 * driver is loaded after the library's constructor ran.
 *
 * Cases (argv[1]):
 *   fork_dlopen  a worker thread captures kernel launches on a stream
 *                without pause (the library forwards each under its
 *                recorder's lock) while the main thread forks 100 children
 *                that exit at once. Before the fix fork() hung: the driver,
 *                loaded after the library, had registered its fork handlers
 *                last, so its prepare handler (taking the driver's locks) ran
 *                first, and the library's then waited for its recorder lock,
 *                held by the worker inside a launch that waited for the
 *                driver's locks. Then the worker instantiates and launches a
 *                last capture: buf[i] == 4.
 *   next_plugin  the driver opened RTLD_GLOBAL; a plugin (interpose_plug.so,
 *                linked with libcuda), opened after it, looks driver
 *                functions up with dlsym(RTLD_NEXT): glibc searches the
 *                global scope but the plugin, where the driver is. Before
 *                the fix the library searched the link map chain after the
 *                plugin only, where libcuda is not: NULL for every hooked
 *                name. The program then allocates with the found
 *                cuMemAlloc_v2, sets the words through the plugin's own
 *                cuMemsetD32_v2 wrapper (value + 1, forwarding to RTLD_NEXT)
 *                and checks them. (With the driver opened RTLD_LOCAL glibc's
 *                own answers vary from call to call: no case.)
 * Usage: adv_interpose CASE
 */
#include "adv_common.h"

#include <dlfcn.h>
#include <sys/wait.h>

/* The driver functions the program uses, by exact ELF name. */
#define ADV_DRIVER(X)                                                         \
    X(cuGetErrorName) X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain)    \
    X(cuCtxSetCurrent) X(cuModuleLoad) X(cuModuleGetFunction)                 \
    X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamSynchronize)            \
    X(cuStreamBeginCapture_v2) X(cuStreamEndCapture) X(cuLaunchKernel)        \
    X(cuGraphDestroy) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch)         \
    X(cuGraphExecDestroy) X(cuMemAlloc_v2) X(cuMemFree_v2)                    \
    X(cuMemcpyDtoH_v2) X(cuMemsetD32_v2)
#define ADV_PTR_(n) static __typeof__(&n) p_##n;
ADV_DRIVER(ADV_PTR_)

/* adv_common.h names the results with cuGetErrorName: the driver's. */
CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
    return p_cuGetErrorName ? p_cuGetErrorName(error, pStr) : CUDA_ERROR_NOT_INITIALIZED;
}

#define N 16u

static CUcontext ctx;
static CUfunction add;
static CUstream s;
static CUdeviceptr buf;

/* dlopen of the driver (RTLD_GLOBAL if global), dlsym of every function,
 * cuInit, the primary context current and adv_kernels.so's add_u32. */
static void open_driver(int global)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!h) {
        printf("set-up failed: dlopen(libcuda.so.1): %s\n", dlerror());
        exit(2);
    }
#define ADV_LOAD_(n)                                                          \
    if (!(*(void **)&p_##n = dlsym(h, #n))) {                                 \
        printf("set-up failed: dlsym(%s) = NULL\n", #n);                      \
        exit(2);                                                              \
    }
    ADV_DRIVER(ADV_LOAD_)
    CUdevice dev;
    CUmodule mod;
    char path[PATH_MAX + 64];
    MUST(p_cuInit(0));
    MUST(p_cuDeviceGet(&dev, 0));
    MUST(p_cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(p_cuCtxSetCurrent(ctx));
    adv_path("adv_kernels.so", path, sizeof path);
    MUST(p_cuModuleLoad(&mod, path));
    MUST(p_cuModuleGetFunction(&add, mod, "add_u32"));
}

/* Checks the N words at buf against v. */
static void check_buf(const char *name, uint32_t v)
{
    uint32_t got[N], want[N];
    for (uint32_t i = 0; i < N; i++) want[i] = v;
    if (R(p_cuMemcpyDtoH_v2(got, buf, sizeof got)) != CUDA_SUCCESS) {
        adv_check(name, 0, "the copy back failed");
        return;
    }
    adv_check(name, memcmp(got, want, sizeof got) == 0, "%u words, first %u, want %u", N,
              got[0], v);
}

/* ---------------------------------------------------------------- fork_dlopen */

static int stop, captures, worker_failed;

/* One capture of 4 launches of add_u32(buf, 1, N) on s; its graph or NULL.
 * Failures are counted, not printed (their number depends on timing). */
static CUgraph capture4(void)
{
    uint32_t one = 1;
    uint64_t n = N;
    void *args[] = { &buf, &one, &n };
    CUgraph g = NULL;
    int bad = p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED) != CUDA_SUCCESS;
    for (int k = 0; k < 4; k++)
        bad |= p_cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, NULL) != CUDA_SUCCESS;
    bad |= p_cuStreamEndCapture(s, &g) != CUDA_SUCCESS;
    if (bad) __atomic_fetch_add(&worker_failed, 1, __ATOMIC_RELAXED);
    return g;
}

static void *capture_loop(void *arg)
{
    (void)arg;
    if (p_cuCtxSetCurrent(ctx) != CUDA_SUCCESS) __atomic_store_n(&worker_failed, 1, __ATOMIC_RELAXED);
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        CUgraph g = capture4();
        if (g && p_cuGraphDestroy(g) != CUDA_SUCCESS)
            __atomic_fetch_add(&worker_failed, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&captures, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void case_fork_dlopen(void)
{
    MUST(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(p_cuMemAlloc_v2(&buf, N * 4));
    MUST(p_cuMemsetD32_v2(buf, 0, N));
    pthread_t t;
    if (pthread_create(&t, NULL, capture_loop, NULL) != 0) {
        printf("set-up failed: pthread_create\n");
        exit(2);
    }
    while (!__atomic_load_n(&captures, __ATOMIC_ACQUIRE)) adv_sleep_us(100);
    int children = 0, clean = 0;
    fflush(stdout);
    for (int i = 0; i < 100; i++) {
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        if (pid < 0) break;
        int st = 0;
        children++;
        clean += waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    adv_check("forks while another thread captures", children == 100 && clean == 100,
              "%d children forked, %d exited 0", children, clean);
    adv_check("every call of the capturing thread succeeded", worker_failed == 0, "%d failed",
              worker_failed);

    CUgraph g = capture4();
    CUgraphExec exec;
    MUST(p_cuGraphInstantiateWithFlags(&exec, g, 0));
    R(p_cuGraphLaunch(exec, s));
    R(p_cuStreamSynchronize(s));
    check_buf("the last capture launched", 4);
    R(p_cuGraphExecDestroy(exec));
    R(p_cuGraphDestroy(g));
    R(p_cuMemFree_v2(buf));
    R(p_cuStreamDestroy_v2(s));
}

/* ---------------------------------------------------------------- next_plugin */

static void case_next_plugin(void)
{
    static const char *const names[] = { "cuInit", "cuMemAlloc_v2", "cuMemFree_v2",
                                         "cuMemsetD32_v2", "cuGraphLaunch_ptsz",
                                         "cuDriverGetVersion", "cuNoSuchFunction", NULL };
    char path[PATH_MAX + 64];
    adv_path("interpose_plug.so", path, sizeof path);
    void *plug = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *(*next)(const char *) = NULL;
    if (plug) *(void **)&next = dlsym(plug, "adv_plug_next");
    if (!next) {
        printf("set-up failed: %s\n", plug ? "no adv_plug_next" : dlerror());
        exit(2);
    }
    void *found[8] = { 0 };
    for (int i = 0; names[i]; i++) {
        found[i] = next(names[i]);
        int want = names[i + 1] != NULL;   /* all but the last exist */
        char what[96];
        snprintf(what, sizeof what, "dlsym(RTLD_NEXT, %s) from the plugin", names[i]);
        adv_check(what, !!found[i] == want, "%s", found[i] ? "found" : "NULL");
    }
    __typeof__(&cuMemAlloc_v2) alloc;
    __typeof__(&cuMemFree_v2) release;
    __typeof__(&cuMemsetD32_v2) memset_plug;
    *(void **)&alloc = found[1];
    *(void **)&release = found[2];
    *(void **)&memset_plug = dlsym(plug, "cuMemsetD32_v2");
    if (!alloc || !release || !memset_plug) return;
    MUST(alloc(&buf, N * 4));
    R(memset_plug(buf, 41, N));   /* the plugin adds 1 */
    check_buf("words set through the plugin's wrapper", 42);
    R(release(buf));
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "fork_dlopen", "next_plugin", NULL };
    int c = adv_case(argc, argv, cases);
    open_driver(c == 1);
    if (c == 0) case_fork_dlopen();
    else case_next_plugin();
    return adv_finish();
}
