/*
 * core/mem_query.c: what the program asks of its memory, answered for
 * placed memory as the driver answers for a cuMemAlloc block (address
 * range, pointer attributes, VMM queries, legacy IPC, cuMemGetInfo, the
 * default pools' memory figures), and
 * for blocks opened from another process's IPC handle (ipc.c) as for an
 * opened cuMemAlloc block (address range, attributes, VMM queries, range
 * checks), and the
 * driver's range checks of copies, memsets and memset / memcpy nodes over
 * placed blocks (small blocks share one mapped chunk, so the driver alone
 * would let them run past a block's end), and CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
 * of the library's blocks. State: sync_seen (an atomic hint); the
 * registry's lock is taken through mem_internal.h, the IPC table's through
 * ipc.h.
 */
#include "mem_internal.h"

#include "arena.h"
#include "contexts.h"
#include "driver.h"
#include "ipc.h"
#include "log.h"
#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void put_u64(void *d, unsigned long long v) { memcpy(d, &v, sizeof v); }
static void put_int(void *d, int v) { memcpy(d, &v, sizeof v); }

/* GPU_DIRECT_RDMA_CAPABLE of cuMemAlloc memory: what the device supports
 * (the library's chunks ask for it there, vmm.c rdma_rule). The device is
 * the one the driver names for the mapping. */
static int rdma_capable(CUdeviceptr p)
{
    int ord = 0, v = 0;
    CUdevice dev;
    if (!sg_drv.cuPointerGetAttribute || !sg_drv.cuDeviceGet || !sg_drv.cuDeviceGetAttribute ||
        SG_DRIVER_CALL(cuPointerGetAttribute, &ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) !=
            CUDA_SUCCESS ||
        SG_DRIVER_CALL(cuDeviceGet, &dev, ord) != CUDA_SUCCESS ||
        SG_DRIVER_CALL(cuDeviceGetAttribute, &v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, dev) !=
            CUDA_SUCCESS)
        return 0;
    return v != 0;
}

/* The memory pool a stream-ordered block would have come from: the default
 * pool of its device (memory.c places cuMemAllocAsync only while that pool
 * is the device's current one); NULL if the driver cannot say. */
static CUmemoryPool default_pool(CUdevice dev)
{
    CUmemoryPool pool = NULL;
    if (!sg_drv.cuDeviceGetDefaultMemPool ||
        SG_DRIVER_CALL(cuDeviceGetDefaultMemPool, &pool, dev) != CUDA_SUCCESS)
        pool = NULL;
    return pool;
}

/* Writes what the driver's own allocation would report for attribute a
 * (a cuMemAlloc block, or for a stream-ordered block one from the default
 * pool), for the attributes whose driver answer would reveal the arena (the
 * reservation, the shared chunk, its id, VMM handle types, a context, no
 * pool); 0 if a is not one of them (the driver's answer stands: memory
 * type, device, access...). Pool memory has no context, no legacy IPC and,
 * the default pool asking for none, no GPUDirect RDMA (CUmemPoolProps). */
static int attr_override(const sg_alloc_info *b, int opened, CUpointer_attribute a, void *data)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: {
        CUcontext ctx = b->stream_ordered ? NULL : b->ctx;
        memcpy(data, &ctx, sizeof ctx);
        return 1;
    }
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: {
        CUmemoryPool pool = b->stream_ordered ? default_pool(b->dev) : NULL;
        memcpy(data, &pool, sizeof pool);
        return 1;
    }
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        put_u64(data, b->id);
        return 1;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        put_u64(data, b->base);
        return 1;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        put_u64(data, b->size);
        return 1;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:     /* a cuMemAlloc block is mapped whole pages */
        put_u64(data, sg_round_up(b->size, 4096));
        return 1;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        put_int(data, !b->stream_ordered && rdma_capable(b->base));
        return 1;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        put_u64(data, CU_MEM_HANDLE_TYPE_NONE);
        return 1;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        /* cuMemAlloc memory; pool memory or a block opened from a handle is not */
        put_int(data, !opened && !b->stream_ordered);
        return 1;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:     /* as the program set it (mem_ptr_set) */
        put_int(data, b->sync_memops);
        return 1;
    default:
        return 0;
    }
}

