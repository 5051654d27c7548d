/*
 * emu_pool.c: stream-ordered allocation of the emulated CUDA driver: memory
 * pools (each device's default pool, and pools cuMemPoolCreate makes:
 * device-located pinned memory without export handle types), the current
 * pool of each device, attributes, access, trim, destroy;
 * cuMemAllocAsync / cuMemAllocFromPoolAsync / cuMemFreeAsync. Inside a
 * capture they make allocation and free nodes (emu_capture.c); the memory
 * and the pools' state are emu_mem.c's (emu_mem.h).
 *
 * Locks: none of its own. The default pools are made once (pools_once);
 * a pool's state and each device's current pool are guarded by emu_mem.c's
 * emu_mem_lock. A created pool is a handle (EMU_K_POOL) from the handle
 * memory until destroyed; its memory goes back to that handle memory once
 * nothing of it is left (emu_mem_pool_destroy, or its last block's free).
 */
#include "emu_mem.h"
#include "emu_stream.h"

#include <string.h>

/* ------------------------------------------------------------------------
 * Pools
 * ---------------------------------------------------------------------- */
static struct CUmemPoolHandle_st default_pools[MEM_MAX_DEVICES];
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;

static void pools_init(void)
{
    for (int i = 0; i < MEM_MAX_DEVICES; i++) {
        emu_mem_pool_add(&default_pools[i], i, 0, 0);
        if (i < emu_device_count()) emu_handle_add(&default_pools[i], EMU_K_POOL);
    }
}

static CUresult default_pool(CUmemoryPool *out, CUdevice dev)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    pthread_once(&pools_once, pools_init);
    *out = &default_pools[dev];
    return CUDA_SUCCESS;
}

/* The pool cuMemAllocAsync takes from on dev (dev valid). */
static CUmemoryPool current_pool(int dev)
{
    pthread_once(&pools_once, pools_init);
    CUmemoryPool p = emu_mem_pool_current(dev, NULL, 0);
    return p ? p : &default_pools[dev];
}

/* A pool argument: a live pool (a default one, or a created one not yet
 * destroyed). */
static int pool_ok(CUmemoryPool pool)
{
    pthread_once(&pools_once, pools_init);
    return pool && emu_handle_alive(pool, EMU_K_POOL);
}

EMU_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    EMU_ENTRY_INIT();
    return default_pool(pool_out, dev);
}

/* cuDeviceGetMemPool: "the last pool provided to cuDeviceSetMemPool for this
 * device or the device's default memory pool". */
EMU_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    EMU_ENTRY_INIT();
    CUmemoryPool d;
    CUresult r = default_pool(&d, dev);
    if (r == CUDA_SUCCESS) *pool = current_pool(dev);
    return r;
}

/* cuMemPoolCreate. Emulated: allocType CU_MEM_ALLOCATION_TYPE_PINNED,
 * location a device, handleTypes CU_MEM_HANDLE_TYPE_NONE, usage 0, maxSize
 * (0: the device's memory). Documented refusals: no pointer, another
 * allocation type, win32SecurityAttributes or reserved bytes set, a HOST
 * location with handle types, HOST_NUMA_CURRENT: CUDA_ERROR_INVALID_VALUE;
 * a device that does not exist: CUDA_ERROR_INVALID_DEVICE. What a real
 * driver may do but the emulator does not model (host or NUMA locations,
 * export handle types, usage flags) is refused with
 * CUDA_ERROR_NOT_SUPPORTED and a log line, never silently. */
