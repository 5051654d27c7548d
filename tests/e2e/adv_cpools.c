/*
 * adv_cpools.c: memory pools the program creates (round 45), beside the
 * library's placed temporaries. The library never places an allocation
 * from a created pool (cuMemAllocFromPoolAsync, or cuMemAllocAsync while a
 * created pool is the device's current one): such memory is the driver's,
 * with that pool's figures, and is foreign memory in captured graphs.
 * Every result is checked on the host; every CUresult is printed, and the
 * pool a block came from (created or default) and the created pool's
 * figures are printed, so they must be the same with and without the
 * library. (adv_pools.c is round 14's: the default pool.)
 *
 * Cases:
 *   current    steps of cuMemAllocAsync temporaries (fill, mad, copy out);
 *              from step 2 a created pool is the device's current pool
 *              (cuDeviceSetMemPool): the blocks must be that pool's
 *              (MEMPOOL_HANDLE) and its USED/RESERVED figures count them;
 *              the default pool's count none of them.
 *   switch     12 re-captured steps (one exec, cuGraphExecUpdate each
 *              step) over two cuMemAllocAsync temporaries, the current pool
 *              switched between the default and a created pool
 *              (cuDeviceSetMemPool and cuMemSetMemPool), one step in three
 *              with one temporary from each.
 *   destroy    a created current pool destroyed while one of its blocks
 *              lives: the device's default pool is current again (the
 *              next blocks are its own), the live block stays usable until
 *              freed; captures and updates go on; the default pool set
 *              explicitly later (placing resumes).
 *   destroy_resume  the same with the created pool current from the
 *              first step and the default pool never set again: the
 *              destroy alone makes the default pool current, so the
 *              library places again after it (and only then: the output
 *              is pinned host memory).
 *   operands   a created pool's blocks (cuMemAllocFromPoolAsync) as operands
 *              of memset, kernel and memcpy nodes beside a placed
 *              temporary, re-captured each step and updated; freed and
 *              allocated again each step (the pool keeps its memory:
 *              release threshold UINT64_MAX), trimmed every fourth step;
 *              after each free, the exec updated from the step's own graph
 *              (naming the freed block: the driver refuses it).
 *   threshold  release threshold raised: a block freed on stream A, an
 *              event, stream B waits for it and allocates as much; from
 *              step 4 the host waits for the event first (A's free
 *              reached: the pool reuses it, its reserved figure stays at
 *              1 MiB); placed temporaries on both streams.
 *   figures    USED/RESERVED_MEM_CURRENT/HIGH of a created pool read and
 *              asserted at each point, peaks reset, with placed blocks of
 *              the default pool alive beside (and its figures too).
 *   nearfull   (256 MiB device) a created pool holds 160 MiB it freed
 *              (threshold UINT64_MAX) while placed temporaries take most
 *              of the rest and are freed (the library's arenas keep their
 *              chunks); then the pool grows to 220 MiB (60 MiB new: the
 *              driver alone has 96 MiB free), is trimmed, and a 200 MiB
 *              cuMemAlloc follows.
 *   peer       (two devices) the default pool and a created pool of device 0
 *              opened to device 1 (cuMemPoolSetAccess); blocks of both
 *              (the default pool's placed) written and copied by work on a
 *              stream of device 1: pool memory is the owner's only unless
 *              opened, so placed memory must be reachable where the
 *              program opened its pool.
 *
 * Usage: adv_cpools CASE
 */
#include "adv_common.h"

#define MiB ((size_t)1 << 20)
#define N 1024u                 /* words per buffer */

static CUcontext ctx;
static CUmodule mod;
static CUdevice dev;
static CUfunction kfill, kadd, kmad;
static CUmemoryPool dpool;      /* the device's default pool */

static CUmemoryPool make_pool(void)
{
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = (int)dev;
    CUmemoryPool p;
    MUST(cuMemPoolCreate(&p, &pp));
    return p;
}

static cuuint64_t pattr(CUmemoryPool p, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    R(cuMemPoolGetAttribute(p, a, &v));
    return v;
}