/* What p is: 1 and *b in a placed block, 2 and *b in a block opened from
 * another process's IPC handle (ipc.c); 0 in a reservation of the library
 * but no block; -1 neither. */
static int find_block(CUdeviceptr p, sg_alloc_info *b)
{
    int r = sg_mem_placing ? sg_mem_lookup(p, b) : -1;
    if (r < 0 && (r = sg_ipc_lookup(p, b)) > 0) r = 2;
    return r;
}

static CUresult mem_addr_range(const sg_call *c)
{
    sg_alloc_info b;
    int r = find_block(c->u.range.ptr, &b);
    if (r < 0) return c->forward(c->args);
    if (sg_vmm_no_context()) return CUDA_ERROR_INVALID_CONTEXT;   /* the driver asks for one */
    if (r == 0) return CUDA_ERROR_NOT_FOUND;
    if (c->u.range.base) *c->u.range.base = b.base;
    if (c->u.range.size) *c->u.range.size = b.size;
    return CUDA_SUCCESS;
}

static CUresult mem_ptr_attr(const sg_call *c)
{
    sg_alloc_info b;
    int r = c->u.attr.data ? find_block(c->u.attr.ptr, &b) : -1;
    if (r < 0) return c->forward(c->args);
    if (r == 0) return CUDA_ERROR_INVALID_VALUE;   /* as for unallocated memory */
    return attr_override(&b, r == 2, c->u.attr.attr, c->u.attr.data) ? CUDA_SUCCESS
                                                                     : c->forward(c->args);
}

static CUresult mem_ptr_attrs(const sg_call *c)
{
    sg_alloc_info b;
    int r = find_block(c->u.attrs.ptr, &b);
    if (r < 0) return c->forward(c->args);
    if (r == 0) { /* freed placed memory: what the driver says of an unallocated pointer */
        if (!sg_drv.cuPointerGetAttributes) return CUDA_ERROR_INVALID_VALUE;
        return SG_DRIVER_CALL(cuPointerGetAttributes, c->u.attrs.n, c->u.attrs.attrs,
                              c->u.attrs.data, 0);
    }
    CUresult rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS) return rc;
    for (unsigned i = 0; i < c->u.attrs.n; i++)
        if (c->u.attrs.data[i]) attr_override(&b, r == 2, c->u.attrs.attrs[i], c->u.attrs.data[i]);
    return CUDA_SUCCESS;
}

/* Set once a program gave a block of the library CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
 * (an atomic, never cleared): from then on synchronous memory operations
 * look their operands up (memop_sync). */
static int sync_seen;

/* Synchronizes stream s (a default stream) in the thread's capture mode
 * relaxed: a legacy stream that synchronized with a capture would have
 * refused the program's own operation first. */
static CUresult sync_stream(CUstream s)
{
    if (!sg_drv.cuStreamSynchronize) return CUDA_ERROR_NOT_SUPPORTED;
    sg_vmm_relax();
    CUresult rc = SG_DRIVER_CALL(cuStreamSynchronize, s);
    sg_vmm_unrelax();
    return rc;
}

/* The synchronous memory operations the program made on its current
 * context's legacy stream and on the thread's per-thread default stream
 * (where cuMemcpy, cuMemset and their _ptds forms go) are complete. */
static CUresult sync_default_streams(void)
{
    CUresult rc = sync_stream(CU_STREAM_LEGACY);
    return rc == CUDA_SUCCESS ? sync_stream(CU_STREAM_PER_THREAD) : rc;
}

