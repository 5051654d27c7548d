/*
 * stress.c: concurrency stress of the driver API (issue 6), run with and
 * without the library by tests/stress/test_stress.sh.
 *
 * Own-exec threads (--threads T): each has two streams, one exec and its own
 * result buffer y. Per iteration it allocates a temporary x (cuMemAlloc, or
 * cuMemAllocAsync on odd threads; sizes vary), fills it, captures (thread-
 * local mode) a chain of --nodes wl_mix kernels y = mix(x, y, k), and
 * instantiates or cuGraphExecUpdate's its exec from it. Iterations 2m-1
 * and 2m capture the same chain, so every other update is identical (the
 * skipping policies skip it); when it is 1 mod 4 the iteration also changes
 * the first node with cuGraphExecKernelNodeSetParams, so the identical update
 * that follows must not be skipped. It
 * launches on one of its streams (ordered through events), frees x
 * (cuMemFreeAsync, or synchronize + cuMemFree), and every 16 iterations
 * destroys and re-creates the exec.
 *
 * Shared-exec threads (--shared S): S threads share ONE exec, each with its
 * own stream and result buffer. A mutex held across update + launch
 * serialises them, as CUDA requires for one exec: on even iterations every
 * node is set with cuGraphExecKernelNodeSetParams, on odd ones a new chain is
 * captured and applied with cuGraphExecUpdate; then the exec is launched on
 * the thread's stream.
 *
 * Every thread keeps a host model of its y (wl_math.h) and compares at the
 * end; it prints its checksum (FNV-1a of y), and main prints the total,
 * "checksum: <hex>", and the operation counts. Results depend only on
 * (thread, iteration), never on the interleaving: exit status 1 on any
 * mismatch or driver error.
 *
 * Usage: stress [--threads T] [--shared S] [--iters N] [--nodes K]
 *               [--elems E] [--module PATH]
 * The module defaults to $BUILD/workloads/wl_kernels.so (the binary is
 * $BUILD/tests/stress/stress).
 */
#include "wl_math.h"

#include <cuda.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_NODES 64

static int opt_threads = 8, opt_shared = 2, opt_iters = 50, opt_nodes = 6;
static unsigned opt_elems = 512;
static CUcontext ctx;
static CUfunction f_mix;

/* Operation counts, summed over threads (deterministic for given options). */
enum { OP_ALLOC, OP_FREE, OP_CAPTURE, OP_INSTANTIATE, OP_UPDATE, OP_SETPARAMS, OP_LAUNCH, OP_N };
static const char *const op_names[OP_N] = {
    "allocs", "frees", "captures", "instantiations", "updates", "node_sets", "launches",
};
static atomic_ulong ops[OP_N];

static void die_cu(CUresult r, const char *what, int line)
{
    const char *name = NULL;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "unknown CUresult";
    fprintf(stderr, "stress.c:%d: %s failed: %s (%d)\n", line, what, name, (int)r);
    exit(1);
}
#define CU(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) die_cu(r_, #call, __LINE__); } while (0)

static void count(int op) { atomic_fetch_add_explicit(&ops[op], 1, memory_order_relaxed); }

/* The scalar of node j at iteration it of thread t (alt: the value a
 * cuGraphExecKernelNodeSetParams puts instead). */
static unsigned kval(int t, int it, int j, int alt)
{
    return wl_hash(((unsigned)t * 0x10001u) ^ ((unsigned)it * 0x9e37u) ^ ((unsigned)j << 24) ^
                   (alt ? 0xa5a5a5a5u : 0));
}

/* One wl_mix launch's arguments. */
typedef struct mix_args {
    CUdeviceptr x, y;
    unsigned n, k;
    void *argv[4];
} mix_args;

static void mix_set(mix_args *a, CUdeviceptr x, CUdeviceptr y, unsigned k)
{
    a->x = x; a->y = y; a->n = opt_elems; a->k = k;
    a->argv[0] = &a->x; a->argv[1] = &a->y; a->argv[2] = &a->n; a->argv[3] = &a->k;
}

static CUDA_KERNEL_NODE_PARAMS mix_node(mix_args *a)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = f_mix;
    p.gridDimX = 4; p.gridDimY = 1; p.gridDimZ = 1;
    p.blockDimX = 128; p.blockDimY = 1; p.blockDimZ = 1;
    p.kernelParams = a->argv;
    return p;
}

/* Captures (thread-local mode) the chain y = mix(x, y, k_j), j = 0..nodes-1,
 * k_j = kval(t, it, j, 0), on s; the nodes, in chain order, go to nodes[] if
 * not NULL. */
