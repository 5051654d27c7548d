/*
 * tests/e2e/adv_soak.c: round 42, what the library holds over long runs
 * (tests/e2e/test_soak.sh). Each case churns short-lived objects in a loop
 * while the program itself holds a bounded amount:
 *
 *   adv_soak CASE N
 *     graphs    a graph of a new shape (1..5 kernels) captured on a block of a
 *               new size each step, instantiated, launched, updated from a
 *               second capture, launched; a fork and join through two new
 *               events captured; a graph built node by node, a node removed;
 *               everything destroyed
 *     execs     a new exec per step from one of three held graphs, updated in
 *               rotation and launched 6 times (skip_profiled decides and buys
 *               variants), then destroyed
 *     streams   a stream and two events created each step; a stream-ordered
 *               block of a new size allocated and freed on it, a launch, an
 *               event waited on by a held stream, a capture every 4th step;
 *               all destroyed
 *     modules   the kernel module loaded each step, 8 functions looked up, a
 *               graph of 3 of them captured, instantiated, updated, launched;
 *               the module unloaded
 *     contexts  a context created each step, the module loaded, a block of a
 *               new size, a graph captured, instantiated, updated, launched,
 *               a kernel launched directly, a stream with a priority and a stream-ordered block freed on
 *               it; the context destroyed with everything in it
 *     sizes     blocks of ever-new sizes (1 B .. 1 MiB), 8 alive at a time,
 *               each filled and read back
 *     uobj      a user object per step moved into a graph, the graph
 *               instantiated, cloned, launched, updated; all destroyed
 *     threads   a thread per step: a block on the per-thread default stream
 *               (stream-ordered; the thread exits with its free queued), a
 *               capture on its own stream, launch, destroy
 *     libraries the kernels as a library each step: CUkernel handles looked up,
 *               launched directly and captured, the exec updated; unloaded
 *     longexec  one exec for the whole run, updated every step from a graph
 *               captured on blocks of new sizes (three alive, in turn)
 *     odd       paths that end early: a capture invalidated, an update
 *               refused, a stream destroyed with its free queued, a graph
 *               with memory nodes (captured cuMemAllocAsync/cuMemFreeAsync)
 *     ipc       a block of a new size each step, its IPC handle taken, freed
 *     ipcopen   the same, each handle opened, read and closed by a child
 *               process (this program as "ipcchild N"), which samples
 *     green     a green context each step, its converted context current, a
 *               block, a kernel launched directly on its stream; destroyed
 *
 * stdout (compared with the run without the library): the checks of the
 * results and the digest of every call's CUresult (adv_common.h). stderr: a
 * line at each quarter of the run,
 *   soak CASE qK heap B rss_kb K live NAME=N ...
 * (mallinfo2's bytes in use, RssAnon and the emulated driver's live objects
 * per kind, device bytes included, cuemuLive, when it has it), read
 * by test_soak.sh: the library's extra over the run without it must stay
 * flat from q2 to q4.
 */
#include "adv_common.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdatomic.h>
#include <sys/wait.h>

static const char *const cases[] = { "graphs", "execs", "streams", "modules", "contexts",
                                     "sizes", "uobj", "threads", "ipc", "green", "odd", "libraries", "longexec", "ipcopen", "ipcchild", NULL };
static const char *const live_names[] = { "contexts", "streams", "events", "modules", "functions",
                                          "graphs", "nodes", "execs", "user_objects",
                                          "device_ranges", "vmm_reservations", "vmm_handles",
                                          "device_bytes", NULL };
static const char *case_name;
static CUcontext ctx;
static CUmodule mod;
static CUfunction add, fill;
static CUstream main_s, side_s;

/* One line of figures on stderr (never through R: not in the digest). */
static void sample(int q)
{
    char text[8192];
    long rss = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        while (fgets(text, sizeof text, f))
            if (!strncmp(text, "RssAnon:", 8)) rss = strtol(text + 8, NULL, 10);
        fclose(f);
    }
    struct mallinfo2 m = mallinfo2();
    fprintf(stderr, "soak %s q%d heap %zu rss_kb %ld live", case_name, q, m.uordblks, rss);
    CUresult (*live)(const char *, unsigned long long *) =
        (CUresult(*)(const char *, unsigned long long *))dlsym(RTLD_DEFAULT, "cuemuLive");
    for (int k = 0; live && live_names[k]; k++) {
        unsigned long long n = 0;
        if (live(live_names[k], &n) == CUDA_SUCCESS) fprintf(stderr, " %s=%llu", live_names[k], n);
    }
    fprintf(stderr, "\n");
}

