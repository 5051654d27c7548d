/*
 * core/arena_internal.h: the representation of an arena (arena.c's model,
 * arena.h), shared by arena.c, which changes it, and arena_query.c, which
 * only reads it. Private to those two files.
 */
#ifndef SG_ARENA_INTERNAL_H
#define SG_ARENA_INTERNAL_H

#include "arena.h"

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

/* A segment's free ranges, in address order, are kept in blocks of at
 * most SG_FR_BLOCK ranges each (arena_index.c): an insertion or removal
 * moves the ranges of its block only, a full block splits in two, and a
 * block left empty or nearly so goes or merges with a neighbour, so that a
 * change far below the top of the used memory costs the same as one near
 * it (a flat array moved every range above the change, and the index
 * rebuilt its figures above it: 2,000 steps that took and gave back the
 * lowest of 100,000 holes took 1,092 ms against the driver's 49 ms,
 * tests/stress/scale_prog lowhole, docs/design.md). A position is a block
 * and an offset in it; the end is (nbk, 0).
 *
 * The index's figures for a block (arena_index.c): the largest bytes of
 * adjacent ranges inside the block, over all of them and over the mapped
 * ones; SIZE_MAX when its last range touches the next block's first. */
#define SG_FR_BLOCK SG_ARENA_FR_BLOCK
#define SG_IX_GROUP 64   /* blocks per group, the index's second level */
typedef struct ixblk {
    size_t any, mapped;
} ixblk;

typedef struct frblk {
    size_t n;
    int stale;             /* fig is not current */
    ixblk fig;
    frange r[SG_FR_BLOCK];
} frblk;

typedef struct ixgrp {
    ixblk fig;             /* the largest of its blocks' figures, when not stale */
    int stale;
} ixgrp;

typedef struct frpos {
    size_t b, o;
} frpos;

typedef struct seg {
    CUdeviceptr base;
    size_t size;
    sg_arena_chunk *ch;    /* sorted by va, one granule each */
    size_t nch, capch;
    frblk **bk;            /* the free ranges' blocks, in address order, none empty */
    size_t nbk, capbk, nfr;
    frblk *spare[2];       /* for the splits of the next two insertions (fr_reserve) */
    ixgrp *ixg;            /* per group of SG_IX_GROUP blocks */
    size_t capixg;
} seg;

struct sg_arena {
    sg_arena_ops ops;
    size_t gran, resv;
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

static inline frange *fr_at(const seg *s, frpos p) { return &s->bk[p.b]->r[p.o]; }

static inline frpos fr_next(const seg *s, frpos p)
{
    return p.o + 1 < s->bk[p.b]->n ? (frpos){ p.b, p.o + 1 } : (frpos){ p.b + 1, 0 };
}

/* The position before p (p not the first), or the last one for the end. */
static inline frpos fr_prev(const seg *s, frpos p)
{
    return p.o ? (frpos){ p.b, p.o - 1 } : (frpos){ p.b - 1, s->bk[p.b - 1]->n - 1 };
}

/* The first free range whose end is > addr, or the end. */
frpos sg_fr_find(const seg *s, CUdeviceptr addr);
/* Makes sure the next two sg_fr_insert calls need no memory. 0, or -1. */
int sg_fr_reserve(seg *s);
/* Inserts r at p (the ranges from p on follow it); sg_fr_reserve first. */
void sg_fr_insert(seg *s, frpos p, frange r);
/* Removes the range at p (a later position may then name another range). */
void sg_fr_remove(seg *s, frpos p);
/* The range at p changed its size or mapped state: the index's figures of
 * its block, and of the block before (whose last range may touch it), are
 * stale. Tags (pending or not) are not in the figures. */
void sg_fr_touch(seg *s, frpos p);
/* Block b's ranges changed (their count too): as sg_fr_touch. */
void sg_fr_touch_block(seg *s, size_t b);
/* Removes the empty blocks (after a pass that merged ranges in place). */
void sg_fr_drop_empty(seg *s);
/* Frees the blocks and the index. */
void sg_fr_free(seg *s);

/* From position p of s, where the first-fit scan is about to start a run:
 * the first position from which a run of `need` bytes may start (p itself
 * unless p begins blocks that certainly hold none; the end if none is
 * left). mapped_only: the scan accepts mapped ranges only. */
frpos sg_arena_ix_skip(seg *s, frpos p, size_t need, int mapped_only);

#endif
