/*
 * core/arena.c: deterministic first-fit placement over VA reservations,
 * mapped one granule at a time (see arena.h for the model and the
 * guarantees).
 *
 * Representation: per segment, a sorted array of chunks (one per mapped
 * granule) and a sorted array of free ranges covering every byte of the
 * segment that no block uses. A free range is either wholly mapped or wholly
 * unmapped (`mapped`), and is available to everyone (p == NULL) or pending: p
 * is the event recorded when a stream-ordered free happened, with the
 * freeing stream's key and a reference count (a pending range split by a
 * carve shares its pend). Adjacent ranges with the same mapped state and
 * compatible tags are coalesced. An unmapped granule is always wholly free
 * and available (blocks only live on mapped granules; trim only unmaps what
 * is available). The free ranges are kept in a blocked sorted array of at
 * most SG_FR_BLOCK per block (blocked.h, arena_index.c), so that an
 * insertion or removal moves the ranges of one block. A free merges with
 * its neighbours only; the first-fit scan is a pass over one segment's
 * ranges that skips, by arena_index.c's index, whole blocks of ranges too
 * small for the block (every change below marks the figures of its block
 * stale: sg_fr_touch, and the container's notes).
 * Pending frees also wait in a chain per freeing stream (reap). The
 * structures are in arena_internal.h; what only reads them, in arena_query.c.
 *
 * No locking here: the caller serialises every call on one arena (arena.h).
 */
#include "arena_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

static int key_eq(sg_arena_key a, sg_arena_key b)
{
    return a.stream == b.stream && a.thread == b.thread;
}

/* Takes p out of its chain (done, or freed before), and an emptied chain
 * out of the arena. */
static void chain_unlink(sg_arena *a, pend *p)
{
    chain *c = p->ch;
    if (!c) return;
    if (p->kprev) p->kprev->knext = p->knext; else c->head = p->knext;
    if (p->knext) p->knext->kprev = p->kprev; else c->tail = p->kprev;
    p->ch = NULL;
    p->knext = p->kprev = NULL;
    if (c->head) return;
    chain **pp = &a->chains;
    while (*pp != c) pp = &(*pp)->next;
    *pp = c->next;
    free(c);
}

/* Appends p to the chain of its stream (a new one if none). -1 if out of
 * memory (p in none). */
static int chain_add(sg_arena *a, pend *p)
{
    chain *c = a->chains;
    while (c && !(c->key.stream && key_eq(c->key, p->key))) c = c->next;
    if (!c) {
        if (!(c = calloc(1, sizeof *c))) return -1;
        c->key = p->key;
        c->next = a->chains;
        a->chains = c;
    }
    p->ch = c;
    p->kprev = c->tail;
    if (c->tail) c->tail->knext = p; else c->head = p;
    c->tail = p;
    return 0;
}

static void pend_unref(sg_arena *a, pend *p)
{
    if (!p || --p->refs > 0) return;
    chain_unlink(a, p);
    if (a->ops.event_put) a->ops.event_put(a->ops.user, p->event);
    free(p);
}

static int usable(const frange *r, sg_arena_key key)
{
    return !r->p || (key.stream != 0 && key_eq(r->p->key, key));
}

/* Two adjacent ranges may merge: same mapped state, and both available or
 * pending for one live stream (the merged range keeps the later event, which
 * completes after the other: events of one stream complete in order). */
static int mergeable(const frange *x, const frange *y)
{
    if (x->base + x->size != y->base || x->mapped != y->mapped) return 0;
    if (!x->p || !y->p) return !x->p && !y->p;
    return x->p->key.stream != 0 && key_eq(x->p->key, y->p->key);
}

/* m absorbs r, the range right after it (mergeable): r's bytes, and of the
 * two pends the later one (whose event completes after the other's). */
static void absorb(sg_arena *a, frange *m, const frange *r)
{
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
}

/* Merges the mergeable neighbours among the ranges from the one before the
 * first that ends above lo up to the first whose base is above hi (the
 * ranges outside them were coalesced and stay so). */
