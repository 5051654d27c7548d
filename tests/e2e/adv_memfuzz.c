/*
 * tests/e2e/adv_memfuzz.c: random programs of memory operations, for the
 * allocator's promise: a placed block must behave, in every valid program,
 * as the driver's own allocation would (data, the answers of every query,
 * the error of every call whose error is defined). adv_memory.c and the
 * other adversarial programs each try one way; this program tries many at
 * once, drawn from a seed.
 *
 * A program is OPS operations on up to MAXB live buffers, each with a host
 * model of its bytes:
 *   alloc    cuMemAlloc, cuMemAllocPitch (elements of 4, 8 or 16 bytes),
 *            cuMemAllocAsync or cuMemAllocFromPoolAsync (the device's
 *            current pool) of 1 byte to 9 MiB, filled at once;
 *   free     cuMemFree, or cuMemFreeAsync for stream-ordered buffers (on
 *            their stream or another one ordered after it); sometimes
 *            cuMemFree once more (the driver refuses a freed pointer), or
 *            cuMemFree of an interior pointer (refused);
 *   memset   cuMemsetD8/D16/D32 (and Async) of an aligned range, or
 *            cuMemsetD2D8/16/32 of a rectangle of a pitched buffer;
 *   copy     cuMemcpyHtoD, cuMemcpyDtoD (and Async) between two buffers or
 *            two disjoint ranges of one, cuMemcpy2D between pitched ones;
 *   add      the kernel add_u32 over an aligned range (with
 *            CUDAEMU_KERNEL_DELAY_US it stays in flight: an early reuse of a
 *            block shows);
 *   check    the whole buffer copied back and compared with its model;
 *   query    at a random offset: cuMemGetAddressRange, every
 *            cuPointerGetAttribute and cuPointerGetAttributes at once,
 *            cuMemRetainAllocationHandle, cuMemGetAccess. Addresses are
 *            printed relative to the buffer, handles as which one they are,
 *            buffer and block ids as whether they stayed the same and are
 *            unique among live buffers;
 *   move     (asynchronous modes) the buffer's work goes to another stream,
 *            ordered by an event.
 * Every result is printed or folded into the digest, so the output must be
 * the same with and without the library.
 *
 * Modes:
 *   sync      synchronous calls only;
 *   async     three streams (odd seeds: the first is the legacy NULL
 *             stream); every buffer has a stream its work goes to, and work
 *             on two buffers of different streams is ordered by events both
 *             ways; synchronous calls synchronize the buffer's stream first;
 *   capture   as async, with captures of stream 0 (global, thread-local or
 *             relaxed mode) holding memsets, copies, kernels and graph
 *             memory (cuMemAllocAsync / cuMemFreeAsync in the capture),
 *             sometimes a cuMemAlloc or cuMemFree inside (refused in global
 *             and thread-local modes, allowed in relaxed); one exec follows
 *             the captures by cuGraphExecUpdate (instantiated again when
 *             refused) and is launched: the skipping policies may skip;
 *   contexts  sync, with a second context (cuCtxCreate) current at random
 *             times: buffers are allocated in the current context, used
 *             with theirs current, freed and queried with either; the second
 *             context is destroyed with its buffers live and created again;
 *   threads   two programs of mode async at once (SEED and SEED + 1) on
 *             threads of their own, each thread's lines printed after both
 *             ended; no second free (the other thread may own the address).
 * Live bytes stay under LIVE_MAX, far below the device, so no allocation
 * may fail for memory.
 *   mixed     as async, with managed memory (cuMemAllocManaged) and pinned
 *             host memory (cuMemAllocHost, copied by cuMemCpy(Async) through
 *             its unified address, checked and freed as the program's own)
 *             among the buffers: memory the library forwards, in the same
 *             copies and queries as the memory it places.
 *   events    (round 22) as capture, but each wait for a stream's work is
 *             one of cuStreamSynchronize, an event recorded and
 *             cuEventSynchronize, an event or the stream polled
 *             (cuEventQuery, cuStreamQuery until not CUDA_ERROR_NOT_READY:
 *             how many polls is timing, neither printed nor digested) or
 *             cuCtxSynchronize.
 * Usage: adv_memfuzz SEED [sync|async|capture|contexts|threads|mixed|events]
 */
#include "adv_common.h"

#define MAXB 24
#define NS 3
#define OPS 320
#define LIVE_MAX ((size_t)40 << 20)
#define MAXCAP 8