/* One line with the pool's four figures (MiB and pages of 4 KiB). */
static void figures(const char *what, CUmemoryPool p)
{
    adv_line("%s: used %llu reserved %llu used_high %llu reserved_high %llu (KiB)", what,
             (unsigned long long)pattr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >> 10,
             (unsigned long long)pattr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >> 10,
             (unsigned long long)pattr(p, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >> 10,
             (unsigned long long)pattr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) >> 10);
}

/* Which pool block d came from: "created" (cp), "default" or "none". */
static const char *pool_of(CUdeviceptr d, CUmemoryPool cp)
{
    CUmemoryPool p = NULL;
    if (R(cuPointerGetAttribute(&p, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, d)) != CUDA_SUCCESS) return "?";
    return p && p == cp ? "created" : p == dpool ? "default" : "none";
}

/* fill_u32(p, v, n) writes v + i, add_u32 adds v, mad_u32(in, acc, n)
 * makes acc 3 acc + in: w[i] = mul (vb + i) + va + i (mul 0: va + i). */
static void want_of(uint32_t *w, uint32_t mul, uint32_t vb, uint32_t va)
{
    for (uint32_t i = 0; i < N; i++) w[i] = mul * (vb + i) + va + i;
}

/* On s: fill(a, va); fill(b, vb); mad(in a, acc b): b = 3 (vb + i) + va + i; copy b -> out. */
static void chain(CUstream s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out, uint32_t va, uint32_t vb)
{
    uint64_t n = N;
    ADV_LAUNCH(kfill, s, &a, &va, &n);
    ADV_LAUNCH(kfill, s, &b, &vb, &n);
    ADV_LAUNCH(kmad, s, &a, &b, &n);
    R(cuMemcpyDtoDAsync(out, b, N * 4, s));
}

/* The end of a step: waits for s, checks out ("step<k>"), frees a and b on
 * s and waits for the frees (so that the figures read next do not race
 * them). */
static void step_end(CUstream s, int k, CUdeviceptr out, const uint32_t *want, CUdeviceptr a, CUdeviceptr b)
{
    char name[32];
    snprintf(name, sizeof name, "step%d", k);
    R(cuStreamSynchronize(s));
    adv_check_words(name, out, want, N);
    R(cuMemFreeAsync(a, s));
    R(cuMemFreeAsync(b, s));
    R(cuStreamSynchronize(s));
}

static void current(void)
{
    CUstream s;
    CUdeviceptr out, a, b;
    uint32_t want[N];
    CUmemoryPool cp = make_pool();
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&out, N * 4));
    for (int k = 0; k < 6; k++) {
        if (k == 2) MUST(cuDeviceSetMemPool(dev, cp));
        MUST(cuMemAllocAsync(&a, N * 4, s));
        MUST(cuMemAllocAsync(&b, 2 * N * 4, s));
        adv_line("step %d: a from %s, b from %s", k, pool_of(a, cp), pool_of(b, cp));
        chain(s, a, b, out, 10u + k, 7u * k);
        R(cuStreamSynchronize(s));
        if (k == 3) {
            figures("created pool, two blocks live", cp);
            figures("default pool", dpool);
        }
        want_of(want, 3, 7u * k, 10u + k);
        step_end(s, k, out, want, a, b);
    }
    R(cuStreamSynchronize(s));
    figures("created pool after the frees", cp);
    CUmemoryPool got = NULL;
    R(cuDeviceGetMemPool(&got, dev));
    adv_check("current", got == cp, "the created pool is current");
    MUST(cuDeviceSetMemPool(dev, dpool));
    MUST(cuMemPoolDestroy(cp));
    R(cuMemFree(out));
    R(cuStreamDestroy(s));
}

/* Captures chain(a, b) into a graph; instantiated into *x the first time,
 * else *x updated from it; launched. */
static void capture_step(CUstream s, CUgraphExec *x, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out,
                         uint32_t va, uint32_t vb, CUgraph *gout)
{
    CUgraph g;
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    chain(s, a, b, out, va, vb);
    MUST(cuStreamEndCapture(s, &g));
    if (!*x) MUST(cuGraphInstantiateWithFlags(x, g, 0));
    else adv_update(*x, g);
    R(cuGraphLaunch(*x, s));
    if (gout) *gout = g;
    else R(cuGraphDestroy(g));
}

