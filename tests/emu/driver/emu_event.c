/*
 * emu_event.c: events of the emulated CUDA driver (create, destroy, record,
 * query, synchronize, elapsed time, cuStreamWaitEvent) and their teardown
 * with their context; external records and waits during capture (event
 * record / wait nodes: emu_capture_add) and what a graph launch queues for
 * event nodes (emu_event_mark_work, emu_event_wait_work,
 * emu_event_enqueue_chain).
 *
 * An event is a (stream, sequence number) pair: its last record's target.
 * Each event has a reference count (atomic): the handle holds one, every
 * queued record marker one, every graph or exec node naming it one; the last
 * drop gives the handle value back to the pool. Events recorded during a
 * capture belong to the capture (emu_capture.c, the `cap` field).
 *
 * Locks: emu_ev_lock guards the fields of every event (struct CUevent_st); it
 * comes first in the stream lock order (emu_stream.h): the capture lock is
 * never taken under it.
 */
#include "emu_stream.h"

#include <stdlib.h>
#include <time.h>

pthread_mutex_t emu_ev_lock = PTHREAD_MUTEX_INITIALIZER;

/* An event with its reference count: the handle holds one, every queued
 * record marker holds one. */
typedef struct emu_event {
    struct CUevent_st pub;
    int refs;                       /* atomic */
    CUcontext ctx;                  /* the context it was created in */
} emu_event;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------------
 * Events
 * ---------------------------------------------------------------------- */
static emu_event *ev_of(CUevent e) { return (emu_event *)(void *)e; }

/* Frees an event no reference reaches any more (nothing else can reach its
 * capture-time record either: freed without the capture lock, so that a
 * graph node's reference may be the last one dropped under it). */
static void event_free(emu_event *e)
{
    emu_stream *s = e->pub.stream;
    free(e->pub.cap);
    e->pub.cap = NULL;
    emu_handle_mem_put(EMU_K_EVENT, e);    /* the next cuEventCreate reuses the value */
    if (s) emu_stream_unref(s);
}

/* Drops a reference (no lock needed: the last one is only dropped once no
 * handle and no marker can reach the event). */
static void event_unref(emu_event *e)
{
    if (__atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0) event_free(e);
}

EMU_EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (!phEvent || (Flags & ~known)) return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult r = emu_ctx_require(&ctx);
    if (r != CUDA_SUCCESS) return r;
    emu_event *e = emu_handle_mem_get(EMU_K_EVENT, sizeof *e);
    e->pub.flags = Flags;
    e->refs = 1;
    e->ctx = ctx;
    emu_handle_add_ctx(&e->pub, EMU_K_EVENT, ctx);
    *phEvent = &e->pub;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
    EMU_ENTRY_INIT();
    if (!hEvent || !emu_handle_ok(hEvent, EMU_K_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
    emu_handle_del(hEvent);
    event_unref(ev_of(hEvent));     /* pending records keep it alive */
    return CUDA_SUCCESS;
}

/* Context teardown (after its streams are gone): ends and releases every
 * event created in ctx. */
static void event_ctx_end(void *h) { event_unref(ev_of(h)); }

void emu_events_ctx_destroyed(CUcontext ctx)
{
    emu_handles_end_ctx(ctx, EMU_K_EVENT, event_ctx_end);
}

/* A record marker holds a reference to its event until it completes: the
 * reference goes in mark_complete, under the stream's lock, so an event
 * whose record a waiter saw complete holds none from it any more
 * (cuEventDestroy then gives the handle value back at once). Freeing takes
 * other locks, so a marker that dropped the last reference frees the event
 * in mark_release. A marker released unrun drops its reference there. */
typedef struct mark_work {
    emu_work w;
    emu_event *e;
    int completed;                  /* mark_complete ran */
    int last;                       /* ...and dropped the last reference */
} mark_work;

static void mark_run(emu_work *w, emu_stream *s)
{
    mark_work *mw = (mark_work *)w;
    pthread_mutex_lock(&emu_ev_lock);
    if (mw->e->pub.stream == s && mw->e->pub.seq == w->seq) mw->e->pub.time_ms = now_ms();
    pthread_mutex_unlock(&emu_ev_lock);
}

static void mark_complete(emu_work *w)
{
    mark_work *mw = (mark_work *)w;
    mw->completed = 1;
    mw->last = __atomic_sub_fetch(&mw->e->refs, 1, __ATOMIC_ACQ_REL) == 0;
}

static void mark_release(emu_work *w)
{
    mark_work *mw = (mark_work *)w;
    if (!mw->completed) event_unref(mw->e);
    else if (mw->last) event_free(mw->e);
    free(w);
}

emu_work *emu_event_mark_work(CUevent ev, const char *what)
{
    mark_work *mw = (mark_work *)emu_work_new(sizeof *mw, what, mark_run);
    mw->w.complete = mark_complete;
    mw->w.release = mark_release;
    mw->e = ev_of(ev);
    __atomic_add_fetch(&mw->e->refs, 1, __ATOMIC_RELAXED);
    return &mw->w;
}

CUresult emu_event_enqueue_chain(emu_stream *s, emu_work **w, size_t n)
{
    /* The markers' events, referenced until they name their markers (a
     * marker may complete and be released as soon as it is queued). */
    emu_event **ev = emu_xcalloc(n, sizeof *ev);
    uint64_t *seq = emu_xcalloc(n, sizeof *seq);
    emu_stream **old = emu_xcalloc(n, sizeof *old);
    for (size_t i = 0; i < n; i++)
        if (w[i]->run == mark_run) {
            ev[i] = ((mark_work *)w[i])->e;
            __atomic_add_fetch(&ev[i]->refs, 1, __ATOMIC_RELAXED);
        }
    /* emu_ev_lock is held until each event names its marker, so no marker can
     * run (it takes emu_ev_lock) before. */
    pthread_mutex_lock(&emu_ev_lock);
    CUresult r = emu_stream_enqueue_many(s, w, n, seq);
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
        if (!ev[i]) continue;
        old[i] = ev[i]->pub.stream;
        emu_stream_ref(s);
        ev[i]->pub.stream = s;
        ev[i]->pub.seq = seq[i];
        ev[i]->pub.recorded = 1;
        ev[i]->pub.time_ms = 0;
    }
    pthread_mutex_unlock(&emu_ev_lock);
    for (size_t i = 0; i < n; i++) {
        if (!ev[i]) continue;
        /* An ordinary record replaces any capture-time record (outside
         * emu_ev_lock: the capture lock is never taken under it). */
        if (r == CUDA_SUCCESS) emu_capture_event_forget(&ev[i]->pub);
        if (old[i]) emu_stream_unref(old[i]);
        event_unref(ev[i]);
    }
    free(ev);
    free(seq);
    free(old);
    return r;
}

