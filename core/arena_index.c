/*
 * core/arena_index.c: a segment's free ranges as a blocked sorted array
 * (blocked.h, the kind sg_fr_kind: reserved before each change, so that no
 * change fails midway), and what lets arena.c's first-fit scan skip whole
 * blocks of free ranges that cannot hold the block it places, so that a
 * placement costs about the same with 100,000 holes between live blocks as
 * with 1,000 (a pass over every range made 2,000 allocations there take
 * 1,062 ms against the emulated driver's 34: tests/stress/scale_prog holes,
 * docs/design.md). The addresses are those of the plain scan: the index
 * only ever says "nothing here", and the scan itself picks the range.
 *
 * A segment's free ranges are kept in blocks of at most SG_FR_BLOCK. For
 * each block the index keeps the largest number of bytes of a cluster of
 * adjacent ranges (each one starting where the one before ends) inside the
 * block, over all its ranges and over its mapped ones (arena_internal.h,
 * ixblk); a block whose last range touches the next block's first counts
 * as unbounded. For each group of SG_IX_GROUP blocks it keeps the largest
 * of its blocks' figures. Invariant: the figures of every block and group
 * not marked stale are the ones ix_figures and group_figures would compute
 * now.
 *
 * Why a block (or a group) below the size needed holds no place: the scan
 * takes runs of adjacent ranges that it accepts, and a run lies within one
 * cluster, so a run that starts inside the block, at its first range or
 * later, is no larger than the block's figure, whatever the key and the
 * pending tags. The figures ignore tags: they hold for every key, claims
 * included; a block with a large range pending for another stream is only
 * visited in vain.
 *
 * Kept lazily (the container's notes, fr_note): a change in a block marks
 * it and the block before stale (sg_fr_touch), with their groups; a split
 * or removal of a block, which renumbers the blocks after it, marks the
 * groups from there on stale (their blocks' figures stay). The scan rebuilds a stale group, and in it
 * the stale blocks, when it reaches one, so a step that frees or fills a
 * hole far below the top rebuilds a block or two and a group's 64
 * figures, whatever lies above. Memory: a header of 32 bytes per block of
 * 64 ranges (of 32 bytes each), and 24 per group.
 *
 * No locking here: the caller serialises every call on one arena (arena.h).
 */
#include "arena_internal.h"

#include "util.h"

#include <stddef.h>
#include <stdlib.h>

static int touches(const frange *x, const frange *y) { return x->base + x->size == y->base; }

/* ---- the blocks (blocked.h), their figures marked stale on each change ---- */

static seg *seg_of_fr(sg_blocked *c) { return (seg *)((char *)c - offsetof(seg, fr)); }
static ixhead *head(const seg *s, size_t b) { return sg_blocked_head(&s->fr, b); }

static void group_stale_from(seg *s, size_t b)
{
    for (size_t g = b / SG_IX_GROUP; g * SG_IX_GROUP < s->fr.nbk; g++) s->ixg[g].stale = 1;
}

static void block_stale(seg *s, size_t b)
{
    head(s, b)->stale = 1;
    s->ixg[b / SG_IX_GROUP].stale = 1;
}

/* Block b's ranges changed (their count too): its figures and those of the
 * block before (whose last range may touch its first) are stale. */
static void touch_block(seg *s, size_t b)
{
    block_stale(s, b);
    if (b) block_stale(s, b - 1);
}

static void fr_note(sg_blocked *c, int what, size_t b)
{
    seg *s = seg_of_fr(c);
    switch (what) {
    case SG_BLK_CHANGED:
        touch_block(s, b);
        break;
    case SG_BLK_ADDED:   /* the blocks from b on renumbered */
        s->ixg[(s->fr.nbk - 1) / SG_IX_GROUP].stale = 1;   /* a group may have begun */
        group_stale_from(s, b);
        touch_block(s, b);
        break;
    case SG_BLK_REMOVED:
        group_stale_from(s, b);
        if (b) block_stale(s, b - 1);   /* its next block is another */
        break;
    }
}

