/*
 * core/cap_record.c: what the stream operations of a capture in progress
 * add to its record (record.h), and the recorder's entry point for stream
 * calls (sg_rec_call). Captures themselves, and the streams taking part in
 * them, are capture.c's (cap_internal.h).
 *
 * Each stream taking part in a capture has the nodes the driver will make
 * its next node depend on, as the CUDA Programming Guide describes capture
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
 * Locks: rec_lock guards the stream and event entries (cap_internal.h); it
 * is held across the forward of an asynchronous
 * operation on a capturing stream, so that records are made in the driver's
 * order.
 */
#include "cap_internal.h"

#include "capture.h"
#include "driver.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ recording */

/* The context of stream s, taking part in a capture, asked for once: a
 * named stream's (cuStreamGetCtx), a default stream's the current one
 * (NULL if the driver cannot tell). */
static CUcontext stream_ctx(sstate *s, CUstream hs)
{
    if (!s->ctx_known) {
        s->ctx_known = 1;
        s->ctx = sg_stream_ctx(hs);
    }
    return s->ctx;
}

/* Whether the cache entry of slot holds launched handle h on stream s: a
 * function's entry whatever the stream, a CUkernel's on the streams of the
 * context it was resolved in. */
static inline int pcache_hit(cap *c, unsigned slot, const void *h, sstate *s, CUstream hs)
{
    return c->pcache[slot].h == h &&
           (c->pcache[slot].f == (CUfunction)(uintptr_t)h || c->pcache[slot].kctx == stream_ctx(s, hs));
}

/* Describes a kernel launch into n through the general path, and keeps
 * its function and layout in c's cache. SG_FP_* or -1 if out of memory. */
static int kernel_desc_new(cap *c, sstate *s, sg_fp_node *n, const sg_call *call, unsigned slot)
{
    const void *h = (const void *)call->u.kernel.f;
    int hit = pcache_hit(c, slot, h, s, call->u.kernel.stream);
    CUcontext kctx = NULL;
    sg_fp_kin k = { .func = hit ? c->pcache[slot].f : call->u.kernel.f, .shmem = call->u.kernel.shmem,
                    .kernelParams = call->u.kernel.params, .extra = call->u.kernel.extra };
    memcpy(k.grid, call->u.kernel.grid, sizeof k.grid);
    memcpy(k.block, call->u.kernel.block, sizeof k.block);
    int st = sg_fp_kernel_desc(n, &k, hit ? c->pcache[slot].pi : NULL);
    if (st > 0 && !n->pi && !hit) {          /* not a function's layout: a CUkernel? */
        /* A program may launch a CUkernel as if it were a CUfunction (the
         * driver takes both; the CUDA runtime does): "the context to launch
         * the kernel on will either be taken from the specified stream
         * hStream or the current context in case of NULL stream"
         * (cuLaunchKernel), so the driver's node holds the kernel's function
         * in the context of the stream it was launched on, and so does the
         * record. That is the capture's context only on the streams of its
         * context: one of another context may join the capture (an event),
         * and there the capture's function was recorded for a node holding
         * another context's, so that updates the driver refuses (the
         * function's context changed) were skipped (round 27,
         * tests/e2e/adv_records.c ctx_kernel). */
        kctx = stream_ctx(s, call->u.kernel.stream);
        CUfunction f = sg_fp_kern_function((CUkernel)(uintptr_t)h, kctx);
        if (f) {
            k.func = f;
            st = sg_fp_kernel_desc(n, &k, NULL);
        }
    }
    if (n->pi) {
        c->pcache[slot].h = h;
        c->pcache[slot].f = k.func;
        c->pcache[slot].pi = n->pi;
        c->pcache[slot].kctx = hit ? c->pcache[slot].kctx : kctx;
    }
    return st;
}

/* Describes a kernel launch on stream s into n, as the driver's node will
 * hold it. A handle this capture launched before with kernelParams (the
 * common case) takes the short path: its function and layout from c's
 * cache. */