enum { K_ALLOC, K_PITCH, K_ASYNC, K_POOL, K_MANAGED, K_HOST };
static const char *const kind_name[] = { "alloc", "pitch", "async", "pool", "managed", "host" };
enum { M_SYNC, M_ASYNC, M_CAPTURE, M_CONTEXTS, M_THREADS, M_MIXED, M_EVENTS };
static const char *const modes[] = { "sync", "async", "capture", "contexts", "threads", "mixed", "events", NULL };

typedef struct mbuf {
    CUdeviceptr p;
    size_t bytes;                    /* pitch * height for K_PITCH */
    size_t pitch, height;            /* K_PITCH */
    int kind, home, ctx, id;         /* home: stream index, -1: synchronous only */
    unsigned long long bufid, blockid;
    uint8_t *model;
} mbuf;

/* Freed by cuMemFreeAsync or cuMemFree without synchronization. */
static int ordered(const mbuf *b) { return b->kind == K_ASYNC || b->kind == K_POOL; }
/* Device memory a memset, a kernel or a typed copy may use (pinned host
 * memory is only copied, by cuMemcpy). */
static int on_device(const mbuf *b) { return b->kind != K_HOST; }

static CUfunction f_add;
static CUcontext ctx0;
static CUmemoryPool pool, dflt_pool;    /* the device's current pool, its default one */
static CUcontext ctxs[2];             /* contexts mode: [1] made by cuCtxCreate (NULL: none) */
static int cur_ctx;

static __thread uint64_t rng;
static __thread mbuf bufs[MAXB];
static __thread int nbufs, next_id;
static __thread size_t live;
static __thread CUstream st[NS];
static __thread CUevent evs[NS];
static __thread int async_mode, threads_mode, contexts_mode, mixed_mode, events_mode;
static __thread CUevent evq;          /* mode events: the event of sync_stream */
static __thread uint8_t *scratch;     /* host staging, LIVE_MAX bytes */

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static size_t draw_size(void)
{
    switch (rnd(8)) {
    case 0: return 1 + rnd(16);
    case 1: return 4 * (1 + rnd(64));
    case 2:
    case 3: return 1 + rnd(8192);
    case 4:
    case 5: return 4096 * (size_t)(1 + rnd(64)) + (rnd(2) ? 0 : rnd(4096));
    case 6: return 1 + rnd(1 << 20);
    default: return ((size_t)(1 + rnd(8)) << 20) + rnd(8192);
    }
}

/* Orders stream b after stream a's work so far (nothing when the same). */
static void order(int a, int b)
{
    if (a < 0 || b < 0 || a == b) return;
    MUST(cuEventRecord(evs[a], st[a]));
    MUST(cuStreamWaitEvent(st[b], evs[a], 0));
}

/* Stream s's work done: cuStreamSynchronize, or in mode events one of the
 * ways a program waits (polls: their count is timing, not digested). */
