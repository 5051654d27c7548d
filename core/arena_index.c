/*
 * core/arena_index.c: what lets arena.c's first-fit scan skip whole blocks
 * of free ranges that cannot hold the block it places, so that a placement
 * costs about the same with 100,000 holes between live blocks as with 1,000
 * (a pass over every range made 2,000 allocations there take 1,062 ms
 * against the emulated driver's 34: tests/stress/scale_prog holes,
 * docs/design.md). The addresses are those of the plain scan: the index
 * only ever says "nothing here", and the scan itself picks the range.
 *
 * A segment's free ranges are cut, by array index, into blocks of
 * SG_IX_BLOCK. For each block the index keeps the largest number of bytes
 * of a cluster of adjacent ranges (each one starting where the one before
 * ends) inside the block, over all its ranges and over its mapped ones
 * (arena_internal.h, ixblk); a block whose last range touches the next
 * block's first counts as unbounded. For each group of SG_IX_GROUP blocks
 * it keeps the largest of its blocks' figures. Invariant: the figures of
 * every block below ixok, and of every group whose blocks all are, are the
 * ones ix_figures and group_figures would compute now.
 *
 * Why a block (or a group) below the size needed holds no place: the scan
 * takes runs of adjacent ranges that it accepts, and a run lies within one
 * cluster, so a run that starts inside the block, at its first range or
 * later, is no larger than the block's figure, whatever the key and the
 * pending tags. The figures ignore tags: they hold for every key, claims
 * included; a block with a large range pending for another stream is only
 * visited in vain.
 *
 * Kept lazily: a change at index i makes the figures from the block holding
 * i - 1 on stale (ix_touch: an insert or removal moves every later range to
 * another place), and the scan rebuilds a stale block when it reaches one.
 * A loop that allocates and frees near the top of the used memory rebuilds
 * a block or two per allocation; a change far below rebuilds, once, the
 * blocks the next scans pass. A scan passes 64 blocks at a time where a
 * whole group is current and too small. Memory: 16 bytes per 64 ranges (of
 * 32 bytes each), and 16 per 4,096.
 *
 * No locking here: the caller serialises every call on one arena (arena.h).
 */
#include "arena_internal.h"

#include "util.h"

static int touches(const frange *x, const frange *y) { return x->base + x->size == y->base; }

/* The figures of block b of s, from its ranges. */
static ixblk ix_figures(const seg *s, size_t b)
{
    size_t lo = b * SG_IX_BLOCK, hi = lo + SG_IX_BLOCK < s->nfr ? lo + SG_IX_BLOCK : s->nfr;
    size_t any = 0, mapped = 0, run = 0, mrun = 0;   /* the clusters ending at k */
    for (size_t k = lo; k < hi; k++) {
        const frange *r = &s->fr[k];
        int joined = k > lo && touches(&s->fr[k - 1], r);
        run = (joined ? run : 0) + r->size;
        mrun = r->mapped ? (joined ? mrun : 0) + r->size : 0;   /* 0 after an unmapped one */
        if (run > any) any = run;
        if (mrun > mapped) mapped = mrun;
    }
    if (hi < s->nfr && touches(&s->fr[hi - 1], &s->fr[hi])) any = mapped = SIZE_MAX;
    return (ixblk){ any, mapped };
}

/* The figures of group g: the largest of its blocks' (all current). */
static ixblk group_figures(const seg *s, size_t g)
{
    ixblk m = { 0, 0 };
    for (size_t b = g * SG_IX_GROUP; b < (g + 1) * SG_IX_GROUP; b++) {
        if (s->ix[b].any > m.any) m.any = s->ix[b].any;
        if (s->ix[b].mapped > m.mapped) m.mapped = s->ix[b].mapped;
    }
    return m;
}

/* Makes the figures of the blocks up to b current, and of each group whose
 * last block that reaches. 0, or -1 if out of memory. */
static int ix_build(seg *s, size_t b)
{
    if (sg_grow((void **)&s->ix, &s->capix, b + 1, sizeof *s->ix) != 0 ||
        sg_grow((void **)&s->ixg, &s->capixg, b / SG_IX_GROUP + 1, sizeof *s->ixg) != 0)
        return -1;
    for (; s->ixok <= b; s->ixok++) {
        s->ix[s->ixok] = ix_figures(s, s->ixok);
        if ((s->ixok + 1) % SG_IX_GROUP == 0)
            s->ixg[s->ixok / SG_IX_GROUP] = group_figures(s, s->ixok / SG_IX_GROUP);
    }
    return 0;
}

static size_t figure(const ixblk *x, int mapped_only) { return mapped_only ? x->mapped : x->any; }

size_t sg_arena_ix_skip(seg *s, size_t i, size_t need, int mapped_only)
{
    while (i < s->nfr && i % SG_IX_BLOCK == 0) {
        size_t b = i / SG_IX_BLOCK;
        if (b % SG_IX_GROUP == 0 && b + SG_IX_GROUP <= s->ixok &&
            figure(&s->ixg[b / SG_IX_GROUP], mapped_only) < need) {
            i += SG_IX_BLOCK * SG_IX_GROUP;   /* a whole group, current */
            continue;
        }
        /* out of memory: no skipping, the scan visits every range */
        if (b >= s->ixok && ix_build(s, b) != 0) return i;
        if (figure(&s->ix[b], mapped_only) >= need) return i;
        i += SG_IX_BLOCK;
    }
    return i;
}

void sg_arena_set_linear(sg_arena *a, int on) { a->linear = on; }

size_t sg_arena_ix_stale(const sg_arena *a)
{
    size_t n = 0;
    for (size_t k = 0; k < a->nsegs; k++) {
        const seg *s = &a->segs[k];
        for (size_t b = 0; b < s->ixok; b++) {
            ixblk now = ix_figures(s, b);
            n += now.any != s->ix[b].any || now.mapped != s->ix[b].mapped;
        }
        for (size_t g = 0; g < s->ixok / SG_IX_GROUP; g++) {
            ixblk now = group_figures(s, g);
            n += now.any != s->ixg[g].any || now.mapped != s->ixg[g].mapped;
        }
    }
    return n;
}
