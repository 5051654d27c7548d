/*
 * core/capture.c: stream captures in progress (capture.h) and what they
 * record (record.h).
 *
 * The count of captures in progress in the process, taken at every
 * successful cuStreamBeginCapture* and every cuStreamEndCapture* that ended
 * one, lets the library keep its shortcuts away from captures, and lets a
 * kernel launch skip everything when it is zero.
 *
 * While a capture is in progress, each stream taking part in it (the one it
 * began on, and any stream that joined it by waiting on an event recorded in
 * it) has an entry with the nodes the driver will make the stream's next
 * node depend on, as the CUDA Programming Guide describes capture
 * ("Cross-stream Dependencies and Events"): a node added to a stream depends
 * on the stream's last nodes and becomes its only last node; an event
 * recorded in a capturing stream carries that stream's last nodes; a stream
 * that waits on it adds them to its own (or, not capturing yet, joins the
 * capture with them). Every other operation on a capturing stream spoils
 * the record; so does a capture on, or joined by, a stream created with a
 * priority or given launch attributes (cuStreamSetAttribute,
 * cuStreamCopyAttributes): its kernels take them as node attributes, which
 * the recorder does not model.
 *
 * Locks: rec_lock (rec_internal.h) guards the captures, the stream and event
 * entries (and rec_marks.c's marked streams); it is held across the forward of an
 * asynchronous operation on a capturing stream, so that records are made in
 * the driver's order. The count is atomic.
 */
#include "capture.h"

#include "contexts.h"
#include "driver.h"
#include "rec_internal.h"
#include "streams.h"
#include "util.h"
#include "vmm.h"

#include <stdlib.h>
#include <string.h>

int sg_captures_active;   /* atomic */

#define PCACHE 32

/* One capture in progress. */
typedef struct cap {
    sg_grecord *rec;                /* what it records */
    sg_stream_id origin;
    CUstream origin_handle;
    int per_thread;
    CUcontext ctx;                  /* its context, asked for when a CUkernel needs it */
    int ctx_known;
    /* handles launched, the function each names, its layout */
    struct { const void *h; CUfunction f; const sg_fp_pinfo *pi; } pcache[PCACHE];
} cap;

typedef struct sstate {             /* a stream taking part in a capture */
    sg_stream_id key;
    UT_hash_handle hh;
    cap *c;
    sg_deps d;
} sstate;

typedef struct evstate {            /* an event recorded in a capture */
    CUevent ev;
    UT_hash_handle hh;
    cap *c;
    sg_deps d;
} evstate;

static sstate *streams;
static evstate *events;
static uint64_t streams_gen = 1;    /* bumped at every add and delete of a stream entry */

/* The last stream a thread looked up, and what it found (NULL: none), valid
 * while streams_gen is unchanged: read and written under rec_lock. */
static __thread struct { sg_stream_id key; uint64_t gen; sstate *s; } last
    __attribute__((tls_model("initial-exec")));          /* one load, no __tls_get_addr */

/* ------------------------------------------------------------ helpers */

static sstate *stream_find(sg_stream_id key)
{
    sstate *s;
    if (last.gen == streams_gen && sg_stream_id_eq(last.key, key)) return last.s;
    HASH_FIND(hh, streams, &key, sizeof key, s);
    last.key = key;
    last.gen = streams_gen;
    last.s = s;
    return s;
}

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

static sstate *stream_add(sg_stream_id key, cap *c)
{
    sstate *s = nspare_streams ? spare_streams[--nspare_streams] : calloc(1, sizeof *s);
    if (!s) return NULL;
    *s = (sstate){ .key = key, .c = c, .d = { .v = s->d.v, .cap = s->d.cap } };  /* a spare's buffer */
    sg_rec_oom = 0;
    HASH_ADD(hh, streams, key, sizeof s->key, s);
    streams_gen++;
    if (!sg_rec_oom) return s;
    sstate_free(s);
    return NULL;
}