static void sync_stream(CUstream s)
{
    CUresult r;
    switch (events_mode ? rnd(5) : 0) {
    case 0:
        MUST(cuStreamSynchronize(s));
        break;
    case 1:
        MUST(cuEventRecord(evq, s));
        MUST(cuEventSynchronize(evq));
        break;
    case 2:
        MUST(cuEventRecord(evq, s));
        while ((r = cuEventQuery(evq)) == CUDA_ERROR_NOT_READY) sched_yield();
        MUST(r);
        break;
    case 3:
        while ((r = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY) sched_yield();
        MUST(r);
        break;
    default:
        MUST(cuCtxSynchronize());
        break;
    }
}

/* The buffer's pending work done, for a synchronous call on it. */
static void settle(const mbuf *b)
{
    if (b->home >= 0) sync_stream(st[b->home]);
}

/* contexts mode: the buffer's context current, for work on it. */
static void use_ctx(const mbuf *b)
{
    if (!contexts_mode || cur_ctx == b->ctx) return;
    MUST(cuCtxSetCurrent(ctxs[b->ctx]));
    cur_ctx = b->ctx;
}

static void fill(mbuf *b, size_t off, size_t n, int async)
{
    uint8_t v = (uint8_t)rnd(256);
    use_ctx(b);
    if (async) R(cuMemsetD8Async(b->p + off, v, n, st[b->home]));
    else R(cuMemsetD8(b->p + off, v, n));
    memset(b->model + off, v, n);
}

/* A buffer id or block id as the program can compare it. */
static unsigned long long attr_u64(CUpointer_attribute a, CUdeviceptr p)
{
    unsigned long long v = 0;
    if (cuPointerGetAttribute(&v, a, p) != CUDA_SUCCESS) return 0;
    return v;
}

static void op_alloc(int step)
{
    if (nbufs == MAXB) return;
    size_t bytes = draw_size();
    if (live + bytes + (1u << 20) > LIVE_MAX) return;
    mbuf b = { .home = -1, .ctx = cur_ctx, .id = next_id };
    int k = (int)rnd(mixed_mode ? 6 : async_mode ? 4 : 2);
    if (async_mode) b.home = (int)rnd(NS);
    CUresult r;
    if (k == K_ALLOC) {
        r = R(cuMemAlloc(&b.p, bytes));
    } else if (k == K_PITCH) {
        size_t w = 1 + rnd(3000), h = 1 + (size_t)rnd(64), e = 4u << rnd(3);
        r = R(cuMemAllocPitch(&b.p, &b.pitch, w, h, (unsigned)e));
        b.height = h;
        bytes = b.pitch * h;
        if (r == CUDA_SUCCESS) adv_line("step %d: pitch of %zu x %zu (element %zu): %zu", step, w, h, e, b.pitch);
    } else if (k == K_ASYNC) {
        r = R(cuMemAllocAsync(&b.p, bytes, st[b.home]));
    } else if (k == K_POOL) {
        r = R(cuMemAllocFromPoolAsync(&b.p, bytes, pool, st[b.home]));
    } else if (k == K_MANAGED) {
        r = R(cuMemAllocManaged(&b.p, bytes, CU_MEM_ATTACH_GLOBAL));
    } else {
        void *hp = NULL;
        r = R(cuMemAllocHost(&hp, bytes));
        b.p = (CUdeviceptr)(uintptr_t)hp;
    }
    if (r != CUDA_SUCCESS) return;
    b.kind = k;
    b.bytes = bytes;
    b.model = malloc(bytes);
    if (!b.model) {
        printf("set-up failed: malloc\n");
        exit(2);
    }
    if (b.p % 256) adv_line("step %d: %s of %zu bytes is not 256-byte aligned", step, kind_name[k], bytes);
    next_id++;
    bufs[nbufs++] = b;
    live += bytes;
    mbuf *nb = &bufs[nbufs - 1];
    if (k == K_HOST) {                            /* the program's own host memory */
        uint8_t v = (uint8_t)rnd(256);
        memset((void *)(uintptr_t)nb->p, v, bytes);
        memset(nb->model, v, bytes);
    } else {
        fill(nb, 0, bytes, ordered(nb));
    }
    if (!ordered(nb)) {
        nb->bufid = attr_u64(CU_POINTER_ATTRIBUTE_BUFFER_ID, nb->p);
        nb->blockid = attr_u64(CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, nb->p);
    }
}

static void drop(int i)
{
    live -= bufs[i].bytes;
    free(bufs[i].model);
    bufs[i] = bufs[--nbufs];
}

static void op_free(int step)
{
    if (!nbufs) return;
    int i = (int)rnd((uint32_t)nbufs);
    mbuf *b = &bufs[i];
    CUdeviceptr p = b->p;
    int sync_kind = !ordered(b);
    if ((b->kind == K_ALLOC || b->kind == K_PITCH) && b->bytes > 1 && rnd(6) == 0) {
        size_t off = 1 + rnd((uint32_t)(b->bytes - 1 < 1u << 30 ? b->bytes - 1 : 1u << 30));
        settle(b);
        R(cuMemFree(p + off));            /* an interior pointer: refused */
    }
    if (!sync_kind && rnd(3)) {
        int s = rnd(3) ? b->home : (int)rnd(NS);
        order(b->home, s);
        if (R(cuMemFreeAsync(p, st[s])) != CUDA_SUCCESS) return;
        drop(i);
        return;
    }
    settle(b);
    if (contexts_mode && rnd(2)) {               /* freed with either context current */
        cur_ctx = (int)rnd(2);
        if (!ctxs[cur_ctx]) cur_ctx = 0;
        MUST(cuCtxSetCurrent(ctxs[cur_ctx]));
    }
    int host = b->kind == K_HOST;
    if ((host ? R(cuMemFreeHost((void *)(uintptr_t)p)) : R(cuMemFree(p))) != CUDA_SUCCESS) {
        adv_line("step %d: buffer %d stays", step, b->id);
        return;
    }
    drop(i);
    if (sync_kind && !host && !threads_mode && rnd(5) == 0) R(cuMemFree(p));   /* freed: refused */
}

/* A range [off, off + n) of b aligned to `al`, n > 0 (0: none fits). */
static size_t draw_range(const mbuf *b, size_t al, size_t *off)
{
    size_t cap = b->bytes / al;
    if (!cap) return 0;
    size_t o = rnd((uint32_t)cap), n = 1 + rnd((uint32_t)(cap - o));
    if (rnd(3) == 0) o = 0, n = cap;
    *off = o * al;
    return n;
}

static void op_memset(void)
{
    if (!nbufs) return;
    mbuf *b = &bufs[rnd((uint32_t)nbufs)];
    if (!on_device(b)) return;
    int async = b->home >= 0 && rnd(2);
    if (!async) settle(b);
    use_ctx(b);
    CUstream s = async ? st[b->home] : NULL;
    if (b->kind == K_PITCH && rnd(2)) {
        int e = (int)rnd(3);
        size_t es = (size_t)1 << e;
        size_t c0 = rnd((uint32_t)(b->pitch / es)), r0 = rnd((uint32_t)b->height);
        size_t w = 1 + rnd((uint32_t)(b->pitch / es - c0)), h = 1 + rnd((uint32_t)(b->height - r0));
        CUdeviceptr d = b->p + r0 * b->pitch + c0 * es;
        uint32_t v = (uint32_t)rng;
        if (e == 0) async ? R(cuMemsetD2D8Async(d, b->pitch, (uint8_t)v, w, h, s))
                          : R(cuMemsetD2D8(d, b->pitch, (uint8_t)v, w, h));
        else if (e == 1) async ? R(cuMemsetD2D16Async(d, b->pitch, (uint16_t)v, w, h, s))
                               : R(cuMemsetD2D16(d, b->pitch, (uint16_t)v, w, h));
        else async ? R(cuMemsetD2D32Async(d, b->pitch, v, w, h, s))
                   : R(cuMemsetD2D32(d, b->pitch, v, w, h));
        for (size_t r = r0; r < r0 + h; r++)
            for (size_t c = c0; c < c0 + w; c++)
                memcpy(b->model + r * b->pitch + c * es, &v, es);
        return;
    }
    int e = (int)rnd(3);
    size_t es = (size_t)1 << e, off;
    size_t n = draw_range(b, es, &off);
    if (!n) return;
    uint32_t v = (uint32_t)rng;
    if (e == 0) async ? R(cuMemsetD8Async(b->p + off, (uint8_t)v, n, s)) : R(cuMemsetD8(b->p + off, (uint8_t)v, n));
    else if (e == 1) async ? R(cuMemsetD16Async(b->p + off, (uint16_t)v, n, s))
                           : R(cuMemsetD16(b->p + off, (uint16_t)v, n));
    else async ? R(cuMemsetD32Async(b->p + off, v, n, s)) : R(cuMemsetD32(b->p + off, v, n));
    for (size_t k = 0; k < n; k++) memcpy(b->model + off + k * es, &v, es);
}

static void op_add(void)
{
    if (!nbufs) return;
    mbuf *b = &bufs[rnd((uint32_t)nbufs)];
    if (!on_device(b)) return;
    size_t off;
    uint64_t n = draw_range(b, 4, &off);
    if (!n || (contexts_mode && b->ctx != 0)) return;     /* the module is the first context's */
    int s = b->home;
    if (s < 0) s = 0;
    use_ctx(b);
    if (!async_mode) settle(b);
    uint32_t v = 1 + rnd(1000);
    CUdeviceptr d = b->p + off;
    void *args[] = { &d, &v, &n };
    R(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, async_mode ? st[s] : NULL, args, NULL));
    if (!async_mode) MUST(cuCtxSynchronize());
    for (uint64_t k = 0; k < n; k++) {
        uint32_t w;
        memcpy(&w, b->model + off + 4 * k, 4);
        w += v;
        memcpy(b->model + off + 4 * k, &w, 4);
    }
}

