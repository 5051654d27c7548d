/*
 * tests/e2e/adv_common.h: what the adversarial programs of issue 10
 * (tests/e2e/adv_*.c, run by tests/e2e/test_correctness.sh) share.
 *
 * Every program is a valid driver-API program that computes its expected
 * result on the host and prints, on stdout, only lines that must be the same
 * with and without the library:
 *   - every driver call that does not return CUDA_SUCCESS, with its line and
 *     the CUresult name ("L123 cuGraphLaunch(...) = CUDA_ERROR_...");
 *   - "check NAME: ok (...)" or "check NAME: WRONG (...)" for each result the
 *     program verifies against its host computation (absolute values);
 *   - at the end, "driver calls: N, results digest: X": a digest of (source
 *     line, CUresult) of every call made through R() or MUST(), so a changed
 *     result of any call shows even when it is not printed.
 * The digest is a sum of per-call hashes, so calls made from several threads
 * in a varying order give the same digest.
 * Exit status: 0 when every check held, 3 when one did not, 2 when a set-up
 * call failed (MUST), 4 for a bad command line.
 * ADV_VERBOSE=1 prints every call and its result on stderr.
 *
 * Kernels come from the emulated module adv_kernels.so next to the program
 * (tests/e2e/adv_kernels.c).
 *
 * Thread safety: adv_r() and adv_check() may be called from any thread
 * (adv_lock guards the counters and the output). A thread whose lines would
 * interleave with another's in a varying order sets adv_tout to a stream of
 * its own (open_memstream) and the program prints it in a fixed order.
 */
#ifndef ADV_COMMON_H
#define ADV_COMMON_H

#include <cuda.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../launch_util.h"

static pthread_mutex_t adv_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t adv_digest;
static unsigned long adv_ncalls;
static int adv_nchecks, adv_nwrong;
static __thread FILE *adv_tout;         /* this thread's lines, if not stdout */
#define ADV_OUT (adv_tout ? adv_tout : stdout)

static inline const char *adv_err(CUresult r)
{
    const char *s = NULL;
    if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s) return "(unknown CUresult)";
    return s;
}

static inline uint64_t adv_mix(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Counts a driver call's result: folded into the digest, printed unless it
 * is CUDA_SUCCESS. Returns r. */
static inline CUresult adv_r(CUresult r, const char *what, int line)
{
    pthread_mutex_lock(&adv_lock);
    adv_ncalls++;
    adv_digest += adv_mix(adv_mix(0xcbf29ce484222325ull, (uint64_t)line), (uint64_t)r);
    if (r != CUDA_SUCCESS) {
        fprintf(ADV_OUT, "L%d %s = %s\n", line, what, adv_err(r));
        fflush(ADV_OUT);
    }
    if (getenv("ADV_VERBOSE")) fprintf(stderr, "L%d %s = %s\n", line, what, adv_err(r));
    pthread_mutex_unlock(&adv_lock);
    return r;
}
#define R(call) adv_r((call), #call, __LINE__)

/* A set-up call that must succeed: on failure the program ends (status 2). */
#define MUST(call)                                                            \
    do {                                                                      \
        if (R(call) != CUDA_SUCCESS) {                                        \
            printf("set-up failed at line %d\n", __LINE__);                   \
            exit(2);                                                          \
        }                                                                     \
    } while (0)

/* Prints "check NAME: ok (...)" or "check NAME: WRONG (...)"; the details
 * must be the same in every correct run. Returns ok. */
static inline int adv_check(const char *name, int ok, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&adv_lock);
    adv_nchecks++;
    adv_nwrong += !ok;
    fprintf(ADV_OUT, "check %s: %s (", name, ok ? "ok" : "WRONG");
    va_start(ap, fmt);
    vfprintf(ADV_OUT, fmt, ap);
    va_end(ap);
    fprintf(ADV_OUT, ")\n");
    fflush(ADV_OUT);
    pthread_mutex_unlock(&adv_lock);
    return ok;
}

/* One line (fmt, then a newline) on this thread's output, under adv_lock. */
static inline void adv_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void adv_line(const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&adv_lock);
    va_start(ap, fmt);
    vfprintf(ADV_OUT, fmt, ap);
    va_end(ap);
    fputc('\n', ADV_OUT);
    pthread_mutex_unlock(&adv_lock);
}

