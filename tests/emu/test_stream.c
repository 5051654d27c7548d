/*
 * test_stream.c: streams, events, stream memory operations, copies, memsets
 * and stream-ordered allocation of the emulated driver (emu_stream.c).
 *
 * Runs with CUDAEMU_KERNEL_DELAY_US=DELAY_US (the program re-executes itself
 * to set it), so every kernel stays in flight long enough to observe
 * asynchrony, ordering and the legacy stream's implicit synchronization.
 * Kernels come from mod_test.so next to the executable.
 */
#include <cuda.h>

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "emu_test.h"

#define DELAY_US 100000
#define N 256

/* Per-thread entry points: not declared by cuda.h without
 * CUDA_API_PER_THREAD_DEFAULT_STREAM. */
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     unsigned, CUstream, void **, void **);
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream);
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream);
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *, CUdeviceptr, size_t);

static CUcontext ctx;
static CUmodule mod;
static CUfunction k_fill, k_inc;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static CUresult fill_on(CUstream s, CUdeviceptr p, uint32_t v, uint64_t n)
{
    void *args[] = { &p, &v, &n };
    return cuLaunchKernel(k_fill, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

static CUdeviceptr dalloc(size_t bytes)
{
    CUdeviceptr p = 0;
    CHECK_CU(cuMemAlloc(&p, bytes), CUDA_SUCCESS);
    if (p) memset((void *)p, 0, bytes);
    return p;
}

static uint32_t word(CUdeviceptr p, size_t i) { return ((volatile uint32_t *)p)[i]; }

TEST(setup)
{
    CHECK_CU(emu_test_open("mod_test.so", &ctx, &mod), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&k_fill, mod, "fill_u32"), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&k_inc, mod, "inc_u32"), CUDA_SUCCESS);
}

/* A delayed kernel, then an order-sensitive kernel, then a copy: the copy
 * sees both, in order. */