EMU_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *pp)
{
    EMU_ENTRY_INIT();
    if (!pool || !pp) return CUDA_ERROR_INVALID_VALUE;
    static const unsigned char zero[sizeof pp->reserved];
    if (pp->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || pp->win32SecurityAttributes ||
        memcmp(pp->reserved, zero, sizeof zero) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    const CUmemLocation *loc = &pp->location;
    if (loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) return CUDA_ERROR_INVALID_VALUE;
    if (loc->type == CU_MEM_LOCATION_TYPE_HOST && pp->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_INVALID_VALUE;
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE) {
        emu_log("cuMemPoolCreate: a pool of location type %d is not emulated (device pools only): "
                "CUDA_ERROR_NOT_SUPPORTED", (int)loc->type);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (loc->id < 0 || loc->id >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    if (pp->handleTypes != CU_MEM_HANDLE_TYPE_NONE || pp->usage) {
        emu_log("cuMemPoolCreate: %s %#x not emulated (pools without export handle types or usage "
                "flags only): CUDA_ERROR_NOT_SUPPORTED", pp->usage ? "usage" : "handleTypes",
                pp->usage ? (unsigned)pp->usage : (unsigned)pp->handleTypes);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    pthread_once(&pools_once, pools_init);
    CUmemoryPool p = emu_handle_mem_get(EMU_K_POOL, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    emu_mem_pool_add(p, loc->id, 1, pp->maxSize);
    emu_handle_add(p, EMU_K_POOL);
    *pool = p;
    return CUDA_SUCCESS;
}

/* cuMemPoolDestroy: "A device's default memory pool cannot be destroyed"
 * (CUDA_ERROR_INVALID_VALUE, as for a handle that is not a live pool).
 * "Destroying the current mempool of a device sets the default mempool of
 * that device as the current mempool"; with allocations left (not freed, or
 * freed and not yet reached), "the resources associated with the pool will
 * be released automatically once there are no more outstanding
 * allocations": the handle is dead at once (any call naming it:
 * CUDA_ERROR_INVALID_VALUE), its allocations stay valid until freed. */
EMU_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    EMU_ENTRY_INIT();
    if (!pool_ok(pool) || !pool->created) return CUDA_ERROR_INVALID_VALUE;
    int gone = emu_mem_pool_destroy(pool);
    if (gone < 0) return CUDA_ERROR_INVALID_VALUE;   /* another thread destroyed it first */
    emu_handle_del(pool);
    if (gone) emu_handle_mem_put(EMU_K_POOL, pool);
    return CUDA_SUCCESS;
}

/* cuDeviceSetMemPool: "The memory pool must be local to the specified
 * device" (else CUDA_ERROR_INVALID_VALUE, as for a handle that is not a
 * live pool). */
EMU_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    EMU_ENTRY_INIT();
    CUmemoryPool d;
    CUresult r = default_pool(&d, dev);
    if (r != CUDA_SUCCESS) return r;
    if (!pool_ok(pool) || pool->device != dev) return CUDA_ERROR_INVALID_VALUE;
    emu_mem_pool_current(dev, pool == d ? NULL : pool, 1);
    return CUDA_SUCCESS;
}

/* cuMemSetMemPool / cuMemGetMemPool for a device's pinned memory, the only
 * location and type with emulated pools ("the equivalent of calling
 * cuDeviceSetMemPool with the location id as the device"); other locations
 * or types: CUDA_ERROR_NOT_SUPPORTED. */
static CUresult location_dev(const CUmemLocation *loc, CUmemAllocationType type, CUdevice *dev)
{
    if (!loc) return CUDA_ERROR_INVALID_VALUE;
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE || type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUmemoryPool d;
    *dev = loc->id;
    return default_pool(&d, loc->id);
}

EMU_EXPORT CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
    EMU_ENTRY_INIT();
    CUdevice dev;
    CUresult r = location_dev(location, type, &dev);
    if (r != CUDA_SUCCESS) return r;
    if (!pool_ok(pool) || pool->device != dev) return CUDA_ERROR_INVALID_VALUE;
    emu_mem_pool_current(dev, pool == &default_pools[dev] ? NULL : pool, 1);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
    EMU_ENTRY_INIT();
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    CUdevice dev;
    CUresult r = location_dev(location, type, &dev);
    if (r == CUDA_SUCCESS) *pool = current_pool(dev);
    return r;
}

/* cuMemPoolTrimTo: "Releases memory back to the OS until the pool contains
 * fewer than minBytesToKeep reserved bytes"; memory in use stays. */
EMU_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    EMU_ENTRY_INIT();
    if (!pool_ok(pool)) return CUDA_ERROR_INVALID_VALUE;
    emu_mem_pool_trim(pool, minBytesToKeep);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    EMU_ENTRY_INIT();
    if (!pool_ok(pool)) return CUDA_ERROR_INVALID_VALUE;
    return emu_mem_pool_attr(pool, attr, 1, value);
}

EMU_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    EMU_ENTRY_INIT();
    if (!pool_ok(pool)) return CUDA_ERROR_INVALID_VALUE;
    return emu_mem_pool_attr(pool, attr, 0, value);
}

/* cuMemPoolSetAccess: "Controls visibility of pools between devices"; each
 * descriptor a device and CU_MEM_ACCESS_FLAGS_PROT_NONE or _READWRITE.
 * The pool's own device keeps read-write access (it allocates there):
 * revoking it, a read-only access, another location type or a device that
 * does not exist is CUDA_ERROR_INVALID_VALUE (the only error documented),
 * checked for every descriptor before any applies. Peer access
 * (cuCtxEnablePeerAccess) does not open pool memory to another device: only
 * this call does. Checked for kernels (their pointer arguments,
 * emu_mem_pool_open); copies and memsets, which the driver may run on the
 * memory's own device, are not. */
EMU_EXPORT CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
    EMU_ENTRY_INIT();
    if (!pool_ok(pool) || (count && !map)) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        const CUmemAccessDesc *d = &map[i];
        if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE || d->location.id < 0 ||
            d->location.id >= emu_device_count())
            return CUDA_ERROR_INVALID_VALUE;
        if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        if (d->location.id == pool->device && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < count; i++) {
        CUmemAccess_flags f = map[i].flags;
        emu_mem_pool_access(pool, map[i].location.id, &f, 1);
    }
    return CUDA_SUCCESS;
}

