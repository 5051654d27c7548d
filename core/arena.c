/*
 * core/arena.c: deterministic first-fit placement over VA reservations
 * (see arena.h for the model and the guarantees).
 *
 * Representation: per segment, a sorted array of chunks (they tile the
 * mapped prefix, in address order) and a sorted array of free ranges (each
 * inside the mapped prefix, none overlapping, adjacent ones coalesced when
 * they carry the same tag). A free range's tag is NULL (available to
 * everyone) or a pend: the event recorded when a stream-ordered free
 * happened, the freeing stream's key, and a reference count (a pending
 * range split by a carve shares its pend). Arrays are small in practice
 * (free ranges and chunks number in the tens); a carve or a free is a
 * linear pass over one segment's arrays.
 *
 * No locking here: the caller serialises every call on one arena (arena.h).
 */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

typedef struct pend {
    void *event;
    sg_arena_key key;
    uint64_t seq;          /* order of the frees: a later event implies earlier ones on a stream */
    int refs;              /* free ranges tagged with it */
    int done;              /* event_done said yes */
    struct pend *next, *prev;
} pend;

typedef struct frange {
    CUdeviceptr base;
    size_t size;
    pend *p;
} frange;

typedef struct seg {
    CUdeviceptr base;
    size_t size, mapped;
    sg_arena_chunk *ch;
    size_t nch, capch;
    frange *fr;
    size_t nfr, capfr;
    CUdeviceptr tail;      /* scratch of sg_arena_alloc: see scan_seg */
} seg;

struct sg_arena {
    sg_arena_ops ops;
    size_t gran, resv;
    seg *segs;
    size_t nsegs, capsegs;
    pend *pends;
    uint64_t seq;
    size_t mapped;
};

const char *sg_arena_fail_name(sg_arena_fail f)
{
    static const char *const names[] = { "none", "cuMemAddressReserve", "cuMemCreate", "cuMemMap",
                                         "cuMemSetAccess", "out of host memory" };
    return (unsigned)f < sizeof names / sizeof *names ? names[f] : "?";
}

static size_t round_up(size_t v, size_t q) { return (v + q - 1) / q * q; }

/* Makes room for `need` elements of `elem` bytes in *v. 0 or -1 (unchanged). */
static int grow_array(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 8;
    while (ncap < need) ncap *= 2;
    void *nv = realloc(*v, ncap * elem);
    if (!nv) return -1;
    *v = nv;
    *cap = ncap;
    return 0;
}

static int key_eq(sg_arena_key a, sg_arena_key b)
{
    return a.stream == b.stream && a.thread == b.thread;
}

static void pend_unref(sg_arena *a, pend *p)
{
    if (!p || --p->refs > 0) return;
    if (p->prev) p->prev->next = p->next; else a->pends = p->next;
    if (p->next) p->next->prev = p->prev;
    if (a->ops.event_put) a->ops.event_put(a->ops.user, p->event);
    free(p);
}

static int usable(const frange *r, sg_arena_key key)
{
    return !r->p || (key.stream != 0 && key_eq(r->p->key, key));
}

/* Two adjacent ranges may merge: both available, or pending for one stream
 * (the merged range keeps the later event, which completes after the other). */
static int mergeable(const frange *x, const frange *y)
{
    if (x->base + x->size != y->base) return 0;
    if (!x->p || !y->p) return !x->p && !y->p;
    return key_eq(x->p->key, y->p->key);
}

static void coalesce(sg_arena *a, seg *s)
{
    size_t out = 0;
    for (size_t i = 0; i < s->nfr; i++) {
        if (out > 0 && mergeable(&s->fr[out - 1], &s->fr[i])) {
            frange *m = &s->fr[out - 1], *r = &s->fr[i];
            if (m->p && m->p != r->p) {
                if (r->p->seq > m->p->seq) {   /* keep r's (later) event; its ref moves to m */
                    pend_unref(a, m->p);
                    m->p = r->p;
                } else {
                    pend_unref(a, r->p);
                }
            } else if (m->p) {
                pend_unref(a, r->p);           /* same pend twice: one ref goes */
            }
            m->size += r->size;
        } else {
            s->fr[out++] = s->fr[i];
        }
    }
    s->nfr = out;
}