static CUgraph capture_chain(CUstream s, CUdeviceptr x, CUdeviceptr y, int t, int it,
                             CUgraphNode *nodes)
{
    CUgraph g = NULL;
    CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (int j = 0; j < opt_nodes; j++) {
        mix_args a;
        mix_set(&a, x, y, kval(t, it, j, 0));
        CU(cuLaunchKernel(f_mix, 4, 1, 1, 128, 1, 1, 0, s, a.argv, NULL));
        if (nodes) {
            CUstreamCaptureStatus st;
            const CUgraphNode *deps = NULL;
            size_t nd = 0;
            CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &nd));
            if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || nd != 1) {
                fprintf(stderr, "stress: capture status %d with %zu dependencies\n", (int)st, nd);
                exit(1);
            }
            nodes[j] = deps[0];
        }
    }
    CU(cuStreamEndCapture(s, &g));
    count(OP_CAPTURE);
    return g;
}

/* Host model: one iteration's chain on y with x[e] = xv for all e (xs NULL)
 * or x = xs. k0 replaces node 0's scalar when >= 0. */
static void model_chain(unsigned *y, const unsigned *xs, unsigned xv, int t, int it, long long k0)
{
    for (int j = 0; j < opt_nodes; j++) {
        unsigned k = (j == 0 && k0 >= 0) ? (unsigned)k0 : kval(t, it, j, 0);
        for (unsigned e = 0; e < opt_elems; e++)
            y[e] = wl_mix_elem(xs ? xs[e] : xv, y[e], k);
    }
}