/* The last lines; the exit status for main. */
static inline int adv_finish(void)
{
    pthread_mutex_lock(&adv_lock);
    printf("driver calls: %lu, results digest: %016llx\n", adv_ncalls,
           (unsigned long long)adv_digest);
    printf("checks: %d, wrong: %d\n", adv_nchecks, adv_nwrong);
    fflush(stdout);
    int rc = adv_nchecks == 0 ? 3 : adv_nwrong ? 3 : 0;
    pthread_mutex_unlock(&adv_lock);
    return rc;
}

/* "<directory of this program>/<name>" into out; exits 2 if it does not fit. */
static inline void adv_path(const char *name, char *out, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        printf("cannot read /proc/self/exe\n");
        exit(2);
    }
    exe[len] = 0;
    int w = snprintf(out, n, "%s/%s", dirname(exe), name);
    if (w <= 0 || (size_t)w >= n) {
        printf("path too long\n");
        exit(2);
    }
}

/* cuInit, device 0's primary context current (*ctx), and the module `name`
 * (next to this program) loaded (*mod, if mod is not NULL). */
static inline void adv_open_module(const char *name, CUcontext *ctx, CUmodule *mod)
{
    CUdevice dev;
    char path[PATH_MAX + 64];
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(ctx, dev));
    MUST(cuCtxSetCurrent(*ctx));
    if (mod) {
        adv_path(name, path, sizeof path);
        MUST(cuModuleLoad(mod, path));
    }
}

static inline void adv_open(CUcontext *ctx, CUmodule *mod)
{
    adv_open_module("adv_kernels.so", ctx, mod);
}

static inline CUfunction adv_fn(CUmodule mod, const char *name)
{
    CUfunction f;
    MUST(cuModuleGetFunction(&f, mod, name));
    return f;
}

/* Launches f with grid 1x1x1, block 1x1x1 on s (kernelParams). */
#define ADV_LAUNCH(f, s, ...)                                                 \
    ({                                                                        \
        void *adv_args_[] = { __VA_ARGS__ };                                  \
        R(cuLaunchKernel((f), 1, 1, 1, 1, 1, 1, 0, (s), adv_args_, NULL));    \
    })

/* Captures one launch of f(args) (grid and block 1x1x1) on s into *g,
 * instantiates it; *node = its node. Set-up: exits on failure. */
static inline CUgraphExec adv_one_node_exec(CUstream s, CUfunction f, void **args, CUgraph *g,
                                            CUgraphNode *node)
{
    CUgraphExec exec;
    size_t n = 1;
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    MUST(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    MUST(cuStreamEndCapture(s, g));
    MUST(cuGraphGetNodes(*g, node, &n));
    MUST(cuGraphInstantiateWithFlags(&exec, *g, 0));
    return exec;
}

/* The n nodes of g, a chain (as one stream's capture makes), in chain order
 * (cuGraphGetNodes does not promise creation order). Exits on failure. */
static inline void adv_chain_nodes(CUgraph g, CUgraphNode *out, size_t n)
{
    size_t k = 1;
    MUST(cuGraphGetRootNodes(g, &out[0], &k));
    for (size_t i = 1; i < n; i++) {
        k = 1;
        MUST(cuGraphNodeGetDependentNodes(out[i - 1], &out[i], NULL, &k));
    }
}

/* The kernel node parameters of f(args) with grid and block 1x1x1 (args
 * NULL: none; a caller may set extra or the grid afterwards). */
static inline CUDA_KERNEL_NODE_PARAMS adv_kernel_params(CUfunction f, void **args)
{
    return (CUDA_KERNEL_NODE_PARAMS){ .func = f, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                      .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                                      .kernelParams = args };
}

/* A kernel node f(args) (grid and block 1x1x1) added to g after deps; the
 * program ends if the driver refuses it. */
static inline CUgraphNode adv_add_kernel(CUgraph g, const CUgraphNode *deps, size_t nd, CUfunction f,
                                         void **args)
{
    CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(f, args);
    CUgraphNode out;
    MUST(cuGraphAddKernelNode(&out, g, deps, nd, &kp));
    return out;
}

/* A kernel node f(a0, a1, n) (the usual pointer, value-or-pointer, count
 * signature; a0 and a1 point at the arguments) added to g after deps. */
static inline CUgraphNode adv_add_kernel3(CUgraph g, const CUgraphNode *deps, size_t nd, CUfunction f,
                                          void *a0, void *a1, uint64_t n)
{
    void *args[] = { a0, a1, &n };
    return adv_add_kernel(g, deps, nd, f, args);
}

/* A conditional node (cuGraphAddNode) of type t with `size` bodies on
 * handle h and context ctx in g after deps; its body graphs in body[]. */
static inline CUgraphNode adv_add_cond(CUgraph g, const CUgraphNode *deps, size_t nd, CUcontext ctx,
                                       CUgraphConditionalHandle h, CUgraphConditionalNodeType t,
                                       unsigned size, CUgraph *body)
{
    CUgraphNode out;
    CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_CONDITIONAL,
                             .conditional = { .handle = h, .type = t, .size = size,
                                              .phGraph_out = body, .ctx = ctx } };
    MUST(cuGraphAddNode(&out, g, deps, NULL, nd, &np));
    return out;
}