/* Pending ranges whose event completed become available. */
static void reap(sg_arena *a)
{
    int any = 0;
    for (pend *p = a->pends; p; p = p->next)
        if (!p->done && a->ops.event_done && a->ops.event_done(a->ops.user, p->event))
            any = p->done = 1;
    if (!any) return;
    for (size_t k = 0; k < a->nsegs; k++) {
        seg *s = &a->segs[k];
        for (size_t i = 0; i < s->nfr; i++) {
            pend *p = s->fr[i].p;
            if (p && p->done) {
                s->fr[i].p = NULL;
                pend_unref(a, p);
            }
        }
        coalesce(a, s);
    }
}

/* Removes [addr, addr+len) from s's free ranges; every range it touches is
 * free and usable (the scan found it so). Remnants keep their tags.
 * 0, or -1 if out of memory (nothing changed). */
static int carve(sg_arena *a, seg *s, CUdeviceptr addr, size_t len)
{
    if (grow_array((void **)&s->fr, &s->capfr, s->nfr + 1, sizeof *s->fr) != 0) return -1;
    CUdeviceptr end = addr + len;
    size_t i = 0;
    while (i < s->nfr && s->fr[i].base + s->fr[i].size <= addr) i++;
    size_t j = i;
    while (j < s->nfr && s->fr[j].base < end) j++;
    frange rem[2];
    size_t nrem = 0;
    if (s->fr[i].base < addr) {
        rem[nrem++] = (frange){ s->fr[i].base, (size_t)(addr - s->fr[i].base), s->fr[i].p };
    }
    frange *last = &s->fr[j - 1];
    if (last->base + last->size > end) {
        rem[nrem++] = (frange){ end, (size_t)(last->base + last->size - end), last->p };
    }
    for (size_t k = 0; k < nrem; k++)
        if (rem[k].p) rem[k].p->refs++;
    for (size_t k = i; k < j; k++) pend_unref(a, s->fr[k].p);
    memmove(&s->fr[i + nrem], &s->fr[j], (s->nfr - j) * sizeof *s->fr);
    memcpy(&s->fr[i], rem, nrem * sizeof *rem);
    s->nfr = s->nfr - (j - i) + nrem;
    return 0;
}

/* Inserts a free range in address order (no coalescing). 0 or -1. */
static int insert_range(seg *s, frange r)
{
    if (grow_array((void **)&s->fr, &s->capfr, s->nfr + 1, sizeof *s->fr) != 0) return -1;
    size_t i = s->nfr;
    while (i > 0 && s->fr[i - 1].base > r.base) i--;
    memmove(&s->fr[i + 1], &s->fr[i], (s->nfr - i) * sizeof *s->fr);
    s->fr[i] = r;
    s->nfr++;
    return 0;
}

/* For own-handle blocks: the first granule-aligned address in [rs, re)
 * where whole chunks cover exactly [x, x+S). 0 if none. */
static CUdeviceptr own_fit(const seg *s, CUdeviceptr rs, CUdeviceptr re, size_t S)
{
    for (size_t k = 0; k < s->nch; k++) {
        CUdeviceptr x = s->ch[k].va, e = x;
        if (x < rs) continue;
        if (x + S > re) break;
        for (size_t j = k; j < s->nch && e < x + S; j++) e += s->ch[j].size;
        if (e == x + S) return x;
    }
    return 0;
}

/* First fit in segment s for key; returns the address or 0. Sets s->tail:
 * the start of the usable run ending at the mapped end (0 if none). */