static void coalesce_around(sg_arena *a, seg *s, CUdeviceptr lo, CUdeviceptr hi)
{
    if (!sg_blocked_count(&s->fr)) return;
    frpos p = sg_fr_find(s, lo);
    if (!sg_blocked_is_first(p)) p = fr_prev(s, p);
    for (;;) {
        frpos q = fr_next(s, p);
        if (fr_end(s, q)) return;
        frange *x = fr_at(s, p);
        if (x->base > hi) return;
        if (!mergeable(x, fr_at(s, q))) {
            p = q;
            continue;
        }
        CUdeviceptr xb = x->base;
        absorb(a, x, fr_at(s, q));
        sg_fr_touch(s, p);
        sg_fr_remove(s, q);       /* blocks may merge: find x again */
        p = sg_fr_find(s, xb);
    }
}

/* Merges every mergeable pair of neighbours of s, in place (each block
 * keeps its place; those emptied go). */
static void coalesce(sg_arena *a, seg *s)
{
    frange *prev = NULL;           /* the last range kept so far */
    size_t prevb = 0;
    for (size_t b = 0; b < s->fr.nbk; b++) {
        size_t n, out = 0;
        frange *k = sg_blocked_block(&s->fr, b, &n);
        for (size_t i = 0; i < n; i++) {
            if (prev && mergeable(prev, &k[i])) {
                absorb(a, prev, &k[i]);
                sg_blocked_touch(&s->fr, prevb);
                continue;
            }
            k[out] = k[i];
            prev = &k[out++];
            prevb = b;
        }
        sg_blocked_set_count(&s->fr, b, out);
    }
    sg_blocked_drop_empty(&s->fr);
}

/* Pending ranges whose event completed become available. Each stream's
 * chain is asked from its oldest pend, and once one is not complete its
 * later ones are not asked (events of one stream complete in order): frees
 * piled up behind a stream that waits cost one query per stream at every
 * allocation, and no visit of each (4,000 frees pending on a waiting stream
 * made 4,000 allocations 30 times slower than the driver's, and a walk of
 * every pend per allocation still several times: tests/e2e/adv_pools.c,
 * many_pending). */
static void reap(sg_arena *a)
{
    int any = 0;
    if (!a->ops.event_done) return;
    for (chain *c = a->chains, *nx; c; c = nx) {
        nx = c->next;
        pend *p;
        while ((p = c->head) && a->ops.event_done(a->ops.user, p->event)) {
            int last = p == c->tail;
            any = p->done = 1;
            chain_unlink(a, p);    /* the last one frees c */
            if (last) break;
        }
    }
    if (!any) return;
    for (size_t k = 0; k < a->nsegs; k++) {
        seg *s = &a->segs[k];
        for (size_t b = 0; b < s->fr.nbk; b++) {
            size_t n;
            frange *k = sg_blocked_block(&s->fr, b, &n);
            for (size_t i = 0; i < n; i++) {
                frange *r = &k[i];
                if (r->p && r->p->done) {
                    pend_unref(a, r->p);
                    r->p = NULL;
                }
            }
        }
        coalesce(a, s);
    }
}

/* Makes sure no free range straddles addr. 0, or -1 if out of memory. */
static int split_at(seg *s, CUdeviceptr addr)
{
    frpos p = sg_fr_find(s, addr);
    if (fr_end(s, p) || fr_at(s, p)->base >= addr) return 0;
    if (sg_fr_reserve(s) != 0) return -1;
    frange *r = fr_at(s, p), hi = *r;
    r->size = (size_t)(addr - r->base);
    sg_fr_touch(s, p);
    hi.size -= r->size;
    hi.base = addr;
    if (hi.p) hi.p->refs++;
    sg_fr_insert(s, fr_next(s, p), hi);
    return 0;
}

/* Marks the free parts of [lo, hi) mapped or not. 0, or -1 if out of memory
 * (nothing changed that matters: a split range is still one range's worth). */
static int set_mapped(sg_arena *a, seg *s, CUdeviceptr lo, CUdeviceptr hi, int mapped)
{
    if (split_at(s, lo) != 0 || split_at(s, hi) != 0) return -1;
    for (frpos p = sg_fr_find(s, lo); !fr_end(s, p) && fr_at(s, p)->base < hi; p = fr_next(s, p)) {
        /* only a range that changes: a block placed among many holes of
         * one granule would otherwise make the index rebuild them all */
        if (fr_at(s, p)->mapped != mapped) sg_fr_touch(s, p);
        fr_at(s, p)->mapped = mapped;
    }
    coalesce_around(a, s, lo, hi);   /* the marked ranges and a neighbour each side */
    return 0;
}

