/*
 * core/capture.c: stream captures in progress (capture.h): their begin,
 * end and abandonment, the streams taking part in them and the events
 * recorded in them, their contexts. What their operations record is
 * cap_record.c's (cap_internal.h), which calls here.
 *
 * The count of captures in progress in the process, taken at every
 * successful cuStreamBeginCapture* and every cuStreamEndCapture* that ended
 * one, lets the library keep its shortcuts away from captures, and lets a
 * kernel launch skip everything when it is zero.
 *
 * While a capture is in progress, each stream taking part in it (the one it
 * began on, and any stream that joined it by waiting on an event recorded in
 * it) has an entry with the nodes the driver will make the stream's next
 * node depend on (cap_record.c keeps them as the operations come).
 *
 * Locks: rec_lock (rec_internal.h) guards the captures, the stream and event
 * entries (and rec_marks.c's marked streams); it is held across the forward of an
 * asynchronous operation on a capturing stream, so that records are made in
 * the driver's order, and across the forward of a capture's begin and end, so
 * that no thread sees the driver's capture state without the entries that
 * go with it. The count is atomic.
 */
#include "capture.h"

#include "cap_internal.h"
#include "contexts.h"
#include "driver.h"
#include "vmm.h"

#include <stdlib.h>
#include <string.h>

int sg_captures_active;   /* atomic */

sstate *sg_cap_streams;
uint64_t sg_cap_streams_gen = 1;
__thread struct sg_cap_last sg_cap_last __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------------ helpers */

/* Entries kept for the next capture (rec_lock), with their buffers: no
 * allocation per capture in the steady state. */
#define SPARE_STREAMS 8
static cap *spare_cap;
static sstate *spare_streams[SPARE_STREAMS];
static int nspare_streams;

static cap *cap_new(void)
{
    cap *c = spare_cap;
    spare_cap = NULL;
    return c ? memset(c, 0, sizeof *c) : calloc(1, sizeof *c);
}

static void sstate_free(sstate *s)
{
    if (nspare_streams < SPARE_STREAMS) {
        spare_streams[nspare_streams++] = s;
    } else {
        free(s->d.v);
        free(s);
    }
}

sstate *sg_cap_stream_search(sg_stream_id key)
{
    sstate *s;
    HASH_FIND(hh, sg_cap_streams, &key, sizeof key, s);
    sg_cap_last.key = key;
    sg_cap_last.gen = sg_cap_streams_gen;
    sg_cap_last.s = s;
    return s;
}

sstate *sg_cap_stream_add(sg_stream_id key, cap *c)
{
    sstate *s = nspare_streams ? spare_streams[--nspare_streams] : calloc(1, sizeof *s);
    if (!s) return NULL;
    *s = (sstate){ .key = key, .c = c, .d = { .v = s->d.v, .cap = s->d.cap } };  /* a spare's buffer */
    sg_rec_oom = 0;
    HASH_ADD(hh, sg_cap_streams, key, sizeof s->key, s);
    sg_cap_streams_gen++;
    if (!sg_rec_oom) return s;
    sstate_free(s);
    return NULL;
}

static void stream_del(sstate *s)
{
    HASH_DEL(sg_cap_streams, s);
    sg_cap_streams_gen++;
    sstate_free(s);
}

static evstate *events;

evstate *sg_cap_event_find(CUevent ev)
{
    evstate *e;
    HASH_FIND_PTR(events, &ev, e);
    return e;
}

evstate *sg_cap_event_add(CUevent ev)
{
    evstate *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->ev = ev;
    sg_rec_oom = 0;
    HASH_ADD_PTR(events, ev, e);
    if (!sg_rec_oom) return e;
    free(e);
    return NULL;
}

void sg_cap_event_del(evstate *e)
{
    HASH_DEL(events, e);
    free(e->d.v);
    free(e);
}

/* Forgets the events recorded in capture c, or every event if c is NULL. */
static void events_forget(const cap *c)
{
    evstate *e, *et;
    HASH_ITER(hh, events, e, et)
        if (!c || e->c == c) sg_cap_event_del(e);
}

