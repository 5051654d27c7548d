/*
 * tests/e2e/adv_pools.c: stream-ordered allocation and the default memory
 * pool (round 14), where placed cuMemAllocAsync memory must behave as the
 * pool's would.
 *   meminfo_pending  256 MiB device: 64 MiB from cuMemAllocAsync, freed by
 *                    cuMemFreeAsync, the stream synchronized: the default
 *                    pool (release threshold 0) gives the memory back at the
 *                    synchronization, so cuMemGetInfo counts it free (before
 *                    the fix: the library's free was still "pending" until
 *                    its next allocation looked, and 64 MiB read as used);
 *   trim_threshold   the release threshold set to UINT64_MAX (the pool keeps
 *                    freed memory), 96 MiB allocated and freed, then
 *                    cuMemPoolTrimTo(pool, 0): cuMemGetInfo counts it free
 *                    again, and a 200 MiB cuMemAlloc succeeds;
 *   cross_stream     allocated on stream A, used on stream B after
 *                    cuStreamWaitEvent (a copy behind a slow host function),
 *                    freed on B; allocated again on A and overwritten at
 *                    once: the pool reuses memory freed on B for A only once
 *                    B reached the free (or A follows an event dependency on
 *                    it), so B's copy must see the old contents (a control);
 *   follow_event     the same, but A waits for an event B records after the
 *                    free before allocating (REUSE_FOLLOW_EVENT_DEPENDENCIES:
 *                    the pool may hand the range to A): still correct;
 *   pool_mix         the default pool's handle (cuDeviceGetDefaultMemPool)
 *                    used by cuMemAllocFromPoolAsync among cuMemAllocAsync
 *                    blocks: both answer that pool as
 *                    CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, each freed on the
 *                    other's stream, contents kept; cuDeviceSetMemPool with
 *                    the default pool keeps placing (a control);
 *   other_device     CUDAEMU_DEVICES=2: cuMemAllocAsync on a stream of
 *                    device 1 while device 0's context is current: the
 *                    block is device 1's (DEVICE_ORDINAL), no context, freed
 *                    on a stream of device 0 (a control);
 *   many_pending     10,000 blocks freed on stream B while B waits for the
 *                    host, each allocated on A beside a block A keeps:
 *                    frees pile up pending; the program must not slow down
 *                    with their number (before the fix every allocation
 *                    queried every pending free's event: 4,000 rounds took
 *                    2 s instead of 0.07, 10,000 ran past the timeout).
 *   claim_pending    256 MiB device: 192 MiB from cuMemAllocAsync on stream A,
 *                    written, freed on A behind a host gate (the free
 *                    stays pending); then 128 MiB on stream B: 64 MiB are
 *                    free, and the pool takes the rest from A's pending
 *                    free, making B wait for it
 *                    (CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, on
 *                    by default; the emulator's "claims"). B's block is
 *                    written on B and read back once the gate opened.
 *                    Before the fix the library answered
 *                    CUDA_ERROR_OUT_OF_MEMORY: its arena kept A's range for
 *                    A alone, and the driver's own pool had no room left.
 * Usage: adv_pools CASE
 */
#include "adv_common.h"

#define MiB ((size_t)1 << 20)

static CUcontext ctx;
static CUmodule mod;
static CUdevice dev;
static void CUDA_CB slow(void *arg)
{
    (void)arg;
    usleep(200000);
}

/* cuMemGetInfo: "free >= total - slack" as a check line (absolute figures
 * are not printed: the library's own bookkeeping may differ by pages). */
static void check_free(const char *name, size_t slack)
{
    size_t fr = 0, total = 0;
    if (R(cuMemGetInfo(&fr, &total)) != CUDA_SUCCESS) return;
    adv_check(name, fr + slack >= total, "free within %zu MiB of total: %s", slack / MiB,
              fr + slack >= total ? "yes" : "no");
}

