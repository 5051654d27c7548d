/*
 * tests/stress/scale_prog.c: operations that must not slow down with the
 * number of objects alive (tests/stress/test_scale.sh, round 18). Each
 * scenario makes N objects live, then times a loop of M operations whose
 * cost, on the driver, does not depend on N.
 *
 *   holes N M     2N blocks of 256 bytes (cuMemAlloc; every 97th filled and
 *                 checked at the end, all left to the exit), every other one freed:
 *                 N holes too small for the loop's blocks; the loop
 *                 allocates 1 KiB, fills it, reads one word back, frees it
 *   blocks N M    N live blocks of 256 bytes, then the loop of holes
 *   lowhole N M   the holes of `holes`; the loop also allocates 256 bytes
 *                 (first fit: the lowest hole) before the 1 KiB block, and
 *                 frees it after: every step changes the lowest free range
 *   pending N M   N streams, each held by a host function, each with 64
 *                 stream-ordered frees pending behind it; the loop
 *                 allocates, fills, reads back and frees (cuMemAllocAsync /
 *                 cuMemFreeAsync) on another stream
 *   view N M      N live blocks; one exec of a fill_u32 kernel whose buffer
 *                 alternates between two blocks, re-captured and updated
 *                 (cuGraphExecUpdate) every step, with a block allocated and
 *                 freed between steps
 *   execs N M     N live execs of one graph; the loop re-captures the graph
 *                 with a new value, updates and launches the 16 oldest execs
 *                 in turn
 *   captures N M  N captures in progress at once (thread-local mode, one
 *                 stream each), ended oldest first; M rounds of that
 *   contexts N M  N contexts; the loop allocates and frees in the first one
 *
 * MODULE is tests/emu/mod_test.so. Every value read back is checked; the
 * program prints "<scenario> N M: ok <checksum>" (a checksum of what it read
 * back: the same with and without the library) and exits 0, or names the
 * failing call and exits 1. It writes the loop's time to stderr as
 * "loop_ms <ms>".
 *
 * Usage: scale_prog MODULE SCENARIO N M
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PENDING_PER_STREAM 64
#define EXECS_USED 16

static CUcontext ctx;
static CUmodule mod;
static CUfunction fill;
static uint64_t sum = 1469598103934665603ull;   /* FNV-1a of what was read back */

static void fail_call(CUresult r, const char *what, int line)
{
    const char *name = NULL;
    cuGetErrorName(r, &name);
    printf("line %d: %s = %s\n", line, what, name ? name : "?");
    exit(1);
}
#define CK(call)                                                              \
    do {                                                                      \
        CUresult r_ = (call);                                                 \
        if (r_ != CUDA_SUCCESS) fail_call(r_, #call, __LINE__);               \
    } while (0)

static void mix(uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        sum ^= (v >> (8 * i)) & 0xff;
        sum *= 1099511628211ull;
    }
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        printf("out of host memory\n");
        exit(1);
    }
    return p;
}

/* Word `at` of p must be want. */
static void expect(CUdeviceptr p, size_t at, uint32_t want)
{
    uint32_t got;
    CK(cuMemcpyDtoH(&got, p + at * 4, 4));
    if (got != want) {
        printf("word %zu of %#llx is %u, want %u\n", at, (unsigned long long)p, got, want);
        exit(1);
    }
    mix(got);
}

/* The loop of holes and blocks: allocate 1 KiB, fill, read back, free;
 * low: with 256 bytes allocated before and freed after. */
static void alloc_loop(long m, int low)
{
    for (long i = 0; i < m; i++) {
        CUdeviceptr t, s = 0;
        if (low) CK(cuMemAlloc(&s, 256));
        CK(cuMemAlloc(&t, 1024));
        CK(cuMemsetD32(t, (unsigned)i, 256));
        expect(t, (size_t)(i % 256), (uint32_t)i);
        CK(cuMemFree(t));
        if (low) CK(cuMemFree(s));
    }
}

/* N blocks of 256 bytes, each filled with its index; with holes, every other
 * one is freed. Returns them (freed ones 0). */
static CUdeviceptr *live_blocks(long n, int holes)
{
    long total = holes ? 2 * n : n;
    CUdeviceptr *b = xcalloc((size_t)total, sizeof *b);
    for (long i = 0; i < total; i++) {
        CK(cuMemAlloc(&b[i], 256));
        if (i % 97 == 0) CK(cuMemsetD32(b[i], (unsigned)i, 64));
    }
    if (holes)
        for (long i = 1; i < total; i += 2) {
            CK(cuMemFree(b[i]));
            b[i] = 0;
        }
    return b;
}

