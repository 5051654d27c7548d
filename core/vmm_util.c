/*
 * core/vmm_util.c: capture mode, current context and peer access helpers
 * shared by memory.c and slots.c (see vmm_util.h).
 *
 * State: tls_relaxed and tls_saved_mode are per thread; no lock.
 */
#include "vmm_util.h"

#include "driver.h"

static __thread int tls_relaxed;
static __thread CUstreamCaptureMode tls_saved_mode;

void sg_vmm_relax(void)
{
    if (tls_relaxed || !sg_drv.cuThreadExchangeStreamCaptureMode) return;
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (SG_DRIVER_CALL(cuThreadExchangeStreamCaptureMode, &m) == CUDA_SUCCESS) {
        tls_saved_mode = m;
        tls_relaxed = 1;
    }
}

void sg_vmm_unrelax(void)
{
    if (!tls_relaxed) return;
    CUstreamCaptureMode m = tls_saved_mode;
    SG_DRIVER_CALL(cuThreadExchangeStreamCaptureMode, &m);
    tls_relaxed = 0;
}

int sg_vmm_ctx_enter(CUcontext ctx, CUcontext *prev)
{
    if (SG_DRIVER_CALL(cuCtxGetCurrent, prev) != CUDA_SUCCESS) return -1;
    if (*prev != ctx && SG_DRIVER_CALL(cuCtxSetCurrent, ctx) != CUDA_SUCCESS) return -1;
    return 0;
}

void sg_vmm_ctx_leave(CUcontext ctx, CUcontext prev)
{
    if (prev != ctx) SG_DRIVER_CALL(cuCtxSetCurrent, prev);
}

size_t sg_vmm_access_descs(CUdevice dev, CUmemAccessDesc *out, size_t max)
{
    size_t n = 0;
    int ndev = 0;
    if (max == 0) return 0;
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