static uint64_t fnv(const unsigned *v, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *b = (const unsigned char *)v;
    for (size_t i = 0; i < n * sizeof *v; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}

/* Copies y back, compares with the model, returns the checksum (exits on a
 * difference). */
static uint64_t finish_thread(int t, CUstream s, CUdeviceptr y, const unsigned *model)
{
    size_t bytes = opt_elems * sizeof(unsigned);
    unsigned *got = malloc(bytes);
    if (!got) { fprintf(stderr, "stress: out of host memory\n"); exit(1); }
    CU(cuStreamSynchronize(s));
    CU(cuMemcpyDtoH(got, y, bytes));
    for (unsigned e = 0; e < opt_elems; e++) {
        if (got[e] != model[e]) {
            fprintf(stderr, "stress: thread %d: y[%u] = %08x, the model says %08x\n", t, e,
                    got[e], model[e]);
            exit(1);
        }
    }
    uint64_t h = fnv(got, opt_elems);
    free(got);
    return h;
}

static unsigned y_seed(int t, unsigned e) { return wl_hash((unsigned)t * 7919u + e); }

static CUdeviceptr alloc_y(int t, unsigned *model)
{
    size_t bytes = opt_elems * sizeof(unsigned);
    CUdeviceptr y;
    for (unsigned e = 0; e < opt_elems; e++) model[e] = y_seed(t, e);
    CU(cuMemAlloc(&y, bytes));
    CU(cuMemcpyHtoD(y, model, bytes));
    count(OP_ALLOC);
    return y;
}

static uint64_t results[256];

/* ---------------------------------------------------------------- own-exec threads */

static void *own_thread(void *arg)
{
    int t = (int)(intptr_t)arg, async = t % 2;
    size_t bytes = opt_elems * sizeof(unsigned);
    unsigned *model = malloc(bytes);
    CUstream s[2];
    CUevent ev[2];
    CUgraph g0 = NULL;
    CUgraphExec exec = NULL;
    CUgraphNode nodes[MAX_NODES];
    if (!model) { fprintf(stderr, "stress: out of host memory\n"); exit(1); }
    CU(cuCtxSetCurrent(ctx));
    for (int i = 0; i < 2; i++) {
        CU(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
        CU(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
    }
    CUdeviceptr y = alloc_y(t, model);
    for (int it = 0; it < opt_iters; it++) {
        /* Iterations 2m-1 and 2m capture the same chain (phase m): with the
         * temporary at the same address the second update is identical; when
         * 2m-1 is 1 mod 4, its cuGraphExecKernelNodeSetParams changed the
         * exec in between, and skipping that update would be wrong. */
        int phase = (it + 1) / 2;
        /* a temporary, of a size that changes, filled with one value */
        size_t xbytes = bytes + (size_t)(phase % 3) * 4096;
        unsigned xv = wl_hash((unsigned)(t << 16 | it));
        CUdeviceptr x;
        if (async) CU(cuMemAllocAsync(&x, xbytes, s[0]));
        else CU(cuMemAlloc(&x, xbytes));
        count(OP_ALLOC);
        CU(cuMemsetD32Async(x, xv, xbytes / sizeof(unsigned), s[0]));
        /* capture, then instantiate or update */
        CUgraph g = capture_chain(s[0], x, y, t, phase, exec ? NULL : nodes);
        if (!exec) {
            CU(cuGraphInstantiate(&exec, g, 0));
            count(OP_INSTANTIATE);
            g0 = g;
        } else {
            CUgraphExecUpdateResultInfo info;
            memset(&info, 0, sizeof info);
            CU(cuGraphExecUpdate(exec, g, &info));
            count(OP_UPDATE);
            CU(cuGraphDestroy(g));
        }
        long long k0 = -1;
        if (it % 4 == 1) {
            mix_args a;
            mix_set(&a, x, y, kval(t, it, 0, 1));
            CUDA_KERNEL_NODE_PARAMS p = mix_node(&a);
            CU(cuGraphExecKernelNodeSetParams(exec, nodes[0], &p));
            count(OP_SETPARAMS);
            k0 = kval(t, it, 0, 1);
        }
        /* launch on s[0], or on s[1] ordered after s[0] and back */
        int other = it % 4 == 3;
        if (other) {
            CU(cuEventRecord(ev[0], s[0]));
            CU(cuStreamWaitEvent(s[1], ev[0], 0));
        }
        CU(cuGraphLaunch(exec, s[other]));
        count(OP_LAUNCH);
        if (other) {
            CU(cuEventRecord(ev[1], s[1]));
            CU(cuStreamWaitEvent(s[0], ev[1], 0));
        }
        if (async) {
            CU(cuMemFreeAsync(x, s[0]));
        } else {
            CU(cuStreamSynchronize(s[0]));
            CU(cuMemFree(x));
        }
        count(OP_FREE);
        model_chain(model, NULL, xv, t, phase, k0);
        if (it % 16 == 15) {
            CU(cuStreamSynchronize(s[0]));
            CU(cuGraphExecDestroy(exec));
            CU(cuGraphDestroy(g0));
            exec = NULL;
            g0 = NULL;
        }
    }
    results[t] = finish_thread(t, s[0], y, model);
    if (exec) CU(cuGraphExecDestroy(exec));
    if (g0) CU(cuGraphDestroy(g0));
    CU(cuMemFree(y));
    count(OP_FREE);
    for (int i = 0; i < 2; i++) {
        CU(cuEventDestroy(ev[i]));
        CU(cuStreamDestroy(s[i]));
    }
    free(model);
    return NULL;
}

/* ---------------------------------------------------------------- shared-exec threads */

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;  /* update + launch of shared_exec */
static CUgraphExec shared_exec;
static CUgraphNode shared_nodes[MAX_NODES];
static CUdeviceptr shared_x;
static unsigned *shared_x_host;

static void *shared_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    size_t bytes = opt_elems * sizeof(unsigned);
    unsigned *model = malloc(bytes);
    CUstream s;
    if (!model) { fprintf(stderr, "stress: out of host memory\n"); exit(1); }
    CU(cuCtxSetCurrent(ctx));
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr y = alloc_y(t, model);
    for (int it = 0; it < opt_iters; it++) {
        /* the capture needs no lock: only the update and the launch do */
        CUgraph g = it % 2 ? capture_chain(s, shared_x, y, t, it, NULL) : NULL;
        pthread_mutex_lock(&shared_lock);
        if (g) {
            CUgraphExecUpdateResultInfo info;
            memset(&info, 0, sizeof info);
            CU(cuGraphExecUpdate(shared_exec, g, &info));
            count(OP_UPDATE);
        } else {
            for (int j = 0; j < opt_nodes; j++) {
                mix_args a;
                mix_set(&a, shared_x, y, kval(t, it, j, 0));
                CUDA_KERNEL_NODE_PARAMS p = mix_node(&a);
                CU(cuGraphExecKernelNodeSetParams(shared_exec, shared_nodes[j], &p));
                count(OP_SETPARAMS);
            }
        }
        CU(cuGraphLaunch(shared_exec, s));
        count(OP_LAUNCH);
        pthread_mutex_unlock(&shared_lock);
        if (g) CU(cuGraphDestroy(g));
        model_chain(model, shared_x_host, 0, t, it, -1);
        if (it % 8 == 7) CU(cuStreamSynchronize(s));
    }
    results[t] = finish_thread(t, s, y, model);
    CU(cuMemFree(y));
    count(OP_FREE);
    CU(cuStreamDestroy(s));
    free(model);
    return NULL;
}

/* ---------------------------------------------------------------- main */

static long num(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        fprintf(stderr, "stress: --%s wants an integer in [%ld, %ld], got '%s'\n", opt, lo, hi, s);
        exit(2);
    }
    return v;
}

static void default_module(const char *argv0, char *path, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    (void)argv0;
    if (n <= 0) { perror("readlink /proc/self/exe"); exit(1); }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    if ((size_t)snprintf(path, cap, "%s/../../workloads/wl_kernels.so", self) >= cap) {
        fprintf(stderr, "stress: path too long\n");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        { "threads", required_argument, 0, 't' }, { "shared", required_argument, 0, 's' },
        { "iters", required_argument, 0, 'i' },   { "nodes", required_argument, 0, 'n' },
        { "elems", required_argument, 0, 'e' },   { "module", required_argument, 0, 'm' },
        { 0, 0, 0, 0 },
    };
    char module[PATH_MAX] = "";
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 't': opt_threads = (int)num("threads", optarg, 0, 128); break;
        case 's': opt_shared = (int)num("shared", optarg, 0, 128); break;
        case 'i': opt_iters = (int)num("iters", optarg, 1, 1000000); break;
        case 'n': opt_nodes = (int)num("nodes", optarg, 1, MAX_NODES); break;
        case 'e': opt_elems = (unsigned)num("elems", optarg, 1, 1 << 20); break;
        case 'm': snprintf(module, sizeof module, "%s", optarg); break;
        default:
            fprintf(stderr, "usage: stress [--threads T] [--shared S] [--iters N] [--nodes K] "
                            "[--elems E] [--module PATH]\n");
            return 2;
        }
    }
    if (opt_threads + opt_shared == 0) { fprintf(stderr, "stress: no threads\n"); return 2; }
    if (!*module) default_module(argv[0], module, sizeof module);

    CUdevice dev;
    CUmodule mod;
    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
    CU(cuModuleLoad(&mod, module));
    CU(cuModuleGetFunction(&f_mix, mod, "wl_mix"));

    /* the shared exec: a chain on shared_x into a placeholder y */
    CUstream s0;
    CUgraph shared_g = NULL;
    CUdeviceptr y0;
    size_t bytes = opt_elems * sizeof(unsigned);
    shared_x_host = malloc(bytes);
    if (!shared_x_host) { fprintf(stderr, "stress: out of host memory\n"); return 1; }
    for (unsigned e = 0; e < opt_elems; e++) shared_x_host[e] = wl_hash(0x5a5a0000u + e);
    CU(cuMemAlloc(&shared_x, bytes));
    CU(cuMemcpyHtoD(shared_x, shared_x_host, bytes));
    CU(cuMemAlloc(&y0, bytes));
    CU(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
    shared_g = capture_chain(s0, shared_x, y0, 255, 0, shared_nodes);
    CU(cuGraphInstantiate(&shared_exec, shared_g, 0));

    int n = opt_threads + opt_shared;
    pthread_t th[256];
    if (n > 255) { fprintf(stderr, "stress: at most 255 threads\n"); return 2; }
    for (int t = 0; t < n; t++) {
        if (pthread_create(&th[t], NULL, t < opt_threads ? own_thread : shared_thread,
                           (void *)(intptr_t)t) != 0) {
            fprintf(stderr, "stress: pthread_create failed\n");
            return 1;
        }
    }
    for (int t = 0; t < n; t++) pthread_join(th[t], NULL);

    CU(cuCtxSynchronize());
    uint64_t all = 0xcbf29ce484222325ull;
    unsigned long total = 0;
    for (int t = 0; t < n; t++) {
        printf("thread %d (%s): %016llx\n", t, t < opt_threads ? "own exec" : "shared exec",
               (unsigned long long)results[t]);
        for (int b = 0; b < 8; b++) { all ^= (results[t] >> (8 * b)) & 0xff; all *= 0x100000001b3ull; }
    }
    printf("stress: threads=%d (own exec %d, shared exec %d) iterations=%d nodes=%d elems=%u\n",
           n, opt_threads, opt_shared, opt_iters, opt_nodes, opt_elems);
    printf("operations:");
    for (int o = 0; o < OP_N; o++) {
        printf(" %s=%lu", op_names[o], atomic_load(&ops[o]));
        total += atomic_load(&ops[o]);
    }
    printf(" total=%lu\n", total);
    printf("checksum: %016llx\n", (unsigned long long)all);

    CU(cuGraphExecDestroy(shared_exec));
    CU(cuGraphDestroy(shared_g));
    CU(cuMemFree(shared_x));
    CU(cuMemFree(y0));
    CU(cuStreamDestroy(s0));
    CU(cuModuleUnload(mod));
    CU(cuDevicePrimaryCtxRelease(dev));
    free(shared_x_host);
    return 0;
}