static void op_copy(void)
{
    if (!nbufs) return;
    mbuf *a = &bufs[rnd((uint32_t)nbufs)], *b = &bufs[rnd((uint32_t)nbufs)];
    int async = b->home >= 0 && rnd(2);
    if (rnd(4) == 0) {                           /* from the host */
        if (!on_device(b)) return;
        size_t off;
        size_t n = draw_range(b, 1, &off);
        for (size_t k = 0; k < n; k++) scratch[k] = (uint8_t)rnd(256);
        use_ctx(b);
        if (async) {
            R(cuMemcpyHtoDAsync(b->p + off, scratch, n, st[b->home]));
            sync_stream(st[b->home]);                  /* the host buffer is reused */
        } else {
            settle(b);
            R(cuMemcpyHtoD(b->p + off, scratch, n));
        }
        memcpy(b->model + off, scratch, n);
        return;
    }
    if (contexts_mode && a->ctx != b->ctx) return;
    if (!async) {
        settle(a);
        settle(b);
    } else {
        order(a->home, b->home);
    }
    use_ctx(b);
    CUstream s = async ? st[b->home] : NULL;
    if (a->kind == K_PITCH && b->kind == K_PITCH && a != b && rnd(2)) {
        size_t w = 1 + rnd((uint32_t)(a->pitch < b->pitch ? a->pitch : b->pitch));
        size_t h = 1 + rnd((uint32_t)(a->height < b->height ? a->height : b->height));
        size_t ca = rnd((uint32_t)(a->pitch - w + 1)), cb = rnd((uint32_t)(b->pitch - w + 1));
        size_t ra = rnd((uint32_t)(a->height - h + 1)), rb = rnd((uint32_t)(b->height - h + 1));
        CUDA_MEMCPY2D c = { .srcXInBytes = ca, .srcY = ra, .srcMemoryType = CU_MEMORYTYPE_DEVICE,
                            .srcDevice = a->p, .srcPitch = a->pitch, .dstXInBytes = cb, .dstY = rb,
                            .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = b->p,
                            .dstPitch = b->pitch, .WidthInBytes = w, .Height = h };
        if ((async ? R(cuMemcpy2DAsync(&c, s)) : R(cuMemcpy2D(&c))) == CUDA_SUCCESS)
            for (size_t r = 0; r < h; r++)
                memcpy(b->model + (rb + r) * b->pitch + cb, a->model + (ra + r) * a->pitch + ca, w);
    } else {
        size_t n = 1 + rnd((uint32_t)(a->bytes < b->bytes ? a->bytes : b->bytes));
        size_t oa = rnd((uint32_t)(a->bytes - n + 1)), ob = rnd((uint32_t)(b->bytes - n + 1));
        if (a == b) {                            /* two disjoint ranges of one buffer */
            if (a->bytes < 2) return;
            n = 1 + rnd((uint32_t)(a->bytes / 2));
            oa = rnd((uint32_t)(a->bytes / 2 - n + 1));
            ob = a->bytes / 2 + rnd((uint32_t)(a->bytes - a->bytes / 2 - n + 1));
            if (rnd(2)) { size_t t = oa; oa = ob; ob = t; }
        }
        CUresult r;
        if (!on_device(a) || !on_device(b))          /* pinned host memory: by unified address */
            r = async ? R(cuMemcpyAsync(b->p + ob, a->p + oa, n, s)) : R(cuMemcpy(b->p + ob, a->p + oa, n));
        else
            r = async ? R(cuMemcpyDtoDAsync(b->p + ob, a->p + oa, n, s))
                      : R(cuMemcpyDtoD(b->p + ob, a->p + oa, n));
        if (r == CUDA_SUCCESS) memmove(b->model + ob, a->model + oa, n);
    }
    if (async) order(b->home, a->home);          /* a's next writes after this read */
}

