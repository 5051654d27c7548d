/*
 * core/capture.c: the count of captures in progress (capture.h).
 */
#include "capture.h"

#include "driver.h"

static int active;   /* atomic */

CUresult sg_capture_call(const sg_call *c)
{
    if (c->kind == SG_CALL_CAPTURE_BEGIN) {
        __atomic_add_fetch(&active, 1, __ATOMIC_SEQ_CST);   /* before: no allocation slips by */
        CUresult rc = c->forward(c->args);
        if (rc != CUDA_SUCCESS) __atomic_sub_fetch(&active, 1, __ATOMIC_SEQ_CST);
        return rc;
    }
    CUresult rc = c->forward(c->args);
    /* EndCapture ends the capture whether it succeeds or reports the
     * capture invalidated; it does not when called from the wrong thread or
     * on a stream that was not capturing. */
    if (rc != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD && rc != CUDA_ERROR_ILLEGAL_STATE &&
        rc != CUDA_ERROR_INVALID_VALUE && rc != CUDA_ERROR_INVALID_HANDLE &&
        rc != CUDA_ERROR_NOT_INITIALIZED && rc != CUDA_ERROR_INVALID_CONTEXT &&
        rc != CUDA_ERROR_CONTEXT_IS_DESTROYED) {
        int cur = __atomic_load_n(&active, __ATOMIC_RELAXED);
        while (cur > 0 && !__atomic_compare_exchange_n(&active, &cur, cur - 1, 1, __ATOMIC_SEQ_CST,
                                                       __ATOMIC_RELAXED)) {
        }
    }
    return rc;
}

int sg_capture_active(void) { return __atomic_load_n(&active, __ATOMIC_ACQUIRE) > 0; }

int sg_capture_stream(CUstream s, int per_thread)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc = per_thread
        ? (sg_drv.cuStreamIsCapturing_ptsz ? SG_DRIVER_CALL(cuStreamIsCapturing_ptsz, s, &st)
                                           : CUDA_ERROR_NOT_SUPPORTED)
        : (sg_drv.cuStreamIsCapturing ? SG_DRIVER_CALL(cuStreamIsCapturing, s, &st)
                                      : CUDA_ERROR_NOT_SUPPORTED);
    return rc != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

void sg_capture_reset(void) { __atomic_store_n(&active, 0, __ATOMIC_RELAXED); }
