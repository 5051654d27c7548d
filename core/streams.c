/*
 * core/streams.c: stream identities (streams.h).
 */
#include "streams.h"

#include "driver.h"

static uint64_t next_thread;                 /* atomic */
static __thread uint64_t tls_thread;

sg_stream_id sg_stream_id_in(CUstream s, int per_thread, CUcontext ctx)
{
    sg_stream_id id = { (uintptr_t)ctx, SG_STREAM_LEGACY_ID };
    if (s == CU_STREAM_PER_THREAD || (!s && per_thread)) {
        if (!tls_thread) tls_thread = __atomic_add_fetch(&next_thread, 1, __ATOMIC_RELAXED);
        id.thread = tls_thread;
    }
    return id;
}

sg_stream_id sg_stream_id_default(CUstream s, int per_thread)
{
    return sg_stream_id_in(s, per_thread, sg_stream_current_ctx());
}

CUcontext sg_stream_ctx(CUstream s)
{
    CUcontext c = NULL;
    if (sg_default_stream(s)) return sg_stream_current_ctx();
    if (!sg_drv.cuStreamGetCtx || SG_DRIVER_CALL(cuStreamGetCtx, s, &c) != CUDA_SUCCESS) c = NULL;
    return c;
}

CUcontext sg_stream_current_ctx(void)
{
    CUcontext cur = NULL;
    if (!sg_drv.cuCtxGetCurrent || SG_DRIVER_CALL(cuCtxGetCurrent, &cur) != CUDA_SUCCESS) cur = NULL;
    return cur;
}
