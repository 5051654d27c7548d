/*
 * core/prof_order.c: the order event of exec variants (prof_variants.c's
 * header, "Order"): recording it behind a launch, on the previous launch's
 * stream, waiting for it; an upload ordered like a launch; what a
 * generation given up or a stream destroyed leaves of the order; the event's
 * end. The launch itself, and the switch that decides to wait, are
 * prof_variants.c's.
 *
 * Locks: the exec's rec->lock, held by every caller (prof.h).
 */
#include "prof.h"

#include "capture.h"
#include "contexts.h"
#include "driver.h"
#include "vmm.h"

/* The context of stream s (a default stream: the current context, which
 * the callers made the stream's); the exec's context if the driver cannot
 * say. A green context's stream: the primary context, which owns the events
 * made with the green context's converted context current (contexts.h,
 * sg_ctx_owner), so that the exec's teardown with the primary context knows
 * the event went with it (round 38: it destroyed the stale handle). */
static CUcontext stream_ctx(const sg_prof *p, CUstream s, int per_thread)
{
    CUcontext c = sg_stream_ctx(s);
    return c ? sg_ctx_owner(c, s, per_thread) : p->ctx;
}

/* Records the order event on stream s (the _ptsz flavour if per_thread).
 * The event is made in the context of the stream it is recorded on: the
 * driver refuses to record an event of one context on a stream of another
 * (cuEventRecord: "hEvent and hStream must be from the same context"),
 * while a wait may name an event of any context (cuStreamWaitEvent). An
 * exec whose graph spans two devices is launched on either device's
 * streams; with the event always of the exec's context, its record behind a
 * launch on the other device's stream failed, and the next cuGraphUpload on
 * another stream answered CUDA_ERROR_OUT_OF_MEMORY where the driver
 * succeeds (round 31, tests/e2e/adv_multidev.c variants_upload). */