/* cuPointerSetAttribute. The driver refuses CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
 * on VMM memory (CUDA_ERROR_NOT_SUPPORTED), which communication libraries
 * set on every cuMemAlloc buffer they send (UCX, Open MPI, libfabric,
 * GDRCopy, RDMA drivers): a placed block or a block opened from another
 * process's handle keeps the flag itself, as the driver keeps it for a
 * cuMemAlloc block, and the library makes the promise true: synchronous
 * operations on the block complete before they return (memop_sync), and
 * setting it waits for those already made (the driver's "If there are some
 * previously initiated synchronous memory operations that are pending when
 * this attribute is set, the function does not return until those memory
 * operations are complete"). Stream-ordered blocks get the driver's answer
 * for pool memory (forwarded: the driver sees VMM memory); other
 * attributes and a NULL value are the driver's to refuse. */
static CUresult mem_ptr_set(const sg_call *c)
{
    sg_alloc_info b;
    if (c->u.attr.attr != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS || !c->u.attr.data) return c->forward(c->args);
    int r = find_block(c->u.attr.ptr, &b);
    if (r < 0 || (r == 1 && b.stream_ordered)) return c->forward(c->args);
    if (sg_vmm_no_context()) return CUDA_ERROR_INVALID_CONTEXT;
    if (r == 0) return CUDA_ERROR_INVALID_VALUE;   /* as for unallocated memory */
    unsigned int v;
    memcpy(&v, c->u.attr.data, sizeof v);
    if (v) {
        __atomic_store_n(&sync_seen, 1, __ATOMIC_RELEASE);
        CUresult rc = sync_default_streams();
        if (rc != CUDA_SUCCESS) return rc;
    }
    int live = r == 2 ? sg_ipc_set_sync(c->u.attr.ptr, b.id, v != 0)
                      : sg_mem_reg_set_sync(c->u.attr.ptr, b.id, v != 0);
    return live ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;   /* freed meanwhile */
}

/* Legacy IPC of a placed cuMemAlloc block (any address in it): ipc.c
 * exports its chunks (the driver's legacy IPC does not work on VMM memory).
 * A stream-ordered block, or freed placed memory: CUDA_ERROR_INVALID_VALUE,
 * the driver's answer for pool memory and for unallocated memory. */
static CUresult mem_ipc(const sg_call *c)
{
    if (!sg_mem_placing || !sg_mem_maybe_ours(c->u.ipc.ptr)) return c->forward(c->args);
    sg_alloc_info b = { 0 }, now;
    int first = 0, r = sg_mem_reg_ipc(c->u.ipc.ptr, &b, &first);
    if (r < 0) return c->forward(c->args);
    if (sg_vmm_no_context()) return CUDA_ERROR_INVALID_CONTEXT;   /* the driver asks for one */
    if (r != 1) return CUDA_ERROR_INVALID_VALUE;
    size_t n = sg_mem_block_handles(b.base, NULL, 0);
    sg_mem_handle *h = n ? calloc(n, sizeof *h) : NULL;
    if (!h || sg_mem_block_handles(b.base, h, n) != n) n = 0;
    CUresult rc = sg_ipc_export(c->u.ipc.out, &b, h, n, first);
    free(h);
    /* A free racing with the export may have ended it before it was recorded. */
    if (rc == CUDA_SUCCESS && !(sg_mem_find(b.base, &now) && now.id == b.id)) {
        sg_ipc_block_gone(b.id);
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    return rc;
}

/* cuMemRetainAllocationHandle and cuMemGetAccess answer for VMM mappings
 * only: on cuMemAlloc memory the driver says CUDA_ERROR_INVALID_VALUE, and so
 * does the library for placed memory (its chunks are not the program's) and
 * for opened blocks. */
static CUresult mem_vmm_query(const sg_call *c, CUdeviceptr p)
{
    sg_alloc_info b;
    if (find_block(p, &b) < 0) return c->forward(c->args);
    return CUDA_ERROR_INVALID_VALUE;
}

/* cuMemGetInfo: the driver's figure plus the placed memory the program has
 * freed (mapped, unused), which the driver would count as free. */
static CUresult mem_info(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS || !sg_mem_placing || !c->u.info.free) return rc;
    CUdevice dev;
    if (SG_DRIVER_CALL(cuCtxGetDevice, &dev) != CUDA_SUCCESS) return rc;
    size_t total = c->u.info.total ? *c->u.info.total : SIZE_MAX;
    size_t f = *c->u.info.free + sg_mem_mapped_free_on(dev);
    *c->u.info.free = f < *c->u.info.free || f > total ? total : f;
    return rc;
}