static void meminfo_pending(void)
{
    CUstream s;
    CUdeviceptr p;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    check_free("before", 16 * MiB);
    MUST(cuMemAllocAsync(&p, 64 * MiB, s));
    MUST(cuMemsetD8Async(p, 1, 64 * MiB, s));
    MUST(cuMemFreeAsync(p, s));
    MUST(cuStreamSynchronize(s));
    check_free("after free and sync", 16 * MiB);
    /* what cuMemGetInfo promised, the device gives */
    size_t fr = 0, total = 0;
    MUST(cuMemGetInfo(&fr, &total));
    CUdeviceptr q;
    size_t want = total - 24 * MiB;
    if (R(cuMemAlloc(&q, want)) == CUDA_SUCCESS) R(cuMemFree(q));
    MUST(cuStreamDestroy(s));
}

static void trim_threshold(void)
{
    CUstream s;
    CUdeviceptr p, q;
    CUmemoryPool pool;
    cuuint64_t big = ~(cuuint64_t)0, got = 0;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuDeviceGetDefaultMemPool(&pool, dev));
    MUST(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &big));
    MUST(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &got));
    adv_check("threshold", got == big, "read back");
    MUST(cuMemAllocAsync(&p, 96 * MiB, s));
    MUST(cuMemsetD8Async(p, 2, 96 * MiB, s));
    MUST(cuMemFreeAsync(p, s));
    MUST(cuStreamSynchronize(s));
    MUST(cuMemPoolTrimTo(pool, 0));
    check_free("after trim", 16 * MiB);
    if (R(cuMemAlloc(&q, 200 * MiB)) == CUDA_SUCCESS) {
        MUST(cuMemsetD8(q, 3, 200 * MiB));
        R(cuMemFree(q));
    }
    big = 0;
    MUST(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &big));
    MUST(cuStreamDestroy(s));
}

/* p: n words v + i, written on a; copied on b behind a slow host function
 * into out; freed on b (follow: a waits for an event b records after the
 * free); then a allocates as much again and overwrites it at once. out must
 * hold the old words. */