void sg_prof_order_record(sg_prof *p, CUstream s, int per_thread)
{
    p->order_valid = 0;
    if (!sg_drv.cuEventCreate || !(per_thread ? sg_drv.cuEventRecord_ptsz : sg_drv.cuEventRecord))
        return;
    sg_vmm_relax();
    /* (the named stream of the last record needs no query: the steady state
     * of launches on one stream pays nothing) */
    int named = !sg_default_stream(s);
    CUcontext sc = p->order_ev && named && s == p->order_stream ? p->order_ctx : stream_ctx(p, s, per_thread);
    p->order_stream = named ? s : NULL;
    if (p->order_ev && p->order_ctx != sc) {     /* made in another context: a new one */
        if (sg_drv.cuEventDestroy_v2) SG_DRIVER_CALL(cuEventDestroy_v2, p->order_ev);
        p->order_ev = NULL;
    }
    if (!p->order_ev) {
        CUcontext prev;
        if (!sc || sg_vmm_ctx_enter(sc, &prev) != 0) return;
        if (SG_DRIVER_CALL(cuEventCreate, &p->order_ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
            p->order_ev = NULL;
        sg_vmm_ctx_leave(sc, prev);
        if (!p->order_ev) return;
        p->order_ctx = sc;
    }
    CUresult rc = per_thread ? SG_DRIVER_CALL(cuEventRecord_ptsz, p->order_ev, s)
                             : SG_DRIVER_CALL(cuEventRecord, p->order_ev, s);
    p->order_valid = rc == CUDA_SUCCESS;
}

CUresult sg_prof_order_wait(sg_prof *p, const sg_call *c)
{
    if (!(c->per_thread ? sg_drv.cuStreamWaitEvent_ptsz : sg_drv.cuStreamWaitEvent))
        return CUDA_ERROR_NOT_SUPPORTED;
    sg_vmm_relax();
    return c->per_thread ? SG_DRIVER_CALL(cuStreamWaitEvent_ptsz, c->u.launch.stream, p->order_ev, 0)
                         : SG_DRIVER_CALL(cuStreamWaitEvent, c->u.launch.stream, p->order_ev, 0);
}

/* The previous launch's stream, as a handle to record on, with the context
 * to make current for it (*ctx: NULL for none). A per-thread default stream
 * can be named only from its thread with its context current (-1 else); the
 * legacy one with its context current (streams.h). */
static int last_stream_handle(const sg_prof *p, CUstream *s, int *per_thread, CUcontext *ctx)
{
    *ctx = NULL;
    if (sg_stream_id_per_thread(p->last_stream)) {
        sg_stream_id me = sg_stream_id_of(NULL, 1);
        if (!sg_stream_id_eq(me, p->last_stream)) return -1;
        *s = NULL;
        *per_thread = 1;
        return 0;
    }
    if (!p->last_stream.stream) return -1;
    *per_thread = 0;
    if (p->last_stream.thread == SG_STREAM_LEGACY_ID) {
        *s = NULL;
        *ctx = (CUcontext)p->last_stream.stream;
        return 0;
    }
    *s = (CUstream)p->last_stream.stream;
    return 0;
}

/* Records the order event behind the previous launch, on its stream (when
 * that stream can be named: last_stream_handle). */
void sg_prof_order_record_last(sg_prof *p)
{
    CUstream s;
    int pt;
    CUcontext ctx, prev;
    if (last_stream_handle(p, &s, &pt, &ctx) != 0) return;
    if (!ctx) {
        sg_prof_order_record(p, s, pt);
    } else if (sg_vmm_ctx_enter(ctx, &prev) == 0) {   /* the legacy stream of ctx */
        sg_prof_order_record(p, s, pt);
        sg_vmm_ctx_leave(ctx, prev);
    }
}

CUresult sg_prof_upload_ordered(sg_prof *p, const sg_call *c)
{
    sg_stream_id s = sg_stream_id_of(c->u.launch.stream, c->per_thread);
    /* nothing launched yet, or the program's exec last (the driver orders
     * its own upload behind it, and it followed every earlier launch), or
     * the same stream (stream order); a capturing stream records the
     * upload, or refuses it, without running it */
    if (p->last_gen == -1 || p->last_gen == 0 || sg_stream_id_eq(s, p->last_stream) ||
        (sg_capture_active() && sg_capture_stream(c->u.launch.stream, c->per_thread)))
        return sg_mem_retry(c, c->forward(c->args));
    if (!p->order_valid) sg_prof_order_record_last(p);
    if (!p->order_valid) return sg_prof_plausible(CUDA_ERROR_UNKNOWN);
    CUresult rc = sg_prof_order_wait(p, c);
    return rc == CUDA_SUCCESS ? sg_mem_retry(c, c->forward(c->args)) : sg_prof_plausible(rc);
}

void sg_prof_order_hand_over(sg_prof *p)
{
    if (p->last_gen <= 0 || p->order_valid) return;
    sg_prof_order_record_last(p);
    p->multi = 1;
    p->last_gen = -2;                 /* a generation that no longer exists: always wait */
}

void sg_prof_order_stream_gone(sg_prof *p, sg_stream_id s)
{
    int last = p->last_gen != -1 && sg_stream_id_eq(s, p->last_stream);
    if (last && !p->order_valid) sg_prof_order_record(p, (CUstream)s.stream, 0);
    if (p->order_stream == (CUstream)s.stream)
        p->order_stream = NULL;                /* (its handle may name another stream later) */
    if (!last) return;
    p->multi = 1;
    p->last_stream = (sg_stream_id){ 0, 0 };   /* a reused handle is another stream */
    if (p->last_gen >= 0) p->last_gen = -2;
}

void sg_prof_order_free(sg_prof *p, int ctx_gone)
{
    /* ctx_gone: the exec's context is gone, and with it an event made there
     * (one made in another context, for a launch there, is not) */
    if (p->order_ev && !(ctx_gone && p->order_ctx == p->ctx) && sg_drv.cuEventDestroy_v2) {
        sg_vmm_relax();
        SG_DRIVER_CALL(cuEventDestroy_v2, p->order_ev);
    }
    p->order_ev = NULL;
    p->order_valid = 0;
}