/* Inserts a free range in address order (no coalescing; room reserved). */
static void insert_reserved(seg *s, frange r) { sg_fr_insert(s, sg_fr_find(s, r.base), r); }

/* Removes [addr, addr+len) from s's free ranges; every range it touches is
 * free and usable (the scan found it so). Remnants keep their tags.
 * 0, or -1 if out of memory (nothing changed). */
static int carve(sg_arena *a, seg *s, CUdeviceptr addr, size_t len)
{
    if (sg_fr_reserve(s) != 0) return -1;
    CUdeviceptr end = addr + len;
    frpos p = sg_fr_find(s, addr), q = p, last = p;
    for (; !fr_end(s, q) && fr_at(s, q)->base < end; q = fr_next(s, q)) last = q;
    const frange *f = fr_at(s, p), *l = fr_at(s, last);
    frange rem[2];
    size_t nrem = 0;
    if (f->base < addr) rem[nrem++] = (frange){ f->base, (size_t)(addr - f->base), f->p, f->mapped };
    if (l->base + l->size > end)
        rem[nrem++] = (frange){ end, (size_t)(l->base + l->size - end), l->p, l->mapped };
    for (size_t k = 0; k < nrem; k++)
        if (rem[k].p) rem[k].p->refs++;
    while (!fr_end(s, p = sg_fr_find(s, addr)) && fr_at(s, p)->base < end) {
        pend_unref(a, fr_at(s, p)->p);
        sg_fr_remove(s, p);
    }
    for (size_t k = 0; k < nrem; k++) insert_reserved(s, rem[k]);
    return 0;
}

/* Inserts a free range in address order (no coalescing): 0, or -1 if out
 * of memory. */
static int insert_range(seg *s, frange r)
{
    if (sg_fr_reserve(s) != 0) return -1;
    insert_reserved(s, r);
    return 0;
}

/* The lowest address x (a multiple of align) where `need` bytes fit in a run
 * of adjacent free ranges usable for key (all mapped, if mapped_only; any
 * free range, pending for another stream too, if claim); 0 if none. Each
 * run starts where the index leaves the scan (no run before fits). */
static CUdeviceptr scan_seg(const sg_arena *a, seg *s, size_t need, size_t align,
                            sg_arena_key key, int mapped_only, int claim)
{
    frpos p = { 0, 0 };
    while (!fr_end(s, p = a->linear ? p : sg_arena_ix_skip(s, p, need, mapped_only))) {
        const frange *r = fr_at(s, p);
        if (!(claim || usable(r, key)) || (mapped_only && !r->mapped)) {
            p = fr_next(s, p);
            continue;
        }
        CUdeviceptr rs = r->base, re = rs + r->size;
        frpos q = fr_next(s, p);
        for (; !fr_end(s, q); q = fr_next(s, q)) {
            const frange *n = fr_at(s, q);
            if (n->base != re || !(claim || usable(n, key)) || (mapped_only && !n->mapped)) break;
            re += n->size;
        }
        CUdeviceptr x = (rs + align - 1) / align * align;
        if (x >= rs && x + need <= re && x + need > x) return x;
        p = q;
    }
    return 0;
}

static void chunk_drop(sg_arena *a, seg *s, size_t i)
{
    a->ops.unmap(a->ops.user, s->ch[i].va, s->ch[i].size);
    a->ops.release(a->ops.user, s->ch[i].handle);
    a->mapped -= s->ch[i].size;
    memmove(&s->ch[i], &s->ch[i + 1], (s->nch - i - 1) * sizeof *s->ch);
    s->nch--;
}

/* Maps every granule of [lo, hi) (granule-aligned) that is not mapped yet.
 * On failure the granules mapped here are given back: nothing changed.
 * More than one to map: first asks ops.room, so that a block the device
 * cannot hold fails at once instead of taking the device's memory chunk
 * by chunk (other threads' and processes' allocations failing meanwhile). */
