/*
 * core/vmm.c: the VMM adapter (vmm.h).
 *
 * State: sg_vmm_relaxed and tls_saved_mode are per thread; stats are atomics.
 */
#include "vmm.h"

#include "arena.h"
#include "driver.h"
#include "log.h"
#include "util.h"

/* initial-exec, as interpose/'s sg_in_hook: every exec launch reads
 * sg_vmm_relaxed (sg_vmm_unrelax, inline in vmm.h), and the general model
 * costs a __tls_get_addr call each time */
__thread int sg_vmm_relaxed __attribute__((tls_model("initial-exec")));
static __thread CUstreamCaptureMode tls_saved_mode __attribute__((tls_model("initial-exec")));

void sg_vmm_relax(void)
{
    if (sg_vmm_relaxed || !sg_drv.cuThreadExchangeStreamCaptureMode) return;
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (SG_DRIVER_CALL(cuThreadExchangeStreamCaptureMode, &m) == CUDA_SUCCESS) {
        tls_saved_mode = m;
        sg_vmm_relaxed = 1;
    }
}

void sg_vmm_unrelax_now(void)
{
    if (!sg_vmm_relaxed) return;
    CUstreamCaptureMode m = tls_saved_mode;
    SG_DRIVER_CALL(cuThreadExchangeStreamCaptureMode, &m);
    sg_vmm_relaxed = 0;
}

int sg_vmm_ctx_enter(CUcontext ctx, CUcontext *prev)
{
    if (!sg_drv.cuCtxGetCurrent || SG_DRIVER_CALL(cuCtxGetCurrent, prev) != CUDA_SUCCESS)
        return -1;
    if (*prev != ctx &&
        (!sg_drv.cuCtxSetCurrent || SG_DRIVER_CALL(cuCtxSetCurrent, ctx) != CUDA_SUCCESS))
        return -1;
    return 0;
}

int sg_vmm_no_context(void)
{
    CUcontext cur = NULL;
    return sg_drv.cuCtxGetCurrent && SG_DRIVER_CALL(cuCtxGetCurrent, &cur) == CUDA_SUCCESS && !cur;
}

void sg_vmm_ctx_leave(CUcontext ctx, CUcontext prev)
{
    if (prev != ctx) SG_DRIVER_CALL(cuCtxSetCurrent, prev);
}

/* dev first, then every device that can access dev's memory. */
static size_t access_descs(CUdevice dev, CUmemAccessDesc *out, size_t max)
{
    size_t n = 0;
    int ndev = 0;
    out[n++] = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, dev },
                                  CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    if (!sg_drv.cuDeviceGetCount || SG_DRIVER_CALL(cuDeviceGetCount, &ndev) != CUDA_SUCCESS)
        ndev = 0;
    for (int d = 0; d < ndev && n < max; d++) {
        int can = 0;
        if (d == dev || !sg_drv.cuDeviceCanAccessPeer ||
            SG_DRIVER_CALL(cuDeviceCanAccessPeer, &can, d, dev) != CUDA_SUCCESS || !can)
            continue;
        out[n++] = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, d },
                                      CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    }
    return n;
}

/* d->align: placed blocks start where the driver's own allocations do, at
 * the device's texture alignment (cuTexObjectCreate refuses a linear or
 * pitch2D devPtr off it, and a program may make a texture over any pointer
 * cuMemAlloc gave it), and never below SG_ARENA_ALIGN. 0, or -1 if the
 * driver cannot say or the arena cannot honour it (d->gran set). */
static int block_align(sg_vmm_dev *d)
{
    int tex = 0;
    if (SG_DRIVER_CALL(cuDeviceGetAttribute, &tex, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, d->dev) !=
            CUDA_SUCCESS || tex < 0 || (tex & (tex - 1)))
        return -1;
    d->align = (size_t)tex > SG_ARENA_ALIGN ? (size_t)tex : SG_ARENA_ALIGN;
    return d->align <= d->gran ? 0 : -1;
}

/* GPUDirect RDMA: a NIC may register cuMemAlloc memory of a device that
 * reports GPU_DIRECT_RDMA_SUPPORTED (nvidia-peermem, dma-buf), VMM memory
 * only if cuMemCreate asked for it (allocFlags.gpuDirectRDMACapable), which
 * needs GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED. The chunks ask for it where
 * the device supports RDMA; a device that supports it for cuMemAlloc memory
 * only, or whose support the driver cannot tell, gets no placement
 * (-1): an MPI or NCCL job's buffers there must stay registrable. */
static int rdma_rule(sg_vmm_dev *d)
{
    int rdma = 0, vmm_rdma = 0;
    if (SG_DRIVER_CALL(cuDeviceGetAttribute, &rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
                       d->dev) != CUDA_SUCCESS)
        return -1;
    if (!rdma) return 0;
    if (SG_DRIVER_CALL(cuDeviceGetAttribute, &vmm_rdma,
                       CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, d->dev) != CUDA_SUCCESS ||
        !vmm_rdma)
        return -1;
    d->prop.allocFlags.gpuDirectRDMACapable = 1;
    return 0;
}