/* The parameters of a 1D device-to-device copy of `bytes` from src to dst. */
static inline CUDA_MEMCPY3D adv_copy_1d(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
    CUDA_MEMCPY3D m;
    memset(&m, 0, sizeof m);
    m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    m.srcDevice = src;
    m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.dstDevice = dst;
    m.WidthInBytes = bytes;
    m.Height = 1;
    m.Depth = 1;
    return m;
}

/* cuGraphExecUpdate_v2, its result printed where it is not a success. */
static inline void adv_update(CUgraphExec e, CUgraph g)
{
    CUgraphExecUpdateResultInfo info;
    if (R(cuGraphExecUpdate_v2(e, g, &info)) != CUDA_SUCCESS) printf("update result %d\n", (int)info.result);
}

/* cuGraphExecKernelNodeSetParams(exec, node, f(args)) with grid and block
 * 1x1x1, counted as a call at the caller's line. */
static inline CUresult adv_set_kernel_at(int line, CUgraphExec exec, CUgraphNode node,
                                         CUfunction f, void **args)
{
    CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(f, args);
    return adv_r(cuGraphExecKernelNodeSetParams(exec, node, &kp),
                 "cuGraphExecKernelNodeSetParams(exec, node, f(args))", line);
}
#define ADV_SET_KERNEL(exec, node, f, args) adv_set_kernel_at(__LINE__, exec, node, f, args)

/* FNV-1a 64 over n bytes. */
static inline uint64_t adv_fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Host copy of n 32-bit words at d (synchronous); NULL on failure. */
static inline uint32_t *adv_read(CUdeviceptr d, size_t n)
{
    uint32_t *h = malloc(n ? n * 4 : 1);
    if (!h) return NULL;
    if (R(cuMemcpyDtoH(h, d, n * 4)) != CUDA_SUCCESS) {
        free(h);
        return NULL;
    }
    return h;
}

/* Compares n words at device address d with want[]; prints one check line
 * with the first differing index. */
static inline int adv_check_words(const char *name, CUdeviceptr d, const uint32_t *want, size_t n)
{
    uint32_t *got = adv_read(d, n);
    if (!got) return adv_check(name, 0, "the copy back failed");
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            if (first == n) first = i;
            bad++;
        }
    int ok = bad == 0;
    if (ok)
        adv_check(name, 1, "%zu words, fnv %016llx", n, (unsigned long long)adv_fnv(want, n * 4));
    else
        adv_check(name, 0, "%zu of %zu words differ, first at %zu: got %08x, want %08x", bad, n,
                  first, got[first], want[first]);
    free(got);
    return ok;
}

/* Waits for st, then compares acc's n words with want (check "<what>_step<k>"). */
static inline int adv_step_check(CUstream st, const char *what, int k, CUdeviceptr acc, const uint32_t *want,
                                 size_t n)
{
    char name[64];
    R(cuStreamSynchronize(st));
    snprintf(name, sizeof name, "%s_step%d", what, k);
    return adv_check_words(name, acc, want, n);
}

/* The buffers of the launch-order attacks (adv_order.c, adv_ptsz.c): n
 * words each of inputs *a (7i + 1) and *b (0x1000 + 13i) and of the
 * accumulator *acc (i), allocated and filled, their host copies in ha, hb
 * and acc_h. */
static inline void adv_order_buffers(uint32_t n, CUdeviceptr *a, CUdeviceptr *b, CUdeviceptr *acc,
                                     uint32_t *ha, uint32_t *hb, uint32_t *acc_h)
{
    MUST(cuMemAlloc(a, n * 4));
    MUST(cuMemAlloc(b, n * 4));
    MUST(cuMemAlloc(acc, n * 4));
    for (uint32_t i = 0; i < n; i++) {
        ha[i] = 7u * i + 1u;
        hb[i] = 0x1000u + 13u * i;
        acc_h[i] = i;
    }
    MUST(cuMemcpyHtoD(*a, ha, n * 4));
    MUST(cuMemcpyHtoD(*b, hb, n * 4));
    MUST(cuMemcpyHtoD(*acc, acc_h, n * 4));
}