static CUresult event_record(const char *call, CUevent h, CUstream hs, int pt, unsigned flags)
{
    emu_stream *s;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    if (!h || !emu_handle_ok(h, EMU_K_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = emu_stream_get(hs, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    /* cuEventRecord: "hEvent and hStream must be from the same context
     * otherwise CUDA_ERROR_INVALID_HANDLE is returned." */
    if (ev_of(h)->ctx != s->ctx) return CUDA_ERROR_INVALID_HANDLE;
    /* CU_EVENT_RECORD_EXTERNAL: "Event is captured in the graph as an
     * external event node when performing stream capture. This flag is
     * invalid outside of stream capture." */
    if (flags & CU_EVENT_RECORD_EXTERNAL) {
        if (!emu_stream_capture(s)) return CUDA_ERROR_INVALID_VALUE;
        emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_EVENT_RECORD, .event = h };
        return emu_capture_add(s, &op);
    }
    if (emu_stream_capture(s)) return emu_capture_event_record(s, h);

    if ((r = emu_stream_legacy_check(s)) != CUDA_SUCCESS) return r;
    emu_work *w = emu_event_mark_work(h, call);
    return emu_event_enqueue_chain(s, &w, 1);
}

EMU_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return event_record(__func__, hEvent, hStream, 0, 0);
}

EMU_EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return event_record(__func__, hEvent, hStream, 1, 0);
}

EMU_EXPORT CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    EMU_ENTRY_INIT();
    return event_record(__func__, hEvent, hStream, 0, flags);
}

EMU_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    EMU_ENTRY_INIT();
    return event_record(__func__, hEvent, hStream, 1, flags);
}

/* Where an event's last (non-captured) record completes: *s is referenced,
 * NULL if the event was never recorded outside capture. */
static void event_target(emu_event *e, emu_stream **s, uint64_t *seq)
{
    pthread_mutex_lock(&emu_ev_lock);
    *s = e->pub.recorded && !e->pub.cap ? e->pub.stream : NULL;
    *seq = e->pub.seq;
    if (*s) emu_stream_ref(*s);
    pthread_mutex_unlock(&emu_ev_lock);
}

/* An event recorded during a capture still in progress may not be queried
 * or waited for (the capture is invalidated); once that capture ended, the
 * event has no work behind it: queries and waits see it complete. */