/* The device whose default pool is `pool`; -1 if none (a pool the program
 * made: the library places nothing for it) or the driver cannot say. */
static CUdevice pool_device(CUmemoryPool pool)
{
    int n = 0;
    if (!pool || !sg_drv.cuDeviceGetCount || !sg_drv.cuDeviceGet ||
        SG_DRIVER_CALL(cuDeviceGetCount, &n) != CUDA_SUCCESS)
        return -1;
    for (int i = 0; i < n; i++) {
        CUdevice d;
        if (SG_DRIVER_CALL(cuDeviceGet, &d, i) == CUDA_SUCCESS && default_pool(d) == pool) return d;
    }
    return -1;
}

/* cuMemPoolGetAttribute / cuMemPoolSetAttribute: the memory a device's
 * default pool holds for the program includes the stream-ordered blocks the
 * library placed (which the driver's pool never saw): their bytes are added
 * to CU_MEMPOOL_ATTR_USED_MEM_CURRENT and RESERVED_MEM_CURRENT, their peak
 * to USED_MEM_HIGH and RESERVED_MEM_HIGH, and setting a peak to 0 (the
 * driver's reset) resets the library's part to what is in use. Frameworks
 * read these for their memory statistics (PyTorch's cudaMallocAsync
 * backend, CuPy's MemoryAsyncPool) and size caches from the peak; without
 * this they read 0 for placed memory (round 23, adv_frameworks stats). A
 * peak is the driver's plus the library's: exact while the pool's memory is
 * all placed (or all the driver's), at most the sum of the two peaks
 * otherwise. Freed placed memory is not counted reserved (cuMemGetInfo
 * counts it free), where a pool with a raised release threshold would
 * still hold it. Forwarded first: an error is the driver's. */
static CUresult mem_pool_attr(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    CUmemPool_attribute a = c->u.pattr.attr;
    if (rc != CUDA_SUCCESS || !sg_mem_placing || !c->u.pattr.value || !sg_mem_reg_pool_any())
        return rc;
    if (a != CU_MEMPOOL_ATTR_USED_MEM_CURRENT && a != CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT &&
        a != CU_MEMPOOL_ATTR_USED_MEM_HIGH && a != CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
        return rc;
    CUdevice dev = pool_device(c->u.pattr.pool);
    if (dev < 0) return rc;
    if (c->u.pattr.set) {
        sg_mem_reg_pool_reset(dev, a);
        return rc;
    }
    sg_pool_use u = sg_mem_reg_pool_use(dev);
    cuuint64_t v;
    memcpy(&v, c->u.pattr.value, sizeof v);
    v += a == CU_MEMPOOL_ATTR_USED_MEM_HIGH       ? u.used_high
         : a == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH ? u.reserved_high
                                                  : u.used;
    memcpy(c->u.pattr.value, &v, sizeof v);
    return rc;
}

/* ----------------------------------------------------------- range checks */

/* The bytes a 2D / 3D copy operand touches from its base pointer. */
static size_t extent3d(size_t x, size_t y, size_t z, size_t pitch, size_t height, size_t w,
                       size_t h, size_t d)
{
    if (!w || !h || !d) return 0;
    return ((z + d - 1) * height + (y + h - 1)) * pitch + x + w;
}

/* The driver's range check (sg_mem_check_range) for placed memory and for
 * blocks opened from another process's handle, whose mapped chunks reach
 * past them. */
static CUresult check_range(CUdeviceptr p, size_t len)
{
    sg_alloc_info b;
    int r = len ? sg_ipc_lookup(p, &b) : -1;
    if (r < 0) return sg_mem_check_range(p, len);
    return r > 0 && len <= b.size - (size_t)(p - b.base) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int device_operand(CUmemorytype t, CUdeviceptr p)
{
    return t == CU_MEMORYTYPE_DEVICE || (t == CU_MEMORYTYPE_UNIFIED && sg_mem_maybe_ours(p));
}

/* ------------------------------------------------- memory not the library's */

/* The driver's range check of a foreign operand [p, p + len):
 * CUDA_SUCCESS where cuMemGetAddressRange shows an allocation holding it
 * all, SG_FOREIGN_UNSURE otherwise, for the driver to judge: freed, past its
 * end, or what the library cannot judge (pinned or registered host memory,
 * which the query may not show; a unified address it does not know, host
 * memory or nothing; VMM mappings side by side, which the driver takes for
 * one buffer). */
static CUresult foreign_check(CUdeviceptr p, size_t len)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!len) return CUDA_SUCCESS;
    if (!sg_drv.cuMemGetAddressRange_v2 ||
        SG_DRIVER_CALL(cuMemGetAddressRange_v2, &base, &size, p) != CUDA_SUCCESS)
        return SG_FOREIGN_UNSURE;
    return p >= base && len <= size && p - base <= size - len ? CUDA_SUCCESS : SG_FOREIGN_UNSURE;
}