/* The buffers of the rotating mad_u32 attacks (adv_execset.c, adv_flags.c):
 * three inputs in[k] of n words (0x100 (k + 1) + 7i; host copies at hin +
 * k * n) and the accumulator *acc (i, host copy in model), allocated and
 * filled. */
static inline void adv_mad_buffers(uint32_t n, CUdeviceptr *in, uint32_t *hin, CUdeviceptr *acc,
                                   uint32_t *model)
{
    for (uint32_t k = 0; k < 3; k++) {
        MUST(cuMemAlloc(&in[k], n * 4));
        for (uint32_t i = 0; i < n; i++) hin[k * n + i] = 0x100u * (k + 1) + 7u * i;
        MUST(cuMemcpyHtoD(in[k], hin + k * n, n * 4));
    }
    MUST(cuMemAlloc(acc, n * 4));
    for (uint32_t i = 0; i < n; i++) model[i] = i;
    MUST(cuMemcpyHtoD(*acc, model, n * 4));
}

/* A launch-order step's result: acc_h advanced by a then b (acc = acc * 3 +
 * in, twice) and compared with the device's acc. 1 if equal. */
static inline int adv_order_step_ok(CUdeviceptr acc, uint32_t *acc_h, const uint32_t *ha, const uint32_t *hb,
                                    uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) acc_h[i] = (acc_h[i] * 3u + ha[i]) * 3u + hb[i];
    uint32_t *got = adv_read(acc, n);
    int ok = got && memcmp(got, acc_h, n * 4) == 0;
    free(got);
    return ok;
}

/* The end of a launch-order attack: the accumulator checked, the exec, its
 * graph and the buffers (adv_order_buffers) gone. */
static inline void adv_order_done(CUgraphExec exec, CUgraph g, CUdeviceptr a, CUdeviceptr b, CUdeviceptr acc,
                                  const uint32_t *acc_h, uint32_t n)
{
    adv_check_words("accumulator", acc, acc_h, n);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    R(cuMemFree(a));
    R(cuMemFree(b));
    R(cuMemFree(acc));
}

/* Sleeps `us` microseconds. */
static inline void adv_sleep_us(unsigned us)
{
    struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* A host function (cuLaunchHostFunc) that holds its stream for arg
 * microseconds ((void *)(uintptr_t)us). */
static inline void CUDA_CB adv_sleep_host(void *arg) { adv_sleep_us((unsigned)(uintptr_t)arg); }

/* A stream held for the host: a host function adv_gate_wait queued on it
 * returns once adv_release() is called (adv_released() tells). One gate per
 * process, closed at start. */
static int adv_gate;
static inline void CUDA_CB adv_gate_wait(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&adv_gate, __ATOMIC_ACQUIRE)) adv_sleep_us(500);
}
static inline int adv_released(void) { return __atomic_load_n(&adv_gate, __ATOMIC_ACQUIRE); }
static inline void adv_release(void) { __atomic_store_n(&adv_gate, 1, __ATOMIC_RELEASE); }

/* The capture status name of stream s ("none", "active", "invalidated", or
 * the error name). */
static inline const char *adv_capture_status(CUstream s)
{
    CUstreamCaptureStatus st;
    CUresult r = R(cuStreamIsCapturing(s, &st));
    if (r != CUDA_SUCCESS) return adv_err(r);
    return st == CU_STREAM_CAPTURE_STATUS_NONE     ? "none"
           : st == CU_STREAM_CAPTURE_STATUS_ACTIVE ? "active"
                                                   : "invalidated";
}

/* The case named on the command line: argv[1] must be one of names[]
 * (NULL-terminated); returns its index, or exits 4 with the list. */
static inline int adv_case(int argc, char **argv, const char *const *names)
{
    for (int i = 0; argc > 1 && names[i]; i++)
        if (strcmp(argv[1], names[i]) == 0) return i;
    printf("usage: %s CASE, CASE one of:", argv[0]);
    for (int i = 0; names[i]; i++) printf(" %s", names[i]);
    printf("\n");
    exit(4);
}