/* A size no earlier step used (words): 1 .. about 1 Mi. */
static size_t new_words(long i) { return 1 + (size_t)((unsigned long)i * 104729ul % (1ul << 20)); }

/* word 0 and the last word of d (n words) must be want; one check per
 * `every` steps is printed, every failure is. */
static int words_ok(long i, CUdeviceptr d, size_t n, uint32_t want)
{
    uint32_t a = 0, b = 0;
    R(cuMemcpyDtoH(&a, d, 4));
    R(cuMemcpyDtoH(&b, d + 4 * (n - 1), 4));
    if (a == want && b == want) return 1;
    char name[64];
    snprintf(name, sizeof name, "%s_step%ld", case_name, i);
    adv_check(name, 0, "words %u %u, want %u", a, b, want);
    return 0;
}

/* k launches of add(d, v, n) captured on s. */
static CUgraph capture_adds(CUstream s, CUdeviceptr d, uint32_t v, uint64_t n, int k)
{
    CUgraph g = NULL;
    R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (int j = 0; j < k; j++) ADV_LAUNCH(add, s, &d, &v, &n);
    R(cuStreamEndCapture(s, &g));
    return g;
}

static int step_graphs(long i)
{
    size_t n = new_words(i) % 4096 + 1;
    int k = 1 + (int)(i % 5);
    CUdeviceptr d;
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    if (R(cuMemAlloc(&d, 4 * n)) != CUDA_SUCCESS) return 0;
    R(cuMemsetD32(d, 0, n));
    CUgraph g1 = capture_adds(main_s, d, (uint32_t)i, n, k);
    CUgraph g2 = capture_adds(main_s, d, (uint32_t)i + 1, n, k);
    R(cuGraphInstantiateWithFlags(&e, g1, 0));
    R(cuGraphLaunch(e, main_s));
    R(cuGraphExecUpdate(e, g2, &info));
    R(cuGraphLaunch(e, main_s));
    R(cuGraphExecUpdate(e, g2, &info));   /* the same again: answered by the library */
    R(cuGraphLaunch(e, main_s));
    /* a fork and join through two new events: a kernel on the held second
     * stream inside main_s's capture; then a graph built node by node, one
     * node removed before it is instantiated */
    CUevent ef, ej;
    CUgraph g3 = NULL, g4;
    CUgraphExec e3, e4;
    CUgraphNode nodes[2];
    uint32_t one = 1;
    uint64_t n64 = n;
    R(cuEventCreate(&ef, CU_EVENT_DISABLE_TIMING));
    R(cuEventCreate(&ej, CU_EVENT_DISABLE_TIMING));
    R(cuStreamBeginCapture(main_s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    R(cuEventRecord(ef, main_s));
    R(cuStreamWaitEvent(side_s, ef, 0));
    ADV_LAUNCH(add, side_s, &d, &one, &n64);
    R(cuEventRecord(ej, side_s));
    R(cuStreamWaitEvent(main_s, ej, 0));
    R(cuStreamEndCapture(main_s, &g3));
    R(cuGraphInstantiateWithFlags(&e3, g3, 0));
    R(cuGraphLaunch(e3, main_s));
    void *args[] = { &d, &one, &n64 };
    CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(add, args);
    R(cuGraphCreate(&g4, 0));
    R(cuGraphAddKernelNode(&nodes[0], g4, NULL, 0, &kp));
    R(cuGraphAddKernelNode(&nodes[1], g4, &nodes[0], 1, &kp));
    R(cuGraphDestroyNode(nodes[1]));
    R(cuGraphInstantiateWithFlags(&e4, g4, 0));
    R(cuGraphLaunch(e4, main_s));
    R(cuStreamSynchronize(main_s));
    int ok = words_ok(i, d, n, (uint32_t)(k * ((uint32_t)i + 2 * ((uint32_t)i + 1)) + 2));
    R(cuGraphExecDestroy(e3));
    R(cuGraphExecDestroy(e4));
    R(cuGraphDestroy(g3));
    R(cuGraphDestroy(g4));
    R(cuEventDestroy(ef));
    R(cuEventDestroy(ej));
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g1));
    R(cuGraphDestroy(g2));
    R(cuMemFree(d));
    return ok;
}