static sg_arena_fail map_granules(sg_arena *a, seg *s, CUdeviceptr lo, CUdeviceptr hi, CUresult *rc)
{
    const sg_arena_ops *o = &a->ops;
    if (o->room) {
        size_t fresh = 0;
        for (CUdeviceptr g = lo; g < hi; g += a->gran) {
            size_t i = ch_index(s, g);
            fresh += !(i < s->nch && s->ch[i].va == g);
        }
        if (fresh > 1 && !o->room(o->user, fresh * a->gran)) {
            *rc = CUDA_ERROR_OUT_OF_MEMORY;
            return SG_ARENA_FAIL_CREATE;
        }
    }
    CUdeviceptr *made = NULL;
    size_t nmade = 0, capmade = 0;
    sg_arena_fail f = SG_ARENA_OK;
    for (CUdeviceptr g = lo; g < hi && f == SG_ARENA_OK; g += a->gran) {
        size_t i = ch_index(s, g);
        if (i < s->nch && s->ch[i].va == g) continue;
        if (sg_grow((void **)&s->ch, &s->capch, s->nch + 1, sizeof *s->ch) != 0 ||
            sg_grow((void **)&made, &capmade, nmade + 1, sizeof *made) != 0) {
            f = SG_ARENA_FAIL_NOMEM;
            break;
        }
        CUmemGenericAllocationHandle h;
        if ((*rc = o->create(o->user, a->gran, &h)) != CUDA_SUCCESS) {
            f = SG_ARENA_FAIL_CREATE;
        } else if ((*rc = o->map(o->user, g, a->gran, h)) != CUDA_SUCCESS) {
            o->release(o->user, h);
            f = SG_ARENA_FAIL_MAP;
        } else if ((*rc = o->set_access(o->user, g, a->gran)) != CUDA_SUCCESS) {
            o->unmap(o->user, g, a->gran);
            o->release(o->user, h);
            f = SG_ARENA_FAIL_SET_ACCESS;
        } else {
            memmove(&s->ch[i + 1], &s->ch[i], (s->nch - i) * sizeof *s->ch);
            s->ch[i] = (sg_arena_chunk){ g, a->gran, h };
            s->nch++;
            a->mapped += a->gran;
            made[nmade++] = g;
        }
    }
    /* with no granule new, every free range in [lo, hi) is marked mapped
     * already (a granule with a chunk has only mapped free ranges), and a
     * pass over them would cost one step per hole in the granules the
     * block touches (4,096 holes of 256 bytes in a 2 MiB granule) */
    if (f == SG_ARENA_OK && nmade && set_mapped(a, s, lo, hi, 1) != 0) f = SG_ARENA_FAIL_NOMEM;
    if (f != SG_ARENA_OK)
        for (size_t k = 0; k < nmade; k++) chunk_drop(a, s, ch_index(s, made[k]));
    free(made);
    return f;
}

static sg_arena_fail new_seg(sg_arena *a, size_t need, CUresult *rc)
{
    if (sg_grow((void **)&a->segs, &a->capsegs, a->nsegs + 1, sizeof *a->segs) != 0)
        return SG_ARENA_FAIL_NOMEM;
    size_t rsize = sg_round_up(need, a->gran);
    if (!rsize) return SG_ARENA_FAIL_NOMEM;
    if (a->resv > rsize) rsize = a->resv;
    CUdeviceptr base;
    if ((*rc = a->ops.reserve(a->ops.user, rsize, a->gran, &base)) != CUDA_SUCCESS)
        return SG_ARENA_FAIL_RESERVE;
    seg *s = &a->segs[a->nsegs];
    *s = (seg){ .base = base, .size = rsize };
    sg_fr_init(s);
    if (insert_range(s, (frange){ base, rsize, NULL, 0 }) != 0) {
        sg_fr_free(s);
        a->ops.unreserve(a->ops.user, base, rsize);
        return SG_ARENA_FAIL_NOMEM;
    }
    a->nsegs++;
    return SG_ARENA_OK;
}

static void drop_last_seg(sg_arena *a)
{
    seg *s = &a->segs[--a->nsegs];
    a->ops.unreserve(a->ops.user, s->base, s->size);
    free(s->ch);
    sg_fr_free(s);
}

sg_arena *sg_arena_new(const sg_arena_ops *ops, size_t granularity, size_t align, size_t resv_size)
{
    if (align < SG_ARENA_ALIGN || align > granularity || (align & (align - 1))) return NULL;
    sg_arena *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->ops = *ops;
    a->gran = granularity;
    a->align = align;
    a->resv = sg_round_up(resv_size ? resv_size : granularity, granularity);
    return a;
}