/* Ends capture c: its record goes to the table (graph g) or is dropped
 * (g NULL); its streams and events are forgotten (rec_lock held). */
static void cap_end(cap *c, CUgraph g)
{
    sstate *s, *st;
    HASH_ITER(hh, sg_cap_streams, s, st)
        if (s->c == c) stream_del(s);
    events_forget(c);
    if (c->rec) {
        if (g && !c->into_unknown) sg_grecord_finish(c->rec, g);
        else sg_grecord_drop(c->rec);
    }
    if (spare_cap) free(c);
    else spare_cap = c;
    sg_fp_cache_leave();
}

/* ------------------------------------------------------------ begin and end */

/* One capture fewer in progress (never below 0). */
static void captures_drop(void)
{
    int cur = __atomic_load_n(&sg_captures_active, __ATOMIC_RELAXED);
    while (cur > 0 && !__atomic_compare_exchange_n(&sg_captures_active, &cur, cur - 1, 1,
                                                   __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
}

/* The begin and the end are forwarded under rec_lock (neither waits on the
 * device), so that the driver's capture state and the stream's entry change
 * together: another thread may enqueue work into the stream as soon as the
 * driver says it captures (cuStreamIsCapturing), or once it says it no
 * longer does; looked up between the two, that work went to the driver's
 * graph unrecorded, or ran and was recorded (tests/e2e/adv_threads.c,
 * begin_race, end_race: the records were read back, count_mismatch). */
CUresult sg_cap_begin(const sg_call *c, CUresult (*route)(const sg_call *))
{
    __atomic_add_fetch(&sg_captures_active, 1, __ATOMIC_SEQ_CST);   /* before: no allocation slips by */
    if (sg_rec_on) sg_lock_take(&sg_rec_lock);
    CUresult rc = route(c);
    if (rc != CUDA_SUCCESS || !sg_rec_on) {
        if (sg_rec_on) sg_lock_drop(&sg_rec_lock);
        if (rc != CUDA_SUCCESS) __atomic_sub_fetch(&sg_captures_active, 1, __ATOMIC_SEQ_CST);
        return rc;
    }
    CUstream hs = c->u.capture.stream;
    sg_stream_id key = sg_stream_id_of(hs, c->per_thread);
    sstate *old = sg_cap_stream_find(key);        /* a capture the library lost track of */
    if (old && sg_stream_id_eq(old->c->origin, key)) {
        cap_end(old->c, NULL);             /* it ended: the driver began a new one */
        captures_drop();
    } else if (old) {
        stream_del(old);
    }
    /* a capture into an existing graph adds nodes to it now, whether or not
     * it ends well (an invalidated one leaves them): its record goes, and the
     * graph is read back until a capture or a build records it again. A
     * graph without a record stays without one: it may be an embedded graph
     * (cuGraphChildGraphNodeGetGraph), which dies with its parent unseen, and
     * a record would outlive it (its execs would keep node handles the
     * driver gives to new nodes: graphs.c describe, round 40) */
    int into_unknown = c->u.capture.to_graph && !sg_grecord_known_locked(c->u.capture.graph);
    if (c->u.capture.to_graph) sg_grecord_forget_locked(c->u.capture.graph);
    cap *cp = cap_new();
    if (cp) {
        cp->into_unknown = into_unknown;
        sg_fp_cache_enter();               /* layouts handed out stay valid until the end */
        cp->origin = key;
        cp->origin_handle = hs;
        cp->per_thread = c->per_thread;
        if (!hs || hs == CU_STREAM_LEGACY || hs == CU_STREAM_PER_THREAD)
            sg_cap_ctx(cp);                   /* a default stream's: the thread's context, now */
        cp->rec = sg_grecord_building();
        if (!sg_cap_stream_add(key, cp)) {
            cap_end(cp, NULL);
        } else if (cp->rec) {
            if (c->u.capture.to_graph) sg_grecord_spoil(cp->rec, SG_READBACK_CAPTURE_TO_GRAPH);
            sg_readback why = sg_rec_marked(key);
            if (why != SG_READBACK_NONE) sg_grecord_spoil(cp->rec, why);
        }
    }
    sg_lock_drop(&sg_rec_lock);
    return rc;
}

/* Whether cuStreamEndCapture's result says the capture ended: it ends it
 * whether it succeeds or reports the capture invalidated; it does not when
 * called from the wrong thread, on a stream that was not capturing, or on
 * one that joined a capture begun elsewhere (UNMATCHED: that capture is
 * invalidated and goes on until its own stream ends it). */
static int end_ended(CUresult rc)
{
    return rc != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD && rc != CUDA_ERROR_ILLEGAL_STATE &&
           rc != CUDA_ERROR_STREAM_CAPTURE_UNMATCHED &&
           rc != CUDA_ERROR_INVALID_VALUE && rc != CUDA_ERROR_INVALID_HANDLE &&
           rc != CUDA_ERROR_NOT_INITIALIZED && rc != CUDA_ERROR_INVALID_CONTEXT &&
           rc != CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

CUresult sg_cap_end(const sg_call *c, CUresult (*route)(const sg_call *))
{
    int rec = sg_rec_on;
    if (rec) sg_lock_take(&sg_rec_lock);       /* (see sg_cap_begin) */
    CUresult rc = route(c);
    if (end_ended(rc)) {
        captures_drop();
        sg_stream_id key = sg_stream_id_of(c->u.capture.stream, c->per_thread);
        sstate *s = rec ? sg_cap_stream_find(key) : NULL;
        if (s && sg_stream_id_eq(s->c->origin, key)) {
            CUgraph *out = c->u.capture.graph_out;
            cap_end(s->c, rc == CUDA_SUCCESS && out ? *out : NULL);
        }
    }
    if (rec) sg_lock_drop(&sg_rec_lock);
    return rc;
}

/* The capture's context, asked for once (its teardown ends the capture; a
 * CUkernel launched as a function is described with the context of the
 * stream it is launched on, cap_record.c): when the capture
 * begins on a default stream (the thread's current context), else when
 * first needed or at the latest before a context may go
 * (sg_rec_ctx_may_go: a named stream's context never changes). NULL if the
 * driver cannot tell. */
CUcontext sg_cap_ctx(cap *c)
{
    if (!c->ctx_known) {
        c->ctx_known = 1;
        CUresult r = c->per_thread
            ? (sg_drv.cuStreamGetCtx_ptsz ? SG_DRIVER_CALL(cuStreamGetCtx_ptsz, c->origin_handle, &c->ctx)
                                          : CUDA_ERROR_NOT_SUPPORTED)
            : (sg_drv.cuStreamGetCtx ? SG_DRIVER_CALL(cuStreamGetCtx, c->origin_handle, &c->ctx)
                                     : CUDA_ERROR_NOT_SUPPORTED);
        if (r != CUDA_SUCCESS) c->ctx = NULL;
    }
    return c->ctx;
}

/* ------------------------------------------------------------ streams and contexts going */

int sg_rec_stream_gone(CUstream hs)
{
    int origin = 0;
    if (!sg_rec_on) return 0;
    sg_lock_take(&sg_rec_lock);
    sg_stream_id key = sg_stream_id_of(hs, 0);
    sg_rec_unmark(key);
    sstate *s = sg_cap_stream_find(key);
    if (s) {
        if (sg_stream_id_eq(s->c->origin, key)) {
            cap_end(s->c, NULL);               /* the capture is abandoned */
            origin = 1;
        } else {
            sg_cap_spoil(s->c, SG_READBACK_UNMODELED_CALL);
            stream_del(s);
        }
    }
    sg_lock_drop(&sg_rec_lock);
    return origin;
}

void sg_capture_abandoned(void) { captures_drop(); }

void sg_rec_ctx_may_go(void)
{
    if (!sg_rec_on || !sg_capture_active()) return;
    sg_lock_take(&sg_rec_lock);
    for (sstate *s = sg_cap_streams; s; s = s->hh.next)
        if (sg_stream_id_eq(s->c->origin, s->key)) sg_cap_ctx(s->c);
    sg_lock_drop(&sg_rec_lock);
}

/* Whether cp is a capture of context ctx's streams (rec_lock held). */
static int cap_of_ctx(const sstate *s, const cap *cp, CUcontext ctx)
{
    return sg_stream_id_eq(cp->origin, s->key) && cp->ctx_known && cp->ctx == ctx;
}

/* Marks (dying 1) or unmarks (0) the captures of ctx's streams (rec_lock
 * held). */
static void mark_ctx_captures(CUcontext ctx, int dying)
{
    sstate *s, *tmp;
    HASH_ITER(hh, sg_cap_streams, s, tmp)
        if (cap_of_ctx(s, s->c, ctx)) s->c->dying = dying;
}

/* cuCtxDestroy or cuGreenCtxDestroy of ctx, before it is forwarded
 * (contexts.h, sg_ctx_on_take): its streams' captures are marked, and its
 * teardown ends those only. Once the driver has freed the handle, another
 * thread's new context may get the value and begin captures of its own,
 * which a teardown by value would end (their graphs then unrecorded, and no
 * longer counted as in progress while the driver captures; round 40's
 * windows). */
static void *ctx_captures_take(CUcontext ctx)
{
    if (!sg_rec_on || !ctx) return NULL;
    sg_lock_take(&sg_rec_lock);
    mark_ctx_captures(ctx, 1);
    sg_lock_drop(&sg_rec_lock);
    return ctx;                        /* the token: the context */
}

/* The destroy was refused: ctx's captures go on. */
static void ctx_captures_give_back(void *taken)
{
    sg_lock_take(&sg_rec_lock);
    mark_ctx_captures((CUcontext)taken, 0);
    sg_lock_drop(&sg_rec_lock);
}

/* Context teardown (contexts.h, step 0): the driver ended the captures of
 * the context's streams (known: sg_rec_ctx_may_go ran before): those marked
 * before the destroy was forwarded (cx->early), or by value where nothing
 * was taken (a primary context's reset). Their records go (no call on the
 * dead streams) and they no longer count as in progress; the entries of
 * every stream that joined them go with them. */
static void ctx_captures_gone(sg_ctx *cx)
{
    const void *early = cx->early[SG_CTX_PART_CAPTURES];
    if (!sg_rec_on) return;
    sg_lock_take(&sg_rec_lock);
    sstate *s, *tmp;
    HASH_ITER(hh, sg_cap_streams, s, tmp) {
        cap *cp = s->c;
        if (!cap_of_ctx(s, cp, cx->ctx) || (early && !cp->dying)) continue;
        cap_end(cp, NULL);             /* its other streams' entries go too: restart */
        captures_drop();
        tmp = sg_cap_streams;
    }
    sg_lock_drop(&sg_rec_lock);
}

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

void sg_rec_init(int on, int audit)
{
    sg_rec_on = on;
    sg_rec_audit_init(on && audit);
    sg_ctx_on_teardown(SG_CTX_PART_CAPTURES, ctx_captures_gone);
    sg_ctx_on_take(SG_CTX_PART_CAPTURES, ctx_captures_take, ctx_captures_give_back);
}

void sg_rec_reset(void)
{
    sg_lock_take(&sg_rec_lock);
    while (sg_cap_streams) cap_end(sg_cap_streams->c, NULL);   /* every entry of that capture goes */
    events_forget(NULL);
    sg_rec_marks_reset();
    free(spare_cap);
    spare_cap = NULL;
    while (nspare_streams) {
        sstate *s = spare_streams[--nspare_streams];
        free(s->d.v);
        free(s);
    }
    sg_lock_drop(&sg_rec_lock);
    sg_rec_graphs_reset();
    __atomic_store_n(&sg_captures_active, 0, __ATOMIC_RELAXED);
}

void sg_capture_reset(void) { sg_rec_reset(); }
