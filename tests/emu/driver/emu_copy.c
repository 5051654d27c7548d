/*
 * emu_copy.c: copies (1D, 2D, 3D, every direction, between contexts,
 * synchronous and asynchronous), memsets (8/16/32-bit, 1D and 2D) and stream memory
 * operations (32- and 64-bit write and wait, cuStreamBatchMemOp; captured as
 * batch memory operation nodes) of the emulated CUDA driver, with the
 * driver's range checks; the copy and memset executors and range
 * recorders graph nodes use (emu_memcpy3d_*, emu_memset_*).
 *
 * Locks: early_lock guards early_pending (the synchronous operations that
 * returned early and have not run yet; a leaf lock). Work goes through
 * emu_stream_submit (emu_stream.c); the device-range queries (emu_mem_*)
 * take emu_mem_lock inside emu_mem.c.
 */
#include "emu_mem.h"
#include "emu_stream.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* ------------------------------------------------------------------------
 * Stream memory operations (32- and 64-bit write and wait, batches)
 * ---------------------------------------------------------------------- */
/* One operation's address and width (0: none: a flush or a barrier). */
static unsigned memop_size(const CUstreamBatchMemOpParams *o)
{
    switch (o->operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_32: return 4;
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64: return 8;
    default: return 0;
    }
}

static int memop_is_wait(const CUstreamBatchMemOpParams *o)
{
    return o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 || o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
}

/* cuStreamBatchMemOp: "count The number of operations in the array. Must be
 * less than 256 ... flags Reserved for future expansion; must be 0"; each
 * operation as its single call checks it (cuStreamWaitValue32 and friends:
 * an aligned address in device memory, pinned or registered host memory
 * included; the wait type with CU_STREAM_WAIT_VALUE_FLUSH, or
 * CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER), a flush of remote writes with
 * flags 0, a memory barrier ("Only supported in the _v2 API") of type SYS or
 * GPU; any other operation: CUDA_ERROR_INVALID_VALUE. */