static CUdeviceptr scan_seg(seg *s, size_t size, int own, size_t S, sg_arena_key key)
{
    CUdeviceptr mend = s->base + s->mapped;
    s->tail = 0;
    size_t i = 0;
    while (i < s->nfr) {
        if (!usable(&s->fr[i], key)) { i++; continue; }
        CUdeviceptr rs = s->fr[i].base, re = rs + s->fr[i].size;
        size_t j = i + 1;
        while (j < s->nfr && s->fr[j].base == re && usable(&s->fr[j], key)) {
            re += s->fr[j].size;
            j++;
        }
        if (own) {
            CUdeviceptr x = own_fit(s, rs, re, S);
            if (x) return x;
        } else if (re - rs >= size) {
            return rs;   /* every range starts on an SG_ARENA_ALIGN boundary */
        }
        if (re == mend) s->tail = rs;
        i = j;
    }
    return 0;
}

/* Creates, maps and opens one chunk of `len` bytes at the end of s's mapped
 * prefix, and adds it as an available free range. Nothing changed on failure. */
static sg_arena_fail grow_seg(sg_arena *a, seg *s, size_t len, CUresult *rc)
{
    const sg_arena_ops *o = &a->ops;
    CUdeviceptr va = s->base + s->mapped;
    CUmemGenericAllocationHandle h;
    if (grow_array((void **)&s->ch, &s->capch, s->nch + 1, sizeof *s->ch) != 0 ||
        grow_array((void **)&s->fr, &s->capfr, s->nfr + 1, sizeof *s->fr) != 0)
        return SG_ARENA_FAIL_NOMEM;
    if ((*rc = o->create(o->user, len, &h)) != CUDA_SUCCESS) return SG_ARENA_FAIL_CREATE;
    if ((*rc = o->map(o->user, va, len, h)) != CUDA_SUCCESS) {
        o->release(o->user, h);
        return SG_ARENA_FAIL_MAP;
    }
    if ((*rc = o->set_access(o->user, va, len)) != CUDA_SUCCESS) {
        o->unmap(o->user, va, len);
        o->release(o->user, h);
        return SG_ARENA_FAIL_SET_ACCESS;
    }
    s->ch[s->nch++] = (sg_arena_chunk){ va, len, h };
    s->mapped += len;
    a->mapped += len;
    insert_range(s, (frange){ va, len, NULL });   /* room made above */
    coalesce(a, s);
    return SG_ARENA_OK;
}

static sg_arena_fail new_seg(sg_arena *a, size_t size, CUresult *rc)
{
    if (grow_array((void **)&a->segs, &a->capsegs, a->nsegs + 1, sizeof *a->segs) != 0)
        return SG_ARENA_FAIL_NOMEM;
    size_t rsize = a->resv > size ? a->resv : size;
    CUdeviceptr base;
    if ((*rc = a->ops.reserve(a->ops.user, rsize, a->gran, &base)) != CUDA_SUCCESS)
        return SG_ARENA_FAIL_RESERVE;
    a->segs[a->nsegs++] = (seg){ .base = base, .size = rsize };
    return SG_ARENA_OK;
}

static void drop_last_seg(sg_arena *a)
{
    seg *s = &a->segs[--a->nsegs];
    a->ops.unreserve(a->ops.user, s->base, s->size);
    free(s->ch);
    free(s->fr);
}

sg_arena *sg_arena_new(const sg_arena_ops *ops, size_t granularity, size_t resv_size)
{
    sg_arena *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->ops = *ops;
    a->gran = granularity;
    a->resv = round_up(resv_size ? resv_size : granularity, granularity);
    return a;
}

void sg_arena_destroy(sg_arena *a)
{
    if (!a) return;
    for (size_t k = 0; k < a->nsegs; k++) {
        seg *s = &a->segs[k];
        for (size_t i = 0; i < s->nch; i++) {
            a->ops.unmap(a->ops.user, s->ch[i].va, s->ch[i].size);
            a->ops.release(a->ops.user, s->ch[i].handle);
        }
        a->ops.unreserve(a->ops.user, s->base, s->size);
        free(s->ch);
        free(s->fr);
    }
    while (a->pends) {
        pend *p = a->pends;
        a->pends = p->next;
        if (a->ops.event_put) a->ops.event_put(a->ops.user, p->event);
        free(p);
    }
    free(a->segs);
    free(a);
}