/* One device operand of a copy or memset: its memory type, address and the
 * bytes it spans; arg: what the caller of the walk (op_operands,
 * check_copy3d) passes. */
typedef CUresult operand_fn(CUmemorytype t, CUdeviceptr p, size_t len, void *arg);

/* One operand of a node: the library's memory (a placed block or a freed
 * one in a live reservation, a block opened from another process's handle)
 * as check_range, foreign memory asked of the driver where `ask` (arg, a
 * const int). Which is which is looked up exactly: sg_mem_maybe_ours is only
 * a hint, whose bounds still cover reservations given back, where the system
 * may put the program's own memory (round 41, `hole`). */
static CUresult node_operand(CUmemorytype t, CUdeviceptr p, size_t len, void *arg)
{
    sg_alloc_info b;
    int ask = *(const int *)arg;
    if (t != CU_MEMORYTYPE_DEVICE && t != CU_MEMORYTYPE_UNIFIED) return CUDA_SUCCESS;
    if (!len) return CUDA_SUCCESS;
    if (sg_ipc_lookup(p, &b) >= 0 || (sg_mem_placing && sg_mem_lookup(p, &b) >= 0)) return check_range(p, len);
    return ask ? foreign_check(p, len) : CUDA_SUCCESS;
}

/* One operand of a call's copy (the API's range check): device memory, or
 * a unified address in the library's reservations, as check_range. */
static CUresult api_operand(CUmemorytype t, CUdeviceptr p, size_t len, void *arg)
{
    (void)arg;
    return device_operand(t, p) ? check_range(p, len) : CUDA_SUCCESS;
}

/* A 3D copy's source, then destination, each checked by `one` (api_operand
 * for a call, node_operand for a node). */
static CUresult check_copy3d(const CUDA_MEMCPY3D *p, operand_fn *one, void *arg)
{
    CUresult rc = one(p->srcMemoryType, p->srcDevice,
                      extent3d(p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch, p->srcHeight,
                               p->WidthInBytes, p->Height, p->Depth), arg);
    if (rc == CUDA_SUCCESS)
        rc = one(p->dstMemoryType, p->dstDevice,
                 extent3d(p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch, p->dstHeight,
                          p->WidthInBytes, p->Height, p->Depth), arg);
    return rc;
}

/* The CUDA_MEMCPY3D a cuMemcpy3DPeer copies: the same members, its contexts
 * (where CUDA_MEMCPY3D has reserved0 / reserved1) left out. */