CUresult emu_memops_check(const CUstreamBatchMemOpParams *ops, unsigned n, unsigned flags, int v2)
{
    emu_range r;
    if (!ops || !n || n >= 256 || flags) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        const CUstreamBatchMemOpParams *o = &ops[i];
        unsigned size = memop_size(o);
        switch (o->operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        case CU_STREAM_MEM_OP_WAIT_VALUE_64:
            if (o->waitValue.flags & ~(3u | CU_STREAM_WAIT_VALUE_FLUSH)) return CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        case CU_STREAM_MEM_OP_WRITE_VALUE_64:
            if (o->writeValue.flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
                return CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
            if (o->flushRemoteWrites.flags) return CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_STREAM_MEM_OP_BARRIER:
            if (!v2 || o->memoryBarrier.flags > CU_STREAM_MEMORY_BARRIER_TYPE_GPU) return CUDA_ERROR_INVALID_VALUE;
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (!size) continue;
        CUdeviceptr a = o->waitValue.address;   /* the same place in both structs */
        if (!a || a % size || !emu_mem_find(a, &r) || a + size > r.base + r.size) return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

void emu_memops_touch(emu_work *w, const CUstreamBatchMemOpParams *ops, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (memop_size(&ops[i])) emu_work_touch_range(w, ops[i].waitValue.address, memop_size(&ops[i]));
}

static uint64_t memop_load(CUdeviceptr a, unsigned size)
{
    if (size == 8) return __atomic_load_n((uint64_t *)(uintptr_t)a, __ATOMIC_ACQUIRE);
    return __atomic_load_n((uint32_t *)(uintptr_t)a, __ATOMIC_ACQUIRE);
}

static int memop_satisfied(const CUstreamBatchMemOpParams *o, unsigned size)
{
    uint64_t cur = memop_load(o->waitValue.address, size);
    uint64_t v = size == 8 ? o->waitValue.value64 : o->waitValue.value;
    uint64_t mask = size == 8 ? ~(uint64_t)0 : 0xffffffffu;
    switch (o->waitValue.flags & 3) {
    case CU_STREAM_WAIT_VALUE_GEQ:
        return size == 8 ? (int64_t)(cur - v) >= 0 : (int32_t)(uint32_t)(cur - v) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return cur == v;
    case CU_STREAM_WAIT_VALUE_AND: return (cur & v) != 0;
    default: return (~(cur | v) & mask) != 0;   /* NOR */
    }
}

/* Runs the operations in order: a write stores, a wait blocks until its
 * condition holds (flushes and barriers: nothing to do on one host). */
void emu_memops_exec(const CUstreamBatchMemOpParams *ops, unsigned n, int dev, const char *what)
{
    for (unsigned i = 0; i < n; i++) {
        const CUstreamBatchMemOpParams *o = &ops[i];
        unsigned size = memop_size(o);
        if (!size) continue;
        CUdeviceptr a = o->waitValue.address;
        if (!emu_mem_accessible(a, size, dev)) {
            emu_violation(what, "illegal address 0x%llx (%u bytes not accessible to device %d)",
                          (unsigned long long)a, size, dev);
            return;
        }
        if (!memop_is_wait(o)) {
            if (size == 8) __atomic_store_n((uint64_t *)(uintptr_t)a, o->writeValue.value64, __ATOMIC_RELEASE);
            else __atomic_store_n((uint32_t *)(uintptr_t)a, o->writeValue.value, __ATOMIC_RELEASE);
            continue;
        }
        struct timespec ts = { 0, 20000 };
        while (!memop_satisfied(o, size)) nanosleep(&ts, NULL);
    }
}

typedef struct memop_work {
    emu_work w;
    unsigned n;
    CUstreamBatchMemOpParams ops[];
} memop_work;

static void memop_run(emu_work *w, emu_stream *s)
{
    memop_work *m = (memop_work *)w;
    emu_memops_exec(m->ops, m->n, s->device, w->what);
}

/* Queues n checked operations on stream h, or, on a capturing stream, adds
 * them as one batch memory operation node (CU_GRAPH_NODE_TYPE_BATCH_MEM_OP,
 * the node cuGraphAddBatchMemOpNode makes). */
static CUresult memops_submit(const char *call, CUstream h, int pt, const CUstreamBatchMemOpParams *ops,
                              unsigned n, unsigned flags, int v2)
{
    emu_stream *s;
    CUresult res = emu_memops_check(ops, n, flags, v2);
    if (res != CUDA_SUCCESS || (res = emu_stream_get(h, pt, &s)) != CUDA_SUCCESS) return res;
    memop_work *m = (memop_work *)emu_work_new(sizeof *m + n * sizeof *ops, call, memop_run);
    m->n = n;
    memcpy(m->ops, ops, n * sizeof *ops);
    emu_memops_touch(&m->w, ops, n);
    emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, .memops = ops, .nmemops = n };  /* not m->ops: a capture releases m first */
    return emu_stream_submit(call, s, 0, &op, &m->w);
}

/* cuStreamWriteValue32/64, cuStreamWaitValue32/64: a batch of one. */
static CUresult memop(const char *call, CUstream h, int pt, CUdeviceptr addr, uint64_t value,
                      unsigned size, unsigned flags, int wait)
{
    CUstreamBatchMemOpParams o;
    memset(&o, 0, sizeof o);
    o.operation = wait ? (size == 8 ? CU_STREAM_MEM_OP_WAIT_VALUE_64 : CU_STREAM_MEM_OP_WAIT_VALUE_32)
                       : (size == 8 ? CU_STREAM_MEM_OP_WRITE_VALUE_64 : CU_STREAM_MEM_OP_WRITE_VALUE_32);
    o.waitValue.address = addr;
    if (size == 8) o.waitValue.value64 = value;
    else o.waitValue.value = (cuuint32_t)value;
    o.waitValue.flags = flags;
    return memops_submit(call, h, pt, &o, 1, 0, 1);
}

#define MEMOP_EXPORTS(name, type, size, wait)                                               \
    EMU_EXPORT CUresult name(CUstream stream, CUdeviceptr addr, type value, unsigned int flags) \
    { EMU_ENTRY_INIT(); return memop(__func__, stream, 0, addr, value, size, flags, wait); }    \
    EMU_EXPORT CUresult name##_v2(CUstream stream, CUdeviceptr addr, type value, unsigned int flags) \
    { EMU_ENTRY_INIT(); return memop(__func__, stream, 0, addr, value, size, flags, wait); }    \
    EMU_EXPORT CUresult name##_ptsz(CUstream stream, CUdeviceptr addr, type value, unsigned int flags) \
    { EMU_ENTRY_INIT(); return memop(__func__, stream, 1, addr, value, size, flags, wait); }    \
    EMU_EXPORT CUresult name##_v2_ptsz(CUstream stream, CUdeviceptr addr, type value, unsigned int flags) \
    { EMU_ENTRY_INIT(); return memop(__func__, stream, 1, addr, value, size, flags, wait); }

MEMOP_EXPORTS(cuStreamWriteValue32, cuuint32_t, 4, 0)
MEMOP_EXPORTS(cuStreamWaitValue32, cuuint32_t, 4, 1)
MEMOP_EXPORTS(cuStreamWriteValue64, cuuint64_t, 8, 0)
MEMOP_EXPORTS(cuStreamWaitValue64, cuuint64_t, 8, 1)

/* cuStreamBatchMemOp: the first version (no barriers), _v2, per-thread flavours. */
#define BATCH_MEMOP_EXPORT(name, pt, v2)                                                        \
    EMU_EXPORT CUresult name(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray, \
                             unsigned int flags)                                                \
    { EMU_ENTRY_INIT(); return memops_submit(__func__, stream, pt, paramArray, count, flags, v2); }
BATCH_MEMOP_EXPORT(cuStreamBatchMemOp, 0, 0)
BATCH_MEMOP_EXPORT(cuStreamBatchMemOp_ptsz, 1, 0)
BATCH_MEMOP_EXPORT(cuStreamBatchMemOp_v2, 0, 1)
BATCH_MEMOP_EXPORT(cuStreamBatchMemOp_v2_ptsz, 1, 1)

/* ------------------------------------------------------------------------
 * Copies
 * ---------------------------------------------------------------------- */
typedef struct side {
    CUmemorytype type;
    uintptr_t base;                 /* host or device address; an array's storage once pinned */
    size_t x, y, z, pitch, height;
    CUarray arr;                    /* CU_MEMORYTYPE_ARRAY: the array named */
} side;

static side src_side(const CUDA_MEMCPY3D *p)
{
    return (side){ p->srcMemoryType, p->srcMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->srcHost
                                                                            : (uintptr_t)p->srcDevice,
                   p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch, p->srcHeight, p->srcArray };
}

static side dst_side(const CUDA_MEMCPY3D *p)
{
    return (side){ p->dstMemoryType, p->dstMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->dstHost
                                                                            : (uintptr_t)p->dstDevice,
                   p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch, p->dstHeight, p->dstArray };
}

/* Address of row (y, z) of the copy on one side. */
static uintptr_t side_row(const side *s, size_t y, size_t z)
{
    return s->base + ((s->z + z) * s->height + s->y + y) * s->pitch + s->x;
}

static CUresult side_check(const side *s, const CUDA_MEMCPY3D *p)
{
    emu_range r;
    /* An array: "srcArray specifies the handle of the source data. srcHost,
     * srcDevice and srcPitch are ignored" (and so is srcHeight: the array
     * has its own); its extents checked by emu_array.c. */
    if (s->type == CU_MEMORYTYPE_ARRAY)
        return emu_array_side_check(s->arr, s->x, s->y, s->z, p->WidthInBytes, p->Height, p->Depth);
    if (s->type != CU_MEMORYTYPE_HOST && s->type != CU_MEMORYTYPE_DEVICE && s->type != CU_MEMORYTYPE_UNIFIED)
        return CUDA_ERROR_INVALID_VALUE;
    if (!s->base) return CUDA_ERROR_INVALID_VALUE;
    int rows = p->Height > 1 || p->Depth > 1 || s->y || s->z;
    if (rows && s->pitch < s->x + p->WidthInBytes) return CUDA_ERROR_INVALID_VALUE;
    if ((p->Depth > 1 || s->z) && s->height < s->y + p->Height) return CUDA_ERROR_INVALID_VALUE;
    /* Device memory (and unified addresses that are device memory): the whole
     * span, first row to end of last row, lies in the allocation holding its
     * start (emu_mem_extent_ok). */
    uintptr_t first = side_row(s, 0, 0);
    if (s->type == CU_MEMORYTYPE_DEVICE && !emu_mem_find(first, &r)) return CUDA_ERROR_INVALID_VALUE;
    if (s->type != CU_MEMORYTYPE_HOST && emu_mem_find(first, &r)) {
        size_t rows = (p->Depth - 1) * s->height + p->Height - 1;
        if (s->pitch && rows > (SIZE_MAX - p->WidthInBytes) / s->pitch) return CUDA_ERROR_INVALID_VALUE;
        if (!emu_mem_extent_ok(first, rows * s->pitch + p->WidthInBytes)) return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult emu_memcpy3d_check(const CUDA_MEMCPY3D *p)
{
    if (!p || p->srcLOD || p->dstLOD) return CUDA_ERROR_INVALID_VALUE;
    if (!p->WidthInBytes || !p->Height || !p->Depth) return CUDA_ERROR_INVALID_VALUE;
    side s = src_side(p), d = dst_side(p);
    CUresult r = side_check(&s, p);
    return r != CUDA_SUCCESS ? r : side_check(&d, p);
}

/* The generations of the arrays a checked copy names (0: not an array):
 * what the copy binds to when it is queued or its node's parameters set. */
void emu_memcpy3d_gens(const CUDA_MEMCPY3D *p, uint64_t *src_gen, uint64_t *dst_gen)
{
    *src_gen = p->srcMemoryType == CU_MEMORYTYPE_ARRAY ? emu_array_gen(p->srcArray) : 0;
    *dst_gen = p->dstMemoryType == CU_MEMORYTYPE_ARRAY ? emu_array_gen(p->dstArray) : 0;
}

/* 1 if every row of the side is accessible (host memory always is; an
 * array is when it is still the array of generation gen: its storage is
 * then pinned into s, under emu_array_lock). */
static int side_accessible(side *s, const CUDA_MEMCPY3D *p, int dev, uint64_t gen, const char *what)
{
    emu_range r;
    if (s->type == CU_MEMORYTYPE_HOST) return 1;
    if (s->type == CU_MEMORYTYPE_ARRAY) {
        int pin = emu_array_pin(s->arr, gen, &s->base, &s->pitch, &s->height);
        if (pin > 0) return 1;
        emu_violation(what, "array %p was destroyed after the copy named it%s (the copy would use freed "
                      "memory: cuArrayDestroy)", (void *)s->arr,
                      pin < 0 ? "; its handle value is another array's now" : "");
        return 0;
    }
    for (size_t z = 0; z < p->Depth; z++) {
        for (size_t y = 0; y < p->Height; y++) {
            uintptr_t a = side_row(s, y, z);
            /* Unified addresses outside every device range are host memory. */
            if (s->type == CU_MEMORYTYPE_UNIFIED && !emu_mem_find(a, &r)) continue;
            if (!emu_mem_accessible(a, p->WidthInBytes, dev)) {
                emu_violation(what, "illegal address 0x%llx (%zu bytes not accessible to device %d)",
                              (unsigned long long)a, p->WidthInBytes, dev);
                return 0;
            }
        }
    }
    return 1;
}

void emu_memcpy3d_exec(const CUDA_MEMCPY3D *p, uint64_t src_gen, uint64_t dst_gen)
{
    side s = src_side(p), d = dst_side(p);
    int dev = emu_worker_device();
    int arrays = s.type == CU_MEMORYTYPE_ARRAY || d.type == CU_MEMORYTYPE_ARRAY;
    if (arrays) pthread_mutex_lock(&emu_array_lock);   /* no destroy unmaps the storage meanwhile */
    if (side_accessible(&s, p, dev, src_gen, "memcpy") && side_accessible(&d, p, dev, dst_gen, "memcpy")) {
        for (size_t z = 0; z < p->Depth; z++) {
            for (size_t y = 0; y < p->Height; y++)
                emu_mem_copy((void *)side_row(&d, y, z), (const void *)side_row(&s, y, z), p->WidthInBytes);
        }
    }
    if (arrays) pthread_mutex_unlock(&emu_array_lock);
}

/* An array has no device address: nothing to order it by range (its
 * stream order is the only order, as for host memory). */
static void side_touch(emu_work *w, const side *s, const CUDA_MEMCPY3D *p)
{
    emu_range r;
    if (s->type == CU_MEMORYTYPE_ARRAY) return;
    uintptr_t first = side_row(s, 0, 0);
    uintptr_t end = side_row(s, p->Height - 1, p->Depth - 1) + p->WidthInBytes;
    /* Host memory matters only where it is a device range (pinned memory). */
    if (s->type == CU_MEMORYTYPE_HOST && !emu_mem_find(first, &r) && !emu_mem_find(end - 1, &r)) return;
    emu_work_touch_range(w, first, end - first);
}

void emu_memcpy3d_touch(emu_work *w, const CUDA_MEMCPY3D *p)
{
    side s = src_side(p), d = dst_side(p);
    side_touch(w, &s, p);
    side_touch(w, &d, p);
}

/* ------------------------------------------------------------------------
 * Synchronous operations that return early (CUDAEMU_SYNC_EARLY_US)
 *
 * The CUDA Runtime API's "API synchronization behavior": a synchronous copy
 * "from pageable host memory to device memory ... will return once the
 * pageable buffer has been copied to the staging memory for DMA transfer to
 * device memory, but the DMA to final destination may not have completed";
 * "for transfers from device memory to device memory, no host-side
 * synchronization is performed"; "the synchronous memset functions are
 * asynchronous with respect to the host except when the target is pinned
 * host memory". A program may not notice (every later CUDA call on the
 * stream is ordered after them), a NIC reading the memory by DMA does:
 * hence CU_POINTER_ATTRIBUTE_SYNC_MEMOPS and CU_CTX_SYNC_MEMOPS, under which
 * such an operation completes before it returns. With the knob set the
 * emulator returns early where the documentation allows it, the operation's
 * work delayed that long on its stream (a pageable source is staged first:
 * the program may reuse it at once); by default every synchronous operation
 * completes before returning.
 * ---------------------------------------------------------------------- */
static pthread_mutex_t early_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t early_cond = PTHREAD_COND_INITIALIZER;
static unsigned long early_pending;   /* early_lock */

void emu_sync_early_drain(void)
{
    pthread_mutex_lock(&early_lock);
    while (early_pending) pthread_cond_wait(&early_cond, &early_lock);
    pthread_mutex_unlock(&early_lock);
}

/* The part of an early operation's work that runs before and after it. */
typedef struct early {
    unsigned delay_us;              /* 0: not early */
    void *staged;                   /* a pageable source's bytes, freed after */
} early;

static void early_count(long d)
{
    pthread_mutex_lock(&early_lock);
    early_pending += (unsigned long)d;
    if (!early_pending) pthread_cond_broadcast(&early_cond);
    pthread_mutex_unlock(&early_lock);
}

/* Submits the work of an early operation (its `early` e): counted pending
 * until it has run; a refused submission (the work released unrun) is
 * undone here. */
static CUresult early_submit(const char *call, emu_stream *s, const emu_capture_op *op, emu_work *w,
                             early *e)
{
    void *staged = e->staged;
    early_count(1);
    CUresult r = emu_stream_submit(call, s, 2, op, w);
    if (r != CUDA_SUCCESS) {
        free(staged);
        early_count(-1);
    }
    return r;
}

static void early_before(const early *e)
{
    if (!e->delay_us) return;
    struct timespec ts = { e->delay_us / 1000000, (e->delay_us % 1000000) * 1000L };
    nanosleep(&ts, NULL);
}

static void early_after(early *e)
{
    if (!e->delay_us) return;
    free(e->staged);
    e->staged = NULL;
    early_count(-1);
}

/* Device memory at p (a unified address the emulator knows as device
 * memory included), or a CUDA array: an array lives in device memory, so a
 * copy between an array and device memory (cuMemcpyDtoA, cuMemcpyAtoD, a
 * 2D / 3D copy naming an array) or between two arrays is a "transfer from
 * device memory to device memory" of the API synchronization behavior. */
static int is_device(CUmemorytype t, uintptr_t p)
{
    return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_ARRAY ||
           (t == CU_MEMORYTYPE_UNIFIED && emu_mem_class(p) == 2);
}

/* Whether a device side asks for synchronous memory operations: the
 * pointer's CU_POINTER_ATTRIBUTE_SYNC_MEMOPS or the current context's
 * CU_CTX_SYNC_MEMOPS; an array has no pointer attributes, only the
 * context's flag. */
static int side_guaranteed(CUmemorytype t, uintptr_t p)
{
    if (t == CU_MEMORYTYPE_ARRAY) return (emu_ctx_current_flags() & CU_CTX_SYNC_MEMOPS) != 0;
    return emu_sync_guaranteed(p);
}

/* Pageable host memory at p: host memory the emulator did not pin. */
static int is_pageable(CUmemorytype t, uintptr_t p)
{
    return (t == CU_MEMORYTYPE_HOST || t == CU_MEMORYTYPE_UNIFIED) && emu_mem_class(p) == 0;
}

/* The bytes of a copy side from its base address up to its last byte. */
static size_t side_extent(const CUDA_MEMCPY3D *p, size_t x, size_t y, size_t z, size_t pitch, size_t height)
{
    if (p->Height <= 1 && p->Depth <= 1) return x + p->WidthInBytes;
    return ((z + p->Depth - 1) * height + y + p->Height - 1) * pitch + x + p->WidthInBytes;
}

/* Whether synchronous copy p may return early: host (pageable) to device,
 * or device to device, with neither side's memory nor the current context
 * asking for synchronous memory operations. A pageable source is then
 * staged into *e (0 if that fails: the copy completes instead). */
static int copy_early(CUDA_MEMCPY3D *p, early *e)
{
    if (!emu_cfg.sync_early_us) return 0;
    uintptr_t dst = p->dstMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->dstHost : p->dstDevice;
    uintptr_t src = p->srcMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->srcHost : p->srcDevice;
    if (!is_device(p->dstMemoryType, dst) || side_guaranteed(p->dstMemoryType, dst)) return 0;
    if (is_device(p->srcMemoryType, src)) {
        if (side_guaranteed(p->srcMemoryType, src)) return 0;
    } else if (is_pageable(p->srcMemoryType, src)) {
        size_t n = side_extent(p, p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch, p->srcHeight);
        if (!(e->staged = malloc(n ? n : 1))) return 0;
        memcpy(e->staged, (const void *)src, n);
        p->srcMemoryType = CU_MEMORYTYPE_HOST;
        p->srcHost = e->staged;
    } else {
        return 0;
    }
    e->delay_us = emu_cfg.sync_early_us;
    return 1;
}

/* Whether a synchronous memset of device memory at dst may return early. */
static int memset_early(CUdeviceptr dst, early *e)
{
    if (!emu_cfg.sync_early_us || emu_mem_class(dst) != 2 || emu_sync_guaranteed(dst)) return 0;
    e->delay_us = emu_cfg.sync_early_us;
    return 1;
}

typedef struct copy_work {
    emu_work w;
    CUDA_MEMCPY3D p;
    uint64_t src_gen, dst_gen;      /* the arrays named when queued (emu_memcpy3d_gens) */
    early e;
} copy_work;

static void copy_run(emu_work *w, emu_stream *s)
{
    (void)s;
    copy_work *cw = (copy_work *)w;
    early_before(&cw->e);
    emu_memcpy3d_exec(&cw->p, cw->src_gen, cw->dst_gen);
    early_after(&cw->e);
}

/* Every copy entry point ends here. A zero-sized copy does nothing. */
static CUresult copy_submit(const char *call, const CUDA_MEMCPY3D *p, CUstream h, int pt, int sync)
{
    if (p && (!p->WidthInBytes || !p->Height || !p->Depth)) return CUDA_SUCCESS;
    CUresult r = emu_memcpy3d_check(p);
    if (r != CUDA_SUCCESS) return r;
    emu_stream *s;
    if ((r = emu_stream_get(h, pt, &s)) != CUDA_SUCCESS) return r;
    copy_work *cw = (copy_work *)emu_work_new(sizeof *cw, call, copy_run);
    cw->p = *p;
    emu_memcpy3d_gens(p, &cw->src_gen, &cw->dst_gen);
    emu_memcpy3d_touch(&cw->w, p);
    emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_MEMCPY, .copy = p };
    if (sync && !emu_stream_capture(s) && copy_early(&cw->p, &cw->e))
        return early_submit(call, s, &op, &cw->w, &cw->e);
    return emu_stream_submit(call, s, sync, &op, &cw->w);
}

static CUresult copy_1d(const char *call, CUmemorytype dt, uintptr_t dst, CUmemorytype st, uintptr_t src,
                        size_t n, CUstream h, int pt, int sync)
{
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = st;
    p.dstMemoryType = dt;
    if (st == CU_MEMORYTYPE_HOST) p.srcHost = (const void *)src;
    else p.srcDevice = src;
    if (dt == CU_MEMORYTYPE_HOST) p.dstHost = (void *)dst;
    else p.dstDevice = dst;
    p.WidthInBytes = n;
    p.Height = p.Depth = 1;
    return copy_submit(call, &p, h, pt, sync);
}

static CUresult copy_2d(const char *call, const CUDA_MEMCPY2D *c, CUstream h, int pt, int sync)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.srcXInBytes = c->srcXInBytes;
    p.srcY = c->srcY;
    p.srcMemoryType = c->srcMemoryType;
    p.srcHost = c->srcHost;
    p.srcDevice = c->srcDevice;
    p.srcArray = c->srcArray;
    p.srcPitch = c->srcPitch;
    p.srcHeight = c->srcY + c->Height;
    p.dstXInBytes = c->dstXInBytes;
    p.dstY = c->dstY;
    p.dstMemoryType = c->dstMemoryType;
    p.dstHost = c->dstHost;
    p.dstDevice = c->dstDevice;
    p.dstArray = c->dstArray;
    p.dstPitch = c->dstPitch;
    p.dstHeight = c->dstY + c->Height;
    p.WidthInBytes = c->WidthInBytes;
    p.Height = c->Height;
    p.Depth = 1;
    return copy_submit(call, &p, h, pt, sync);
}

#define H CU_MEMORYTYPE_HOST
#define D CU_MEMORYTYPE_DEVICE
#define U CU_MEMORYTYPE_UNIFIED

EMU_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, U, dst, U, src, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, U, dst, U, src, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, U, dst, U, src, ByteCount, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, U, dst, U, src, ByteCount, hStream, 1, 0); }