EMU_EXPORT CUresult cuEventQuery(CUevent hEvent)
{
    EMU_ENTRY_INIT();
    if (!hEvent || !emu_handle_ok(hEvent, EMU_K_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
    if (emu_capture_event_busy(hEvent)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    emu_stream *s;
    uint64_t seq;
    event_target(ev_of(hEvent), &s, &seq);
    if (!s) return CUDA_SUCCESS;
    int done = emu_stream_done(s, seq);
    CUresult sticky = emu_sticky_now(emu_stream_ctx(s));
    emu_stream_unref(s);
    return done ? sticky : CUDA_ERROR_NOT_READY;
}

EMU_EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    EMU_ENTRY_INIT();
    if (!hEvent || !emu_handle_ok(hEvent, EMU_K_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = emu_capture_check_unsafe(__func__);
    if (r != CUDA_SUCCESS) return r;
    if (emu_capture_event_busy(hEvent)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    emu_stream *s;
    uint64_t seq;
    event_target(ev_of(hEvent), &s, &seq);
    CUresult sticky = CUDA_SUCCESS;
    if (s) {
        emu_stream_wait_seq(s, seq);
        sticky = emu_sticky_now(emu_stream_ctx(s));
        emu_stream_unref(s);
    }
    emu_mem_pools_sync();
    return sticky;
}

static CUresult event_elapsed(float *ms, CUevent a, CUevent b)
{
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (!a || !b || !emu_handle_ok(a, EMU_K_EVENT) || !emu_handle_ok(b, EMU_K_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    emu_stream *sa, *sb;
    uint64_t qa, qb;
    event_target(ev_of(a), &sa, &qa);
    event_target(ev_of(b), &sb, &qb);
    CUresult r = CUDA_SUCCESS;
    if (!sa || !sb) r = CUDA_ERROR_INVALID_HANDLE;
    else if (!emu_stream_done(sa, qa) || !emu_stream_done(sb, qb)) r = CUDA_ERROR_NOT_READY;
    if (sa) emu_stream_unref(sa);
    if (sb) emu_stream_unref(sb);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&emu_ev_lock);
    *ms = (float)(b->time_ms - a->time_ms);
    pthread_mutex_unlock(&emu_ev_lock);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    EMU_ENTRY_INIT();
    return event_elapsed(pMilliseconds, hStart, hEnd);
}

EMU_EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    EMU_ENTRY_INIT();
    return event_elapsed(pMilliseconds, hStart, hEnd);
}

/* What work on s must wait for to wait for ev's most recent record (the
 * cuEventRecord rule: "Other APIs such as cuStreamWaitEvent() use the most
 * recently captured state at the time of the API call"): 1 and *d
 * (referenced), or 0 if nothing (never recorded outside capture, recorded
 * on s itself, or done). */
static int wait_target(CUevent ev, emu_stream *s, dep *d)
{
    event_target(ev_of(ev), &d->s, &d->seq);
    if (!d->s) return 0;
    if (d->s == s || emu_stream_done(d->s, d->seq)) {
        emu_stream_unref(d->s);
        return 0;
    }
    return 1;
}

emu_work *emu_event_wait_work(CUevent ev, emu_stream *s, const char *what)
{
    dep d;
    return wait_target(ev, s, &d) ? emu_stream_wait_new(&d, 1, what) : NULL;
}

int emu_event_live(CUevent ev) { return ev && emu_handle_ok(ev, EMU_K_EVENT); }
void emu_event_ref(CUevent ev) { __atomic_add_fetch(&ev_of(ev)->refs, 1, __ATOMIC_RELAXED); }
void emu_event_unref(CUevent ev) { event_unref(ev_of(ev)); }
CUcontext emu_event_ctx(CUevent ev) { return ev_of(ev)->ctx; }

static CUresult stream_wait_event(CUstream h, int pt, CUevent ev, unsigned flags)
{
    emu_stream *s;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    if (!ev || !emu_handle_ok(ev, EMU_K_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    /* CU_EVENT_WAIT_EXTERNAL: "Event is captured in the graph as an external
     * event node when performing stream capture. This flag is invalid
     * outside of stream capture." */
    if (flags & CU_EVENT_WAIT_EXTERNAL) {
        if (!emu_stream_capture(s)) return CUDA_ERROR_INVALID_VALUE;
        emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_WAIT_EVENT, .event = ev };
        return emu_capture_add(s, &op);
    }
    /* The legacy stream waiting while a blocking stream of its context
     * captures: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, the capture invalidated
     * (as any other use of it), whatever the event. */
    if ((r = emu_stream_legacy_check(s)) != CUDA_SUCCESS) return r;
    if (emu_capture_event_wait(s, ev, &r)) return r;
    /* A capturing stream that waits on an event recorded outside capture
     * gains no dependency in the graph: nothing to queue. */
    if (emu_stream_capture(s)) return CUDA_SUCCESS;
    dep d;
    if (!wait_target(ev, s, &d)) return CUDA_SUCCESS;
    return emu_stream_push_wait(s, &d, 1, "cuStreamWaitEvent");
}

EMU_EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    return stream_wait_event(hStream, 0, hEvent, Flags);
}

EMU_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    return stream_wait_event(hStream, 1, hEvent, Flags);
}