TEST(ordering_on_one_stream)
{
    CUstream s;
    uint32_t host[N];
    uint64_t n = N;
    CUdeviceptr p = dalloc(N * 4);
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CHECK_CU(fill_on(s, p, 7, N), CUDA_SUCCESS);
    void *args[] = { &p, &n };
    CHECK_CU(cuLaunchKernel(k_inc, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), CUDA_SUCCESS);
    memset(host, 0, sizeof host);
    CHECK_CU(cuMemcpyDtoHAsync(host, p, sizeof host, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(host[0], 8);
    CHECK_EQ(host[N - 1], 8);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

TEST(launch_is_asynchronous)
{
    CUstream s;
    CUdeviceptr p = dalloc(N * 4);
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamQuery(s), CUDA_SUCCESS);
    double t0 = now_ms();
    CHECK_CU(fill_on(s, p, 3, N), CUDA_SUCCESS);
    CHECK(now_ms() - t0 < DELAY_US / 2000.0);
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CHECK_EQ(word(p, 0), 0);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(now_ms() - t0 >= DELAY_US / 1000.0 * 0.9);
    CHECK_CU(cuStreamQuery(s), CUDA_SUCCESS);
    CHECK_EQ(word(p, N - 1), 3);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuStreamCreate(&s, 0x10), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* Work on the legacy stream waits for blocking streams and the other way
 * round; non-blocking streams take no part. */
TEST(legacy_stream_implicit_sync)
{
    CUstream b, nb;
    unsigned flags = 99;
    CUdeviceptr a = dalloc(N * 4), c = dalloc(N * 4), d = dalloc(N * 4);
    CHECK_CU(cuStreamCreate(&b, CU_STREAM_DEFAULT), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamGetFlags(nb, &flags), CUDA_SUCCESS);
    CHECK_EQ(flags, CU_STREAM_NON_BLOCKING);

    /* blocking stream -> legacy */
    CHECK_CU(fill_on(b, a, 5, N), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoDAsync(c, a, N * 4, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(word(c, N - 1), 5);

    /* legacy -> blocking stream */
    CHECK_CU(fill_on(CU_STREAM_LEGACY, a, 6, N), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoDAsync(c, a, N * 4, b), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(b), CUDA_SUCCESS);
    CHECK_EQ(word(c, 0), 6);

    /* non-blocking stream -> legacy: no wait */
    CHECK_CU(fill_on(nb, a, 9, N), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(d, 1, N, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamQuery(nb), CUDA_ERROR_NOT_READY);
    CHECK_EQ(word(d, 0), 1);
    CHECK_CU(cuStreamSynchronize(nb), CUDA_SUCCESS);

    /* legacy -> non-blocking stream: no wait */
    CHECK_CU(fill_on(NULL, a, 10, N), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(d, 2, N, nb), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(nb), CUDA_SUCCESS);
    CHECK_CU(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
    CHECK_EQ(word(d, 0), 2);

    /* a synchronous copy is ordered on the legacy stream too */
    uint32_t host[N];
    CHECK_CU(fill_on(b, a, 12, N), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(host, a, sizeof host), CUDA_SUCCESS);
    CHECK_EQ(host[N - 1], 12);

    CHECK_CU(cuStreamDestroy(b), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(nb), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(c), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(d), CUDA_SUCCESS);
}

static void *other_thread(void *arg)
{
    CUresult *r = arg;
    cuCtxSetCurrent(ctx);
    r[0] = cuStreamQuery_ptsz(NULL);                  /* its own per-thread stream: idle */
    r[1] = cuStreamQuery(CU_STREAM_PER_THREAD);
    return NULL;
}

TEST(per_thread_stream)
{
    CUdeviceptr a = dalloc(N * 4), c = dalloc(N * 4);
    uint32_t v = 4;
    uint64_t n = N;
    void *args[] = { &a, &v, &n };
    CHECK_CU(cuLaunchKernel_ptsz(k_fill, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamQuery_ptsz(NULL), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);

    pthread_t t;
    CUresult r[2] = { CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN };
    pthread_create(&t, NULL, other_thread, r);
    pthread_join(t, NULL);
    CHECK_CU(r[0], CUDA_SUCCESS);
    CHECK_CU(r[1], CUDA_SUCCESS);

    /* the per-thread stream is a blocking stream: it waits for legacy work */
    CHECK_CU(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS);
    CHECK_CU(fill_on(NULL, a, 8, N), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoDAsync_v2_ptsz(c, a, N * 4, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS);
    CHECK_EQ(word(c, N - 1), 8);

    /* a synchronous _ptds copy is ordered on the per-thread stream */
    uint32_t host[N];
    v = 13;
    CHECK_CU(cuLaunchKernel_ptsz(k_fill, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH_v2_ptds(host, a, sizeof host), CUDA_SUCCESS);
    CHECK_EQ(host[0], 13);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(c), CUDA_SUCCESS);
}

TEST(events)
{
    CUstream s1, s2;
    CUevent e0, e1, nt, never;
    float ms = -1;
    CUdeviceptr a = dalloc(N * 4), b = dalloc(N * 4);
    CHECK_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&e0, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&e1, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&never, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&never, 0x80), CUDA_ERROR_INVALID_VALUE);

    CHECK_CU(cuEventQuery(never), CUDA_SUCCESS);        /* never recorded */
    CHECK_CU(cuEventRecord(e0, s1), CUDA_SUCCESS);
    CHECK_CU(fill_on(s1, a, 11, N), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(e1, s1), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(nt, s1), CUDA_SUCCESS);
    CHECK_CU(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_NOT_READY);

    /* s2 waits for e1 (the fill) before copying */
    CHECK_CU(cuStreamWaitEvent(s2, e1, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoDAsync(b, a, N * 4, s2), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s2), CUDA_SUCCESS);
    CHECK_EQ(word(b, N - 1), 11);
    CHECK_CU(cuEventQuery(e1), CUDA_SUCCESS);

    CHECK_CU(cuEventSynchronize(e1), CUDA_SUCCESS);
    CHECK_CU(cuEventElapsedTime(&ms, e0, e1), CUDA_SUCCESS);
    CHECK(ms >= DELAY_US / 1000.0 * 0.9);
    CHECK(ms < 10 * DELAY_US / 1000.0);
    CHECK_CU(cuEventElapsedTime(&ms, e0, nt), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuEventElapsedTime(&ms, e0, never), CUDA_ERROR_INVALID_HANDLE);

    /* an event destroyed while its record is pending */
    CHECK_CU(fill_on(s1, a, 1, N), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(e0, s1), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(e0), CUDA_SUCCESS);
    CHECK_CU(cuEventQuery(e0), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuStreamSynchronize(s1), CUDA_SUCCESS);

    CHECK_CU(cuEventDestroy(e1), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(nt), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(never), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s1), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
}

/* Waits until the stream is idle or 2 s passed; returns its last query. */
static CUresult settle(CUstream s)
{
    CUresult r;
    for (int i = 0; i < 2000 && (r = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY; i++) usleep(1000);
    return r;
}

TEST(write_wait_value)
{
    CUstream s1, s2;
    CUdeviceptr flag = dalloc(64), x = dalloc(N * 4);
    uint64_t *f = (uint64_t *)flag;
    CHECK_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);

    /* GEQ: s1 blocks until s2 writes */
    CHECK_CU(cuStreamWaitValue64(s1, flag, 5, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(x, 1, N, s1), CUDA_SUCCESS);
    usleep(30000);
    CHECK_CU(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    CHECK_EQ(word(x, 0), 0);
    CHECK_CU(cuStreamWriteValue64(s2, flag, 5, CU_STREAM_WRITE_VALUE_DEFAULT), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s1), CUDA_SUCCESS);
    CHECK_EQ(word(x, 0), 1);
    CHECK_EQ(__atomic_load_n(f, __ATOMIC_ACQUIRE), 5);

    /* EQ */
    CHECK_CU(cuStreamWaitValue64(s1, flag, 7, CU_STREAM_WAIT_VALUE_EQ), CUDA_SUCCESS);
    usleep(20000);
    CHECK_CU(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuStreamWriteValue64(s2, flag, 7, 0), CUDA_SUCCESS);
    CHECK_CU(settle(s1), CUDA_SUCCESS);

    /* AND */
    __atomic_store_n(f, 0x10, __ATOMIC_RELEASE);    /* the host writes device memory */
    CHECK_CU(cuStreamWaitValue64(s1, flag, 0x30, CU_STREAM_WAIT_VALUE_AND), CUDA_SUCCESS);
    CHECK_CU(settle(s1), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitValue64(s1, flag, 0x01, CU_STREAM_WAIT_VALUE_AND), CUDA_SUCCESS);
    usleep(20000);
    CHECK_CU(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    __atomic_store_n(f, 0x11, __ATOMIC_RELEASE);
    CHECK_CU(settle(s1), CUDA_SUCCESS);

    /* NOR: ~(*f | v) != 0 */
    __atomic_store_n(f, ~0ull, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamWaitValue64(s1, flag, 0, CU_STREAM_WAIT_VALUE_NOR), CUDA_SUCCESS);
    usleep(20000);
    CHECK_CU(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuStreamWriteValue64(s2, flag, 0, 0), CUDA_SUCCESS);
    CHECK_CU(settle(s1), CUDA_SUCCESS);

    /* 32-bit, with GEQ wrapping: 2 is "after" 0xfffffff0 */
    uint32_t *f32 = (uint32_t *)(flag + 8);
    __atomic_store_n(f32, 0xfffffff0u, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamWaitValue32(s1, flag + 8, 2, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
    usleep(20000);
    CHECK_CU(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuStreamWriteValue32(s2, flag + 8, 2, 0), CUDA_SUCCESS);
    CHECK_CU(settle(s1), CUDA_SUCCESS);
    CHECK_EQ(__atomic_load_n(f32, __ATOMIC_ACQUIRE), 2);

    /* errors */
    CHECK_CU(cuStreamWriteValue64(s2, flag + 4, 1, 0), CUDA_ERROR_INVALID_VALUE);   /* misaligned */
    CHECK_CU(cuStreamWriteValue64(s2, flag, 1, 0x8), CUDA_ERROR_INVALID_VALUE);     /* bad flag */
    CHECK_CU(cuStreamWaitValue64(s2, flag, 1, 0x100), CUDA_ERROR_INVALID_VALUE);
    uint64_t host_word = 0;
    CHECK_CU(cuStreamWriteValue64(s2, (CUdeviceptr)&host_word, 1, 0), CUDA_ERROR_INVALID_VALUE);

    CHECK_CU(cuStreamDestroy(s1), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(flag), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(x), CUDA_SUCCESS);
}

TEST(copies_and_memsets)
{
    enum { W = 24, HT = 5, PITCH = 64 };
    CUstream s;
    unsigned char src[PITCH * HT], dst[PITCH * HT];
    CUdeviceptr d1 = dalloc(PITCH * HT), d2 = dalloc(PITCH * HT);
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    for (int i = 0; i < PITCH * HT; i++) src[i] = (unsigned char)i;

    /* 1D sync round trip */
    CHECK_CU(cuMemcpyHtoD(d1, src, sizeof src), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoD(d2, d1, sizeof src), CUDA_SUCCESS);
    memset(dst, 0, sizeof dst);
    CHECK_CU(cuMemcpyDtoH(dst, d2, sizeof dst), CUDA_SUCCESS);
    CHECK(memcmp(src, dst, sizeof src) == 0);
    CHECK_CU(cuMemcpy(d2 + 1, d1, 10), CUDA_SUCCESS);  /* unified addressing */
    CHECK_EQ(((unsigned char *)d2)[1], 0);
    CHECK_EQ(((unsigned char *)d2)[10], 9);

    /* 2D: a W x HT block from pitched host memory into pitched device memory */
    CHECK_CU(cuMemsetD8(d1, 0xee, PITCH * HT), CUDA_SUCCESS);
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = src;
    c.srcPitch = PITCH;
    c.srcXInBytes = 2;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = d1;
    c.dstPitch = PITCH;
    c.dstY = 1;
    c.WidthInBytes = W;
    c.Height = HT - 1;
    CHECK_CU(cuMemcpy2DAsync(&c, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    const unsigned char *d = (const unsigned char *)d1;
    CHECK_EQ(d[0], 0xee);                               /* row 0 untouched */
    CHECK_EQ(d[PITCH + 0], 2);                          /* row 1 <- src row 0 from x=2 */
    CHECK_EQ(d[PITCH + W - 1], W + 1);
    CHECK_EQ(d[PITCH + W], 0xee);                       /* past the width */
    CHECK_EQ(d[4 * PITCH + 5], 3 * PITCH + 7);
    c.dstPitch = W - 1;                                 /* pitch below the width */
    CHECK_CU(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);
    c.dstPitch = PITCH;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;                /* no array named (test_arrays.c: copies to arrays) */
    CHECK_CU(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);

    /* 3D between device buffers */
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    p.srcDevice = d1;
    p.dstDevice = d2;
    p.srcPitch = p.dstPitch = PITCH;
    p.srcHeight = p.dstHeight = 2;
    p.WidthInBytes = 4;
    p.Height = 2;
    p.Depth = 2;
    CHECK_CU(cuMemsetD8(d2, 0, PITCH * HT), CUDA_SUCCESS);
    CHECK_CU(cuMemcpy3D(&p), CUDA_SUCCESS);
    CHECK_EQ(((unsigned char *)d2)[3 * PITCH + 3], d[3 * PITCH + 3]);
    CHECK_EQ(((unsigned char *)d2)[3 * PITCH + 4], 0);

    /* memsets: 16- and 32-bit, 2D */
    CHECK_CU(cuMemsetD16Async(d2, 0xbeef, 3, s), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD2D32Async(d2 + PITCH, PITCH, 0x01020304u, 2, 3, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(((uint16_t *)d2)[2], 0xbeef);
    CHECK_EQ(((uint16_t *)d2)[3], 0);
    CHECK_EQ(((uint32_t *)(d2 + 3 * PITCH))[1], 0x01020304u);
    CHECK_EQ(((uint32_t *)(d2 + 3 * PITCH))[2], 0);
    CHECK_CU(cuMemsetD2D8(d2, 3, 0, 4, 2), CUDA_ERROR_INVALID_VALUE);   /* pitch < width */
    CHECK_CU(cuMemsetD32(d2 + 2, 0, 1), CUDA_ERROR_INVALID_VALUE);      /* misaligned */
    CHECK_CU(cuMemsetD8(0, 0, 1), CUDA_ERROR_INVALID_VALUE);

    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(d1), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(d2), CUDA_SUCCESS);
}

static void host_fn(void *arg)
{
    uint32_t **pp = arg;
    pp[1][0] = pp[0][0];                                /* copy what the kernel wrote */
}

static void callback_fn(CUstream s, CUresult st, void *arg)
{
    (void)s;
    ((CUresult *)arg)[0] = st;
    ((CUresult *)arg)[1] = CUDA_SUCCESS;
}

TEST(host_functions_in_order)
{
    CUstream s;
    uint32_t seen = 0;
    CUresult cb[2] = { CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN };
    CUdeviceptr a = dalloc(N * 4);
    uint32_t *pp[2] = { (uint32_t *)a, &seen };
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CHECK_CU(fill_on(s, a, 21, N), CUDA_SUCCESS);
    CHECK_CU(cuLaunchHostFunc(s, host_fn, pp), CUDA_SUCCESS);
    CHECK_CU(cuStreamAddCallback(s, callback_fn, cb, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamAddCallback(s, callback_fn, cb, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(seen, 21);
    CHECK_CU(cb[0], CUDA_SUCCESS);
    CHECK_CU(cb[1], CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

TEST(destroy_with_pending_work)
{
    CUstream s;
    CUcontext c = NULL;
    CUdeviceptr a = dalloc(N * 4);
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamGetCtx(s, &c), CUDA_SUCCESS);
    CHECK(c == ctx);
    CHECK_CU(fill_on(s, a, 31, N), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(fill_on(s, a, 1, N), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ(word(a, 0), 0);                            /* still pending */
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_EQ(word(a, N - 1), 31);                       /* and it completed */
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

TEST(stream_ordered_allocation)
{
    CUstream s;
    CUmemoryPool pool, pool2;
    CUdeviceptr p = 0, q = 0, plain = dalloc(64);
    uint32_t host[N];
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&p, N * 4, s), CUDA_SUCCESS);
    CHECK(p != 0);
    CHECK_CU(cuMemAllocAsync(&q, 0, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(fill_on(s, p, 17, N), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoHAsync(host, p, sizeof host, s), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(p, s), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);       /* already freed */
    CHECK_CU(cuMemFreeAsync(plain, s), CUDA_ERROR_INVALID_VALUE);   /* not from the async allocator */
    CHECK_CU(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);               /* already freed in stream order */
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(host[N - 1], 17);
    /* cuMemFree also frees stream-ordered memory (without synchronizing). */
    CHECK_CU(cuMemAllocAsync(&p, 64, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);

    CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetMemPool(&pool2, 0), CUDA_SUCCESS);
    CHECK(pool == pool2);
    CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 99), CUDA_ERROR_INVALID_DEVICE);
    CHECK_CU(cuMemAllocFromPoolAsync(&q, 128, pool2, s), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocFromPoolAsync(&p, 128, (CUmemoryPool)&host, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFreeAsync(q, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(plain), CUDA_SUCCESS);
}

/* Runs fn in a child with stderr captured into buf; returns the wait status. */
static int run_child(void (*fn)(void), char *buf, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t n;
    while (len + 1 < cap && (n = read(fds[0], buf + len, cap - 1 - len)) > 0) len += (size_t)n;
    buf[len] = 0;
    close(fds[0]);
    int st = -1;
    waitpid(pid, &st, 0);
    return st;
}

/* A VMM mapping of one granule at a new reservation; access given if rw. */
static CUdeviceptr vmm_map(int rw, size_t *size)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = 0;
    cuMemGetAllocationGranularity(size, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    cuMemAddressReserve(&va, *size, 0, 0, 0);
    cuMemCreate(&h, *size, &prop, 0);
    cuMemMap(va, *size, 0, h, 0);
    cuMemRelease(h);
    if (rw) cuMemSetAccess(va, *size, &acc, 1);
    return va;
}

/* cuMemUnmap does not wait for the kernel that still uses the mapping. */
static void unmap_while_in_flight(void)
{
    CUstream s;
    size_t size;
    cuCtxSetCurrent(ctx);
    CUdeviceptr va = vmm_map(1, &size);
    cuStreamCreate(&s, 0);
    fill_on(s, va, 1, N);
    cuMemUnmap(va, size);
    _exit(0);                                           /* before the kernel runs */
}

static void unmap_after_sync(void)
{
    CUstream s;
    size_t size;
    cuCtxSetCurrent(ctx);
    CUdeviceptr va = vmm_map(1, &size);
    cuStreamCreate(&s, 0);
    fill_on(s, va, 1, N);
    cuStreamSynchronize(s);
    cuMemUnmap(va, size);
}

/* A kernel given a mapping that the device has no access to. */
static void kernel_without_access(void)
{
    size_t size;
    cuCtxSetCurrent(ctx);
    CUdeviceptr va = vmm_map(0, &size);
    fill_on(NULL, va, 1, N);
    cuStreamSynchronize(NULL);
}

TEST(violations)
{
    char err[4096];
    int st = run_child(unmap_while_in_flight, err, sizeof err);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(strstr(err, "VIOLATION: cuMemUnmap") != NULL);
    CHECK(strstr(err, "still in use by cuLaunchKernel on stream") != NULL);
    if (!strstr(err, "VIOLATION")) printf("#   child stderr: %s\n", err);

    st = run_child(unmap_after_sync, err, sizeof err);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(strstr(err, "VIOLATION") == NULL);

    st = run_child(kernel_without_access, err, sizeof err);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(strstr(err, "VIOLATION: cuLaunchKernel: illegal address") != NULL);
    CHECK(strstr(err, "kernel fill_u32") != NULL);
}

int main(int argc, char **argv)
{
    (void)argc;
    char want[32];
    snprintf(want, sizeof want, "%d", DELAY_US);
    const char *have = getenv("CUDAEMU_KERNEL_DELAY_US");
    if (!have || strcmp(have, want) != 0) {
        setenv("CUDAEMU_KERNEL_DELAY_US", want, 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    RUN(setup);
    RUN(ordering_on_one_stream);
    RUN(launch_is_asynchronous);
    RUN(legacy_stream_implicit_sync);
    RUN(per_thread_stream);
    RUN(events);
    RUN(write_wait_value);
    RUN(copies_and_memsets);
    RUN(host_functions_in_order);
    RUN(destroy_with_pending_work);
    RUN(stream_ordered_allocation);
    RUN(violations);
    return check_done();
}