static void check(int step, mbuf *b)
{
    use_ctx(b);
    if (!on_device(b)) {
        settle(b);
        R(cuMemcpy((CUdeviceptr)(uintptr_t)scratch, b->p, b->bytes));
    } else if (b->home >= 0 && rnd(2)) {
        R(cuMemcpyDtoHAsync(scratch, b->p, b->bytes, st[b->home]));
        sync_stream(st[b->home]);
    } else {
        settle(b);
        R(cuMemcpyDtoH(scratch, b->p, b->bytes));
    }
    size_t bad = 0, first = 0;
    for (size_t k = 0; k < b->bytes; k++)
        if (scratch[k] != b->model[k] && !bad++) first = k;
    if (!bad)
        adv_check("buffer", 1, "step %d, buffer %d (%s, %zu bytes): fnv %016llx", step, b->id,
                  kind_name[b->kind], b->bytes, (unsigned long long)adv_fnv(b->model, b->bytes));
    else
        adv_check("buffer", 0, "step %d, buffer %d (%s, %zu bytes): %zu bytes differ, first at %zu",
                  step, b->id, kind_name[b->kind], b->bytes, bad, first);
}

static void op_check(int step)
{
    if (nbufs) check(step, &bufs[rnd((uint32_t)nbufs)]);
}

