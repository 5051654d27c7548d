/*
 * core/blocked.c: the blocked sorted array (blocked.h): blocks split when
 * full and merged at half, spare blocks for insertions that must not fail,
 * the user told of each change (kind->note).
 *
 * No locking here: the user serialises every call on one container.
 */
#include "blocked.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

static void setup(sg_blocked *c)
{
    c->esize = c->k->esize;
    c->cap = c->k->cap;
    c->note = c->k->note;
    c->hoff = (c->k->cap * c->esize + 15) / 16 * 16;
}

void sg_blocked_init(sg_blocked *c, const sg_blocked_kind *k)
{
    *c = (sg_blocked){ .k = k };
    setup(c);
}

void sg_blocked_free(sg_blocked *c)
{
    for (size_t b = 0; b < c->nbk; b++) free(c->bk[b]);
    for (size_t s = 0; s < c->nspare; s++) free(c->spare[s]);
    free(c->bk);
    sg_blocked_init(c, c->k);
}

static void note(sg_blocked *c, int what, size_t b)
{
    if (c->note) c->note(c, what, b);
}

void sg_blocked_touch(sg_blocked *c, size_t b) { note(c, SG_BLK_CHANGED, b); }

sg_bpos sg_blocked_upper(const sg_blocked *c, uint64_t x)
{
    return sg_blocked_upper_by(c, x, c->k->key, c->esize);
}

int sg_blocked_reserve_slow(sg_blocked *c, size_t k)
{
    if (!c->esize) setup(c);
    if (sg_grow((void **)&c->bk, &c->capbk, c->nbk + k, sizeof *c->bk) != 0) return -1;
    while (c->nspare < k && c->nspare < SG_BLOCKED_SPARES) {
        sg_bblk *b = malloc(sizeof(sg_bblk) + c->hoff + c->k->hsize);
        if (!b) return -1;
        c->spare[c->nspare++] = b;
    }
    return 0;
}

static sg_bblk *take_spare(sg_blocked *c)
{
    if (!c->nspare) abort();   /* an insertion without sg_blocked_reserve: a bug of the user */
    sg_bblk *k = c->spare[--c->nspare];
    k->n = 0;
    return k;
}

static void give_spare(sg_blocked *c, sg_bblk *k)
{
    if (c->nspare < SG_BLOCKED_SPARES) c->spare[c->nspare++] = k;
    else free(k);
}

/* A new block k at b (the blocks from b on move up). */
static void block_insert(sg_blocked *c, size_t b, sg_bblk *k)
{
    memmove(&c->bk[b + 1], &c->bk[b], (c->nbk - b) * sizeof *c->bk);
    c->bk[b] = k;
    c->nbk++;
    note(c, SG_BLK_ADDED, b);
}

static void block_remove(sg_blocked *c, size_t b)
{
    give_spare(c, c->bk[b]);
    memmove(&c->bk[b], &c->bk[b + 1], (c->nbk - b - 1) * sizeof *c->bk);
    c->nbk--;
    note(c, SG_BLK_REMOVED, b);
}

static unsigned char *elem(const sg_blocked *c, sg_bblk *k, size_t i)
{
    return k->d + i * c->esize;
}

/* One element's bytes (inline for the users' sizes: no call). */
static void elem_copy(unsigned char *d, const void *e, size_t es)
{
    switch (es) {
    case 8: memcpy(d, e, 8); break;
    case 16: memcpy(d, e, 16); break;
    case 32: memcpy(d, e, 32); break;
    default: memcpy(d, e, es); break;
    }
}

void sg_blocked_insert_reserved(sg_blocked *c, sg_bpos p, const void *e)
{
    size_t cap = c->cap, es = c->esize;
    if (c->nbk == 0) block_insert(c, 0, take_spare(c));
    if (p.b == c->nbk) p = (sg_bpos){ c->nbk - 1, c->bk[c->nbk - 1]->n };   /* appended */
    sg_bblk *k = c->bk[p.b];
    if (k->n == cap) {   /* split: the upper half to a new block */
        sg_bblk *u = take_spare(c);
        u->n = cap / 2;
        memcpy(elem(c, u, 0), elem(c, k, cap / 2), u->n * es);
        k->n = cap / 2;
        block_insert(c, p.b + 1, u);
        if (p.o > k->n) p = (sg_bpos){ p.b + 1, p.o - k->n };
        k = c->bk[p.b];
    }
    memmove(elem(c, k, p.o + 1), elem(c, k, p.o), (k->n - p.o) * es);
    elem_copy(elem(c, k, p.o), e, es);
    k->n++;
    c->n++;
    note(c, SG_BLK_CHANGED, p.b);
}

int sg_blocked_insert(sg_blocked *c, sg_bpos p, const void *e)
{
    /* a new block: the first one, or a split of the full block at p */
    size_t b = p.b < c->nbk ? p.b : c->nbk - 1;
    if ((!c->nbk || c->bk[b]->n == c->cap) && sg_blocked_reserve(c, 1) != 0) return -1;
    sg_blocked_insert_reserved(c, p, e);
    return 0;
}

void sg_blocked_erase(sg_blocked *c, sg_bpos p)
{
    size_t half = c->cap / 2;
    sg_bblk *k = c->bk[p.b];
    memmove(elem(c, k, p.o), elem(c, k, p.o + 1), (k->n - p.o - 1) * c->esize);
    k->n--;
    c->n--;
    note(c, SG_BLK_CHANGED, p.b);
    if (!k->n) {
        block_remove(c, p.b);
        return;
    }
    /* merge with a neighbour when both together fill at most half a block */
    size_t b = p.b;
    if (b + 1 < c->nbk && k->n + c->bk[b + 1]->n <= half) {
        /* b absorbs b + 1 */
    } else if (b > 0 && c->bk[b - 1]->n + k->n <= half) {
        b--;
    } else {
        return;
    }
    sg_bblk *x = c->bk[b], *y = c->bk[b + 1];
    memcpy(elem(c, x, x->n), elem(c, y, 0), y->n * c->esize);
    x->n += y->n;
    block_remove(c, b + 1);
    note(c, SG_BLK_CHANGED, b);
}

void sg_blocked_set_count(sg_blocked *c, size_t b, size_t n)
{
    sg_bblk *k = c->bk[b];
    if (n == k->n) return;
    c->n -= k->n - n;
    k->n = n;
    note(c, SG_BLK_CHANGED, b);
}

void sg_blocked_drop_empty(sg_blocked *c)
{
    for (size_t b = c->nbk; b-- > 0;)
        if (!c->bk[b]->n) block_remove(c, b);
}

size_t sg_blocked_bad(const sg_blocked *c)
{
    size_t bad = 0, n = 0;
    int any = 0;
    uint64_t last = 0;
    for (size_t b = 0; b < c->nbk; b++) {
        sg_bblk *k = c->bk[b];
        bad += k->n == 0 || k->n > c->k->cap;
        for (size_t i = 0; i < k->n && i < c->k->cap; i++, n++) {
            uint64_t key = c->k->key(elem(c, k, i));
            bad += any && key <= last;
            any = 1;
            last = key;
        }
    }
    return bad + (n != c->n) + (c->nbk > c->capbk);
}