void sg_arena_destroy(sg_arena *a, int put_events)
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
        sg_fr_free(s);
    }
    while (a->chains) {
        chain *c = a->chains;
        a->chains = c->next;
        for (pend *p = c->head, *nx; p; p = nx) {
            nx = p->knext;
            if (put_events && a->ops.event_put) a->ops.event_put(a->ops.user, p->event);
            free(p);
        }
        free(c);
    }
    free(a->segs);
    free(a);
}

sg_arena_fail sg_arena_alloc(sg_arena *a, size_t size, int own, sg_arena_key key,
                             CUdeviceptr *addr, size_t *placed, CUresult *rc)
{
    *rc = CUDA_SUCCESS;
    size_t align = own ? a->gran : a->align;
    size_t need = sg_round_up(size, align);
    if (!need) return SG_ARENA_FAIL_NOMEM;   /* overflow */
    reap(a);

    seg *s = NULL;
    CUdeviceptr at = 0;
    for (int pass = 1; pass <= 2 && !at; pass++)
        for (size_t k = 0; k < a->nsegs && !at; k++) {
            s = &a->segs[k];
            at = scan_seg(a, s, need, align, key, pass == 1, 0);
        }
    int fresh = 0;
    sg_arena_fail f;
    if (!at) {
        if ((f = new_seg(a, need, rc)) != SG_ARENA_OK) return f;
        s = &a->segs[a->nsegs - 1];
        at = s->base;
        fresh = 1;
    }
    CUdeviceptr lo = at / a->gran * a->gran;
    CUdeviceptr hi = (at + need + a->gran - 1) / a->gran * a->gran;
    if ((f = map_granules(a, s, lo, hi, rc)) != SG_ARENA_OK || carve(a, s, at, need) != 0) {
        if (f == SG_ARENA_OK) f = SG_ARENA_FAIL_NOMEM;
        if (fresh) {
            for (size_t i = s->nch; i-- > 0;) chunk_drop(a, s, i);
            drop_last_seg(a);
        }
        return f;
    }
    *addr = at;
    *placed = need;
    return SG_ARENA_OK;
}

sg_arena_fail sg_arena_alloc_claiming(sg_arena *a, size_t size, int own, sg_arena_key key,
                                      int (*wait)(void *arg, void *event), void *arg,
                                      CUdeviceptr *addr, size_t *placed)
{
    size_t align = own ? a->gran : a->align;
    size_t need = sg_round_up(size, align);
    if (!need || !key.stream) return SG_ARENA_FAIL_NOMEM;
    reap(a);
    for (size_t k = 0; k < a->nsegs; k++) {
        seg *s = &a->segs[k];
        CUdeviceptr at = scan_seg(a, s, need, align, key, 1, 1);
        if (!at) continue;
        /* the allocating stream waits for each other stream's free it
         * takes from (a pend split in several ranges is waited for again:
         * harmless); a wait refused leaves waits behind, for frees that
         * complete anyway, and nothing else */
        const pend *last = NULL;
        for (frpos p = sg_fr_find(s, at); !fr_end(s, p) && fr_at(s, p)->base < at + need;
             p = fr_next(s, p)) {
            const frange *r = fr_at(s, p);
            if (!r->p || usable(r, key) || r->p == last) continue;
            if (wait(arg, r->p->event) != 0) return SG_ARENA_FAIL_NOMEM;
            last = r->p;
        }
        if (carve(a, s, at, need) != 0) return SG_ARENA_FAIL_NOMEM;
        *addr = at;
        *placed = need;
        return SG_ARENA_OK;
    }
    return SG_ARENA_FAIL_NOMEM;
}

int sg_arena_free(sg_arena *a, CUdeviceptr addr, size_t placed, sg_arena_key key, void *event)
{
    seg *s = seg_of(a, addr);
    if (!s) return -1;
    pend *p = NULL;
    if (event) {
        if (!(p = calloc(1, sizeof *p))) return -1;
        *p = (pend){ .event = event, .key = key, .seq = ++a->seq, .refs = 1 };
        if (chain_add(a, p) != 0) {
            pend_unref(a, p);      /* puts the event back */
            return -1;
        }
    }
    if (insert_range(s, (frange){ addr, placed, p, 1 }) != 0) {
        if (p) pend_unref(a, p);   /* puts the event back */
        return -1;
    }
    coalesce_around(a, s, addr, addr);
    return 0;
}