static const CUpointer_attribute attrs[] = {
    CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
    CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER,
    CU_POINTER_ATTRIBUTE_BUFFER_ID,   /* not SYNC_MEMOPS: not emulated (the plural call would fail) */
    CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
    CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_MAPPED,
    CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE,
    CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
    CU_POINTER_ATTRIBUTE_MAPPING_SIZE, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR,
    CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID,
};
#define NATTRS (sizeof attrs / sizeof attrs[0])

/* An attribute's value as the program can compare it across runs: addresses
 * relative to the buffer, handles as which one they are, ids as whether
 * they are the buffer's first ones. */
static unsigned long long shown(CUpointer_attribute a, unsigned long long v, const mbuf *b,
                                size_t off)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        return v == 0 ? 0 : v == (uintptr_t)ctxs[0] || v == (uintptr_t)ctx0 ? 1
               : v == (uintptr_t)ctxs[1] ? 2 : 99;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        return v == 0 ? 0 : v == (uintptr_t)dflt_pool ? 1 : v == (uintptr_t)pool ? 2 : 99;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: return v - (b->p + off);
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: return v - b->p;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: return !ordered(b) ? v == b->bufid : 1;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: return !ordered(b) ? v == b->blockid : 1;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: return v ? v - b->p : 1;
    default: return v;
    }
}

static void op_query(int step)
{
    if (!nbufs) return;
    mbuf *b = &bufs[rnd((uint32_t)nbufs)];
    size_t off = rnd((uint32_t)(b->bytes < 1u << 30 ? b->bytes : 1u << 30));
    CUdeviceptr p = b->p + off;
    char line[2048];
    int len = snprintf(line, sizeof line, "step %d: buffer %d (%s) + %zu:", step, b->id,
                       kind_name[b->kind], off);
    CUdeviceptr base = 0;
    size_t size = 0;
    if (R(cuMemGetAddressRange(&base, &size, p)) == CUDA_SUCCESS)
        len += snprintf(line + len, sizeof line - len, " range %+lld %zu", (long long)(base - b->p), size);
    unsigned long long all[NATTRS];
    void *data[NATTRS];
    for (size_t k = 0; k < NATTRS; k++) {
        unsigned long long one = 0;
        char what[64];
        all[k] = 0;
        data[k] = &all[k];
        snprintf(what, sizeof what, "cuPointerGetAttribute(&v, %d, p)", (int)attrs[k]);
        if (adv_r(cuPointerGetAttribute(&one, attrs[k], p), what, __LINE__) == CUDA_SUCCESS)
            len += snprintf(line + len, sizeof line - len, " %d=%llx", (int)attrs[k],
                            shown(attrs[k], one, b, off));
    }
    if (R(cuPointerGetAttributes((unsigned)NATTRS, (CUpointer_attribute *)attrs, data, p)) == CUDA_SUCCESS) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t k = 0; k < NATTRS; k++) h = adv_mix(h, shown(attrs[k], all[k], b, off));
        len += snprintf(line + len, sizeof line - len, " all %016llx", (unsigned long long)h);
    }
    CUmemGenericAllocationHandle h;
    if (R(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p)) == CUDA_SUCCESS) R(cuMemRelease(h));
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    unsigned long long flags = 0;
    if (R(cuMemGetAccess(&flags, &loc, p)) == CUDA_SUCCESS)
        len += snprintf(line + len, sizeof line - len, " access %llu", flags);
    int dup = 0;
    unsigned long long id = attr_u64(CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
    for (int k = 0; k < nbufs; k++)
        dup += &bufs[k] != b && id && attr_u64(CU_POINTER_ATTRIBUTE_BUFFER_ID, bufs[k].p) == id;
    snprintf(line + len, sizeof line - len, " id shared %d", dup);
    adv_line("%s", line);
}

static void op_move(void)
{
    if (!nbufs || !async_mode) return;
    mbuf *b = &bufs[rnd((uint32_t)nbufs)];
    int s = (int)rnd(NS);
    order(b->home, s);
    b->home = s;
}

/* contexts mode: switch, destroy the second context (its buffers go with it)
 * or create it again. */
