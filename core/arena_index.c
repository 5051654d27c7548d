/*
 * core/arena_index.c: a segment's free ranges in blocks (arena_internal.h:
 * find, insert, remove), and what lets arena.c's first-fit scan skip whole
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
 * Kept lazily: a change in a block marks it and the block before stale
 * (sg_fr_touch), with their groups; a split or removal of a block, which
 * renumbers the blocks after it, marks the groups from there on stale
 * (their blocks' figures stay). The scan rebuilds a stale group, and in it
 * the stale blocks, when it reaches one, so a step that frees or fills a
 * hole far below the top rebuilds a block or two and a group's 64
 * figures, whatever lies above. Memory: 16 bytes per block of 64 ranges
 * (of 32 bytes each), and 24 per group.
 *
 * No locking here: the caller serialises every call on one arena (arena.h).
 */
#include "arena_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

static int touches(const frange *x, const frange *y) { return x->base + x->size == y->base; }

/* ---- the blocks ---- */

static void group_stale_from(seg *s, size_t b)
{
    for (size_t g = b / SG_IX_GROUP; g * SG_IX_GROUP < s->nbk; g++) s->ixg[g].stale = 1;
}

static void block_stale(seg *s, size_t b)
{
    s->bk[b]->stale = 1;
    s->ixg[b / SG_IX_GROUP].stale = 1;
}

void sg_fr_touch_block(seg *s, size_t b)
{
    block_stale(s, b);
    if (b) block_stale(s, b - 1);
}

void sg_fr_touch(seg *s, frpos p) { sg_fr_touch_block(s, p.b); }

frpos sg_fr_find(const seg *s, CUdeviceptr addr)
{
    size_t lo = 0, hi = s->nbk;
    while (lo < hi) {   /* the first block whose last range ends above addr */
        size_t mid = (lo + hi) / 2;
        const frange *l = &s->bk[mid]->r[s->bk[mid]->n - 1];
        if (l->base + l->size <= addr) lo = mid + 1; else hi = mid;
    }
    if (lo == s->nbk) return (frpos){ s->nbk, 0 };
    const frblk *k = s->bk[lo];
    size_t a = 0, z = k->n - 1;
    while (a < z) {
        size_t mid = (a + z) / 2;
        if (k->r[mid].base + k->r[mid].size <= addr) a = mid + 1; else z = mid;
    }
    return (frpos){ lo, a };
}

int sg_fr_reserve(seg *s)
{
    if (sg_grow((void **)&s->bk, &s->capbk, s->nbk + 2, sizeof *s->bk) != 0 ||
        sg_grow((void **)&s->ixg, &s->capixg, (s->nbk + 2) / SG_IX_GROUP + 1, sizeof *s->ixg) != 0)
        return -1;
    for (int k = 0; k < 2; k++)
        if (!s->spare[k] && !(s->spare[k] = malloc(sizeof *s->spare[k]))) return -1;
    return 0;
}

static frblk *take_spare(seg *s)
{
    frblk *k = s->spare[0] ? s->spare[0] : s->spare[1];
    if (k == s->spare[0]) s->spare[0] = NULL; else s->spare[1] = NULL;
    k->n = 0;
    k->stale = 1;
    return k;
}

static void give_spare(seg *s, frblk *k)
{
    if (!s->spare[0]) s->spare[0] = k;
    else if (!s->spare[1]) s->spare[1] = k;
    else free(k);
}

/* A new block k at b (the blocks from b on move up). */
static void block_insert(seg *s, size_t b, frblk *k)
{
    memmove(&s->bk[b + 1], &s->bk[b], (s->nbk - b) * sizeof *s->bk);
    s->bk[b] = k;
    s->nbk++;
    s->ixg[(s->nbk - 1) / SG_IX_GROUP].stale = 1;   /* a group may have begun */
    group_stale_from(s, b);
    sg_fr_touch_block(s, b);
}

static void block_remove(seg *s, size_t b)
{
    give_spare(s, s->bk[b]);
    memmove(&s->bk[b], &s->bk[b + 1], (s->nbk - b - 1) * sizeof *s->bk);
    s->nbk--;
    group_stale_from(s, b);
    if (b) block_stale(s, b - 1);   /* its next block is another */
}