int sg_vmm_dev_setup(CUcontext ctx, sg_vmm_dev *d, const char **why)
{
    CUcontext prev;
    int vmm = 0;
    *d = (sg_vmm_dev){ 0 };
    if (!sg_drv.cuCtxGetDevice || !sg_drv.cuDeviceGetAttribute || !sg_drv.cuMemCreate ||
        !sg_drv.cuMemMap || !sg_drv.cuMemSetAccess || !sg_drv.cuMemUnmap || !sg_drv.cuMemRelease ||
        !sg_drv.cuMemAddressReserve || !sg_drv.cuMemAddressFree ||
        !sg_drv.cuMemGetAllocationGranularity) {
        *why = "the driver lacks VMM entry points";
        return -1;
    }
    if (sg_vmm_ctx_enter(ctx, &prev) != 0) {
        *why = "the context cannot be made current";
        return -1;
    }
    CUresult rc = SG_DRIVER_CALL(cuCtxGetDevice, &d->dev);
    sg_vmm_ctx_leave(ctx, prev);
    if (rc != CUDA_SUCCESS) {
        *why = "cuCtxGetDevice failed";
        return -1;
    }
    rc = SG_DRIVER_CALL(cuDeviceGetAttribute, &vmm,
                        CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d->dev);
    if (rc != CUDA_SUCCESS || !vmm) {
        *why = "the device has no virtual memory management support";
        return -1;
    }
    d->prop = (CUmemAllocationProp){ .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = { CU_MEM_LOCATION_TYPE_DEVICE, d->dev } };
    if (rdma_rule(d) != 0) {
        *why = "the device supports GPUDirect RDMA on cuMemAlloc memory but not on VMM memory "
               "(or cannot say)";
        return -1;
    }
    /* Shareable as a file descriptor where the device allows it: legacy IPC
     * of placed blocks exports the chunks (ipc.h). */
    int fd_ok = 0;
    if (SG_DRIVER_CALL(cuDeviceGetAttribute, &fd_ok,
                       CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                       d->dev) == CUDA_SUCCESS && fd_ok)
        d->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    rc = SG_DRIVER_CALL(cuMemGetAllocationGranularity, &d->gran, &d->prop,
                        CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (rc != CUDA_SUCCESS || d->gran == 0 || (d->gran & (d->gran - 1))) {
        *why = "cuMemGetAllocationGranularity failed";
        return -1;
    }
    if (block_align(d) != 0) {
        *why = "the device's texture alignment is unknown, or not a power of two within the granularity";
        return -1;
    }
    if (!sg_drv.cuDeviceTotalMem_v2 ||
        SG_DRIVER_CALL(cuDeviceTotalMem_v2, &d->total, d->dev) != CUDA_SUCCESS)
        d->total = 0;
    d->naccess = access_descs(d->dev, d->access, SG_VMM_MAX_DEVICES);
    return 0;
}

CUresult sg_vmm_reserve(size_t size, size_t align, CUdeviceptr *base)
{
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuMemAddressReserve, base, size, align, 0, 0);
}

CUresult sg_vmm_unreserve(CUdeviceptr base, size_t size)
{
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuMemAddressFree, base, size);
}

/* A device that reports shareable descriptors but refuses a chunk that asks
 * for them still gets the chunk, without: only legacy IPC of the blocks on
 * it fails (cleanly, ipc.c), placement does not. */
CUresult sg_vmm_create(const sg_vmm_dev *d, size_t size, CUmemGenericAllocationHandle *h)
{
    sg_vmm_relax();
    CUresult rc = SG_DRIVER_CALL(cuMemCreate, h, size, &d->prop, 0);
    if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_OUT_OF_MEMORY || !d->prop.requestedHandleTypes) return rc;
    CUmemAllocationProp plain = d->prop;
    plain.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    CUresult again = SG_DRIVER_CALL(cuMemCreate, h, size, &plain, 0);
    if (again != CUDA_SUCCESS) return rc;
    SG_WARN_ONCE("cuMemCreate refused memory shareable as a file descriptor (error %d) on device %d, "
                 "which reports supporting it: the library's chunks are made without; legacy IPC "
                 "(cuIpcGetMemHandle) of the allocations it places fails", (int)rc, (int)d->dev);
    return CUDA_SUCCESS;
}

CUresult sg_vmm_release(CUmemGenericAllocationHandle h)
{
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuMemRelease, h);
}

CUresult sg_vmm_map(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h)
{
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuMemMap, va, size, 0, h, 0);
}

CUresult sg_vmm_set_access(const sg_vmm_dev *d, CUdeviceptr va, size_t size)
{
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuMemSetAccess, va, size, d->access, d->naccess);
}

CUresult sg_vmm_unmap(CUdeviceptr va, size_t size)
{
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuMemUnmap, va, size);
}
