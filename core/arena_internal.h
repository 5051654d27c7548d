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

/* The index's figures for one block of SG_IX_BLOCK free ranges
 * (arena_index.c): the largest bytes of adjacent ranges inside the block,
 * over all of them and over the mapped ones; SIZE_MAX when its last range
 * touches the next block's first. */
#define SG_IX_BLOCK 64
#define SG_IX_GROUP 64   /* blocks per group, the index's second level */
typedef struct ixblk {
    size_t any, mapped;
} ixblk;

typedef struct seg {
    CUdeviceptr base;
    size_t size;
    sg_arena_chunk *ch;    /* sorted by va, one granule each */
    size_t nch, capch;
    frange *fr;            /* sorted by base */
    size_t nfr, capfr;
    ixblk *ix;             /* per block of fr; the first ixok blocks' figures are current */
    ixblk *ixg;            /* per group of blocks; current where all its blocks are */
    size_t ixok, capix, capixg;
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

/* Range i of s changed (its size or mapped state), or ranges were inserted
 * or removed at i (every later one moved): the index's figures from the
 * block that holds i - 1 (whose last range may have touched i) on are
 * stale. Tags (pending or not) are not in the figures. */
static inline void ix_touch(seg *s, size_t i)
{
    size_t b = (i ? i - 1 : 0) / SG_IX_BLOCK;
    if (b < s->ixok) s->ixok = b;
}

/* From index i of s, where the first-fit scan is about to start a run: the
 * first index from which a run of `need` bytes may start (i itself unless
 * i begins blocks that certainly hold none; s->nfr or more if none is
 * left). mapped_only: the scan accepts mapped ranges only. */
size_t sg_arena_ix_skip(seg *s, size_t i, size_t need, int mapped_only);

#endif