/* cuMemPoolGetAccess: "the accessibility of the pool's memory from the
 * specified location" (a device). */
EMU_EXPORT CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
    EMU_ENTRY_INIT();
    if (!flags || !location || !pool_ok(memPool) || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
        location->id < 0 || location->id >= emu_device_count())
        return CUDA_ERROR_INVALID_VALUE;
    return emu_mem_pool_access(memPool, location->id, flags, 0);
}

/* The access descriptors an allocation node captured from pool gets ("The
 * memory pool's properties are used to set the node's creation
 * parameters"): one per other device the pool is open to. */
size_t emu_pool_access_descs(CUmemoryPool pool, CUmemAccessDesc *out, size_t max)
{
    size_t n = 0;
    for (int d = 0; d < emu_device_count() && n < max; d++) {
        CUmemAccess_flags f;
        if (d == pool->device) continue;
        emu_mem_pool_access(pool, d, &f, 0);
        if (f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            out[n++] = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, d }, f };
    }
    return n;
}

static CUresult alloc_async(const char *call, CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream h,
                            int pt)
{
    emu_stream *s;
    if (!dptr || !bytes) return CUDA_ERROR_INVALID_VALUE;
    if (pool && !pool_ok(pool)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    /* cuMemAllocAsync: "The allocation comes from the memory pool current
     * to the stream's device." */
    if (!pool) pool = current_pool(s->device);
    int dev = pool->device;
    if (emu_stream_capture(s)) {
        /* cuMemAllocAsync: "During stream capture, this function results in
         * the creation of an allocation node. In this case, the allocation
         * is owned by the graph instead of the memory pool. The memory
         * pool's properties are used to set the node's creation
         * parameters." */
        emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC, .mem_bytes = bytes, .mem_dev = dev,
                              .mem_pool = pool, .mem_out = dptr };
        return emu_capture_add(s, &op);
    }
    /* "This function uses standard default stream semantics": on the legacy
     * stream while a blocking stream captures, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. */
    if ((r = emu_stream_legacy_check(s)) != CUDA_SUCCESS) return r;
    return emu_mem_alloc_device(dptr, bytes, dev, pool, s, call);
}

EMU_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{ EMU_ENTRY_INIT(); return alloc_async(__func__, dptr, bytesize, NULL, hStream, 0); }
EMU_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{ EMU_ENTRY_INIT(); return alloc_async(__func__, dptr, bytesize, NULL, hStream, 1); }

static CUresult alloc_from_pool(const char *call, CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                CUstream h, int pt)
{
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(call, dptr, bytes, pool, h, pt);
}

EMU_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                            CUstream hStream)
{ EMU_ENTRY_INIT(); return alloc_from_pool(__func__, dptr, bytesize, pool, hStream, 0); }
EMU_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                 CUstream hStream)
{ EMU_ENTRY_INIT(); return alloc_from_pool(__func__, dptr, bytesize, pool, hStream, 1); }

typedef struct free_work {
    emu_work w;
    CUdeviceptr p;
    uint64_t token;
} free_work;

static void free_run(emu_work *w, emu_stream *s)
{
    (void)s;
    free_work *fw = (free_work *)w;
    emu_mem_free_async_complete(fw->p, fw->token);
}

static CUresult free_async(const char *call, CUdeviceptr p, CUstream h, int pt)
{
    emu_stream *s;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    if (emu_stream_capture(s)) {
        /* cuMemFreeAsync: "During stream capture, this function results in
         * the creation of a free node and must therefore be passed the
         * address of a graph allocation" (else INVALID_VALUE, and the
         * capture is invalidated: emu_capture_add). */
        emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_MEM_FREE, .mem_ptr = p };
        return emu_capture_add(s, &op);
    }
    /* Checked before the block is marked freed: a refused call frees nothing. */
    if ((r = emu_stream_legacy_check(s)) != CUDA_SUCCESS) return r;
    uint64_t token;
    r = emu_mem_free_async_begin(p, &token);
    if (r != CUDA_SUCCESS) return r;
    /* The free itself touches nothing: work queued after it on the stream
     * that still uses p is what the release reports. */
    free_work *fw = (free_work *)emu_work_new(sizeof *fw, call, free_run);
    fw->p = p;
    fw->token = token;
    uint64_t seq;
    if ((r = emu_stream_enqueue_seq(s, &fw->w, &seq)) == CUDA_SUCCESS)
        emu_mem_free_async_queued(p, s, token, seq);   /* what an allocation's claim waits for */
    return r;
}

EMU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{ EMU_ENTRY_INIT(); return free_async(__func__, dptr, hStream, 0); }
EMU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{ EMU_ENTRY_INIT(); return free_async(__func__, dptr, hStream, 1); }