void sg_fr_insert(seg *s, frpos p, frange r)
{
    if (s->nbk == 0) block_insert(s, 0, take_spare(s));
    if (p.b == s->nbk) p = (frpos){ s->nbk - 1, s->bk[s->nbk - 1]->n };   /* appended */
    frblk *k = s->bk[p.b];
    if (k->n == SG_FR_BLOCK) {   /* split: the upper half to a new block */
        frblk *u = take_spare(s);
        u->n = SG_FR_BLOCK / 2;
        memcpy(u->r, &k->r[SG_FR_BLOCK / 2], u->n * sizeof *u->r);
        k->n = SG_FR_BLOCK / 2;
        block_insert(s, p.b + 1, u);
        if (p.o > k->n) p = (frpos){ p.b + 1, p.o - k->n };
        k = s->bk[p.b];
    }
    memmove(&k->r[p.o + 1], &k->r[p.o], (k->n - p.o) * sizeof *k->r);
    k->r[p.o] = r;
    k->n++;
    s->nfr++;
    sg_fr_touch(s, p);
}

void sg_fr_remove(seg *s, frpos p)
{
    frblk *k = s->bk[p.b];
    memmove(&k->r[p.o], &k->r[p.o + 1], (k->n - p.o - 1) * sizeof *k->r);
    k->n--;
    s->nfr--;
    sg_fr_touch(s, p);
    if (!k->n) {
        block_remove(s, p.b);
        return;
    }
    /* merge with a neighbour when both together fill at most half a block */
    size_t b = p.b;
    if (b + 1 < s->nbk && k->n + s->bk[b + 1]->n <= SG_FR_BLOCK / 2) {
        /* b absorbs b + 1 */
    } else if (b > 0 && s->bk[b - 1]->n + k->n <= SG_FR_BLOCK / 2) {
        b--;
    } else {
        return;
    }
    frblk *x = s->bk[b], *y = s->bk[b + 1];
    memcpy(&x->r[x->n], y->r, y->n * sizeof *y->r);
    x->n += y->n;
    block_remove(s, b + 1);
    sg_fr_touch_block(s, b);
}

void sg_fr_drop_empty(seg *s)
{
    for (size_t b = s->nbk; b-- > 0;)
        if (!s->bk[b]->n) block_remove(s, b);
}

void sg_fr_free(seg *s)
{
    for (size_t b = 0; b < s->nbk; b++) free(s->bk[b]);
    free(s->bk);
    free(s->spare[0]);
    free(s->spare[1]);
    free(s->ixg);
}

/* ---- the index ---- */

/* The figures of block b of s, from its ranges. */
static ixblk ix_figures(const seg *s, size_t b)
{
    const frblk *k = s->bk[b];
    size_t any = 0, mapped = 0, run = 0, mrun = 0;   /* the clusters ending at i */
    for (size_t i = 0; i < k->n; i++) {
        const frange *r = &k->r[i];
        int joined = i > 0 && touches(&k->r[i - 1], r);
        run = (joined ? run : 0) + r->size;
        mrun = r->mapped ? (joined ? mrun : 0) + r->size : 0;   /* 0 after an unmapped one */
        if (run > any) any = run;
        if (mrun > mapped) mapped = mrun;
    }
    if (b + 1 < s->nbk && touches(&k->r[k->n - 1], &s->bk[b + 1]->r[0])) any = mapped = SIZE_MAX;
    return (ixblk){ any, mapped };
}

static const ixblk *block_fig(seg *s, size_t b)
{
    frblk *k = s->bk[b];
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
    while (p.b < s->nbk && p.o == 0) {
        size_t b = p.b, g = b / SG_IX_GROUP;
        if (b % SG_IX_GROUP == 0 && b + SG_IX_GROUP <= s->nbk) {
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
        for (size_t b = 0; b < s->nbk; b++) {
            ixblk now = ix_figures(s, b);
            const frblk *x = s->bk[b];
            n += !x->stale && (now.any != x->fig.any || now.mapped != x->fig.mapped);
        }
        for (size_t g = 0; (g + 1) * SG_IX_GROUP <= s->nbk; g++) {
            ixblk now = group_figures(s, g, 0);
            n += !s->ixg[g].stale && (now.any != s->ixg[g].fig.any || now.mapped != s->ixg[g].fig.mapped);
        }
    }
    return n;
}