static CUDA_MEMCPY3D peer_as_3d(const CUDA_MEMCPY3D_PEER *c)
{
    return (CUDA_MEMCPY3D){
        .srcXInBytes = c->srcXInBytes, .srcY = c->srcY, .srcZ = c->srcZ, .srcLOD = c->srcLOD,
        .srcMemoryType = c->srcMemoryType, .srcHost = c->srcHost, .srcDevice = c->srcDevice,
        .srcArray = c->srcArray, .srcPitch = c->srcPitch, .srcHeight = c->srcHeight,
        .dstXInBytes = c->dstXInBytes, .dstY = c->dstY, .dstZ = c->dstZ, .dstLOD = c->dstLOD,
        .dstMemoryType = c->dstMemoryType, .dstHost = c->dstHost, .dstDevice = c->dstDevice,
        .dstArray = c->dstArray, .dstPitch = c->dstPitch, .dstHeight = c->dstHeight,
        .WidthInBytes = c->WidthInBytes, .Height = c->Height, .Depth = c->Depth,
    };
}

/* The bytes a memset of h rows of w elements of es bytes, pitch apart, spans. */
static size_t memset_extent(size_t pitch, size_t es, size_t w, size_t h)
{
    return h ? (h - 1) * pitch + w * es : 0;
}

/* Gives each device operand of a memory-operation call (u.memop: a copy,
 * a memset, node parameters it carries) to one, in order, until one answers
 * other than CUDA_SUCCESS; returns that answer. */
static CUresult op_operands(const sg_call *c, operand_fn *one, void *arg)
{
    const void *d = c->u.memop.desc;
    CUresult rc = CUDA_SUCCESS;
    switch (c->u.memop.kind) {
    case SG_OP_RANGES:
        if (c->u.memop.dst) rc = one(CU_MEMORYTYPE_DEVICE, c->u.memop.dst, c->u.memop.dst_bytes, arg);
        if (rc == CUDA_SUCCESS && c->u.memop.src)
            rc = one(CU_MEMORYTYPE_DEVICE, c->u.memop.src, c->u.memop.src_bytes, arg);
        return rc;
    case SG_OP_COPY2D: {
        const CUDA_MEMCPY2D *p = d;
        if (!p) return CUDA_SUCCESS;
        rc = one(p->srcMemoryType, p->srcDevice,
                 extent3d(p->srcXInBytes, p->srcY, 0, p->srcPitch, 0, p->WidthInBytes, p->Height, 1), arg);
        if (rc == CUDA_SUCCESS)
            rc = one(p->dstMemoryType, p->dstDevice,
                     extent3d(p->dstXInBytes, p->dstY, 0, p->dstPitch, 0, p->WidthInBytes, p->Height, 1), arg);
        return rc;
    }
    case SG_OP_COPY3D:
        return d ? check_copy3d(d, one, arg) : CUDA_SUCCESS;
    case SG_OP_COPY3D_PEER: {
        if (!d) return CUDA_SUCCESS;
        CUDA_MEMCPY3D p = peer_as_3d(d);
        return check_copy3d(&p, one, arg);
    }
    case SG_OP_MEMSET_NODE: {
        const CUDA_MEMSET_NODE_PARAMS *m = d;
        return m ? one(CU_MEMORYTYPE_DEVICE, m->dst, memset_extent(m->pitch, m->elementSize, m->width, m->height),
                       arg)
                 : CUDA_SUCCESS;
    }
    case SG_OP_NODE_PARAMS: {
        const CUgraphNodeParams *n = d;
        if (!n) return CUDA_SUCCESS;
        if (n->type == CU_GRAPH_NODE_TYPE_MEMSET)
            return one(CU_MEMORYTYPE_DEVICE, n->memset.dst,
                       memset_extent(n->memset.pitch, n->memset.elementSize, n->memset.width, n->memset.height),
                       arg);
        if (n->type == CU_GRAPH_NODE_TYPE_MEMCPY) return check_copy3d(&n->memcpy.copyParams, one, arg);
        return CUDA_SUCCESS;
    }
    }
    return CUDA_SUCCESS;
}