static void switch_pools(void)
{
    CUstream s;
    CUdeviceptr out, a, b;
    CUgraphExec x = NULL;
    uint32_t want[N];
    CUmemoryPool cp = make_pool();
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, (int)dev };
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&out, N * 4));
    for (int k = 0; k < 12; k++) {
        int m = k % 3;
        if (m == 1) MUST(cuDeviceSetMemPool(dev, cp));
        MUST(cuMemAllocAsync(&a, N * 4, s));
        if (m == 2) MUST(cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, cp));
        MUST(cuMemAllocAsync(&b, N * 4, s));
        if (m) MUST(cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, dpool));
        adv_line("step %d: a from %s, b from %s", k, pool_of(a, cp), pool_of(b, cp));
        capture_step(s, &x, a, b, out, 100u + k, 5u + k, NULL);
        want_of(want, 3, 5u + k, 100u + k);
        step_end(s, k, out, want, a, b);
    }
    R(cuStreamSynchronize(s));
    figures("created pool", cp);
    R(cuGraphExecDestroy(x));
    MUST(cuMemPoolDestroy(cp));
    R(cuMemFree(out));
    R(cuStreamDestroy(s));
}

/* resume: the created pool is current from the start (nothing placed
 * before its destroy) and the default pool is never set again: whatever
 * the library places comes after the destroy. */
static void destroy_run(int resume)
{
    CUstream s;
    CUdeviceptr out, a, b, keep = 0;
    CUgraphExec x = NULL;
    uint32_t want[N];
    CUmemoryPool cp = make_pool();
    void *hout = NULL;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (resume) {   /* pinned host memory: nothing but the temporaries could be placed */
        MUST(cuMemHostAlloc(&hout, N * 4, CU_MEMHOSTALLOC_DEVICEMAP));
        MUST(cuMemHostGetDevicePointer(&out, hout, 0));
    } else {
        MUST(cuMemAlloc(&out, N * 4));
    }
    for (int k = 0; k < 10; k++) {
        if (k == (resume ? 0 : 1)) MUST(cuDeviceSetMemPool(dev, cp));
        if (k == 2) {
            MUST(cuMemAllocAsync(&keep, N * 4, s));
            uint32_t v = 0x77u;
            uint64_t n = N;
            ADV_LAUNCH(kfill, s, &keep, &v, &n);
            adv_line("kept block from %s", pool_of(keep, cp));
        }
        if (k == 3) {
            R(cuStreamSynchronize(s));
            MUST(cuMemPoolDestroy(cp));
            CUmemoryPool got = NULL;
            R(cuDeviceGetMemPool(&got, dev));
            adv_check("default_again", got == dpool, "the default pool is current after the destroy");
        }
        if (k == 7 && !resume) MUST(cuDeviceSetMemPool(dev, dpool));
        MUST(cuMemAllocAsync(&a, N * 4, s));
        MUST(cuMemAllocAsync(&b, N * 4, s));
        adv_line("step %d: a from %s, b from %s", k, k < 3 ? pool_of(a, cp) : pool_of(a, NULL),
                 k < 3 ? pool_of(b, cp) : pool_of(b, NULL));
        capture_step(s, &x, a, b, out, 3u + k, 11u * k, NULL);
        if (k == 5) {   /* the destroyed pool's block, still allocated, used and freed */
            uint32_t v = 9;
            uint64_t n = N;
            ADV_LAUNCH(kadd, s, &keep, &v, &n);
            R(cuStreamSynchronize(s));
            want_of(want, 0, 0, 0x77u + 9);
            adv_check_words("kept_block", keep, want, N);
            R(cuMemFreeAsync(keep, s));
        }
        want_of(want, 3, 11u * k, 3u + k);
        step_end(s, k, out, want, a, b);
    }
    R(cuStreamSynchronize(s));
    R(cuGraphExecDestroy(x));
    if (resume) R(cuMemFreeHost(hout));
    else R(cuMemFree(out));
    R(cuStreamDestroy(s));
}

static void destroy(void) { destroy_run(0); }
static void destroy_resume(void) { destroy_run(1); }

