/*
 * core/arena_internal.h: the representation of an arena (arena.c's model,
 * arena.h), shared by arena.c, which changes it, and arena_query.c, which
 * only reads it. Private to those two files.
 */
#ifndef SG_ARENA_INTERNAL_H
#define SG_ARENA_INTERNAL_H

#include "arena.h"
#include "blocked.h"

#include <stdint.h>

struct chain;

typedef struct pend {
    void *event;
    sg_arena_key key;      /* stream == 0: its stream is gone; only the event frees it */
    uint64_t seq;          /* order of the frees: a later event implies earlier ones on a stream */
    int refs;              /* free ranges tagged with it */
    int done;              /* event_done said yes (reap then frees it) */
    struct chain *ch;      /* the chain it waits in (NULL once done) */
    struct pend *knext, *kprev;
} pend;

/* The pends of one freeing stream not yet done, oldest first: their events
 * complete in order, so reap asks the oldest of each chain only. Every live
 * pend is in a chain: one leaves its chain when done, and reap frees it in
 * the same call (its ranges cleared). */
typedef struct chain {
    sg_arena_key key;      /* the stream's; stream 0 once rekeyed (no new pend joins) */
    pend *head, *tail;
    struct chain *next;
} chain;

typedef struct frange {
    CUdeviceptr base;
    size_t size;
    pend *p;
    int mapped;
} frange;

/* A segment's free ranges, in address order, are kept in a blocked sorted
 * array (blocked.h) of at most SG_FR_BLOCK ranges per block, keyed by
 * their end: an insertion or removal moves the ranges of its block only,
 * so that a change far below the top of the used memory costs the same as
 * one near it (a flat array moved every range above the change, and the
 * index rebuilt its figures above it: 2,000 steps that took and gave back
 * the lowest of 100,000 holes took 1,092 ms against the driver's 49 ms,
 * tests/stress/scale_prog lowhole, docs/design.md). A position is a block
 * and an offset in it; the end is (nbk, 0).
 *
 * The index's figures for a block (arena_index.c), in the block's header:
 * the largest bytes of adjacent ranges inside the block, over all of them
 * and over the mapped ones; SIZE_MAX when its last range touches the next
 * block's first. */
#define SG_FR_BLOCK SG_ARENA_FR_BLOCK
#define SG_IX_GROUP 64   /* blocks per group, the index's second level */
typedef struct ixblk {
    size_t any, mapped;
} ixblk;

typedef struct ixhead {   /* a block's header */
    int stale;             /* fig is not current */
    ixblk fig;
} ixhead;

typedef struct ixgrp {
    ixblk fig;             /* the largest of its blocks' figures, when not stale */
    int stale;
} ixgrp;

typedef sg_bpos frpos;

typedef struct seg {
    CUdeviceptr base;
    size_t size;
    sg_arena_chunk *ch;    /* sorted by va, one granule each */
    size_t nch, capch;
    sg_blocked fr;         /* the free ranges (sg_fr_kind; sg_fr_init) */
    ixgrp *ixg;            /* per group of SG_IX_GROUP blocks */
    size_t capixg;
} seg;

struct sg_arena {
    sg_arena_ops ops;
    size_t gran, resv;
    size_t align;          /* of ordinary blocks (sg_arena_new) */
    seg *segs;
    size_t nsegs, capsegs;
    chain *chains;         /* one per stream with pends not done: every live pend */
    uint64_t seq;
    size_t mapped;
    int linear;            /* tests: the scan visits every range (sg_arena_set_linear) */
};

/* The reservation holding p, or NULL. */
static inline seg *seg_of(const sg_arena *a, CUdeviceptr p)
{
    for (size_t k = 0; k < a->nsegs; k++)
        if (p >= a->segs[k].base && p - a->segs[k].base < a->segs[k].size) return &a->segs[k];
    return NULL;
}

/* Index of the chunk at va, or of where it would go. */
static inline size_t ch_index(const seg *s, CUdeviceptr va)
{
    size_t lo = 0, hi = s->nch;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->ch[mid].va < va) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* The key of a free range: its end (the ranges do not overlap). */
static inline uint64_t sg_fr_key(const void *e)
{
    const frange *r = e;
    return r->base + r->size;
}

static inline frange *fr_at(const seg *s, frpos p) { return (frange *)sg_blocked_elems(&s->fr, p.b) + p.o; }
static inline frpos fr_next(const seg *s, frpos p) { return sg_blocked_next(&s->fr, p); }
/* The position before p (p not the first), or the last one for the end. */
static inline frpos fr_prev(const seg *s, frpos p) { return sg_blocked_prev(&s->fr, p); }
static inline int fr_end(const seg *s, frpos p) { return sg_blocked_is_end(&s->fr, p); }

/* The first free range whose end is > addr, or the end. */
static inline frpos sg_fr_find(const seg *s, CUdeviceptr addr)
{
    return sg_blocked_upper_by(&s->fr, addr, sg_fr_key, sizeof(frange));
}

/* s's free ranges, empty (a new segment). */
void sg_fr_init(seg *s);
/* Makes sure the next two sg_fr_insert calls need no memory. 0, or -1. */
int sg_fr_reserve(seg *s);
/* Inserts r at p (the ranges from p on follow it); sg_fr_reserve first. */
static inline void sg_fr_insert(seg *s, frpos p, frange r) { sg_blocked_insert_reserved(&s->fr, p, &r); }
/* Removes the range at p (a later position may then name another range). */
static inline void sg_fr_remove(seg *s, frpos p) { sg_blocked_erase(&s->fr, p); }
/* The range at p changed its size or mapped state: the index's figures of
 * its block, and of the block before (whose last range may touch it), are
 * stale. Tags (pending or not) are not in the figures. */
static inline void sg_fr_touch(seg *s, frpos p) { sg_blocked_touch(&s->fr, p.b); }
/* Frees the blocks and the index. */
void sg_fr_free(seg *s);

/* From position p of s, where the first-fit scan is about to start a run:
 * the first position from which a run of `need` bytes may start (p itself
 * unless p begins blocks that certainly hold none; the end if none is
 * left). mapped_only: the scan accepts mapped ranges only. */
frpos sg_arena_ix_skip(seg *s, frpos p, size_t need, int mapped_only);

#endif
