/*
 * emu_pool.c: stream-ordered allocation of the emulated CUDA driver: each
 * device's default memory pool (cuDeviceGetDefaultMemPool, attributes,
 * trim), cuMemAllocAsync / cuMemAllocFromPoolAsync / cuMemFreeAsync. Inside
 * a capture they make allocation and free nodes (emu_capture.c); the memory
 * itself is emu_mem.c's.
 *
 * Locks: none of its own. The default pools are made once (pools_once) and
 * immutable afterwards; a pool's state is guarded by emu_mem.c's emu_mem_lock.
 */
#include "emu_stream.h"

struct CUmemPoolHandle_st { int device; };

/* ------------------------------------------------------------------------
 * Stream-ordered allocation (the default pool of each device only). Inside a
 * capture they make allocation and free nodes (emu_capture.c).
 * ---------------------------------------------------------------------- */
static struct CUmemPoolHandle_st default_pools[8];
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;

static void pools_init(void)
{
    for (int i = 0; i < 8; i++) {
        default_pools[i].device = i;
        emu_handle_add(&default_pools[i], EMU_K_POOL);
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

EMU_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    EMU_ENTRY_INIT();
    return default_pool(pool_out, dev);
}

EMU_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    EMU_ENTRY_INIT();
    return default_pool(pool, dev);
}

/* The entry point exists (the library hooks it); creating a pool is not
 * emulated. */
EMU_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    EMU_ENTRY_INIT();
    if (!pool || !poolProps) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* cuDeviceSetMemPool: "The memory pool must be local to the specified
 * device." The only pools emulated are the default ones (cuMemPoolCreate refuses),
 * so the one pool that can be made current is the device's default pool,
 * already current; any other handle is not a pool of the device. */
EMU_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    EMU_ENTRY_INIT();
    CUmemoryPool d;
    CUresult r = default_pool(&d, dev);
    if (r != CUDA_SUCCESS) return r;
    return pool == d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuMemSetMemPool / cuMemGetMemPool for a device's pinned memory, the only
 * location and type with an emulated pool (the default one); other
 * locations or types: CUDA_ERROR_NOT_SUPPORTED. */
static CUresult location_pool(const CUmemLocation *loc, CUmemAllocationType type, CUmemoryPool *out)
{
    if (!loc) return CUDA_ERROR_INVALID_VALUE;
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE || type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_NOT_SUPPORTED;
    return default_pool(out, loc->id);
}

EMU_EXPORT CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
    EMU_ENTRY_INIT();
    CUmemoryPool d;
    CUresult r = location_pool(location, type, &d);
    if (r != CUDA_SUCCESS) return r;
    return pool == d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EMU_EXPORT CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
    EMU_ENTRY_INIT();
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    return location_pool(location, type, pool);
}

/* A pool argument: one of the devices' default pools. */
static int pool_ok(CUmemoryPool pool)
{
    pthread_once(&pools_once, pools_init);
    return pool >= &default_pools[0] && pool < &default_pools[emu_device_count()];
}

/* cuMemPoolTrimTo: "Releases memory back to the OS until the pool contains
 * fewer than minBytesToKeep reserved bytes"; memory in use stays. */
EMU_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    EMU_ENTRY_INIT();
    if (!pool_ok(pool)) return CUDA_ERROR_INVALID_VALUE;
    emu_mem_pool_trim(pool->device, minBytesToKeep);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    EMU_ENTRY_INIT();
    if (!pool_ok(pool)) return CUDA_ERROR_INVALID_VALUE;
    return emu_mem_pool_attr(pool->device, attr, 1, value);
}

EMU_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    EMU_ENTRY_INIT();
    if (!pool_ok(pool)) return CUDA_ERROR_INVALID_VALUE;
    return emu_mem_pool_attr(pool->device, attr, 0, value);
}

static CUresult alloc_async(const char *call, CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream h,
                            int pt)
{
    emu_stream *s;
    if (!dptr || !bytes) return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&pools_once, pools_init);
    if (pool && (pool < &default_pools[0] || pool >= &default_pools[emu_device_count()]))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    int dev = pool ? pool->device : s->device;
    if (emu_stream_capture(s)) {
        /* cuMemAllocAsync: "During stream capture, this function results in
         * the creation of an allocation node." */
        emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC, .mem_bytes = bytes, .mem_dev = dev,
                              .mem_out = dptr };
        return emu_capture_add(s, &op);
    }
    /* "This function uses standard default stream semantics": on the legacy
     * stream while a blocking stream captures, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. */
    if ((r = emu_stream_legacy_check(s)) != CUDA_SUCCESS) return r;
    return emu_mem_alloc_device(dptr, bytes, dev, pool ? pool : &default_pools[dev], s, call);
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