static void kernel_desc(sstate *s, sg_grecord *r, sg_fp_node *n, const sg_call *call)
{
    cap *c = s->c;
    unsigned slot = (unsigned)(((uintptr_t)call->u.kernel.f >> 4) & (PCACHE - 1));
    int st;
    if (call->u.kernel.params && !call->u.kernel.extra &&
        pcache_hit(c, slot, (const void *)call->u.kernel.f, s, call->u.kernel.stream))
        st = sg_fp_launch_desc(n, c->pcache[slot].f, call->u.kernel.grid, call->u.kernel.block,
                               call->u.kernel.shmem, call->u.kernel.params, c->pcache[slot].pi);
    else
        st = kernel_desc_new(c, s, n, call, slot);
    if (st < 0) {
        sg_grecord_spoil(r, SG_READBACK_OUT_OF_MEMORY);
        return;
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
    sg_fp_node *n = sg_grecord_add_captured(r);
    if (!n) return;
    uint32_t idx = (uint32_t)(r->fp.n - 1);
    if (call->kind == SG_CALL_KERNEL) kernel_desc(s, r, n, call);
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


/* cuEventRecord on stream s (capturing or not; rec_lock held). */
static void event_record(sstate *s, const sg_gb *gb)
{
    evstate *e = sg_cap_event_find(gb->u.event.event);
    if (!s) {                                  /* recorded outside any capture */
        if (e) sg_cap_event_del(e);
        return;
    }
    if (gb->u.event.flags & CU_EVENT_RECORD_EXTERNAL) {   /* an event record node */
        sg_cap_spoil(s->c, SG_READBACK_UNMODELED_CALL);
        return;
    }
    if (!e && !(e = sg_cap_event_add(gb->u.event.event))) {
        sg_cap_spoil(s->c, SG_READBACK_OUT_OF_MEMORY);
        return;
    }
    e->c = s->c;
    if (sg_deps_set(&e->d, s->d.v, s->d.n) != 0) sg_cap_spoil(s->c, SG_READBACK_OUT_OF_MEMORY);
}

/* cuEventDestroy: what a capture recorded in the event goes before the
 * driver frees the handle, which a new event may get at once (waiting on
 * that one joins no capture). */
static CUresult event_destroy(const sg_call *c, CUresult (*route)(const sg_call *))
{
    sg_lock_take(&sg_rec_lock);                /* (no entry while the recorder is off) */
    evstate *e = sg_cap_event_find(c->gb->u.event.event);
    if (e) sg_cap_event_del(e);
    sg_lock_drop(&sg_rec_lock);
    return route(c);
}

/* cuStreamWaitEvent of stream key on an event (rec_lock held). */
static void event_wait(sstate *s, sg_stream_id key, const sg_gb *gb, evstate *e)
{
    if (gb->u.event.flags & CU_EVENT_WAIT_EXTERNAL) {
        if (s) sg_cap_spoil(s->c, SG_READBACK_UNMODELED_CALL);
        return;
    }
    if (!e) {                                  /* an event of no capture */
        if (s) sg_cap_spoil(s->c, SG_READBACK_UNMODELED_CALL);
        return;
    }
    if (!s) {                                  /* the stream joins the capture */
        s = sg_cap_stream_add(key, e->c);
        if (!s || sg_deps_set(&s->d, e->d.v, e->d.n) != 0) {
            sg_cap_spoil(e->c, SG_READBACK_OUT_OF_MEMORY);
            return;
        }
        sg_readback why = sg_rec_marked(key);
        if (why != SG_READBACK_NONE) sg_cap_spoil(e->c, why);
        return;
    }
    if (s->c != e->c) {                        /* across captures: not modeled */
        sg_cap_spoil(s->c, SG_READBACK_UNMODELED_CALL);
        sg_cap_spoil(e->c, SG_READBACK_UNMODELED_CALL);
        return;
    }
    if (sg_deps_union(&s->d, &e->d) != 0) sg_cap_spoil(s->c, SG_READBACK_OUT_OF_MEMORY);
}

/* A kernel launch while a capture is in progress: on a capturing stream, its
 * node (stream_op's rules for a kernel, apart: every node of a re-captured
 * graph comes this way). A launch into a capturing stream only adds its
 * node, so it is forwarded as route would forward it (core.c), without
 * route's tests. Out of line: sg_rec_call, which every hooked call with a
 * recorder facet passes (a graph launch too), keeps no frame of its own. */
static __attribute__((noinline)) CUresult kernel_op(const sg_call *c, CUresult (*route)(const sg_call *))
{
    sg_stream_id key = sg_stream_id_of(c->u.kernel.stream, c->per_thread);
    sg_lock_take(&sg_rec_lock);
    sstate *s = sg_cap_stream_find(key);
    if (!s) {
        sg_lock_drop(&sg_rec_lock);
        return route(c);
    }
    CUresult rc = c->forward(c->args);         /* adds a node: no wait */
    if (rc != CUDA_SUCCESS) sg_cap_spoil(s->c, SG_READBACK_UNMODELED_CALL);
    else add_node(s, c);
    sg_lock_drop(&sg_rec_lock);
    return rc;
}

/* Whether a memset or copy the driver accepted moves no byte (a zero
 * width, height, depth or size). Such an operation gets no node in the
 * record: the emulated driver adds none, and a record must never hold a
 * node the graph may lack. The record's check against the driver counts
 * nodes and edges; it shows every node the recorder missed only while each
 * node the record holds is one the driver made. A node held for an empty
 * copy the driver did not make would stand in for one added by a call the
 * library does not hook (cuMemcpyBatchAsync, cuStreamBatchMemOp, ...),
 * counts equal, and an update changing that node would be skipped (round
 * 35, tests/e2e/adv_unhooked.c zero_copy). Where a driver does make a node
 * for it, the counts differ and the graph is read back. */
static int gb_empty(const sg_gb *gb)
{
    switch (gb->kind) {
    case SG_GB_MEMSET:
        return !gb->u.memset.width || !gb->u.memset.height;
    case SG_GB_COPY:
        return !gb->u.copy.bytes;
    case SG_GB_COPY2D: {
        const CUDA_MEMCPY2D *c = gb->u.desc;
        return !c || !c->WidthInBytes || !c->Height;
    }
    case SG_GB_COPY3D: {
        const CUDA_MEMCPY3D *c = gb->u.desc;
        return !c || !c->WidthInBytes || !c->Height || !c->Depth;
    }
    default:
        return 0;
    }
}

/* A stream operation other than a kernel launch (memset, copy, event record
 * or wait, anything else on a stream). */
static CUresult stream_op(const sg_call *c, CUresult (*route)(const sg_call *))
{
    const sg_gb *gb = c->gb;
    sg_gb_kind kind = gb->kind;
    if (!sg_rec_on || (!sg_capture_active() && kind != SG_GB_EVENT_RECORD)) return route(c);
    sg_stream_id key = sg_stream_id_of(gb->stream, c->per_thread);
    sg_lock_take(&sg_rec_lock);
    sstate *s = sg_cap_stream_find(key);
    evstate *e = NULL;
    if (kind == SG_GB_EVENT_WAIT) e = sg_cap_event_find(gb->u.event.event);
    if (!s && !e) {
        if (kind == SG_GB_EVENT_RECORD) event_record(NULL, gb);
        sg_lock_drop(&sg_rec_lock);
        return route(c);
    }
    if (kind == SG_GB_SYNC_OP) {               /* never forwarded under the lock */
        sg_cap_spoil(s ? s->c : e->c, SG_READBACK_UNMODELED_CALL);
        sg_lock_drop(&sg_rec_lock);
        return route(c);
    }
    CUresult rc = route(c);                    /* adds a node or dependencies: no wait */
    if (rc != CUDA_SUCCESS) {
        sg_cap_spoil(s ? s->c : e->c, SG_READBACK_UNMODELED_CALL);
    } else {
        switch (kind) {
        case SG_GB_MEMSET:
        case SG_GB_COPY:
        case SG_GB_COPY2D:
        case SG_GB_COPY3D:
            if (s && !gb_empty(gb)) add_node(s, c);
            break;
        case SG_GB_EVENT_RECORD:
            event_record(s, gb);
            break;
        case SG_GB_EVENT_WAIT:
            event_wait(s, key, gb, e);
            break;
        default:
            if (s) sg_cap_spoil(s->c, SG_READBACK_UNMODELED_CALL);
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
    sstate *s = rc == CUDA_SUCCESS ? sg_cap_stream_find(key) : NULL;
    if (s && s->d.n == 1 && gb->u.capinfo.status &&
        *gb->u.capinfo.status == CU_STREAM_CAPTURE_STATUS_ACTIVE && gb->u.capinfo.deps &&
        *gb->u.capinfo.deps && gb->u.capinfo.ndeps && *gb->u.capinfo.ndeps == 1)
        sg_grecord_learn(s->c->rec, s->d.v[0], (*gb->u.capinfo.deps)[0]);
    sg_lock_drop(&sg_rec_lock);
    return rc;
}

/* cuStreamCreateWithPriority, cuGreenCtxStreamCreate: a stream whose
 * kernels take its priority. */
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
    sstate *s = sg_cap_stream_find(key);
    if (s) sg_cap_spoil(s->c, SG_READBACK_STREAM_ATTRIBUTES);
    sg_lock_drop(&sg_rec_lock);
    return route(c);
}

/* ------------------------------------------------------------ entry */

/* The calls with a recorder facet (sg_rec_call's rest: out of line, so
 * that a captured kernel launch, every node of a re-captured graph, reaches
 * stream_op through tail calls with no frame). */
static __attribute__((noinline)) CUresult gb_call(const sg_call *c,
                                                  CUresult (*route)(const sg_call *))
{
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

CUresult sg_rec_call(const sg_call *c, CUresult (*route)(const sg_call *))
{
    switch (c->kind) {
    case SG_CALL_CAPTURE_BEGIN:
        return sg_cap_begin(c, route);
    case SG_CALL_CAPTURE_END:
        return sg_cap_end(c, route);
    case SG_CALL_KERNEL:
        if (!sg_rec_on || !sg_capture_active()) return route(c);
        return kernel_op(c, route);
    default:
        return gb_call(c, route);
    }
}