EMU_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, H, (uintptr_t)srcHost, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, H, (uintptr_t)srcHost, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, H, (uintptr_t)dstHost, D, srcDevice, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, H, (uintptr_t)dstHost, D, srcDevice, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, D, srcDevice, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, D, srcDevice, ByteCount, NULL, 1, 1); }

EMU_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                         CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, H, (uintptr_t)srcHost, ByteCount, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                              CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, H, (uintptr_t)srcHost, ByteCount, hStream, 1, 0); }
EMU_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, H, (uintptr_t)dstHost, D, srcDevice, ByteCount, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                              CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, H, (uintptr_t)dstHost, D, srcDevice, ByteCount, hStream, 1, 0); }
EMU_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                         CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, D, srcDevice, ByteCount, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                              CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, D, srcDevice, ByteCount, hStream, 1, 0); }

/* The 1D copies to and from arrays (cuMemcpyHtoA, AtoH, DtoA, AtoD, AtoA,
 * HtoAAsync, AtoHAsync): "dstOffset ... Offset in bytes of destination
 * array", ByteCount bytes; a 3D copy of one row whose array side starts at
 * that offset of the array's first row (the documentation says no more: a
 * copy running past the first row of a 2D array is refused here,
 * CUDA_ERROR_INVALID_VALUE, as one past the array's end, and offsets and
 * counts are whole elements as for cuMemcpy2D's srcXInBytes). cuMemcpyAtoA:
 * "the elements must be the same size; and count must be evenly divisible
 * by that size". dst or src is an address (host or device) or, for the
 * array side(s), a CUarray with its offset. */