#define EX_WORDS 64
static CUdeviceptr ex_buf[3];
static CUgraph ex_g[3];
static uint32_t ex_host[3];

static int step_execs(long i)
{
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    int first = (int)(i % 3);
    R(cuGraphInstantiateWithFlags(&e, ex_g[first], 0));
    for (int j = 0; j < 6; j++) {
        int b = (first + j) % 3;
        if (j) R(cuGraphExecUpdate(e, ex_g[b], &info));
        R(cuGraphLaunch(e, main_s));
        ex_host[b] += 2 * 7;
    }
    R(cuStreamSynchronize(main_s));
    R(cuGraphExecDestroy(e));
    int ok = 1;
    if (i % 16 == 0)
        for (int b = 0; b < 3; b++) ok &= words_ok(i, ex_buf[b], EX_WORDS, ex_host[b]);
    return ok;
}

static int step_streams(long i)
{
    CUstream s;
    CUevent e1, e2;
    CUdeviceptr d, keep;
    size_t n = new_words(i) % 65536 + 1;
    uint32_t v = (uint32_t)i;
    uint64_t n64 = n;
    R(cuStreamCreate(&s, i % 2 ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT));
    R(cuEventCreate(&e1, i % 3 ? CU_EVENT_DISABLE_TIMING : CU_EVENT_DEFAULT));
    R(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    R(cuMemAlloc(&keep, 4));
    if (R(cuMemAllocAsync(&d, 4 * n, s)) != CUDA_SUCCESS) return 0;
    ADV_LAUNCH(fill, s, &d, &v, &n64);
    R(cuMemcpyDtoDAsync(keep, d + 4 * (n - 1), 4, s));
    R(cuMemFreeAsync(d, s));
    R(cuEventRecord(e1, s));
    R(cuStreamWaitEvent(main_s, e1, 0));
    if (i % 4 == 0) {
        CUgraph g = capture_adds(s, keep, 1, 1, 2);
        CUgraphExec x;
        R(cuGraphInstantiateWithFlags(&x, g, 0));
        R(cuGraphLaunch(x, s));
        R(cuGraphExecDestroy(x));
        R(cuGraphDestroy(g));
        v += 2;
    }
    R(cuEventRecord(e2, s));
    R(cuEventSynchronize(e2));
    int ok = words_ok(i, keep, 1, v + (uint32_t)(n - 1));
    R(cuEventDestroy(e1));
    R(cuEventDestroy(e2));
    R(cuStreamDestroy(s));
    R(cuMemFree(keep));
    return ok;
}

static char mod_path[PATH_MAX + 64];

/* A graph of three launches from module m on s over d (n words): fill, add,
 * add; updated with itself; launched twice. The words must be 5 + 2 * 2 + i. */
static int module_graph(long i, CUmodule m, CUstream s, CUdeviceptr d, uint64_t n)
{
    static const char *const names[] = { "add_u32", "fill_u32", "mad_u32", "sum_u32",
                                         "range_sum", "ptr_eq", "grid_tag", "pad_sum" };
    CUfunction f[8], fa, ff;
    for (int k = 0; k < 8; k++) R(cuModuleGetFunction(&f[k], m, names[k]));
    fa = f[0], ff = f[1];
    uint32_t five = 5, two = 2;
    CUgraph g = NULL;
    CUgraphExec x;
    CUgraphExecUpdateResultInfo info;
    R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    ADV_LAUNCH(ff, s, &d, &five, &n);
    ADV_LAUNCH(fa, s, &d, &two, &n);
    ADV_LAUNCH(fa, s, &d, &two, &n);
    R(cuStreamEndCapture(s, &g));
    R(cuGraphInstantiateWithFlags(&x, g, 0));
    R(cuGraphLaunch(x, s));
    R(cuGraphExecUpdate(x, g, &info));
    R(cuGraphLaunch(x, s));
    R(cuStreamSynchronize(s));
    int ok = words_ok(i, d, 1, 9);
    R(cuGraphExecDestroy(x));
    R(cuGraphDestroy(g));
    return ok;
}

static int step_modules(long i)
{
    CUmodule m;
    CUdeviceptr d;
    if (R(cuModuleLoad(&m, mod_path)) != CUDA_SUCCESS) return 0;
    R(cuMemAlloc(&d, 64 * 4));
    int ok = module_graph(i, m, main_s, d, 64);
    R(cuMemFree(d));
    R(cuModuleUnload(m));
    return ok;
}

static int step_contexts(long i)
{
    CUcontext c, popped;
    CUdevice dev;
    CUmodule m;
    CUstream s;
    CUdeviceptr d;
    size_t n = new_words(i) % 8192 + 1;
    R(cuDeviceGet(&dev, 0));
    if (R(cuCtxCreate(&c, NULL, 0, dev)) != CUDA_SUCCESS) return 0;
    R(cuModuleLoad(&m, mod_path));
    R(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    R(cuMemAlloc(&d, 4 * n));
    int ok = module_graph(i, m, s, d, n);
    /* a kernel launched directly (not in a graph): its first launch in the
     * context, which the launch filter notes */
    CUfunction fa;
    uint32_t two = 2;
    uint64_t n64 = n;
    R(cuModuleGetFunction(&fa, m, "add_u32"));
    ADV_LAUNCH(fa, s, &d, &two, &n64);
    R(cuStreamSynchronize(s));
    ok &= words_ok(i, d, 1, 11);
    /* a stream with a priority and a stream-ordered block freed on it, both
     * left to the context's destruction */
    CUstream sp;
    CUdeviceptr a;
    R(cuStreamCreateWithPriority(&sp, CU_STREAM_NON_BLOCKING, -1));
    if (R(cuMemAllocAsync(&a, 4 * n + 4, sp)) == CUDA_SUCCESS) R(cuMemFreeAsync(a, sp));
    /* popped first: the emulated driver's context stack is 16 deep */
    R(cuCtxPopCurrent(&popped));
    R(cuCtxDestroy(c));
    return ok;
}

#define SZ_LIVE 8
static CUdeviceptr sz_d[SZ_LIVE];
static size_t sz_n[SZ_LIVE];

static int step_sizes(long i)
{
    int slot = (int)(i % SZ_LIVE);
    if (sz_d[slot]) R(cuMemFree(sz_d[slot]));
    sz_d[slot] = 0;
    size_t bytes = 1 + (size_t)((unsigned long)i * 7919ul % (1ul << 20));
    size_t n = bytes / 4 ? bytes / 4 : 1;
    if (R(cuMemAlloc(&sz_d[slot], 4 * n)) != CUDA_SUCCESS) return 0;
    sz_n[slot] = n;
    uint32_t v = (uint32_t)i;
    uint64_t n64 = n;
    ADV_LAUNCH(fill, main_s, &sz_d[slot], &v, &n64);
    R(cuStreamSynchronize(main_s));
    return words_ok(i, sz_d[slot], 1, v);
}

static atomic_int uobj_runs;
static void CUDA_CB uobj_dtor(void *p) { (void)p; atomic_fetch_add(&uobj_runs, 1); }
static CUdeviceptr uo_buf;

static int step_uobj(long i)
{
    CUuserObject o;
    CUgraph c;
    CUgraphExec x;
    CUgraphExecUpdateResultInfo info;
    R(cuUserObjectCreate(&o, NULL, uobj_dtor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CUgraph g = capture_adds(main_s, uo_buf, 1, 1, 1);
    R(cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    R(cuGraphClone(&c, g));
    R(cuGraphInstantiateWithFlags(&x, g, 0));
    R(cuGraphLaunch(x, main_s));
    R(cuGraphExecUpdate(x, c, &info));
    R(cuGraphLaunch(x, main_s));
    R(cuStreamSynchronize(main_s));
    R(cuGraphExecDestroy(x));
    R(cuGraphDestroy(c));
    R(cuGraphDestroy(g));
    return i % 64 ? 1 : words_ok(i, uo_buf, 1, (uint32_t)(2 * (i + 1)));
}

typedef struct th_arg { long i; int ok; } th_arg;

static void *soak_thread(void *p)
{
    th_arg *a = p;
    CUstream s;
    CUdeviceptr d, keep;
    uint64_t n = 128;
    uint32_t v = (uint32_t)a->i;
    R(cuCtxSetCurrent(ctx));
    R(cuMemAlloc(&keep, 4 * n));
    if (R(cuMemAllocAsync(&d, 4 * n, CU_STREAM_PER_THREAD)) == CUDA_SUCCESS) {
        ADV_LAUNCH(fill, CU_STREAM_PER_THREAD, &d, &v, &n);
        R(cuMemcpyDtoDAsync(keep, d, 4 * n, CU_STREAM_PER_THREAD));
        R(cuMemFreeAsync(d, CU_STREAM_PER_THREAD));
    }
    R(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    /* the per-thread stream's copy must be done before the graph adds: the
     * block's free is left queued when the thread exits */
    CUevent e;
    R(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    R(cuEventRecord(e, CU_STREAM_PER_THREAD));
    R(cuStreamWaitEvent(s, e, 0));
    R(cuEventDestroy(e));
    CUgraph g = capture_adds(s, keep, 3, n, 2);
    CUgraphExec x;
    R(cuGraphInstantiateWithFlags(&x, g, 0));
    R(cuGraphLaunch(x, s));
    R(cuStreamSynchronize(s));
    a->ok = words_ok(a->i, keep, 1, v + 6);
    R(cuGraphExecDestroy(x));
    R(cuGraphDestroy(g));
    R(cuStreamDestroy(s));
    R(cuMemFree(keep));
    return NULL;
}

static int step_threads(long i)
{
    pthread_t t;
    th_arg a = { i, 0 };
    if (pthread_create(&t, NULL, soak_thread, &a) != 0) {
        printf("pthread_create failed\n");
        exit(2);
    }
    pthread_join(t, NULL);
    return a.ok;
}

static int step_green(long i)
{
    CUcontext cc;
    CUstream gs;
    CUdeviceptr d;
    uint64_t n = 1 + new_words(i) % 1024;
    uint32_t v = (uint32_t)i;
    CUgreenCtx g = adv_green_make(&cc, &gs);
    R(cuCtxSetCurrent(cc));
    R(cuMemAlloc(&d, 4 * n));
    ADV_LAUNCH(fill, gs, &d, &v, &n);
    R(cuStreamSynchronize(gs));
    int ok = words_ok(i, d, 1, v);
    R(cuMemFree(d));
    R(cuStreamDestroy(gs));
    R(cuCtxSetCurrent(ctx));
    R(cuGreenCtxDestroy(g));
    return ok;
}

/* Paths that end early: a capture invalidated by a synchronous copy (its end
 * fails), an update refused for a changed topology, a stream destroyed with
 * its stream-ordered free still queued, a graph that allocates and frees
 * (captured cuMemAllocAsync / cuMemFreeAsync: memory nodes). */
static int step_odd(long i)
{
    CUgraph g = NULL, g2 = NULL;
    CUgraphExec x;
    CUgraphExecUpdateResultInfo info;
    CUstream s;
    CUdeviceptr d, keep;
    uint32_t host = 0, v = (uint32_t)i;
    uint64_t n = 1 + new_words(i) % 512;
    R(cuMemAlloc(&keep, 4 * (n + 2)));   /* words 1 and 2 take the copies */
    R(cuMemsetD32(keep, 0, n + 2));
    R(cuStreamBeginCapture(main_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ADV_LAUNCH(add, main_s, &keep, &v, &n);
    R(cuMemcpyDtoH(&host, keep, 4));      /* not allowed while capturing: invalidates */
    R(cuStreamEndCapture(main_s, &g));
    if (g) R(cuGraphDestroy(g));
    g = capture_adds(main_s, keep, 1, n, 1);
    g2 = capture_adds(main_s, keep, 1, n, 2);
    R(cuGraphInstantiateWithFlags(&x, g, 0));
    R(cuGraphExecUpdate(x, g2, &info));   /* topology changed: refused */
    R(cuGraphLaunch(x, main_s));
    R(cuStreamSynchronize(main_s));
    R(cuGraphExecDestroy(x));
    R(cuGraphDestroy(g));
    R(cuGraphDestroy(g2));
    R(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (R(cuMemAllocAsync(&d, 4 * n, s)) == CUDA_SUCCESS) {
        ADV_LAUNCH(fill, s, &d, &v, &n);
        R(cuMemcpyDtoDAsync(keep + 4, d, 4, s));
        R(cuMemFreeAsync(d, s));
    }
    R(cuStreamDestroy(s));                /* the free still queued */
    R(cuStreamBeginCapture(main_s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    if (R(cuMemAllocAsync(&d, 4 * n, main_s)) == CUDA_SUCCESS) {
        ADV_LAUNCH(fill, main_s, &d, &v, &n);
        R(cuMemcpyDtoDAsync(keep + 8, d, 4, main_s));
        R(cuMemFreeAsync(d, main_s));
    }
    R(cuStreamEndCapture(main_s, &g));
    R(cuGraphInstantiateWithFlags(&x, g, 0));
    R(cuGraphLaunch(x, main_s));
    R(cuStreamSynchronize(main_s));
    R(cuCtxSynchronize());
    uint32_t w[3];
    R(cuMemcpyDtoH(w, keep, sizeof w));
    R(cuGraphExecDestroy(x));
    R(cuGraphDestroy(g));
    R(cuMemFree(keep));
    if (w[0] == 1 && w[1] == v && w[2] == v) return 1;
    char name[64];
    snprintf(name, sizeof name, "odd_step%ld", i);
    adv_check(name, 0, "words %u %u %u, want %u %u %u", w[0], w[1], w[2], 1u, v, v);
    return 0;
}

/* The kernels as a library (CUkernel handles): loaded, looked up, captured
 * and launched directly, unloaded. */
static int step_libraries(long i)
{
    CUlibrary lib;
    CUkernel ka, kf;
    CUdeviceptr d;
    uint64_t n = 1 + new_words(i) % 256;
    uint32_t v = (uint32_t)i, one = 1;
    if (R(cuLibraryLoadFromFile(&lib, mod_path, NULL, NULL, 0, NULL, NULL, 0)) != CUDA_SUCCESS) return 0;
    R(cuLibraryGetKernel(&ka, lib, "add_u32"));
    R(cuLibraryGetKernel(&kf, lib, "fill_u32"));
    R(cuMemAlloc(&d, 4 * n));
    ADV_LAUNCH((CUfunction)kf, main_s, &d, &v, &n);
    CUgraph g = NULL;
    CUgraphExec x;
    CUgraphExecUpdateResultInfo info;
    R(cuStreamBeginCapture(main_s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    ADV_LAUNCH((CUfunction)ka, main_s, &d, &one, &n);
    R(cuStreamEndCapture(main_s, &g));
    R(cuGraphInstantiateWithFlags(&x, g, 0));
    R(cuGraphLaunch(x, main_s));
    R(cuGraphExecUpdate(x, g, &info));
    R(cuGraphLaunch(x, main_s));
    R(cuStreamSynchronize(main_s));
    int ok = words_ok(i, d, 1, v + 2);
    R(cuGraphExecDestroy(x));
    R(cuGraphDestroy(g));
    R(cuMemFree(d));
    R(cuLibraryUnload(lib));
    return ok;
}

/* One exec for the whole run, updated every step from a graph captured on
 * blocks of new sizes (new addresses; three alive at a time, used in turn). */
#define LX_LIVE 3
static CUgraphExec lx_exec;
static CUdeviceptr lx_d[LX_LIVE];

static int step_longexec(long i)
{
    int slot = (int)(i % LX_LIVE);
    uint64_t n = 1 + new_words(i) % 4096;
    uint32_t v = (uint32_t)i;
    CUgraphExecUpdateResultInfo info;
    if (lx_d[slot]) R(cuMemFree(lx_d[slot]));
    lx_d[slot] = 0;
    if (R(cuMemAlloc(&lx_d[slot], 4 * n)) != CUDA_SUCCESS) return 0;
    CUgraph g = NULL;
    R(cuStreamBeginCapture(main_s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    ADV_LAUNCH(fill, main_s, &lx_d[slot], &v, &n);
    R(cuStreamEndCapture(main_s, &g));
    if (!lx_exec) R(cuGraphInstantiateWithFlags(&lx_exec, g, 0));
    else R(cuGraphExecUpdate(lx_exec, g, &info));
    R(cuGraphLaunch(lx_exec, main_s));
    R(cuStreamSynchronize(main_s));
    R(cuGraphDestroy(g));
    return words_ok(i, lx_d[slot], 1, v);
}

/* ipcopen: the parent exports a block of a new size each step; a child
 * (this program as "ipcchild N", its fds 3 and 4 two pipes) opens each
 * handle, reads the block's first word, closes it and answers the word. The
 * child samples (the importer's tables are what this case attacks). */
static int ipc_to = -1, ipc_from = -1;
static pid_t ipc_pid;

static void ipc_spawn(long n)
{
    int a[2], b[2];
    char exe[PATH_MAX], count[32], stats[PATH_MAX + 16];
    if (pipe(a) || pipe(b)) { printf("pipe failed\n"); exit(2); }
    adv_path("adv_soak", exe, sizeof exe);
    snprintf(count, sizeof count, "%ld", n);
    const char *st = getenv("CUDAEMU_STATS");
    if (st) snprintf(stats, sizeof stats, "%s.child", st);
    fflush(NULL);
    ipc_pid = fork();
    if (ipc_pid < 0) { printf("fork failed\n"); exit(2); }
    if (ipc_pid == 0) {
        if (dup2(a[0], 3) < 0 || dup2(b[1], 4) < 0) _exit(2);
        if (st) setenv("CUDAEMU_STATS", stats, 1);
        unsetenv("STABLEGRAPH_REPORT");   /* the parent's report is the one judged */
        char *argv[] = { exe, "ipcchild", count, NULL };
        execv(exe, argv);
        _exit(2);
    }
    close(a[0]);
    close(b[1]);
    ipc_to = a[1];
    ipc_from = b[0];
}

static int step_ipcopen(long i)
{
    CUdeviceptr d;
    CUipcMemHandle h;
    size_t n = new_words(i) % 65536 + 1;
    uint32_t v = (uint32_t)i * 7u + 1u, got = 0;
    if (R(cuMemAlloc(&d, 4 * n)) != CUDA_SUCCESS) return 0;
    R(cuMemsetD32(d, v, n));
    R(cuCtxSynchronize());
    if (R(cuIpcGetMemHandle(&h, d)) != CUDA_SUCCESS) memset(&h, 0, sizeof h);
    int ok = write(ipc_to, &h, sizeof h) == (ssize_t)sizeof h && read(ipc_from, &got, sizeof got) == (ssize_t)sizeof got;
    R(cuMemFree(d));
    if (ok && got == v) return 1;
    char name[64];
    snprintf(name, sizeof name, "ipcopen_step%ld", i);
    adv_check(name, 0, "the child read %u, want %u", got, v);
    return 0;
}

/* The child of ipcopen: n handles opened, read and closed. */
static int ipc_child(long n)
{
    case_name = "ipcopen";
    adv_open(&ctx, NULL);
    long bad = 0;
    for (long i = 0; i < n; i++) {
        CUipcMemHandle h;
        CUdeviceptr p = 0;
        uint32_t w = 0xffffffffu;
        if (read(3, &h, sizeof h) != (ssize_t)sizeof h) { bad++; break; }
        if (R(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) == CUDA_SUCCESS) {
            R(cuMemcpyDtoH(&w, p, 4));
            R(cuIpcCloseMemHandle(p));
        } else {
            bad++;
        }
        if (write(4, &w, sizeof w) != (ssize_t)sizeof w) { bad++; break; }
        for (int q = 1; q <= 4; q++)
            if (i + 1 == n * q / 4) sample(q);
    }
    adv_check("ipcchild", bad == 0, "%ld handles, %ld failed", n, bad);
    return adv_finish();
}

static int step_ipc(long i)
{
    CUdeviceptr d;
    CUipcMemHandle h;
    size_t n = new_words(i) % 65536 + 1;
    if (R(cuMemAlloc(&d, 4 * n)) != CUDA_SUCCESS) return 0;
    R(cuIpcGetMemHandle(&h, d));
    R(cuMemsetD32(d, (uint32_t)i, n));
    int ok = i % 16 ? 1 : words_ok(i, d, n, (uint32_t)i);
    R(cuMemFree(d));
    return ok;
}

int main(int argc, char **argv)
{
    int c = adv_case(argc, argv, cases);
    case_name = cases[c];
    long n = argc > 2 ? atol(argv[2]) : 1000;
    if (n < 4) n = 4;
    if (strcmp(case_name, "ipcchild") == 0) return ipc_child(n);
    adv_open(&ctx, &mod);
    adv_path("adv_kernels.so", mod_path, sizeof mod_path);
    add = adv_fn(mod, "add_u32");
    fill = adv_fn(mod, "fill_u32");
    MUST(cuStreamCreate(&main_s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&side_s, CU_STREAM_NON_BLOCKING));
    if (c == 1) {
        for (int b = 0; b < 3; b++) {
            MUST(cuMemAlloc(&ex_buf[b], 4 * EX_WORDS));
            MUST(cuMemsetD32(ex_buf[b], 0, EX_WORDS));
            ex_g[b] = capture_adds(main_s, ex_buf[b], 7, EX_WORDS, 2);
        }
    }
    if (c == 6) {
        MUST(cuMemAlloc(&uo_buf, 4));
        MUST(cuMemsetD32(uo_buf, 0, 1));
    }
    int (*const steps[])(long) = { step_graphs, step_execs, step_streams, step_modules, step_contexts,
                                   step_sizes, step_uobj, step_threads, step_ipc, step_green, step_odd, step_libraries, step_longexec, step_ipcopen };
    int ipcopen = strcmp(case_name, "ipcopen") == 0;
    if (ipcopen) ipc_spawn(n);
    long bad = 0;
    for (long i = 0; i < n; i++) {
        bad += !steps[c](i);
        for (int q = 1; !ipcopen && q <= 4; q++) {
            if (i + 1 != n * q / 4) continue;
            /* the user objects' destructors run asynchronously (and so are
             * destroyed late): every one released so far is waited for, so
             * that the live count sampled does not depend on that thread's
             * timing (seen: one object more or less, either run) */
            if (c == 6) {
                for (int k = 0; k < 400 && atomic_load(&uobj_runs) < i + 1; k++) adv_sleep_us(5000);
                adv_sleep_us(5000);   /* the handle goes just after its destructor returns */
            }
            sample(q);
        }
    }
    if (ipcopen) {
        int status = 0;
        close(ipc_to);
        fflush(stdout);
        waitpid(ipc_pid, &status, 0);
        adv_check("ipcchild_exit", WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
        const char *st = getenv("CUDAEMU_STATS");
        char path[PATH_MAX + 16], buf[1 << 16];
        snprintf(path, sizeof path, "%s.child", st ? st : "");
        FILE *f = st ? fopen(path, "r") : NULL;
        size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[len] = 0;
        const char *vs = strstr(buf, "\"violations\":");
        if (st) adv_check("ipcchild_violations", vs && strtol(vs + 14, NULL, 10) == 0, "%s", vs ? "read" : "none");
    }
    if (c == 1)
        for (int b = 0; b < 3; b++) words_ok(n, ex_buf[b], EX_WORDS, ex_host[b]);
    if (c == 6) {
        MUST(cuCtxSynchronize());
        /* the destructors run asynchronously: give them a moment */
        for (int k = 0; k < 200 && atomic_load(&uobj_runs) < n; k++) adv_sleep_us(5000);
        adv_check("uobj_destructors", atomic_load(&uobj_runs) == n, "%d of %ld ran", atomic_load(&uobj_runs), n);
    }
    adv_check(case_name, bad == 0, "%ld steps, %ld wrong", n, bad);
    return adv_finish();
}