static void stream_del(sstate *s)
{
    HASH_DEL(streams, s);
    streams_gen++;
    sstate_free(s);
}

static void event_del(evstate *e)
{
    HASH_DEL(events, e);
    free(e->d.v);
    free(e);
}

/* Ends capture c: its record goes to the table (graph g) or is dropped
 * (g NULL); its streams and events are forgotten (rec_lock held). */
static void cap_end(cap *c, CUgraph g)
{
    sstate *s, *st;
    HASH_ITER(hh, streams, s, st)
        if (s->c == c) stream_del(s);
    evstate *e, *et;
    HASH_ITER(hh, events, e, et)
        if (e->c == c) event_del(e);
    if (c->rec) {
        if (g) sg_grecord_finish(c->rec, g);
        else sg_grecord_drop(c->rec);
    }
    if (spare_cap) free(c);
    else spare_cap = c;
    sg_fp_cache_leave();
}

/* ------------------------------------------------------------ begin and end */

static CUcontext cap_ctx(cap *c);

/* One capture fewer in progress (never below 0). */
static void captures_drop(void)
{
    int cur = __atomic_load_n(&sg_captures_active, __ATOMIC_RELAXED);
    while (cur > 0 && !__atomic_compare_exchange_n(&sg_captures_active, &cur, cur - 1, 1,
                                                   __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
}

static CUresult capture_begin(const sg_call *c, CUresult (*route)(const sg_call *))
{
    __atomic_add_fetch(&sg_captures_active, 1, __ATOMIC_SEQ_CST);   /* before: no allocation slips by */
    CUresult rc = route(c);
    if (rc != CUDA_SUCCESS) {
        __atomic_sub_fetch(&sg_captures_active, 1, __ATOMIC_SEQ_CST);
        return rc;
    }
    if (!sg_rec_on) return rc;
    CUstream hs = c->u.capture.stream;
    sg_stream_id key = sg_stream_id_of(hs, c->per_thread);
    sg_lock_take(&sg_rec_lock);
    sstate *old = stream_find(key);        /* a capture the library lost track of */
    if (old && sg_stream_id_eq(old->c->origin, key)) {
        cap_end(old->c, NULL);             /* it ended: the driver began a new one */
        captures_drop();
    } else if (old) {
        stream_del(old);
    }
    /* a capture into an existing graph adds nodes to it now, whether or not
     * it ends well (an invalidated one leaves them): its record goes, and the
     * graph is read back until a capture or a build records it again */
    if (c->u.capture.to_graph) sg_grecord_forget_locked(c->u.capture.graph);
    cap *cp = cap_new();
    if (cp) {
        sg_fp_cache_enter();               /* layouts handed out stay valid until the end */
        cp->origin = key;
        cp->origin_handle = hs;
        cp->per_thread = c->per_thread;
        cap_ctx(cp);                       /* now: its context's teardown must find it */
        cp->rec = sg_grecord_building();
        if (!stream_add(key, cp)) {
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

static CUresult capture_end(const sg_call *c, CUresult (*route)(const sg_call *))
{
    CUresult rc = route(c);
    if (!end_ended(rc)) return rc;
    captures_drop();
    if (!sg_rec_on) return rc;
    sg_stream_id key = sg_stream_id_of(c->u.capture.stream, c->per_thread);
    sg_lock_take(&sg_rec_lock);
    sstate *s = stream_find(key);
    if (s && sg_stream_id_eq(s->c->origin, key)) {
        CUgraph *out = c->u.capture.graph_out;
        cap_end(s->c, rc == CUDA_SUCCESS && out ? *out : NULL);
    }
    sg_lock_drop(&sg_rec_lock);
    return rc;
}

/* ------------------------------------------------------------ recording */

/* The capture's context, asked for once (a CUkernel launched as a function
 * is described with it). NULL if the driver cannot tell. */
static CUcontext cap_ctx(cap *c)
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

/* The function a launched handle names in the capture's context. A program
 * may launch a CUkernel as if it were a CUfunction (the driver takes both;
 * the CUDA runtime does): the driver's graph node then holds the kernel's
 * function in the context, and so does the record. NULL if h is neither. */
static CUfunction launched_function(cap *c, const void *h)
{
    CUfunction f = NULL;
    CUcontext prev;
    if (!sg_drv.cuKernelGetFunction || !cap_ctx(c) || sg_vmm_ctx_enter(c->ctx, &prev) != 0)
        return NULL;
    if (SG_DRIVER_CALL(cuKernelGetFunction, &f, (CUkernel)(uintptr_t)h) != CUDA_SUCCESS) f = NULL;
    sg_vmm_ctx_leave(c->ctx, prev);
    return f;
}

/* Describes a kernel launch into n, as the driver's node will hold it. */
static void kernel_desc(cap *c, sg_grecord *r, sg_fp_node *n, const sg_call *call)
{
    const void *h = (const void *)call->u.kernel.f;
    unsigned slot = (unsigned)(((uintptr_t)h >> 4) & (PCACHE - 1));
    int hit = c->pcache[slot].h == h;
    sg_fp_kin k = { .func = hit ? c->pcache[slot].f : call->u.kernel.f, .shmem = call->u.kernel.shmem,
                    .kernelParams = call->u.kernel.params, .extra = call->u.kernel.extra };
    memcpy(k.grid, call->u.kernel.grid, sizeof k.grid);
    memcpy(k.block, call->u.kernel.block, sizeof k.block);
    int st = sg_fp_kernel_desc(n, &k, hit ? c->pcache[slot].pi : NULL);
    if (st > 0 && !n->pi && !hit) {          /* not a function's layout: a CUkernel? */
        CUfunction f = launched_function(c, h);
        if (f) {
            k.func = f;
            st = sg_fp_kernel_desc(n, &k, NULL);
        }
    }
    if (st < 0) {
        sg_grecord_spoil(r, SG_READBACK_OUT_OF_MEMORY);
        return;
    }
    if (n->pi) {
        c->pcache[slot].h = h;
        c->pcache[slot].f = k.func;
        c->pcache[slot].pi = n->pi;
    }
    if (call->u.kernel.cooperative) {
        CUkernelNodeAttrValue v;
        memset(&v, 0, sizeof v);
        v.cooperative = 1;
        sg_fp_attr_set(&n->k, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v);
    }
    /* cuLaunchKernelEx: the node takes the launch's attributes (in order, a
     * later one of an id over an earlier one); an id a node does not keep
     * (programmatic launches, events, ...) is not modeled */
    for (unsigned i = 0; i < call->u.kernel.nattrs; i++) {
        const CUlaunchAttribute *a = &call->u.kernel.attrs[i];
        if (a->id != CU_LAUNCH_ATTRIBUTE_IGNORE && sg_fp_attr_set(&n->k, a->id, &a->value) != 0) {
            sg_grecord_spoil(r, SG_READBACK_UNMODELED_CALL);
            return;
        }
    }
}

/* A node the operation added on stream s (rec_lock held). */
static void add_node(sstate *s, const sg_call *call)
{
    sg_grecord *r = s->c->rec;
    if (!r || r->why != SG_READBACK_NONE) return;
    sg_fp_node *n = sg_grecord_add(r, NULL);
    if (!n) return;
    uint32_t idx = (uint32_t)(r->fp.n - 1);
    if (call->kind == SG_CALL_KERNEL) kernel_desc(s->c, r, n, call);
    else if (sg_rec_op_desc(n, call->gb) != 0) sg_grecord_spoil(r, SG_READBACK_OUT_OF_MEMORY);
    if (n->k.state == SG_FP_UNSUPPORTED) r->fp.unsupported = 1;
    for (size_t i = 0; i < s->d.n; i++) sg_grecord_edge(r, s->d.v[i], idx, NULL);
    if (s->d.cap) {                            /* the common case: a chain */
        s->d.v[0] = idx;
        s->d.n = 1;
    } else if (sg_deps_set(&s->d, &idx, 1) != 0) {
        sg_grecord_spoil(r, SG_READBACK_OUT_OF_MEMORY);
    }
}

static void spoil(cap *c, sg_readback why)
{
    if (c && c->rec) sg_grecord_spoil(c->rec, why);
}

/* cuEventRecord on stream s (capturing or not; rec_lock held). */
static void event_record(sstate *s, const sg_gb *gb)
{
    evstate *e;
    HASH_FIND_PTR(events, &gb->u.event.event, e);
    if (!s) {                                  /* recorded outside any capture */
        if (e) event_del(e);
        return;
    }
    if (gb->u.event.flags & CU_EVENT_RECORD_EXTERNAL) {   /* an event record node */
        spoil(s->c, SG_READBACK_UNMODELED_CALL);
        return;
    }
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            spoil(s->c, SG_READBACK_OUT_OF_MEMORY);
            return;
        }
        e->ev = gb->u.event.event;
        sg_rec_oom = 0;
        HASH_ADD_PTR(events, ev, e);
        if (sg_rec_oom) {
            free(e);
            spoil(s->c, SG_READBACK_OUT_OF_MEMORY);
            return;
        }
    }
    e->c = s->c;
    if (sg_deps_set(&e->d, s->d.v, s->d.n) != 0) spoil(s->c, SG_READBACK_OUT_OF_MEMORY);
}

/* cuEventDestroy: what a capture recorded in the event goes before the
 * driver frees the handle, which a new event may get at once (waiting on
 * that one joins no capture). */
static CUresult event_destroy(const sg_call *c, CUresult (*route)(const sg_call *))
{
    evstate *e;                                /* (none while the recorder is off) */
    sg_lock_take(&sg_rec_lock);
    HASH_FIND_PTR(events, &c->gb->u.event.event, e);
    if (e) event_del(e);
    sg_lock_drop(&sg_rec_lock);
    return route(c);
}

/* cuStreamWaitEvent of stream key on an event (rec_lock held). */
static void event_wait(sstate *s, sg_stream_id key, const sg_gb *gb, evstate *e)
{
    if (gb->u.event.flags & CU_EVENT_WAIT_EXTERNAL) {
        if (s) spoil(s->c, SG_READBACK_UNMODELED_CALL);
        return;
    }
    if (!e) {                                  /* an event of no capture */
        if (s) spoil(s->c, SG_READBACK_UNMODELED_CALL);
        return;
    }
    if (!s) {                                  /* the stream joins the capture */
        s = stream_add(key, e->c);
        if (!s || sg_deps_set(&s->d, e->d.v, e->d.n) != 0) {
            spoil(e->c, SG_READBACK_OUT_OF_MEMORY);
            return;
        }
        sg_readback why = sg_rec_marked(key);
        if (why != SG_READBACK_NONE) spoil(e->c, why);
        return;
    }
    if (s->c != e->c) {                        /* across captures: not modeled */
        spoil(s->c, SG_READBACK_UNMODELED_CALL);
        spoil(e->c, SG_READBACK_UNMODELED_CALL);
        return;
    }
    if (sg_deps_union(&s->d, &e->d) != 0) spoil(s->c, SG_READBACK_OUT_OF_MEMORY);
}

static CUstream op_stream(const sg_call *c)
{
    return c->kind == SG_CALL_KERNEL ? c->u.kernel.stream : c->gb->stream;
}

/* A stream operation (kernel launch, memset, copy, event record or wait,
 * anything else on a stream). */
static CUresult stream_op(const sg_call *c, CUresult (*route)(const sg_call *))
{
    const sg_gb *gb = c->gb;
    int kernel = c->kind == SG_CALL_KERNEL;
    sg_gb_kind kind = kernel ? SG_GB_STREAM_OTHER : gb->kind;
    if (!sg_rec_on || (!sg_capture_active() && kind != SG_GB_EVENT_RECORD)) return route(c);
    CUstream hs = op_stream(c);
    sg_stream_id key = sg_stream_id_of(hs, c->per_thread);
    sg_lock_take(&sg_rec_lock);
    sstate *s = stream_find(key);
    evstate *e = NULL;
    if (kind == SG_GB_EVENT_WAIT) HASH_FIND_PTR(events, &gb->u.event.event, e);
    if (!s && !e) {
        if (kind == SG_GB_EVENT_RECORD) event_record(NULL, gb);
        sg_lock_drop(&sg_rec_lock);
        return route(c);
    }
    if (kind == SG_GB_SYNC_OP) {               /* never forwarded under the lock */
        spoil(s ? s->c : e->c, SG_READBACK_UNMODELED_CALL);
        sg_lock_drop(&sg_rec_lock);
        return route(c);
    }
    CUresult rc = route(c);                    /* adds a node or dependencies: no wait */
    if (rc != CUDA_SUCCESS) {
        spoil(s ? s->c : e->c, SG_READBACK_UNMODELED_CALL);
    } else {
        if (kernel) {
            if (s) add_node(s, c);
        } else switch (kind) {
        case SG_GB_MEMSET:
        case SG_GB_COPY:
        case SG_GB_COPY2D:
        case SG_GB_COPY3D:
            if (s) add_node(s, c);
            break;
        case SG_GB_EVENT_RECORD:
            event_record(s, gb);
            break;
        case SG_GB_EVENT_WAIT:
            event_wait(s, key, gb, e);
            break;
        default:
            if (s) spoil(s->c, SG_READBACK_UNMODELED_CALL);
            break;
        }
    }
    sg_lock_drop(&sg_rec_lock);
    return rc;
}

/* cuStreamGetCaptureInfo_v2/_v3 naming one last node of a stream whose
 * record has one there too: its handle is learned (record.h). rec_lock is
 * held across the query (it never waits): no node slips in between. */
static CUresult capture_info(const sg_call *c, CUresult (*route)(const sg_call *))
{
    const sg_gb *gb = c->gb;
    if (!sg_rec_on || !sg_capture_active()) return route(c);
    sg_stream_id key = sg_stream_id_of(gb->stream, c->per_thread);
    sg_lock_take(&sg_rec_lock);
    CUresult rc = route(c);
    sstate *s = rc == CUDA_SUCCESS ? stream_find(key) : NULL;
    if (s && s->d.n == 1 && gb->u.capinfo.status &&
        *gb->u.capinfo.status == CU_STREAM_CAPTURE_STATUS_ACTIVE && gb->u.capinfo.deps &&
        *gb->u.capinfo.deps && gb->u.capinfo.ndeps && *gb->u.capinfo.ndeps == 1)
        sg_grecord_learn(s->c->rec, s->d.v[0], (*gb->u.capinfo.deps)[0]);
    sg_lock_drop(&sg_rec_lock);
    return rc;
}

/* cuStreamCreateWithPriority: a stream whose kernels take its priority. */
static CUresult stream_create(const sg_call *c, CUresult (*route)(const sg_call *))
{
    CUresult rc = route(c);
    const sg_gb *gb = c->gb;
    if (rc != CUDA_SUCCESS || !sg_rec_on || !gb->u.create_stream.priority || !gb->u.create_stream.out)
        return rc;
    sg_lock_take(&sg_rec_lock);
    sg_rec_mark(sg_stream_id_of(*gb->u.create_stream.out, 0), SG_READBACK_STREAM_PRIORITY);
    sg_lock_drop(&sg_rec_lock);
    return rc;
}

/* cuStreamSetAttribute, cuStreamCopyAttributes: kernels captured on the
 * stream from now on take its attributes. Marked before the driver applies
 * them (a failed call leaves a mark: slower, never wrong); a capture the
 * stream takes part in now is spoiled too. */
static CUresult stream_attr(const sg_call *c, CUresult (*route)(const sg_call *))
{
    if (!sg_rec_on) return route(c);
    sg_stream_id key = sg_stream_id_of(c->gb->stream, c->per_thread);
    sg_lock_take(&sg_rec_lock);
    sg_rec_mark(key, SG_READBACK_STREAM_ATTRIBUTES);
    sstate *s = stream_find(key);
    if (s) spoil(s->c, SG_READBACK_STREAM_ATTRIBUTES);
    sg_lock_drop(&sg_rec_lock);
    return route(c);
}

/* ------------------------------------------------------------ entry */

CUresult sg_rec_call(const sg_call *c, CUresult (*route)(const sg_call *))
{
    switch (c->kind) {
    case SG_CALL_CAPTURE_BEGIN:
        return capture_begin(c, route);
    case SG_CALL_CAPTURE_END:
        return capture_end(c, route);
    case SG_CALL_KERNEL:
        return stream_op(c, route);
    default:
        break;
    }
    if (!c->gb) return route(c);
    switch (c->gb->kind) {
    case SG_GB_MEMSET:
    case SG_GB_COPY:
    case SG_GB_COPY2D:
    case SG_GB_COPY3D:
    case SG_GB_EVENT_RECORD:
    case SG_GB_EVENT_WAIT:
    case SG_GB_STREAM_OTHER:
    case SG_GB_SYNC_OP:
        return stream_op(c, route);
    case SG_GB_EVENT_DESTROY:
        return event_destroy(c, route);
    case SG_GB_STREAM_CREATE:
        return stream_create(c, route);
    case SG_GB_STREAM_ATTR:
        return stream_attr(c, route);
    case SG_GB_CAPTURE_INFO:
        return capture_info(c, route);
    default:
        return sg_rec_graph_op(c, route);
    }
}

int sg_rec_stream_gone(CUstream hs)
{
    int origin = 0;
    if (!sg_rec_on) return 0;
    sg_lock_take(&sg_rec_lock);
    sg_stream_id key = sg_stream_id_of(hs, 0);
    sg_rec_unmark(key);
    sstate *s = stream_find(key);
    if (s) {
        if (sg_stream_id_eq(s->c->origin, key)) {
            cap_end(s->c, NULL);               /* the capture is abandoned */
            origin = 1;
        } else {
            spoil(s->c, SG_READBACK_UNMODELED_CALL);
            stream_del(s);
        }
    }
    sg_lock_drop(&sg_rec_lock);
    return origin;
}

void sg_capture_abandoned(void) { captures_drop(); }

/* Context teardown (contexts.h, step 0): the driver ended the captures of
 * the context's streams (known at their beginning: cap_ctx). Their records
 * go (no call on the dead streams) and they no longer count as in progress;
 * the entries of every stream that joined them go with them. */
static void ctx_captures_gone(sg_ctx *cx)
{
    if (!sg_rec_on) return;
    sg_lock_take(&sg_rec_lock);
    sstate *s, *tmp;
    HASH_ITER(hh, streams, s, tmp) {
        cap *cp = s->c;
        if (!sg_stream_id_eq(cp->origin, s->key) || !cp->ctx_known || cp->ctx != cx->ctx) continue;
        cap_end(cp, NULL);             /* its other streams' entries go too: restart */
        captures_drop();
        tmp = streams;
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
}

void sg_rec_reset(void)
{
    sg_lock_take(&sg_rec_lock);
    while (streams) cap_end(streams->c, NULL);   /* every entry of that capture goes */
    evstate *e, *et;
    HASH_ITER(hh, events, e, et) event_del(e);
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