static void operands(void)
{
    CUstream s;
    CUdeviceptr out, a, t;
    CUgraphExec x = NULL;
    uint32_t want[N];
    CUmemoryPool cp = make_pool();
    cuuint64_t big = ~(cuuint64_t)0;
    MUST(cuMemPoolSetAttribute(cp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &big));
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&out, N * 4));
    for (int k = 0; k < 12; k++) {
        MUST(cuMemAllocFromPoolAsync(&a, N * 4, cp, s));
        MUST(cuMemAllocAsync(&t, N * 4, s));
        CUgraph g;
        uint32_t v = 5u + k;
        uint64_t n = N;
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        R(cuMemsetD32Async(t, 1, N, s));
        R(cuMemsetD32Async(a, (unsigned)k, N, s));
        ADV_LAUNCH(kadd, s, &a, &v, &n);
        ADV_LAUNCH(kmad, s, &a, &t, &n);
        R(cuMemcpyDtoDAsync(out, t, N * 4, s));
        MUST(cuStreamEndCapture(s, &g));
        if (!x) MUST(cuGraphInstantiateWithFlags(&x, g, 0));
        else adv_update(x, g);
        R(cuGraphLaunch(x, s));
        R(cuStreamSynchronize(s));
        for (uint32_t i = 0; i < N; i++) want[i] = 3u + k + 5u + k;   /* memsets, add, mad */
        char name[32];
        snprintf(name, sizeof name, "step%d", k);
        adv_check_words(name, out, want, N);
        R(cuMemFreeAsync(a, s));
        R(cuMemFreeAsync(t, s));
        R(cuStreamSynchronize(s));
        if (k % 4 == 3) R(cuMemPoolTrimTo(cp, 0));
        if (k % 2) {
            /* the graph names the freed pool block (and a freed placed one) */
            CUgraphExecUpdateResultInfo info;
            CUresult r = R(cuGraphExecUpdate_v2(x, g, &info));
            adv_line("step %d: update over freed operands: %s", k, r == CUDA_SUCCESS ? "accepted" : "refused");
        }
        R(cuGraphDestroy(g));
    }
    figures("created pool", cp);
    R(cuGraphExecDestroy(x));
    MUST(cuMemPoolDestroy(cp));
    R(cuMemFree(out));
    R(cuStreamDestroy(s));
}