static const sg_blocked_kind sg_fr_kind = {
    .esize = sizeof(frange), .cap = SG_FR_BLOCK, .hsize = sizeof(ixhead), .key = sg_fr_key,
    .note = fr_note,
};

void sg_fr_init(seg *s) { sg_blocked_init(&s->fr, &sg_fr_kind); }

int sg_fr_reserve(seg *s)
{
    return sg_blocked_reserve(&s->fr, 2) != 0 ||
           sg_grow((void **)&s->ixg, &s->capixg, (s->fr.nbk + 2) / SG_IX_GROUP + 1, sizeof *s->ixg) != 0
               ? -1 : 0;
}

void sg_fr_free(seg *s)
{
    sg_blocked_free(&s->fr);
    free(s->ixg);
}

/* ---- the index ---- */

/* The figures of block b of s, from its ranges. */
static ixblk ix_figures(const seg *s, size_t b)
{
    size_t n;
    const frange *k = sg_blocked_block(&s->fr, b, &n);
    size_t any = 0, mapped = 0, run = 0, mrun = 0;   /* the clusters ending at i */
    for (size_t i = 0; i < n; i++) {
        const frange *r = &k[i];
        int joined = i > 0 && touches(&k[i - 1], r);
        run = (joined ? run : 0) + r->size;
        mrun = r->mapped ? (joined ? mrun : 0) + r->size : 0;   /* 0 after an unmapped one */
        if (run > any) any = run;
        if (mrun > mapped) mapped = mrun;
    }
    if (b + 1 < s->fr.nbk && touches(&k[n - 1], fr_at(s, (frpos){ b + 1, 0 }))) any = mapped = SIZE_MAX;
    return (ixblk){ any, mapped };
}

static const ixblk *block_fig(seg *s, size_t b)
{
    ixhead *k = head(s, b);
    if (k->stale) {
        k->fig = ix_figures(s, b);
        k->stale = 0;
    }
    return &k->fig;
}

/* The figures of group g (whole): the largest of its blocks' true ones. */
static ixblk group_figures(seg *s, size_t g, int rebuild)
{
    ixblk m = { 0, 0 };
    for (size_t b = g * SG_IX_GROUP; b < (g + 1) * SG_IX_GROUP; b++) {
        ixblk f = rebuild ? *block_fig(s, b) : ix_figures(s, b);
        if (f.any > m.any) m.any = f.any;
        if (f.mapped > m.mapped) m.mapped = f.mapped;
    }
    return m;
}

static size_t figure(const ixblk *x, int mapped_only) { return mapped_only ? x->mapped : x->any; }

frpos sg_arena_ix_skip(seg *s, frpos p, size_t need, int mapped_only)
{
    while (p.b < s->fr.nbk && p.o == 0) {
        size_t b = p.b, g = b / SG_IX_GROUP;
        if (b % SG_IX_GROUP == 0 && b + SG_IX_GROUP <= s->fr.nbk) {
            if (s->ixg[g].stale) {
                s->ixg[g].fig = group_figures(s, g, 1);
                s->ixg[g].stale = 0;
            }
            if (figure(&s->ixg[g].fig, mapped_only) < need) {
                p.b += SG_IX_GROUP;   /* a whole group */
                continue;
            }
        }
        if (figure(block_fig(s, b), mapped_only) >= need) return p;
        p.b++;
    }
    return p;
}

void sg_arena_set_linear(sg_arena *a, int on) { a->linear = on; }

size_t sg_arena_ix_stale(const sg_arena *a)
{
    size_t n = 0;
    for (size_t k = 0; k < a->nsegs; k++) {
        seg *s = &a->segs[k];
        for (size_t b = 0; b < s->fr.nbk; b++) {
            ixblk now = ix_figures(s, b);
            const ixhead *x = head(s, b);
            n += !x->stale && (now.any != x->fig.any || now.mapped != x->fig.mapped);
        }
        for (size_t g = 0; (g + 1) * SG_IX_GROUP <= s->fr.nbk; g++) {
            ixblk now = group_figures(s, g, 0);
            n += !s->ixg[g].stale && (now.any != s->ixg[g].fig.any || now.mapped != s->ixg[g].fig.mapped);
        }
    }
    return n;
}