/* CUDA_SUCCESS, or the error the driver gives for a range outside its
 * allocation. */
static CUresult check_op(const sg_call *c) { return op_operands(c, api_operand, NULL); }

CUresult sg_mem_check_memcpy(const CUDA_MEMCPY3D *p, int ask)
{
    return p ? check_copy3d(p, node_operand, &ask) : CUDA_SUCCESS;
}

CUresult sg_mem_check_memset(const CUDA_MEMSET_NODE_PARAMS *m, int ask)
{
    if (!m) return CUDA_SUCCESS;
    return node_operand(CU_MEMORYTYPE_DEVICE, m->dst, memset_extent(m->pitch, m->elementSize, m->width, m->height),
                        &ask);
}

/* operand_fn, arg an int set to 1 when [p, p + len) starts in a block of the
 * library given CU_POINTER_ATTRIBUTE_SYNC_MEMOPS (an operation the range
 * check let through lies in that one block). */
static CUresult flag_operand(CUmemorytype t, CUdeviceptr p, size_t len, void *arg)
{
    sg_alloc_info b;
    if (!len || !device_operand(t, p)) return CUDA_SUCCESS;
    if (sg_ipc_lookup(p, &b) > 0 ? b.sync_memops : sg_mem_placing && sg_mem_lookup(p, &b) > 0 && b.sync_memops)
        *(int *)arg = 1;
    return CUDA_SUCCESS;
}

/* Whether a memory operation touches a flagged block. */
static int memop_flagged(const sg_call *c)
{
    int flagged = 0;
    op_operands(c, flag_operand, &flagged);
    return flagged;
}

/* A synchronous copy or memset (cuMemcpy*, cuMemset* without Async) on a
 * block given CU_POINTER_ATTRIBUTE_SYNC_MEMOPS is complete when it returns,
 * as the driver makes it for a cuMemAlloc block with the attribute (the
 * CUDA Runtime API's "API synchronization behavior": a copy from pageable
 * host memory may return before the data reached the device, a
 * device-to-device copy and a memset of device memory return at once). The
 * stream it went to (the legacy default stream, or the thread's own for
 * the _ptds forms) is synchronized after it. */
static CUresult memop_sync(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    return rc == CUDA_SUCCESS ? sync_stream(c->per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY) : rc;
}

static CUresult mem_op(const sg_call *c)
{
    if (sg_mem_placing || sg_ipc_opened()) {
        CUresult rc = check_op(c);
        if (rc != CUDA_SUCCESS) return rc;
    }
    if (__builtin_expect(__atomic_load_n(&sync_seen, __ATOMIC_ACQUIRE), 0) && c->gb &&
        c->gb->kind == SG_GB_SYNC_OP && memop_flagged(c))
        return memop_sync(c);
    return c->forward(c->args);
}

CUresult sg_mem_query(const sg_call *c)
{
    switch (c->kind) {
    case SG_CALL_ADDR_RANGE:
        return mem_addr_range(c);
    case SG_CALL_PTR_ATTR:
        return mem_ptr_attr(c);
    case SG_CALL_PTR_ATTRS:
        return mem_ptr_attrs(c);
    case SG_CALL_PTR_SET:
        return mem_ptr_set(c);
    case SG_CALL_IPC_HANDLE:
        return mem_ipc(c);
    case SG_CALL_RETAIN_HANDLE:
        return mem_vmm_query(c, (CUdeviceptr)(uintptr_t)c->u.retain.addr);
    case SG_CALL_MEM_ACCESS:
        return mem_vmm_query(c, c->u.access.ptr);
    case SG_CALL_MEM_INFO:
        return mem_info(c);
    case SG_CALL_POOL_ATTR:
        return mem_pool_attr(c);
    case SG_CALL_MEMOP:
        return mem_op(c);
    default:
        return c->forward(c->args);
    }
}