/* 1 if chunk c of s is unused: one available free range covers all of it
 * (adjacent available ranges are coalesced, so a wholly free granule lies in
 * one range; one left split by a failed set_mapped reads as used, the safe
 * side), so no block and no pending free touches it. What trim may give
 * back, and all of the mapped memory a new block of any size can count on. */
static int chunk_unused(const seg *s, const sg_arena_chunk *c)
{
    frpos p = sg_fr_find(s, c->va);
    if (fr_end(s, p)) return 0;
    const frange *r = fr_at(s, p);
    return !r->p && r->base <= c->va && r->base + r->size >= c->va + c->size;
}

size_t sg_arena_trim(sg_arena *a, size_t at_most)
{
    size_t given = 0;
    reap(a);
    for (size_t k = a->nsegs; k-- > 0 && given < at_most;) {
        seg *s = &a->segs[k];
        for (size_t i = s->nch; i-- > 0 && given < at_most;) {
            CUdeviceptr va = s->ch[i].va;
            if (!chunk_unused(s, &s->ch[i])) continue;   /* a block or a pending free uses it */
            if (a->ops.unmap(a->ops.user, va, s->ch[i].size) != CUDA_SUCCESS) continue;
            a->ops.release(a->ops.user, s->ch[i].handle);
            size_t sz = s->ch[i].size;
            a->mapped -= sz;
            given += sz;
            memmove(&s->ch[i], &s->ch[i + 1], (s->nch - i - 1) * sizeof *s->ch);
            s->nch--;
            /* out of memory here leaves the range marked mapped: the next
             * allocation there maps the granule anew (map_granules checks the
             * chunks, not the flag) */
            (void)set_mapped(a, s, va, va + sz, 0);
        }
    }
    return given;
}

size_t sg_arena_pending(sg_arena *a)
{
    size_t n = 0;
    reap(a);
    for (const chain *c = a->chains; c; c = c->next)
        for (const pend *p = c->head; p; p = p->knext) n++;
    return n;
}

void sg_arena_rekey(sg_arena *a, sg_arena_key key)
{
    for (chain *c = a->chains; c; c = c->next) {  /* still in order; a new stream gets its own */
        if (!key_eq(c->key, key)) continue;
        c->key = (sg_arena_key){ 0, 0 };
        for (pend *p = c->head; p; p = p->knext) p->key = c->key;
    }
}

/* Only whole unused chunks count (the test trim uses): the free bytes of a
 * chunk a live block or a pending free still touches (a hole) serve no block
 * larger than the hole and cannot be given back, so counting them would make
 * cuMemGetInfo promise memory an allocation of that size cannot get. Pending
 * frees whose event completed are taken in first (reap): the driver's pool
 * gives freed memory back at a synchronization, so after cuMemFreeAsync and
 * a stream synchronization cuMemGetInfo counts it free (a const look left
 * those chunks used until the next allocation: tests/e2e/adv_pools.c,
 * meminfo_pending). */
size_t sg_arena_mapped_free(sg_arena *a)
{
    size_t n = 0;
    reap(a);
    for (size_t k = 0; k < a->nsegs; k++) {
        const seg *s = &a->segs[k];
        for (size_t i = 0; i < s->nch; i++)
            if (chunk_unused(s, &s->ch[i])) n += s->ch[i].size;
    }
    return n;
}

size_t sg_arena_fr_bad(const sg_arena *a)
{
    size_t bad = 0;
    for (size_t k = 0; k < a->nsegs; k++) {
        const seg *s = &a->segs[k];
        const frange *prev = NULL;
        bad += sg_blocked_bad(&s->fr);   /* blocks, order, count */
        for (size_t b = 0; b < s->fr.nbk; b++) {
            size_t n;
            const frange *x = sg_blocked_block(&s->fr, b, &n);
            for (size_t i = 0; i < n && i < SG_FR_BLOCK; i++) {
                const frange *r = &x[i];
                bad += r->size == 0 || r->base < s->base || r->base + r->size > s->base + s->size;
                if (prev) bad += prev->base + prev->size > r->base || mergeable(prev, r);
                if (!r->mapped) {   /* no chunk under an unmapped range (map_granules) */
                    size_t c = ch_index(s, r->base / a->gran * a->gran);
                    bad += c < s->nch && s->ch[c].va < r->base + r->size;
                }
                prev = r;
            }
        }
    }
    return bad;
}