static void threshold(void)
{
    CUstream sa, sb;
    CUevent e;
    CUdeviceptr out, a, b, ta, tb;
    uint32_t want[N];
    CUmemoryPool cp = make_pool();
    cuuint64_t big = ~(cuuint64_t)0, zero = 0;
    MUST(cuMemPoolSetAttribute(cp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &big));
    MUST(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    MUST(cuMemAlloc(&out, N * 4));
    uint64_t n = N;
    for (int k = 0; k < 8; k++) {
        uint32_t va = 40u + k, vt = 2u;
        MUST(cuMemAllocFromPoolAsync(&a, MiB, cp, sa));
        MUST(cuMemAllocAsync(&ta, N * 4, sa));
        ADV_LAUNCH(kfill, sa, &a, &va, &n);
        ADV_LAUNCH(kfill, sa, &ta, &vt, &n);
        ADV_LAUNCH(kmad, sa, &a, &ta, &n);            /* ta = 6 + va */
        R(cuMemcpyDtoDAsync(out, ta, N * 4, sa));
        R(cuMemFreeAsync(a, sa));
        R(cuMemFreeAsync(ta, sa));
        R(cuEventRecord(e, sa));
        if (k == 4) {
            /* whether B's block reused A's bytes above depended on whether
             * A's free had run (the emulator reuses only freed bytes that
             * were reached): start the figures afresh */
            R(cuStreamSynchronize(sa));
            R(cuStreamSynchronize(sb));
            R(cuMemPoolTrimTo(cp, MiB));
            R(cuMemPoolSetAttribute(cp, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
            R(cuMemPoolSetAttribute(cp, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
        }
        if (k >= 4) R(cuEventSynchronize(e));        /* A's free reached: B reuses its bytes */
        R(cuStreamWaitEvent(sb, e, 0));
        MUST(cuMemAllocFromPoolAsync(&b, MiB, cp, sb));
        MUST(cuMemAllocAsync(&tb, N * 4, sb));
        ADV_LAUNCH(kfill, sb, &tb, &vt, &n);
        R(cuMemcpyDtoDAsync(b, out, N * 4, sb));
        ADV_LAUNCH(kmad, sb, &b, &tb, &n);            /* tb = 6 + (6 + va) */
        R(cuMemcpyDtoDAsync(out, tb, N * 4, sb));
        R(cuMemFreeAsync(b, sb));
        R(cuMemFreeAsync(tb, sb));
        R(cuStreamSynchronize(sb));
        for (uint32_t i = 0; i < N; i++) want[i] = 12u + 7u * i + va;   /* 6 + 3i twice, va + i */
        char name[32];
        snprintf(name, sizeof name, "step%d", k);
        adv_check_words(name, out, want, N);
        if (k == 7) figures("created pool", cp);
    }
    R(cuStreamSynchronize(sa));
    figures("created pool after the syncs", cp);
    R(cuMemPoolTrimTo(cp, 0));
    adv_check("trimmed", pattr(cp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0, "nothing reserved");
    MUST(cuMemPoolDestroy(cp));
    R(cuEventDestroy(e));
    R(cuMemFree(out));
    R(cuStreamDestroy(sa));
    R(cuStreamDestroy(sb));
}

static void pool_figures(void)
{
    CUstream s;
    CUdeviceptr p[4], d[2];
    CUmemoryPool cp = make_pool();
    cuuint64_t zero = 0;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    figures("created pool, new", cp);
    MUST(cuMemAllocAsync(&d[0], 2 * MiB, s));                 /* default pool (placed) */
    for (int i = 0; i < 4; i++) MUST(cuMemAllocFromPoolAsync(&p[i], (size_t)(i + 1) * MiB, cp, s));
    MUST(cuMemAllocAsync(&d[1], MiB, s));
    R(cuStreamSynchronize(s));
    adv_check("four_blocks", pattr(cp, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 10 * MiB, "used 10 MiB");
    figures("created pool, four blocks", cp);
    figures("default pool, two blocks", dpool);
    R(cuMemFreeAsync(p[3], s));
    R(cuMemFreeAsync(p[1], s));
    R(cuMemFreeAsync(d[0], s));
    R(cuStreamSynchronize(s));
    adv_check("two_freed", pattr(cp, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 4 * MiB &&
                               pattr(cp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 4 * MiB &&
                               pattr(cp, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 10 * MiB,
              "used 4, reserved 4 (threshold 0), used peak 10 MiB");
    figures("created pool, two freed", cp);
    figures("default pool, one block", dpool);
    R(cuMemPoolSetAttribute(cp, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    R(cuMemPoolSetAttribute(cp, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
    R(cuMemPoolSetAttribute(dpool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    adv_check("reset", pattr(cp, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 4 * MiB &&
                           pattr(cp, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == 4 * MiB,
              "the peaks reset to what is current");
    figures("created pool, peaks reset", cp);
    figures("default pool, peak reset", dpool);
    R(cuMemFreeAsync(p[0], s));
    R(cuMemFreeAsync(p[2], s));
    R(cuMemFreeAsync(d[1], s));
    R(cuStreamSynchronize(s));
    figures("created pool, empty", cp);
    MUST(cuMemPoolDestroy(cp));
    R(cuStreamDestroy(s));
}

static void nearfull(void)
{
    CUstream s;
    CUdeviceptr big, t[22], q;
    CUmemoryPool cp = make_pool();
    cuuint64_t keep = ~(cuuint64_t)0;
    MUST(cuMemPoolSetAttribute(cp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAllocFromPoolAsync(&big, 160 * MiB, cp, s));
    R(cuMemsetD8Async(big, 1, 160 * MiB, s));
    R(cuMemFreeAsync(big, s));
    R(cuStreamSynchronize(s));
    figures("created pool holding", cp);
    /* placed temporaries: 22 x 4 MiB of the 96 MiB left, three rounds */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 22; i++)
            if (R(cuMemAllocAsync(&t[i], 4 * MiB, s)) == CUDA_SUCCESS) R(cuMemsetD8Async(t[i], 2, 4 * MiB, s));
            else t[i] = 0;
        for (int i = 0; i < 22; i++)
            if (t[i]) R(cuMemFreeAsync(t[i], s));
        R(cuStreamSynchronize(s));
    }
    /* the pool grows by 60 MiB: the device has 96 MiB free for the program */
    if (R(cuMemAllocFromPoolAsync(&big, 220 * MiB, cp, s)) == CUDA_SUCCESS) {
        R(cuMemsetD8Async(big, 3, 220 * MiB, s));
        uint8_t last = 0;
        R(cuMemcpyDtoHAsync(&last, big + 220 * MiB - 1, 1, s));
        R(cuStreamSynchronize(s));
        adv_check("grown", last == 3, "the pool's 220 MiB block written");
        R(cuMemFreeAsync(big, s));
    }
    R(cuStreamSynchronize(s));
    figures("created pool grown", cp);
    R(cuMemPoolTrimTo(cp, 0));
    if (R(cuMemAlloc(&q, 200 * MiB)) == CUDA_SUCCESS) {
        R(cuMemsetD8(q, 4, 200 * MiB));
        R(cuMemFree(q));
    }
    MUST(cuMemPoolDestroy(cp));
    R(cuStreamDestroy(s));
}

static void peer(void)
{
    CUstream s0, s1;
    CUcontext c1;
    CUdevice d1;
    CUdeviceptr a, b;
    uint32_t want[N];
    CUmemoryPool cp = make_pool();
    MUST(cuDeviceGet(&d1, 1));
    CUmemAccessDesc rw = { { CU_MEM_LOCATION_TYPE_DEVICE, (int)d1 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    MUST(cuMemPoolSetAccess(dpool, &rw, 1));
    MUST(cuMemPoolSetAccess(cp, &rw, 1));
    CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    R(cuMemPoolGetAccess(&f, cp, &rw.location));
    adv_check("opened", f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "device 1 has read-write access");
    MUST(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
    MUST(cuDevicePrimaryCtxRetain(&c1, d1));
    MUST(cuCtxSetCurrent(c1));
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    MUST(cuCtxSetCurrent(ctx));
    for (int k = 0; k < 4; k++) {
        uint32_t v = 20u + k;
        uint64_t n = N;
        MUST(cuMemAllocAsync(&a, N * 4, s0));
        MUST(cuMemAllocFromPoolAsync(&b, N * 4, cp, s0));
        ADV_LAUNCH(kfill, s0, &a, &v, &n);
        R(cuStreamSynchronize(s0));
        MUST(cuCtxSetCurrent(c1));
        R(cuMemcpyDtoDAsync(b, a, N * 4, s1));            /* device 1 reads a, writes b */
        R(cuMemsetD32Async(a, 5u + k, N / 2, s1));        /* and writes a */
        R(cuStreamSynchronize(s1));
        MUST(cuCtxSetCurrent(ctx));
        want_of(want, 0, 0, v);
        char name[32];
        snprintf(name, sizeof name, "b_step%d", k);
        adv_check_words(name, b, want, N);
        for (uint32_t i = 0; i < N / 2; i++) want[i] = 5u + k;
        snprintf(name, sizeof name, "a_step%d", k);
        adv_check_words(name, a, want, N);
        R(cuMemFreeAsync(a, s0));
        R(cuMemFreeAsync(b, s0));
        R(cuStreamSynchronize(s0));
    }
    MUST(cuCtxSetCurrent(c1));
    R(cuStreamDestroy(s1));
    MUST(cuCtxSetCurrent(ctx));
    R(cuDevicePrimaryCtxRelease(d1));
    MUST(cuMemPoolDestroy(cp));
    R(cuStreamDestroy(s0));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "current", "switch", "destroy", "operands", "threshold",
                                          "figures", "nearfull", "peer", "destroy_resume", NULL };
    static void (*const fns[])(void) = { current, switch_pools, destroy, operands, threshold,
                                         pool_figures, nearfull, peer, destroy_resume };
    int c = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDeviceGetDefaultMemPool(&dpool, dev));
    kfill = adv_fn(mod, "fill_u32");
    kadd = adv_fn(mod, "add_u32");
    kmad = adv_fn(mod, "mad_u32");
    fns[c]();
    return adv_finish();
}