static CUresult copy_array_1d(const char *call, CUmemorytype dt, uintptr_t dst, size_t doff, CUmemorytype st,
                              uintptr_t src, size_t soff, size_t n, CUstream h, int pt, int sync)
{
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = st;
    p.dstMemoryType = dt;
    if (st == CU_MEMORYTYPE_ARRAY) p.srcArray = (CUarray)src, p.srcXInBytes = soff;
    else if (st == CU_MEMORYTYPE_HOST) p.srcHost = (const void *)src;
    else p.srcDevice = src;
    if (dt == CU_MEMORYTYPE_ARRAY) p.dstArray = (CUarray)dst, p.dstXInBytes = doff;
    else if (dt == CU_MEMORYTYPE_HOST) p.dstHost = (void *)dst;
    else p.dstDevice = dst;
    if (st == CU_MEMORYTYPE_ARRAY && dt == CU_MEMORYTYPE_ARRAY &&
        emu_array_elem(p.srcArray) != emu_array_elem(p.dstArray))
        return CUDA_ERROR_INVALID_VALUE;
    p.WidthInBytes = n;
    p.Height = p.Depth = 1;
    return copy_submit(call, &p, h, pt, sync);
}

#define A CU_MEMORYTYPE_ARRAY
EMU_EXPORT CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, A, (uintptr_t)dstArray, dstOffset, H, (uintptr_t)srcHost, 0, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, A, (uintptr_t)dstArray, dstOffset, H, (uintptr_t)srcHost, 0, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, H, (uintptr_t)dstHost, 0, A, (uintptr_t)srcArray, srcOffset, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyAtoH_v2_ptds(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, H, (uintptr_t)dstHost, 0, A, (uintptr_t)srcArray, srcOffset, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, A, (uintptr_t)dstArray, dstOffset, D, srcDevice, 0, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyDtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, A, (uintptr_t)dstArray, dstOffset, D, srcDevice, 0, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, D, dstDevice, 0, A, (uintptr_t)srcArray, srcOffset, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, D, dstDevice, 0, A, (uintptr_t)srcArray, srcOffset, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyAtoA_v2(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, A, (uintptr_t)dstArray, dstOffset, A, (uintptr_t)srcArray, srcOffset, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyAtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, A, (uintptr_t)dstArray, dstOffset, A, (uintptr_t)srcArray, srcOffset, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, A, (uintptr_t)dstArray, dstOffset, H, (uintptr_t)srcHost, 0, ByteCount, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, A, (uintptr_t)dstArray, dstOffset, H, (uintptr_t)srcHost, 0, ByteCount, hStream, 1, 0); }
EMU_EXPORT CUresult cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, H, (uintptr_t)dstHost, 0, A, (uintptr_t)srcArray, srcOffset, ByteCount, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpyAtoHAsync_v2_ptsz(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_array_1d(__func__, H, (uintptr_t)dstHost, 0, A, (uintptr_t)srcArray, srcOffset, ByteCount, hStream, 1, 0); }
#undef A