static void op_context(int step)
{
    uint32_t r = rnd(10);
    if (r < 7 || (r < 9 && !ctxs[1])) {
        if (!ctxs[1]) {
            MUST(cuCtxCreate(&ctxs[1], NULL, 0, 0));
            adv_line("step %d: context 2 created", step);
            cur_ctx = 1;
        } else {
            cur_ctx = (int)rnd(2);
            MUST(cuCtxSetCurrent(ctxs[cur_ctx]));
        }
        return;
    }
    if (!ctxs[1]) return;
    CUdeviceptr gone = 0;
    int ngone = 0;
    for (int i = nbufs - 1; i >= 0; i--)
        if (bufs[i].ctx == 1) {
            gone = bufs[i].p;
            ngone++;
            drop(i);
        }
    MUST(cuCtxDestroy(ctxs[1]));
    ctxs[1] = NULL;
    cur_ctx = 0;
    MUST(cuCtxSetCurrent(ctxs[0]));
    adv_line("step %d: context 2 destroyed with %d buffers", step, ngone);
    if (gone) {
        CUdeviceptr base;
        size_t size;
        R(cuMemGetAddressRange(&base, &size, gone));    /* its memory went with it */
    }
}

static void op_capture(int step, CUgraphExec *exec)
{
    static const CUstreamCaptureMode cmodes[] = { CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                  CU_STREAM_CAPTURE_MODE_RELAXED };
    int used[MAXB] = { 0 };
    struct { int b, kind; size_t off, n, off2; int src; uint32_t v; } ops[MAXCAP];
    int nops = 0;
    for (int i = 0; i < nbufs; i++) {            /* the buffers on stream 0 */
        if (bufs[i].home != 0 && rnd(2) == 0) order(bufs[i].home, 0), bufs[i].home = 0;
        used[i] = bufs[i].home == 0 && on_device(&bufs[i]);
    }
    sync_stream(st[1]);
    sync_stream(st[2]);
    int cm = (int)rnd(3);
    if (R(cuStreamBeginCapture(st[0], cmodes[cm])) != CUDA_SUCCESS) return;
    int n = 1 + (int)rnd(MAXCAP);
    CUdeviceptr tmp = 0;
    for (int k = 0; k < n; k++) {
        int i = (int)rnd(nbufs ? (uint32_t)nbufs : 1);
        if (!nbufs || !used[i]) continue;
        mbuf *b = &bufs[i];
        uint32_t r = rnd(10);
        if (r == 9 && rnd(4) == 0) {             /* a call the capture mode may refuse */
            if (rnd(2)) {
                CUdeviceptr x = 0;
                if (R(cuMemAlloc(&x, 1 + rnd(70000))) == CUDA_SUCCESS) R(cuMemFree(x));
            } else {
                /* a buffer of another stream (idle: synchronized before the
                 * capture), while no operation names a buffer index yet */
                int j = (int)rnd((uint32_t)nbufs);
                if (nops || used[j] || (bufs[j].kind != K_ALLOC && bufs[j].kind != K_PITCH)) continue;
                if (R(cuMemFree(bufs[j].p)) == CUDA_SUCCESS) {
                    adv_line("step %d: buffer %d freed during the capture", step, bufs[j].id);
                    drop(j);
                    used[j] = used[nbufs];
                }
            }
            continue;
        }
        size_t off, cnt = draw_range(b, 4, &off);
        if (!cnt || nops == MAXCAP) continue;
        ops[nops].b = i;
        ops[nops].off = off;
        ops[nops].n = cnt;
        ops[nops].v = 1 + rnd(1000);
        if (r < 4) {
            ops[nops].kind = 0;
            R(cuMemsetD32Async(b->p + off, ops[nops].v, cnt, st[0]));
        } else if (r < 7) {
            ops[nops].kind = 1;
            CUdeviceptr d = b->p + off;
            uint64_t n64 = cnt;
            void *args[] = { &d, &ops[nops].v, &n64 };
            R(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, st[0], args, NULL));
        } else {                                  /* through graph memory */
            ops[nops].kind = 2;
            if (R(cuMemAllocAsync(&tmp, cnt * 4, st[0])) != CUDA_SUCCESS) continue;
            R(cuMemsetD32Async(tmp, ops[nops].v, cnt, st[0]));
            R(cuMemcpyDtoDAsync(b->p + off, tmp, cnt * 4, st[0]));
            R(cuMemFreeAsync(tmp, st[0]));
        }
        nops++;
    }
    CUgraph g = NULL;
    if (R(cuStreamEndCapture(st[0], &g)) != CUDA_SUCCESS || !g) {
        adv_line("step %d: capture (mode %d) failed: %d operations not run", step, cm, nops);
        return;
    }
    if (*exec) {
        CUgraphExecUpdateResultInfo info;
        if (R(cuGraphExecUpdate(*exec, g, &info)) != CUDA_SUCCESS) {
            MUST(cuGraphExecDestroy(*exec));
            *exec = NULL;
        }
    }
    if (!*exec) MUST(cuGraphInstantiateWithFlags(exec, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    MUST(cuGraphDestroy(g));
    if (R(cuGraphLaunch(*exec, st[0])) != CUDA_SUCCESS) return;
    for (int k = 0; k < nops; k++) {
        mbuf *b = &bufs[ops[k].b];
        for (size_t w = 0; w < ops[k].n; w++) {
            uint32_t x;
            memcpy(&x, b->model + ops[k].off + 4 * w, 4);
            x = ops[k].kind == 1 ? x + ops[k].v : ops[k].v;
            memcpy(b->model + ops[k].off + 4 * w, &x, 4);
        }
    }
}

static void run(unsigned long seed, int mode)
{
    async_mode = mode == M_ASYNC || mode == M_CAPTURE || mode == M_THREADS || mode == M_MIXED ||
                 mode == M_EVENTS;
    mixed_mode = mode == M_MIXED;
    events_mode = mode == M_EVENTS;
    contexts_mode = mode == M_CONTEXTS;
    rng = 0x9e3779b97f4a7c15ull ^ ((seed + 1) * 0x100000001b3ull);
    scratch = malloc(LIVE_MAX);
    if (!scratch) {
        printf("set-up failed: malloc\n");
        exit(2);
    }
    for (int s = 0; s < NS; s++) {
        if (s == 0 && seed % 2 && mode == M_ASYNC) st[s] = NULL;   /* the legacy stream */
        else MUST(cuStreamCreate(&st[s], CU_STREAM_NON_BLOCKING));
        MUST(cuEventCreate(&evs[s], CU_EVENT_DISABLE_TIMING));
    }
    if (events_mode) MUST(cuEventCreate(&evq, CU_EVENT_DISABLE_TIMING));
    CUgraphExec exec = NULL;
    for (int step = 0; step < OPS; step++) {
        uint32_t r = rnd(100);
        if (r < 18) op_alloc(step);
        else if (r < 32) op_free(step);
        else if (r < 46) op_memset();
        else if (r < 58) op_copy();
        else if (r < 64) op_add();
        else if (r < 74) op_check(step);
        else if (r < 84) op_query(step);
        else if (r < 90 && async_mode) op_move();
        else if (r < 90 && contexts_mode) op_context(step);
        else if (r < 96 && (mode == M_CAPTURE || events_mode)) op_capture(step, &exec);
        else if (r < 98 && async_mode) sync_stream(st[rnd(NS)]);
    }
    while (nbufs) {
        mbuf *b = &bufs[nbufs - 1];
        check(OPS, b);
        settle(b);
        use_ctx(b);
        if (b->kind == K_HOST) R(cuMemFreeHost((void *)(uintptr_t)b->p));
        else R(cuMemFree(b->p));
        drop(nbufs - 1);
    }
    MUST(cuCtxSetCurrent(ctx0));
    if (exec) MUST(cuGraphExecDestroy(exec));
    MUST(cuCtxSynchronize());
    free(scratch);
}

/* mode threads: one program, its seed at arg */
static void work(void *arg)
{
    threads_mode = 1;
    run(*(unsigned long *)arg, M_THREADS);
}

int main(int argc, char **argv)
{
    unsigned long seed;
    int mode = adv_seed_mode(argc, argv, modes, M_SYNC, &seed);
    if (mode < 0) return 4;
    CUmodule mod;
    adv_open(&ctx0, &mod);
    ctxs[0] = ctx0;
    f_add = adv_fn(mod, "add_u32");
    MUST(cuDeviceGetDefaultMemPool(&dflt_pool, 0));
    MUST(cuDeviceGetMemPool(&pool, 0));
    if (mode != M_THREADS) {
        run(seed, mode);
    } else {
        adv_seed_pair(work, seed, ctx0);
    }
    return adv_finish();
}
