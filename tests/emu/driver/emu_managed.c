/*
 * emu_managed.c: the hints a program gives about managed memory
 * (cuMemAllocManaged, emu_mem.c): cuMemPrefetchAsync (v1 with a device, _v2
 * with a location, and their per-thread flavours), cuMemAdvise (v1, _v2)
 * and cuStreamAttachMemAsync (and _ptsz).
 *
 * Emulated memory is host memory that every device and the host reach
 * coherently (the device reports CONCURRENT_MANAGED_ACCESS), so none of
 * these moves or protects anything: what is emulated is what a program can
 * observe, the argument checks of the documentation (cuda.h) and, for the
 * two stream calls, a place in stream order (work that touches the range,
 * so freeing the memory under it is a violation as for any queued work).
 * Accepted only on cuMemAllocManaged memory: the emulated device reports no
 * PAGEABLE_MEMORY_ACCESS, so system-allocated memory is refused.
 *
 * During a stream capture the documentation does not say what
 * cuMemPrefetchAsync and cuStreamAttachMemAsync do (CUDA 13 has no prefetch
 * node type): on a capturing stream they return CUDA_ERROR_NOT_SUPPORTED
 * and leave the capture as it was ("Emulation limits", docs/emulator.md).
 */
#include "emu_internal.h"
#include "emu_stream.h"

#include <string.h>

static void nothing_run(emu_work *w, emu_stream *s)
{
    (void)w;
    (void)s;
}

/* Queues on h (per_thread: the per-thread default stream for NULL) a work
 * item in stream order that touches [p, p + n) and does nothing; not_legacy:
 * the legacy default stream is refused (CUDA_ERROR_INVALID_VALUE). */
static CUresult stream_hint(const char *call, CUstream h, int per_thread, CUdeviceptr p, size_t n,
                            int not_legacy)
{
    emu_stream *s;
    CUresult rc = emu_stream_get(h, per_thread, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (not_legacy && s->kind == S_LEGACY) return CUDA_ERROR_INVALID_VALUE;
    if (emu_stream_capture(s)) return CUDA_ERROR_NOT_SUPPORTED;
    emu_work *w = emu_work_new(sizeof *w, call, nothing_run);
    emu_work_touch_range(w, p, n);
    return emu_stream_submit(call, s, 0, NULL, w);
}

/* A destination or advice location: a device ordinal (CU_MEM_LOCATION_TYPE_
 * DEVICE; every emulated device has concurrent managed access) or the host
 * (HOST, HOST_NUMA node 0 (one NUMA node), HOST_NUMA_CURRENT). */
static CUresult location_check(CUmemLocation loc)
{
    switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return loc.id >= 0 && loc.id < emu_cfg.devices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        return loc.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* A legacy CUdevice argument: CU_DEVICE_CPU is the host. */
static CUmemLocation location_of_device(CUdevice d)
{
    CUmemLocation loc = { .type = d == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE,
                          .id = d == CU_DEVICE_CPU ? 0 : (int)d };
    return loc;
}

/* cuMemPrefetchAsync: "The memory range must refer to managed memory
 * allocated via cuMemAllocManaged ... flags for future use, must be zero
 * now"; results CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_DEVICE. A range
 * of 0 bytes names no managed memory: CUDA_ERROR_INVALID_VALUE. */
static CUresult prefetch(const char *call, CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags,
                         CUstream h, int per_thread)
{
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    if (flags != 0 || n == 0 || !emu_mem_managed_find(p, n, NULL)) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = location_check(loc)) != CUDA_SUCCESS) return rc;
    return stream_hint(call, h, per_thread, p, n, 0);
}

EMU_EXPORT CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return prefetch(__func__, devPtr, count, location_of_device(dstDevice), 0, hStream, 0);
}

EMU_EXPORT CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return prefetch(__func__, devPtr, count, location_of_device(dstDevice), 0, hStream, 1);
}

EMU_EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                          unsigned int flags, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return prefetch(__func__, devPtr, count, location, flags, hStream, 0);
}

EMU_EXPORT CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                               unsigned int flags, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return prefetch(__func__, devPtr, count, location, flags, hStream, 1);
}

/* cuMemAdvise: "The memory range must refer to managed memory allocated via
 * cuMemAllocManaged" (system-allocated memory needs PAGEABLE_MEMORY_ACCESS,
 * which the emulated device does not report); advice one of the six
 * CU_MEM_ADVISE_* values; the location is ignored for the READ_MOSTLY pair
 * and must be valid for the others; results CUDA_ERROR_INVALID_VALUE,
 * CUDA_ERROR_INVALID_DEVICE. Not a stream operation; nothing to store (no
 * range attribute query is emulated). */
static CUresult advise(CUdeviceptr p, size_t n, CUmem_advise advice, CUmemLocation loc)
{
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
        return CUDA_ERROR_INVALID_VALUE;
    if (n == 0 || !emu_mem_managed_find(p, n, NULL)) return CUDA_ERROR_INVALID_VALUE;
    if (advice == CU_MEM_ADVISE_SET_READ_MOSTLY || advice == CU_MEM_ADVISE_UNSET_READ_MOSTLY) return CUDA_SUCCESS;
    return location_check(loc);
}

EMU_EXPORT CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
    EMU_ENTRY_INIT();
    return advise(devPtr, count, advice, location_of_device(device));
}

EMU_EXPORT CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
    EMU_ENTRY_INIT();
    return advise(devPtr, count, advice, location);
}

/* cuStreamAttachMemAsync: "For managed allocations, length must be either
 * zero or the entire allocation's size ... flags ... must be one of
 * CUmemAttach_flags ... It is illegal to attach singly to the NULL stream
 * ... An error will be returned in this case." The documentation lists no
 * code for a bad argument; CUDA_ERROR_INVALID_VALUE here (the code every
 * other argument check of the memory calls returns). dptr must be the
 * allocation's start (the whole allocation is attached). "The NULL stream"
 * is the legacy default stream (NULL or CU_STREAM_LEGACY in the plain call);
 * a per-thread default stream is a stream of its own thread. */
static CUresult attach(const char *call, CUstream h, int per_thread, CUdeviceptr p, size_t n, unsigned flags)
{
    emu_range r;
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST && flags != CU_MEM_ATTACH_SINGLE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!emu_mem_managed_find(p, 1, &r) || r.base != p || (n != 0 && n != r.size)) return CUDA_ERROR_INVALID_VALUE;
    return stream_hint(call, h, per_thread, r.base, r.size, flags == CU_MEM_ATTACH_SINGLE);
}

EMU_EXPORT CUresult cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags)
{
    EMU_ENTRY_INIT();
    return attach(__func__, hStream, 0, dptr, length, flags);
}

EMU_EXPORT CUresult cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr, size_t length,
                                                unsigned int flags)
{
    EMU_ENTRY_INIT();
    return attach(__func__, hStream, 1, dptr, length, flags);
}