sg_arena_fail sg_arena_alloc(sg_arena *a, size_t size, int own, sg_arena_key key,
                             CUdeviceptr *addr, size_t *placed, CUresult *rc)
{
    *rc = CUDA_SUCCESS;
    size_t need = own ? round_up(size, a->gran) : round_up(size, SG_ARENA_ALIGN);
    if (need < size) return SG_ARENA_FAIL_NOMEM;   /* overflow */
    reap(a);

    seg *s = NULL;
    CUdeviceptr at = 0;
    for (size_t k = 0; k < a->nsegs && !at; k++) {
        s = &a->segs[k];
        at = scan_seg(s, need, own, need, key);
    }
    if (!at) {
        /* Grow the mapped prefix of the first segment (creation order) with
         * room for it, or start a new segment. The block starts at the usable
         * run that ends at the mapped end, if any (only the missing bytes are
         * mapped); an own-handle block starts at the mapped end, on fresh
         * chunks. */
        int fresh = 0;
        sg_arena_fail f;
        size_t grow = 0;
        for (size_t k = 0; k < a->nsegs && !at; k++) {
            s = &a->segs[k];
            CUdeviceptr mend = s->base + s->mapped;
            CUdeviceptr start = (!own && s->tail) ? s->tail : mend;
            grow = round_up(start + need - mend, a->gran);
            if (grow <= s->size - s->mapped) at = start;
        }
        if (!at) {
            if ((f = new_seg(a, round_up(need, a->gran), rc)) != SG_ARENA_OK) return f;
            s = &a->segs[a->nsegs - 1];
            at = s->base;
            grow = round_up(need, a->gran);
            fresh = 1;
        }
        if ((f = grow_seg(a, s, grow, rc)) != SG_ARENA_OK) {
            if (fresh) drop_last_seg(a);
            return f;
        }
    }
    if (carve(a, s, at, need) != 0) return SG_ARENA_FAIL_NOMEM;
    *addr = at;
    *placed = need;
    return SG_ARENA_OK;
}

static seg *seg_of(const sg_arena *a, CUdeviceptr p)
{
    for (size_t k = 0; k < a->nsegs; k++)
        if (p >= a->segs[k].base && p - a->segs[k].base < a->segs[k].size) return &a->segs[k];
    return NULL;
}

int sg_arena_free(sg_arena *a, CUdeviceptr addr, size_t placed, sg_arena_key key, void *event)
{
    seg *s = seg_of(a, addr);
    if (!s) return -1;
    pend *p = NULL;
    if (event) {
        if (!(p = calloc(1, sizeof *p))) return -1;
        *p = (pend){ .event = event, .key = key, .seq = ++a->seq, .refs = 1, .next = a->pends };
        if (a->pends) a->pends->prev = p;
        a->pends = p;
    }
    if (insert_range(s, (frange){ addr, placed, p }) != 0) {
        if (p) pend_unref(a, p);   /* puts the event back */
        return -1;
    }
    coalesce(a, s);
    return 0;
}

int sg_arena_contains(const sg_arena *a, CUdeviceptr p) { return seg_of(a, p) != NULL; }

size_t sg_arena_chunks(const sg_arena *a, CUdeviceptr addr, size_t len, sg_arena_chunk *out,
                       size_t max)
{
    const seg *s = seg_of(a, addr);
    size_t n = 0;
    for (size_t i = 0; s && i < s->nch; i++) {
        const sg_arena_chunk *c = &s->ch[i];
        if (c->va + c->size <= addr || c->va >= addr + len) continue;
        if (n < max) out[n] = *c;
        n++;
    }
    return n;
}

size_t sg_arena_mapped(const sg_arena *a) { return a->mapped; }
size_t sg_arena_segments(const sg_arena *a) { return a->nsegs; }

size_t sg_arena_free_ranges(const sg_arena *a)
{
    size_t n = 0;
    for (size_t k = 0; k < a->nsegs; k++) n += a->segs[k].nfr;
    return n;
}