/* cuMemcpyPeer / cuMemcpyPeerAsync: "Copies from device memory in one
 * context to device memory in another context." Both contexts must be live
 * (CUDA_ERROR_INVALID_CONTEXT); then it is a device-to-device copy like
 * cuMemcpyDtoD(Async), with the same range checks, on a stream of the
 * current context (NULL: its legacy or per-thread default stream), recorded
 * as a memcpy node during a capture. Peer access need not be enabled.
 * cuMemcpyPeer "is ... serialized with respect to all pending and future
 * asynchronous work in to the current context, srcContext, and dstContext
 * (use cuMemcpyPeerAsync to avoid this synchronization)": it first waits
 * for every stream of the three contexts (the copy itself is synchronous,
 * so later work comes after it); cuMemcpyPeerAsync waits for nothing but
 * its stream. A call refused during a capture waits for nothing. */
static CUresult copy_peer(const char *call, CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                          size_t n, CUstream h, int pt, int sync)
{
    if (!emu_ctx_live(dst_ctx) || !emu_ctx_live(src_ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (sync) {
        CUresult r = emu_capture_check_unsafe(call);
        if (r != CUDA_SUCCESS) return r;
        CUcontext cur = emu_ctx_current();
        emu_streams_sync_all(src_ctx);
        if (dst_ctx != src_ctx) emu_streams_sync_all(dst_ctx);
        if (cur && cur != src_ctx && cur != dst_ctx) emu_streams_sync_all(cur);
    }
    return copy_1d(call, D, dst, D, src, n, h, pt, sync);
}

EMU_EXPORT CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                 CUcontext srcContext, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_peer(__func__, dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                      CUcontext srcContext, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_peer(__func__, dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                      CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return copy_peer(__func__, dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, 0, 0);
}
EMU_EXPORT CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                           CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return copy_peer(__func__, dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, 1, 0);
}

/* ------------------------------------------------------------------------
 * Batches of copies (cuMemcpyBatchAsync, CUDA 12.8; _v2, without failIdx, 13.0)
 * ---------------------------------------------------------------------- */
/* "Performs a batch of memory copies. The batch as a whole executes in stream
 * order but copies within a batch are not guaranteed to execute in any
 * specific order. This API only supports pointer-to-pointer copies." Each
 * copy is a unified-address 1D copy with cuMemcpyAsync's range checks. The
 * checks, each answered CUDA_ERROR_INVALID_VALUE: count and numAttrs nonzero,
 * the arrays present, "the first entry in attrsIdxs must always be 0 ...
 * each entry must be greater than the previous entry and the last entry
 * should be less than count ... numAttrs must be lesser than or equal to
 * count"; "Each memcpy operation in the batch must have a valid
 * CUmemcpyAttributes ... including the appropriate srcAccessOrder setting"
 * (STREAM, DURING_API_CALL or ANY), flags DEFAULT or
 * PREFER_OVERLAP_WITH_COMPUTE; "hStream ... Must not be legacy NULL stream"
 * (NULL in the non-ptsz entry points, CU_STREAM_LEGACY in all). *failIdx
 * (the 12.8 entry points) gets the index of the copy a failure pertains to,
 * SIZE_MAX if none. A zero-sized copy does nothing (as cuMemcpyAsync's).
 *
 * Out of capture the batch is one work on the stream; a source whose
 * attribute says DURING_API_CALL is read during the call ("all accesses
 * must be complete before the API call returns") into the work, so the
 * program may reuse it at once (device memory the stream's device may not
 * read: a violation, the bytes read as zeros). During a capture each
 * (nonzero) copy is one memcpy node, all of them depending on the stream's
 * last nodes and together becoming its last nodes (no order within a
 * batch); a batch with
 * a DURING_API_CALL source cannot be captured here
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, the capture invalidated: a graph
 * reads its sources at each launch, not during the call). */
typedef struct batch_work {
    emu_work w;
    size_t n;
    CUDA_MEMCPY3D *p;               /* n copies, then the sources read during the call */
} batch_work;

static void batch_run(emu_work *w, emu_stream *s)
{
    (void)s;
    batch_work *b = (batch_work *)w;
    for (size_t i = 0; i < b->n; i++) emu_memcpy3d_exec(&b->p[i], 0, 0);   /* device and host memory only */
}

static CUresult copy_batch(const char *call, const CUdeviceptr *dsts, const CUdeviceptr *srcs,
                           const size_t *sizes, size_t count, const CUmemcpyAttributes *attrs,
                           const size_t *attrs_idxs, size_t nattrs, size_t *fail_idx, CUstream h, int pt)
{
    if (fail_idx) *fail_idx = SIZE_MAX;
    if (!count || !dsts || !srcs || !sizes || !attrs || !attrs_idxs || !nattrs || nattrs > count ||
        attrs_idxs[0] != 0 || h == CU_STREAM_LEGACY || (!h && !pt))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nattrs; k++) {
        if ((k && attrs_idxs[k] <= attrs_idxs[k - 1]) || attrs_idxs[k] >= count) return CUDA_ERROR_INVALID_VALUE;
        if (attrs[k].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
            attrs[k].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY ||
            (attrs[k].flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)) {
            if (fail_idx) *fail_idx = attrs_idxs[k];
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    emu_stream *s;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    size_t n = 0, snap = 0, k = 0;
    for (size_t i = 0; i < count; i++) {
        while (k + 1 < nattrs && attrs_idxs[k + 1] <= i) k++;
        if (!sizes[i]) continue;
        n++;
        if (attrs[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) snap += sizes[i];
    }
    CUDA_MEMCPY3D *p = calloc(n ? n : 1, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    n = 0;
    k = 0;
    for (size_t i = 0; i < count; i++) {
        while (k + 1 < nattrs && attrs_idxs[k + 1] <= i) k++;
        if (!sizes[i]) continue;
        CUDA_MEMCPY3D *c = &p[n++];
        c->srcMemoryType = c->dstMemoryType = CU_MEMORYTYPE_UNIFIED;
        c->srcDevice = srcs[i];
        c->dstDevice = dsts[i];
        c->WidthInBytes = sizes[i];
        c->Height = c->Depth = 1;
        if ((r = emu_memcpy3d_check(c)) != CUDA_SUCCESS) {
            if (fail_idx) *fail_idx = i;
            free(p);
            return r;
        }
    }
    if (emu_stream_capture(s)) {
        emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_MEMCPY, .copies = p, .ncopies = n };
        if (snap) {
            emu_capture_invalidate(s);
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        } else {
            r = emu_capture_add(s, &op);
        }
        free(p);
        return r;
    }
    batch_work *b = (batch_work *)emu_work_new(sizeof *b + n * sizeof *p + snap, call, batch_run);
    b->n = n;
    b->p = (CUDA_MEMCPY3D *)(b + 1);
    unsigned char *at = (unsigned char *)(b->p + n);
    n = 0;
    k = 0;
    for (size_t i = 0; i < count; i++) {
        while (k + 1 < nattrs && attrs_idxs[k + 1] <= i) k++;
        if (!sizes[i]) continue;
        CUDA_MEMCPY3D *c = &b->p[n];
        *c = p[n++];
        if (attrs[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) {
            emu_range rg;
            if (emu_mem_find(c->srcDevice, &rg) && !emu_mem_accessible(c->srcDevice, c->WidthInBytes, s->device)) {
                /* device memory the stream's device may not read: the read would fault */
                emu_violation(call, "illegal address 0x%llx (%zu bytes not accessible to device %d)",
                              (unsigned long long)c->srcDevice, c->WidthInBytes, s->device);
                memset(at, 0, c->WidthInBytes);
            } else {
                memcpy(at, (const void *)(uintptr_t)c->srcDevice, c->WidthInBytes);
            }
            c->srcMemoryType = CU_MEMORYTYPE_HOST;
            c->srcHost = at;
            at += c->WidthInBytes;
        }
        emu_memcpy3d_touch(&b->w, c);
    }
    free(p);
    return emu_stream_submit(call, s, 0, NULL, &b->w);
}

EMU_EXPORT CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                       CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                       size_t *failIdx, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return copy_batch(__func__, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, 0);
}
EMU_EXPORT CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                            CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                            size_t *failIdx, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return copy_batch(__func__, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, 1);
}
EMU_EXPORT CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                          CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                          CUstream hStream)
{
    EMU_ENTRY_INIT();
    return copy_batch(__func__, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, 0);
}
EMU_EXPORT CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                               CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                               CUstream hStream)
{
    EMU_ENTRY_INIT();
    return copy_batch(__func__, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, 1);
}

#undef H
#undef D
#undef U

/* The device's CU_DEVICE_ATTRIBUTE_MAX_PITCH (emu_core.c). cuMemcpy2D:
 * "returns an error if any pitch is greater than the maximum allowed
 * (CU_DEVICE_ATTRIBUTE_MAX_PITCH) ... cuMemcpy2DUnaligned() does not have
 * this restriction". A pitch counts where it is used: a copy of more than
 * one row. */
#define EMU_MAX_PITCH 2147483647u

static CUresult copy_2d_pitch_limited(const char *call, const CUDA_MEMCPY2D *c, CUstream h, int pt, int sync)
{
    if (c && c->Height > 1 && ((c->srcMemoryType != CU_MEMORYTYPE_ARRAY && c->srcPitch > EMU_MAX_PITCH) ||
                               (c->dstMemoryType != CU_MEMORYTYPE_ARRAY && c->dstPitch > EMU_MAX_PITCH)))
        return CUDA_ERROR_INVALID_VALUE;
    return copy_2d(call, c, h, pt, sync);
}

EMU_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{ EMU_ENTRY_INIT(); return copy_2d_pitch_limited(__func__, pCopy, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{ EMU_ENTRY_INIT(); return copy_2d_pitch_limited(__func__, pCopy, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_2d_pitch_limited(__func__, pCopy, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_2d_pitch_limited(__func__, pCopy, hStream, 1, 0); }
EMU_EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{ EMU_ENTRY_INIT(); return copy_2d(__func__, pCopy, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{ EMU_ENTRY_INIT(); return copy_2d(__func__, pCopy, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{ EMU_ENTRY_INIT(); return copy_submit(__func__, pCopy, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
{ EMU_ENTRY_INIT(); return copy_submit(__func__, pCopy, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_submit(__func__, pCopy, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_submit(__func__, pCopy, hStream, 1, 0); }

/* cuMemcpy3DPeer / cuMemcpy3DPeerAsync: "Perform a 3D memory copy according
 * to the parameters specified in pCopy" (CUDA_MEMCPY3D_PEER: CUDA_MEMCPY3D's
 * members, with srcContext / dstContext where CUDA_MEMCPY3D has reserved0 /
 * reserved1). A side's context is "ignored with ... MemoryType is
 * CU_MEMORYTYPE_ARRAY"; the emulator reads it for a device or unified side
 * (a live context, else CUDA_ERROR_INVALID_CONTEXT) and ignores it for a
 * host side too. Then it is cuMemcpy3D(Async) of the same members: the
 * same checks, the synchronous form synchronous as cuMemcpy3D (the
 * documentation gives it \note_sync only, not cuMemcpyPeer's serialization
 * with the contexts' work) and early where cuMemcpy3D is
 * (CUDAEMU_SYNC_EARLY_US), the Async form recorded as a memcpy node during a
 * capture, as cuMemcpyPeerAsync. NULL pCopy: CUDA_ERROR_INVALID_VALUE. */
static CUresult copy_3d_peer(const char *call, const CUDA_MEMCPY3D_PEER *c, CUstream h, int pt, int sync)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    if ((c->srcMemoryType == CU_MEMORYTYPE_DEVICE || c->srcMemoryType == CU_MEMORYTYPE_UNIFIED) &&
        !emu_ctx_live(c->srcContext))
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((c->dstMemoryType == CU_MEMORYTYPE_DEVICE || c->dstMemoryType == CU_MEMORYTYPE_UNIFIED) &&
        !emu_ctx_live(c->dstContext))
        return CUDA_ERROR_INVALID_CONTEXT;
    /* the same members at the same places, the contexts where CUDA_MEMCPY3D
     * has its reserved pointers (which cuMemcpy3D wants NULL) */
    _Static_assert(sizeof(CUDA_MEMCPY3D) == sizeof(CUDA_MEMCPY3D_PEER) &&
                   offsetof(CUDA_MEMCPY3D, reserved0) == offsetof(CUDA_MEMCPY3D_PEER, srcContext) &&
                   offsetof(CUDA_MEMCPY3D, reserved1) == offsetof(CUDA_MEMCPY3D_PEER, dstContext) &&
                   offsetof(CUDA_MEMCPY3D, Depth) == offsetof(CUDA_MEMCPY3D_PEER, Depth),
                   "CUDA_MEMCPY3D_PEER is CUDA_MEMCPY3D with contexts");
    CUDA_MEMCPY3D p;
    memcpy(&p, c, sizeof p);
    p.reserved0 = p.reserved1 = NULL;
    return copy_submit(call, &p, h, pt, sync);
}

EMU_EXPORT CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{ EMU_ENTRY_INIT(); return copy_3d_peer(__func__, pCopy, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy)
{ EMU_ENTRY_INIT(); return copy_3d_peer(__func__, pCopy, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_3d_peer(__func__, pCopy, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_3d_peer(__func__, pCopy, hStream, 1, 0); }

/* ------------------------------------------------------------------------
 * Memsets
 * ---------------------------------------------------------------------- */
CUresult emu_memset_check(const CUDA_MEMSET_NODE_PARAMS *p)
{
    emu_range r;
    if (!p || !p->dst || !p->width || !p->height) return CUDA_ERROR_INVALID_VALUE;
    unsigned es = p->elementSize;
    if (es != 1 && es != 2 && es != 4) return CUDA_ERROR_INVALID_VALUE;
    if (p->dst % es) return CUDA_ERROR_INVALID_VALUE;
    if (p->height > 1 && (p->pitch < p->width * es || p->pitch % es)) return CUDA_ERROR_INVALID_VALUE;
    if (!emu_mem_find(p->dst, &r)) return CUDA_ERROR_INVALID_VALUE;
    /* The whole span lies in the allocation holding dst. */
    if (p->width > SIZE_MAX / es || (p->height > 1 && p->height - 1 > (SIZE_MAX - p->width * es) / p->pitch))
        return CUDA_ERROR_INVALID_VALUE;
    if (!emu_mem_extent_ok(p->dst, (p->height - 1) * p->pitch + p->width * es)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Faults in the whole pages of [p, p + bytes), which the caller is about
 * to write entirely, in one system call, on transparent huge pages where the
 * range covers whole 2 MiB blocks. Writing fresh emulated device memory page
 * by page costs a fault per 4 KiB page, which in a virtual machine is most of
 * the time of the 256 MiB memory tests (adv_memory churn: 4.4 s -> 0.7 s,
 * peak RSS unchanged, since every page here is written anyway). Only a
 * speed-up: what is written and where does not change, and a kernel without
 * MADV_POPULATE_WRITE (before Linux 5.14) or THP just faults as before. */
static void prefault_for_write(unsigned char *p, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
    enum { MIN_BYTES = 1 << 20 };
    if (bytes < MIN_BYTES) return;
    size_t page = emu_page_size();
    size_t lo = emu_round_up((uintptr_t)p, page), hi = ((uintptr_t)p + bytes) / page * page;
    if (hi <= lo) return;
#ifdef MADV_HUGEPAGE
    size_t huge = (size_t)2 << 20;
    size_t hlo = emu_round_up(lo, huge), hhi = hi / huge * huge;
    if (hhi > hlo) (void)madvise((void *)hlo, hhi - hlo, MADV_HUGEPAGE);
#endif
    (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)bytes;
#endif
}

void emu_memset_exec(const CUDA_MEMSET_NODE_PARAMS *p)
{
    int dev = emu_worker_device();
    size_t row_bytes = p->width * p->elementSize;
    for (size_t y = 0; y < p->height; y++) {
        unsigned char *row = (unsigned char *)(uintptr_t)(p->dst + y * p->pitch);
        if (!emu_mem_accessible((CUdeviceptr)(uintptr_t)row, row_bytes, dev)) {
            emu_violation("memset", "illegal address %p (%zu bytes not accessible to device %d)",
                          (void *)row, row_bytes, dev);
            return;
        }
        prefault_for_write(row, row_bytes);
        if (p->elementSize == 1) {
            memset(row, (int)(p->value & 0xff), p->width);
        } else if (p->elementSize == 2) {
            uint16_t v = (uint16_t)p->value;
            for (size_t i = 0; i < p->width; i++) memcpy(row + 2 * i, &v, 2);
        } else {
            uint32_t v = p->value;
            for (size_t i = 0; i < p->width; i++) memcpy(row + 4 * i, &v, 4);
        }
    }
}

void emu_memset_touch(emu_work *w, const CUDA_MEMSET_NODE_PARAMS *p)
{
    size_t span = (p->height - 1) * p->pitch + p->width * p->elementSize;
    emu_work_touch_range(w, p->dst, span);
}

typedef struct set_work {
    emu_work w;
    CUDA_MEMSET_NODE_PARAMS p;
    early e;
} set_work;

static void set_run(emu_work *w, emu_stream *s)
{
    (void)s;
    set_work *sw = (set_work *)w;
    early_before(&sw->e);
    emu_memset_exec(&sw->p);
    early_after(&sw->e);
}

/* Every memset entry point ends here; `width` counts elements. */
static CUresult memset_submit(const char *call, CUdeviceptr dst, size_t pitch, unsigned value, unsigned es,
                              size_t width, size_t height, CUstream h, int pt, int sync)
{
    if (!width || !height) return CUDA_SUCCESS;
    CUDA_MEMSET_NODE_PARAMS p = { .dst = dst, .pitch = height > 1 ? pitch : width * es, .value = value,
                                  .elementSize = es, .width = width, .height = height };
    CUresult r = emu_memset_check(&p);
    if (r != CUDA_SUCCESS) return r;
    emu_stream *s;
    if ((r = emu_stream_get(h, pt, &s)) != CUDA_SUCCESS) return r;
    set_work *sw = (set_work *)emu_work_new(sizeof *sw, call, set_run);
    sw->p = p;
    emu_memset_touch(&sw->w, &p);
    emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_MEMSET, .set = &p };
    if (sync && !emu_stream_capture(s) && memset_early(dst, &sw->e))
        return early_submit(call, s, &op, &sw->w, &sw->e);
    return emu_stream_submit(call, s, sync, &op, &sw->w);
}

#define MEMSET_1D(name, type, es)                                                              \
    EMU_EXPORT CUresult name##_v2(CUdeviceptr d, type v, size_t n)                             \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, 0, v, es, n, 1, NULL, 0, 1); }       \
    EMU_EXPORT CUresult name##_v2_ptds(CUdeviceptr d, type v, size_t n)                        \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, 0, v, es, n, 1, NULL, 1, 1); }       \
    EMU_EXPORT CUresult name##Async(CUdeviceptr d, type v, size_t n, CUstream h)               \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, 0, v, es, n, 1, h, 0, 0); }          \
    EMU_EXPORT CUresult name##Async_ptsz(CUdeviceptr d, type v, size_t n, CUstream h)          \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, 0, v, es, n, 1, h, 1, 0); }

#define MEMSET_2D(name, type, es)                                                              \
    EMU_EXPORT CUresult name##_v2(CUdeviceptr d, size_t pitch, type v, size_t w, size_t ht)    \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, pitch, v, es, w, ht, NULL, 0, 1); }  \
    EMU_EXPORT CUresult name##_v2_ptds(CUdeviceptr d, size_t pitch, type v, size_t w, size_t ht) \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, pitch, v, es, w, ht, NULL, 1, 1); }  \
    EMU_EXPORT CUresult name##Async(CUdeviceptr d, size_t pitch, type v, size_t w, size_t ht, CUstream h) \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, pitch, v, es, w, ht, h, 0, 0); }     \
    EMU_EXPORT CUresult name##Async_ptsz(CUdeviceptr d, size_t pitch, type v, size_t w, size_t ht, CUstream h) \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, pitch, v, es, w, ht, h, 1, 0); }

MEMSET_1D(cuMemsetD8, unsigned char, 1)
MEMSET_1D(cuMemsetD16, unsigned short, 2)
MEMSET_1D(cuMemsetD32, unsigned int, 4)
MEMSET_2D(cuMemsetD2D8, unsigned char, 1)
MEMSET_2D(cuMemsetD2D16, unsigned short, 2)
MEMSET_2D(cuMemsetD2D32, unsigned int, 4)