/* "PROG SEED [MODE]" (the random programs): the mode's index in modes[]
 * (NULL-terminated; dflt when none is given) and *seed; -1 after printing
 * the usage line. */
static inline int adv_seed_mode(int argc, char **argv, const char *const *modes, int dflt,
                                unsigned long *seed)
{
    int mode = argc == 3 ? -1 : dflt;
    for (int m = 0; argc == 3 && modes[m]; m++)
        if (strcmp(argv[2], modes[m]) == 0) mode = m;
    if (argc < 2 || argc > 3 || mode < 0) {
        printf("usage: %s SEED [", argv[0]);
        for (int m = 0; modes[m]; m++) printf("%s%s", m ? "|" : "", modes[m]);
        printf("]\n");
        return -1;
    }
    *seed = strtoul(argv[1], NULL, 10);
    return mode;
}

/* One of the threads adv_threads runs: fn(arg) with ctx current and its
 * lines in a stream of its own, printed after `label` once all ended. */
typedef struct adv_thread {
    void (*fn)(void *arg);
    void *arg;
    CUcontext ctx;
    char label[96];
    pthread_t t;
    char *out;
    size_t len;
} adv_thread;

static inline void *adv_thread_main(void *p)
{
    adv_thread *a = p;
    adv_tout = open_memstream(&a->out, &a->len);
    if (!adv_tout || cuCtxSetCurrent(a->ctx) != CUDA_SUCCESS) {
        printf("set-up failed in a thread\n");
        exit(2);
    }
    a->fn(a->arg);
    fclose(adv_tout);
    return NULL;
}

/* Runs the n threads at once, then prints each one's label and lines, in
 * order (so the output does not depend on how they interleaved). */
static inline void adv_threads(adv_thread *t, int n)
{
    for (int k = 0; k < n; k++)
        if (pthread_create(&t[k].t, NULL, adv_thread_main, &t[k]) != 0) {
            printf("set-up failed: pthread_create\n");
            exit(2);
        }
    for (int k = 0; k < n; k++) {
        pthread_join(t[k].t, NULL);
        printf("%s\n%.*s", t[k].label, (int)t[k].len, t[k].out);
        free(t[k].out);
    }
}

/* Runs fn(&seed) and fn(&seed + 1) on two threads with ctx current (the
 * random programs' mode threads), each one's lines printed after both. */
static inline void adv_seed_pair(void (*fn)(void *arg), unsigned long seed, CUcontext ctx)
{
    unsigned long seeds[2] = { seed, seed + 1 };
    adv_thread t[2];
    for (int k = 0; k < 2; k++) {
        t[k] = (adv_thread){ .fn = fn, .arg = &seeds[k], .ctx = ctx };
        snprintf(t[k].label, sizeof t[k].label, "thread %d (seed %lu):", k, seeds[k]);
    }
    adv_threads(t, 2);
}

/* (adv_green.c, adv_threads2.c) A green context of 16 SMs of device 0; *cc its converted context; *gs (if gs) a stream
 * of it (cuGreenCtxStreamCreate). */
static inline CUgreenCtx adv_green_make(CUcontext *cc, CUstream *gs)
{
    CUdevResource dev, grp[1];
    unsigned ng = 1;
    CUdevResourceDesc desc;
    CUgreenCtx g;
    MUST(cuDeviceGetDevResource(0, &dev, CU_DEV_RESOURCE_TYPE_SM));
    MUST(cuDevSmResourceSplitByCount(grp, &ng, &dev, NULL, 0, 16));
    MUST(cuDevResourceGenerateDesc(&desc, grp, 1));
    MUST(cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM));
    MUST(cuCtxFromGreenCtx(cc, g));
    if (gs) MUST(cuGreenCtxStreamCreate(gs, g, CU_STREAM_NON_BLOCKING, 0));
    return g;
}

/* Steps that re-capture a graph (adv_records.c, adv_multidev.c): the step
 * whose graph step k captures again (every third step repeats the one before
 * it: nothing changes, an update may be skipped), and a step's value, which
 * changes at step `at` mod `every`, else is the last one's (of the step
 * adv_rep(k) repeats). */
static inline int adv_rep(int k) { return k % 3 == 2 ? k - 1 : k; }
static inline uint32_t adv_val(int k, int every, int at, uint32_t base)
{
    k = adv_rep(k);
    int last = k - ((k - at) % every + every) % every;
    return base + (uint32_t)(last > 0 ? last : 0) * 7u;
}

#endif /* ADV_COMMON_H */
