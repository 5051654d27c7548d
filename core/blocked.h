/*
 * core/blocked.h: a blocked sorted array, the one container behind an
 * arena's free ranges (arena_index.c, blocks of 64) and the registry of
 * placed blocks (mem_registry.c, blocks of 256).
 *
 * The elements, of a fixed size, lie in key order in blocks of at most
 * `cap` each (none empty): an insertion or removal moves the elements of
 * one block only, so that a change far below the last element costs the
 * same as one near it. A full block splits in two (the upper half to a new
 * block); a block left empty goes, and one that fits with a neighbour in
 * half a block merges with it. A lookup is a binary search over the blocks'
 * last elements, then one inside the block found (sg_blocked_upper).
 *
 * The order: each element has a key (kind->key), and the keys strictly
 * increase along the array (sg_blocked_bad checks it); the user inserts
 * where the order holds (the position sg_blocked_upper gives for the new
 * element's key).
 *
 * Memory, two failure rules:
 *   - sg_blocked_reserve(c, k) makes sure that the next k insertions need
 *     no memory (the array of blocks grown, spare blocks kept, at most
 *     SG_BLOCKED_SPARES); sg_blocked_insert_reserved then never fails: a
 *     user whose change must not fail midway reserves first (the arena);
 *   - sg_blocked_insert allocates what it needs, or returns -1 with the
 *     elements unchanged (the registry).
 *   A block given up (emptied, or merged away) becomes a spare while fewer
 *   than SG_BLOCKED_SPARES are kept, else it is freed.
 *
 * Each block may carry a user header of kind->hsize bytes
 * (sg_blocked_head: the arena's index figures). kind->note, if set, is told
 * of every change, with the container (the user finds its own structure
 * around it: it may move, as an element of a growing array):
 *   SG_BLK_CHANGED b   block b's elements changed (their count too);
 *   SG_BLK_ADDED b     a new block at b (nbk already raised; the blocks
 *                      from b on were renumbered; its header is the user's
 *                      to set);
 *   SG_BLK_REMOVED b   the block at b went (nbk already lowered; the
 *                      blocks from b on were renumbered).
 *
 * No locking: the user serialises every call on one container.
 */
#ifndef SG_BLOCKED_H
#define SG_BLOCKED_H

#include <stddef.h>
#include <stdint.h>

#define SG_BLOCKED_SPARES 2

enum { SG_BLK_CHANGED, SG_BLK_ADDED, SG_BLK_REMOVED };

struct sg_blocked;

typedef struct sg_blocked_kind {
    size_t esize;                  /* bytes per element */
    size_t cap;                    /* elements per block, at most (even, >= 2) */
    size_t hsize;                  /* bytes of the user's header per block (0: none) */
    uint64_t (*key)(const void *e);
    void (*note)(struct sg_blocked *c, int what, size_t b);   /* NULL: none */
} sg_blocked_kind;

typedef struct sg_bblk {
    size_t n;
    _Alignas(16) unsigned char d[];   /* the elements (cap of them), then the user's header */
} sg_bblk;

typedef struct sg_blocked {
    const sg_blocked_kind *k;
    size_t esize, cap, hoff;       /* kind's esize and cap; offset of the user's header in d */
    void (*note)(struct sg_blocked *c, int what, size_t b);   /* kind's */
    sg_bblk **bk;                  /* the blocks, in order, none empty */
    size_t nbk, capbk, n;          /* blocks, their array's capacity, elements */
    sg_bblk *spare[SG_BLOCKED_SPARES];
    size_t nspare;                 /* spare[0 .. nspare - 1] */
} sg_blocked;

/* A position: block b, element o in it; the end is (nbk, 0). */
typedef struct sg_bpos {
    size_t b, o;
} sg_bpos;

/* An empty container of kind k (static storage may instead name k alone:
 * { .k = &kind }, the rest set at the first insertion). */
void sg_blocked_init(sg_blocked *c, const sg_blocked_kind *k);
/* Frees the blocks and the spares (the elements' own resources are the
 * user's); c is then empty, of the same kind. */
void sg_blocked_free(sg_blocked *c);

