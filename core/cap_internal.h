/*
 * core/cap_internal.h: what the two files of captures in progress share:
 * capture.c (their begin, end and abandonment, the streams taking part in
 * them and the events recorded in them, their contexts) and cap_record.c
 * (what the operations on those streams add to their records, and the
 * recorder's entry point for stream calls). cap_record.c calls capture.c,
 * never the reverse. Not for the rest of core/:
 * capture.h and record.h are the interfaces.
 *
 * Locks: rec_lock (rec_internal.h) guards every capture, stream and event
 * entry below; sg_captures_active is atomic.
 */
#ifndef SG_CAP_INTERNAL_H
#define SG_CAP_INTERNAL_H

#include "call.h"
#include "rec_internal.h"
#include "streams.h"
#include "util.h"

#include <stdint.h>
#include <string.h>

/* A dependency list: node indices of the capture's record. */
typedef struct sg_deps {
    uint32_t *v;
    size_t n, cap;
} sg_deps;

static inline int sg_deps_set(sg_deps *d, const uint32_t *v, size_t n)
{
    if (sg_grow((void **)&d->v, &d->cap, n ? n : 1, sizeof *d->v) != 0) return -1;
    if (n) memcpy(d->v, v, n * sizeof *v);
    d->n = n;
    return 0;
}

/* d gets the indices of add it lacks, in add's order. */
static inline int sg_deps_union(sg_deps *d, const sg_deps *add)
{
    for (size_t i = 0; i < add->n; i++) {
        size_t j = 0;
        while (j < d->n && d->v[j] != add->v[i]) j++;
        if (j < d->n) continue;
        if (sg_grow((void **)&d->v, &d->cap, d->n + 1, sizeof *d->v) != 0) return -1;
        d->v[d->n++] = add->v[i];
    }
    return 0;
}

#define PCACHE 32

/* One capture in progress. */
typedef struct cap {
    sg_grecord *rec;                /* what it records */
    sg_stream_id origin;
    CUstream origin_handle;
    int per_thread;
    CUcontext ctx;                  /* its context (capture.c: sg_cap_ctx) */
    int ctx_known;
    int dying;                      /* its context's destroy is in flight (capture.c,
                                     * ctx_captures_take): ended by that destroy's teardown */
    int into_unknown;               /* into a graph without a record (cuStreamBeginCaptureToGraph
                                     * of one the library did not see made: an embedded graph,
                                     * which dies unseen): its record is dropped at the end */
    /* handles launched, the function each names, its layout; for a CUkernel
     * (f != h) also the context it was resolved in: the same CUkernel names
     * another function on a stream of another context (cap_record.c) */
    struct { const void *h; CUfunction f; const sg_fp_pinfo *pi; CUcontext kctx; } pcache[PCACHE];
} cap;

typedef struct sstate {             /* a stream taking part in a capture */
    sg_stream_id key;
    UT_hash_handle hh;
    cap *c;
    sg_deps d;
    CUcontext ctx;                  /* the stream's context, asked for when a CUkernel needs it */
    int ctx_known;
} sstate;

/* The streams taking part in captures (capture.c's table) and the last
 * stream each thread looked up, and what it found (NULL: none), valid while
 * sg_cap_streams_gen is unchanged (bumped at every add and delete). */
extern sstate *sg_cap_streams;
extern uint64_t sg_cap_streams_gen;
struct sg_cap_last { sg_stream_id key; uint64_t gen; sstate *s; };
extern __thread struct sg_cap_last sg_cap_last
    __attribute__((tls_model("initial-exec")));          /* one load, no __tls_get_addr */

/* The entry of a stream taking part in a capture, or NULL (rec_lock held;
 * every captured operation asks: the thread's last answer inline, the
 * table's search out of line, capture.c). */
sstate *sg_cap_stream_search(sg_stream_id key);
static inline sstate *sg_cap_stream_find(sg_stream_id key)
{
    if (sg_cap_last.gen == sg_cap_streams_gen && sg_stream_id_eq(sg_cap_last.key, key))
        return sg_cap_last.s;
    return sg_cap_stream_search(key);
}

/* capture.c (rec_lock held): a stream joins capture c (NULL if out of
 * memory); the capture's context (see there). */
sstate *sg_cap_stream_add(sg_stream_id key, cap *c);
CUcontext sg_cap_ctx(cap *c);
/* capture.c: cuStreamBeginCapture* and cuStreamEndCapture (rec_lock not
 * held; route(c) forwards). */
CUresult sg_cap_begin(const sg_call *c, CUresult (*route)(const sg_call *));
CUresult sg_cap_end(const sg_call *c, CUresult (*route)(const sg_call *));

typedef struct evstate {            /* an event recorded in a capture */
    CUevent ev;
    UT_hash_handle hh;
    cap *c;
    sg_deps d;
} evstate;

/* capture.c (rec_lock held): the entry of event ev, or NULL; a new entry
 * for ev, not yet in a capture (NULL if out of memory); one that goes. The
 * entries of a capture go when it ends. */
evstate *sg_cap_event_find(CUevent ev);
evstate *sg_cap_event_add(CUevent ev);
void sg_cap_event_del(evstate *e);

/* c's record no longer describes its graph. */
static inline void sg_cap_spoil(cap *c, sg_readback why)
{
    if (c && c->rec) sg_grecord_spoil(c->rec, why);
}

#endif /* SG_CAP_INTERNAL_H */