/* Checks the filled blocks (every 97th) and leaves them all to the exit. */
static void blocks_check(CUdeviceptr *b, long total)
{
    for (long i = 0; i < total; i += 97)
        if (b[i]) expect(b[i], (size_t)(i % 64), (uint32_t)i);
    free(b);
}

static double scen_blocks(long n, long m, int holes, int low)
{
    CUdeviceptr *b = live_blocks(n, holes);
    double t0 = now_ms();
    alloc_loop(m, low);
    double t = now_ms() - t0;
    blocks_check(b, holes ? 2 * n : n);
    return t;
}

/* ------------------------------------------------------------ pending */

static int gate;
static void CUDA_CB gate_wait(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&gate, __ATOMIC_ACQUIRE)) usleep(500);
}

static double scen_pending(long n, long m)
{
    CUstream a, *held = xcalloc((size_t)n, sizeof *held);
    CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CUdeviceptr *keep = xcalloc((size_t)n * PENDING_PER_STREAM, sizeof *keep);
    for (long s = 0; s < n; s++) {
        CK(cuStreamCreate(&held[s], CU_STREAM_NON_BLOCKING));
        CK(cuLaunchHostFunc(held[s], gate_wait, NULL));
        for (int k = 0; k < PENDING_PER_STREAM; k++) {
            CUdeviceptr p;
            CK(cuMemAllocAsync(&p, 256, held[s]));
            CK(cuMemAllocAsync(&keep[s * PENDING_PER_STREAM + k], 256, a));
            CK(cuMemFreeAsync(p, held[s]));
        }
    }
    CK(cuStreamSynchronize(a));
    double t0 = now_ms();
    for (long i = 0; i < m; i++) {
        CUdeviceptr t;
        uint32_t got;
        CK(cuMemAllocAsync(&t, 1024, a));
        CK(cuMemsetD32Async(t, (unsigned)i, 256, a));
        CK(cuMemcpyDtoHAsync(&got, t + (size_t)(i % 256) * 4, 4, a));
        CK(cuMemFreeAsync(t, a));
        CK(cuStreamSynchronize(a));
        if (got != (uint32_t)i) {
            printf("round %ld: read %u\n", i, got);
            exit(1);
        }
        mix(got);
    }
    double t = now_ms() - t0;
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    for (long s = 0; s < n; s++) {
        CK(cuStreamSynchronize(held[s]));
        CK(cuStreamDestroy(held[s]));
    }
    for (long i = 0; i < n * PENDING_PER_STREAM; i++) CK(cuMemFreeAsync(keep[i], a));
    CK(cuStreamSynchronize(a));
    CK(cuStreamDestroy(a));
    free(keep);
    free(held);
    return t;
}

/* ------------------------------------------------------------ graphs */

/* A graph of one fill_u32(p, v, 64) kernel, captured on s. */
static CUgraph capture_fill(CUstream s, CUdeviceptr p, uint32_t v)
{
    uint64_t words = 64;
    void *args[] = { &p, &v, &words };
    CUgraph g;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CK(cuStreamEndCapture(s, &g));
    return g;
}

static void update(CUgraphExec e, CUgraph g)
{
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphExecUpdate(e, g, &info));
}

static double scen_view(long n, long m)
{
    CUdeviceptr *b = live_blocks(n, 0), buf[2];
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&buf[0], 256));
    CK(cuMemAlloc(&buf[1], 256));
    CUgraph g = capture_fill(s, buf[0], 0);
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, g, 0));
    CK(cuGraphDestroy(g));
    double t0 = now_ms();
    for (long i = 0; i < m; i++) {
        CUdeviceptr t;
        CK(cuMemAlloc(&t, 512));
        CUdeviceptr p = buf[i & 1];
        g = capture_fill(s, p, (uint32_t)i);
        update(e, g);
        CK(cuGraphDestroy(g));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect(p, (size_t)(i % 64), (uint32_t)i);
        CK(cuMemFree(t));
    }
    double t = now_ms() - t0;
    CK(cuGraphExecDestroy(e));
    CK(cuMemFree(buf[0]));
    CK(cuMemFree(buf[1]));
    CK(cuStreamDestroy(s));
    blocks_check(b, n);
    return t;
}