static inline size_t sg_blocked_count(const sg_blocked *c) { return c->n; }
static inline sg_bpos sg_blocked_end(const sg_blocked *c) { return (sg_bpos){ c->nbk, 0 }; }
static inline int sg_blocked_is_end(const sg_blocked *c, sg_bpos p) { return p.b >= c->nbk; }
static inline int sg_blocked_is_first(sg_bpos p) { return !p.b && !p.o; }

/* Block b's elements (n of them: *n; an array of the user's type) and its
 * user header. */
static inline void *sg_blocked_block(const sg_blocked *c, size_t b, size_t *n)
{
    *n = c->bk[b]->n;
    return c->bk[b]->d;
}
static inline void *sg_blocked_elems(const sg_blocked *c, size_t b) { return c->bk[b]->d; }
static inline void *sg_blocked_head(const sg_blocked *c, size_t b) { return c->bk[b]->d + c->hoff; }

/* The element at p (not the end). */
static inline void *sg_blocked_at(const sg_blocked *c, sg_bpos p)
{
    return c->bk[p.b]->d + p.o * c->esize;
}

static inline sg_bpos sg_blocked_next(const sg_blocked *c, sg_bpos p)
{
    return p.o + 1 < c->bk[p.b]->n ? (sg_bpos){ p.b, p.o + 1 } : (sg_bpos){ p.b + 1, 0 };
}

/* The position before p (p not the first), or the last one for the end. */
static inline sg_bpos sg_blocked_prev(const sg_blocked *c, sg_bpos p)
{
    return p.o ? (sg_bpos){ p.b, p.o - 1 } : (sg_bpos){ p.b - 1, c->bk[p.b - 1]->n - 1 };
}

/* The first element whose key is > x, or the end. key and es are c's
 * kind's key and esize, passed here so that a caller naming its own has
 * them inlined (sg_blocked_upper: the kind's, called). */
static inline sg_bpos sg_blocked_upper_by(const sg_blocked *c, uint64_t x,
                                          uint64_t (*key)(const void *e), size_t es)
{
    size_t lo = 0, hi = c->nbk;
    while (lo < hi) {   /* the first block whose last element's key is > x */
        size_t mid = (lo + hi) / 2;
        const sg_bblk *k = c->bk[mid];
        if (key(k->d + (k->n - 1) * es) <= x) lo = mid + 1; else hi = mid;
    }
    if (lo == c->nbk) return (sg_bpos){ c->nbk, 0 };
    const sg_bblk *k = c->bk[lo];
    size_t a = 0, z = k->n - 1;
    while (a < z) {
        size_t mid = (a + z) / 2;
        if (key(k->d + mid * es) <= x) a = mid + 1; else z = mid;
    }
    return (sg_bpos){ lo, a };
}

sg_bpos sg_blocked_upper(const sg_blocked *c, uint64_t x);

/* Makes sure the next k (at most SG_BLOCKED_SPARES) insertions need no
 * memory. 0, or -1 (the elements unchanged). */
int sg_blocked_reserve_slow(sg_blocked *c, size_t k);
static inline int sg_blocked_reserve(sg_blocked *c, size_t k)
{
    return c->nspare >= k && c->nbk + k <= c->capbk ? 0 : sg_blocked_reserve_slow(c, k);
}
/* Inserts the element e at p (those from p on follow it); reserved. */
void sg_blocked_insert_reserved(sg_blocked *c, sg_bpos p, const void *e);
/* Inserts e at p, allocating what it needs: 0, or -1 (nothing inserted). */
int sg_blocked_insert(sg_blocked *c, sg_bpos p, const void *e);
/* Removes the element at p (a later position may then name another). */
void sg_blocked_erase(sg_blocked *c, sg_bpos p);
/* Block b was rewritten in place by the user and now holds n elements
 * (n <= its count; 0 allowed until sg_blocked_drop_empty). */
void sg_blocked_set_count(sg_blocked *c, size_t b, size_t n);
/* Removes the empty blocks (after in-place passes; no merging). */
void sg_blocked_drop_empty(sg_blocked *c);
/* Block b changed in place (the user edited elements): kind->note. */
void sg_blocked_touch(sg_blocked *c, size_t b);

/* The structural rules broken, counted: a block empty or over cap, keys
 * not strictly increasing, a count that is not the elements'. 0: sound. */
size_t sg_blocked_bad(const sg_blocked *c);

#endif