static void reuse_across(int follow)
{
    const size_t n = MiB / 4;
    CUstream a, b;
    CUevent e1, e2;
    CUdeviceptr p, q, out;
    CUfunction fill = adv_fn(mod, "fill_u32");
    MUST(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    MUST(cuMemAlloc(&out, n * 4));
    for (int round = 0; round < 4; round++) {
        uint32_t v = 0x1000u * (round + 1), w = 0xdead0000u;
        uint64_t nn = n;
        MUST(cuMemAllocAsync(&p, n * 4, a));
        ADV_LAUNCH(fill, a, &p, &v, &nn);
        MUST(cuEventRecord(e1, a));
        MUST(cuStreamWaitEvent(b, e1, 0));
        MUST(cuLaunchHostFunc(b, slow, NULL));
        MUST(cuMemcpyDtoDAsync(out, p, n * 4, b));
        MUST(cuMemFreeAsync(p, b));
        if (follow) {
            MUST(cuEventRecord(e2, b));
            MUST(cuStreamWaitEvent(a, e2, 0));
        }
        MUST(cuMemAllocAsync(&q, n * 4, a));
        ADV_LAUNCH(fill, a, &q, &w, &nn);
        MUST(cuMemFreeAsync(q, a));
        MUST(cuStreamSynchronize(a));
        MUST(cuStreamSynchronize(b));
        uint32_t *want = malloc(n * 4);
        for (size_t i = 0; i < n; i++) want[i] = v + (uint32_t)i;
        char name[32];
        snprintf(name, sizeof name, "round %d", round);
        adv_check_words(name, out, want, n);
        free(want);
    }
    R(cuMemFree(out));
}

static void cross_stream(void) { reuse_across(0); }
static void follow_event(void) { reuse_across(1); }

static void pool_mix(void)
{
    const size_t n = 4096;
    CUstream s1, s2;
    CUevent e;
    CUmemoryPool pool, cur, ph;
    CUdeviceptr a, b;
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    MUST(cuDeviceGetDefaultMemPool(&pool, dev));
    MUST(cuDeviceSetMemPool(dev, pool));
    MUST(cuDeviceGetMemPool(&cur, dev));
    adv_check("current pool", cur == pool, "the default pool");
    for (int round = 0; round < 3; round++) {
        MUST(cuMemAllocFromPoolAsync(&a, n * 4, pool, s1));
        MUST(cuMemAllocAsync(&b, n * 4, s2));
        MUST(cuMemsetD32Async(a, 0x0a0a0000u + round, n, s1));
        MUST(cuMemsetD32Async(b, 0x0b0b0000u + round, n, s2));
        ph = NULL;
        MUST(cuPointerGetAttribute(&ph, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
        adv_check("pool of a", ph == pool, "the default pool");
        ph = NULL;
        MUST(cuPointerGetAttribute(&ph, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, b + 8));
        adv_check("pool of b", ph == pool, "the default pool");
        MUST(cuEventRecord(e, s1));                 /* a's memset before s2's copy */
        MUST(cuStreamWaitEvent(s2, e, 0));
        MUST(cuMemcpyDtoDAsync(a + 4, b, 4, s2));   /* a word of b into a */
        MUST(cuEventRecord(e, s2));
        MUST(cuStreamWaitEvent(s1, e, 0));
        MUST(cuMemcpyDtoDAsync(b, a, 4, s1));       /* a word of a into b */
        MUST(cuEventRecord(e, s1));
        MUST(cuStreamWaitEvent(s2, e, 0));
        uint32_t ha[3], hb[3];
        MUST(cuMemcpyDtoHAsync(ha, a, sizeof ha, s2));
        MUST(cuMemcpyDtoHAsync(hb, b, sizeof hb, s2));
        MUST(cuMemFreeAsync(a, s2));                /* each on the other's stream */
        MUST(cuMemFreeAsync(b, s2));
        MUST(cuStreamSynchronize(s2));
        char name[32];
        snprintf(name, sizeof name, "round %d", round);
        uint32_t va = 0x0a0a0000u + round, vb = 0x0b0b0000u + round;
        adv_check(name, ha[0] == va && ha[1] == vb && ha[2] == va && hb[0] == va && hb[1] == vb,
                  "a %08x %08x %08x, b %08x %08x", ha[0], ha[1], ha[2], hb[0], hb[1]);
    }
    MUST(cuStreamSynchronize(s1));
}

static void other_device(void)
{
    CUdevice d1;
    CUcontext c1;
    CUstream s0, s1;
    CUdeviceptr p, base;
    size_t size;
    int ord = -1;
    CUcontext pc = (CUcontext)1;
    int count = 0;
    MUST(cuDeviceGetCount(&count));
    if (count < 2) {
        printf("needs two devices\n");
        return;
    }
    MUST(cuDeviceGet(&d1, 1));
    MUST(cuDevicePrimaryCtxRetain(&c1, d1));
    MUST(cuCtxSetCurrent(c1));
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAllocAsync(&p, MiB, s1));             /* device 1's stream, device 0 current */
    MUST(cuMemsetD32Async(p, 0x31313131u, MiB / 4, s1));
    MUST(cuStreamSynchronize(s1));
    R(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
    R(cuPointerGetAttribute(&pc, CU_POINTER_ATTRIBUTE_CONTEXT, p));
    adv_check("attrs", ord == 1 && pc == NULL, "device %d, context %s", ord, pc ? "set" : "none");
    if (R(cuMemGetAddressRange(&base, &size, p + 100)) == CUDA_SUCCESS)
        adv_check("range", base == p && size == MiB, "base +%lld, %zu bytes", (long long)(base - p), size);
    uint32_t *want = malloc(MiB);
    for (size_t i = 0; i < MiB / 4; i++) want[i] = 0x31313131u;
    adv_check_words("contents", p, want, MiB / 4);
    free(want);
    MUST(cuMemFreeAsync(p, s0));                    /* on device 0's stream */
    MUST(cuStreamSynchronize(s0));
    MUST(cuMemAllocAsync(&p, MiB, s1));
    MUST(cuMemFreeAsync(p, s1));
    MUST(cuStreamSynchronize(s1));
    MUST(cuStreamDestroy(s0));
    MUST(cuCtxSetCurrent(c1));
    MUST(cuStreamDestroy(s1));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuDevicePrimaryCtxRelease(d1));
}

static void many_pending(void)
{
    enum { N = 10000 };
    CUstream a, b;
    CUevent e;
    static CUdeviceptr keep[N];
    MUST(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    MUST(cuLaunchHostFunc(b, adv_gate_wait, NULL));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CUresult bad = CUDA_SUCCESS;
    for (int i = 0; i < N && bad == CUDA_SUCCESS; i++) {
        CUdeviceptr p;
        if ((bad = cuMemAllocAsync(&p, 256, a)) != CUDA_SUCCESS) break;
        if ((bad = cuMemAllocAsync(&keep[i], 256, a)) != CUDA_SUCCESS) break;
        if ((bad = cuMemsetD32Async(p, (unsigned)i, 64, a)) != CUDA_SUCCESS) break;
        if ((bad = cuEventRecord(e, a)) != CUDA_SUCCESS) break;
        if ((bad = cuStreamWaitEvent(b, e, 0)) != CUDA_SUCCESS) break;
        bad = cuMemFreeAsync(p, b);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    R(bad);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    fprintf(stderr, "many_pending: %d rounds in %.2f s\n", N, secs);
    adv_check("rounds", bad == CUDA_SUCCESS, "%d", N);   /* the runner's timeout judges the time */
    adv_release();
    MUST(cuStreamSynchronize(b));
    for (int i = 0; i < N; i++)
        if (keep[i]) MUST(cuMemFreeAsync(keep[i], a));
    MUST(cuStreamSynchronize(a));
}

static void claim_pending(void)
{
    CUstream a, b;
    CUdeviceptr x, y;
    MUST(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAllocAsync(&x, 192 * MiB, a));
    MUST(cuMemsetD8Async(x, 5, 192 * MiB, a));
    MUST(cuLaunchHostFunc(a, adv_gate_wait, NULL));
    MUST(cuMemFreeAsync(x, a));
    CUresult r = R(cuMemAllocAsync(&y, 128 * MiB, b));
    if (r == CUDA_SUCCESS) MUST(cuMemsetD32Async(y, 0x0b0b0b0bu, 32 * MiB, b));
    adv_release();
    MUST(cuStreamSynchronize(b));
    if (r == CUDA_SUCCESS) {
        enum { W = 1 << 18 };                       /* the last MiB */
        uint32_t *want = malloc(W * sizeof *want);
        for (size_t i = 0; i < W; i++) want[i] = 0x0b0b0b0bu;
        adv_check_words("contents", y + 127 * MiB, want, W);
        free(want);
        MUST(cuMemFreeAsync(y, b));
    }
    MUST(cuStreamSynchronize(a));
    MUST(cuStreamSynchronize(b));
    MUST(cuStreamDestroy(a));
    MUST(cuStreamDestroy(b));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "meminfo_pending", "trim_threshold", "cross_stream",
                                          "follow_event", "pool_mix", "other_device",
                                          "many_pending", "claim_pending", NULL };
    static void (*const fns[])(void) = { meminfo_pending, trim_threshold, cross_stream,
                                         follow_event, pool_mix, other_device, many_pending,
                                         claim_pending };
    int c = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    MUST(cuDeviceGet(&dev, 0));
    fns[c]();
    return adv_finish();
}