static double scen_execs(long n, long m)
{
    CUstream s;
    CUdeviceptr p;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&p, 256));
    CUgraph g = capture_fill(s, p, 7);
    CUgraphExec *e = xcalloc((size_t)n, sizeof *e);
    for (long i = 0; i < n; i++) CK(cuGraphInstantiate(&e[i], g, 0));
    long k = n < EXECS_USED ? n : EXECS_USED;
    double t0 = now_ms();
    for (long i = 0; i < m; i++) {
        CUgraph g2 = capture_fill(s, p, (uint32_t)i);
        update(e[i % k], g2);
        CK(cuGraphLaunch(e[i % k], s));
        CK(cuGraphDestroy(g2));
        if (i % 64 == 0) {
            CK(cuStreamSynchronize(s));
            expect(p, (size_t)(i % 64), (uint32_t)i);
        }
    }
    double t = now_ms() - t0;
    for (long i = 0; i < n; i++) CK(cuGraphExecDestroy(e[i]));
    CK(cuGraphDestroy(g));
    CK(cuMemFree(p));
    CK(cuStreamDestroy(s));
    free(e);
    return t;
}

static double scen_captures(long n, long m)
{
    CUstream *s = xcalloc((size_t)n, sizeof *s);
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 256 * (size_t)n));
    for (long i = 0; i < n; i++) CK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    double t0 = now_ms();
    for (long r = 0; r < m; r++) {
        for (long i = 0; i < n; i++) {
            uint64_t words = 64;
            uint32_t v = (uint32_t)(r + i);
            CUdeviceptr q = p + 256 * (size_t)i;
            void *args[] = { &q, &v, &words };
            CK(cuStreamBeginCapture(s[i], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
            CK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s[i], args, NULL));
        }
        for (long i = 0; i < n; i++) {
            CUgraph g;
            CK(cuStreamEndCapture(s[i], &g));
            CK(cuGraphDestroy(g));
        }
    }
    double t = now_ms() - t0;
    for (long i = 0; i < n; i++) CK(cuStreamDestroy(s[i]));
    CK(cuMemFree(p));
    free(s);
    mix((uint64_t)n * (uint64_t)m);
    return t;
}

static double scen_contexts(long n, long m)
{
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CUcontext *c = xcalloc((size_t)n, sizeof *c);
    for (long i = 0; i < n; i++) {
        CK(cuCtxCreate(&c[i], NULL, 0, dev));
        CUdeviceptr p;
        CK(cuMemAlloc(&p, 256));   /* the context's arena */
        CK(cuMemFree(p));
    }
    CK(cuCtxSetCurrent(c[0]));
    double t0 = now_ms();
    alloc_loop(m, 0);
    double t = now_ms() - t0;
    for (long i = 0; i < n; i++) CK(cuCtxDestroy(c[i]));
    CK(cuCtxSetCurrent(ctx));
    free(c);
    return t;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: scale_prog MODULE SCENARIO N M\n");
        return 4;
    }
    const char *scen = argv[2];
    long n = atol(argv[3]), m = atol(argv[4]);
    if (n < 1 || m < 1) {
        fprintf(stderr, "scale_prog: N and M must be positive\n");
        return 4;
    }
    CUdevice dev;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoad(&mod, argv[1]));
    CK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    double t;
    if (!strcmp(scen, "holes")) t = scen_blocks(n, m, 1, 0);
    else if (!strcmp(scen, "lowhole")) t = scen_blocks(n, m, 1, 1);
    else if (!strcmp(scen, "blocks")) t = scen_blocks(n, m, 0, 0);
    else if (!strcmp(scen, "pending")) t = scen_pending(n, m);
    else if (!strcmp(scen, "view")) t = scen_view(n, m);
    else if (!strcmp(scen, "execs")) t = scen_execs(n, m);
    else if (!strcmp(scen, "captures")) t = scen_captures(n, m);
    else if (!strcmp(scen, "contexts")) t = scen_contexts(n, m);
    else {
        fprintf(stderr, "scale_prog: unknown scenario %s\n", scen);
        return 4;
    }
    CK(cuModuleUnload(mod));
    printf("%s %ld %ld: ok %016llx\n", scen, n, m, (unsigned long long)sum);
    fprintf(stderr, "loop_ms %.1f\n", t);
    return 0;
}
