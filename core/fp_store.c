/*
 * core/fp_store.c: where descriptions keep their nodes, edges and payloads
 * (fingerprint.h): payload buffers and the slots lent from a description's
 * chunks or slab, growing, copying, shrinking, swapping and freeing. The
 * comparison is fp_compare.c's.
 *
 * Nothing here logs, nothing locks: a description is its owner's
 * (fingerprint.h, "Thread safety").
 */
#include "fp_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

/* Makes d a copy of s whose payload lies in slot (SG_FP_PAD32(s->len)
 * bytes, lent to d; none when s has no payload): a buffer d owned for a
 * payload is freed. Copies and deltas fill their slabs with it. */
void sg_fp_copy_into_slot(sg_fp_node *d, const sg_fp_node *s, unsigned char *slot)
{
    uint32_t room = SG_FP_PAD32(s->len);
    if (room) {
        sg_fp_copy_padded(slot, s->pay, room);   /* the padding too */
        if (!d->lent) free(d->pay);
        d->pay = slot;
        d->cap = room;
        d->lent = 1;
    } else if (d->lent) {
        d->pay = NULL;
        d->cap = d->lent = 0;
    }
    d->k = s->k;
    d->len = s->len;
    d->pi = s->pi;
}

int sg_fp_pay_reserve(sg_fp_node *n, uint32_t len)
{
    if (len <= n->cap) return 0;
    uint32_t cap = n->cap && !n->lent ? n->cap : 64;
    while (cap < len) cap *= 2;
    unsigned char *p;
    if (n->lent) {                       /* out of its slot in the slab: a buffer of its own */
        if (!(p = malloc(cap))) return -1;
        memcpy(p, n->pay, n->cap);
        n->lent = 0;
    } else if (!(p = realloc(n->pay, cap))) {
        return -1;
    }
    n->pay = p;
    n->cap = cap;
    return 0;
}

void sg_fp_node_lend_new(sg_fp *fp, sg_fp_node *n)
{
    if (fp->chunk_used + SG_FP_LEND_BYTES > fp->chunk_cap) {
        /* 4 KiB doubling to 1 MiB: never less than 4 KiB, though the chunk
         * before may be a compacted one of a few bytes (sg_fp_shrink): a new
         * chunk always has room for its first slot past the link */
        size_t cap = 2 * fp->chunk_cap;
        if (cap < 4096) cap = 4096;
        if (cap > ((size_t)1 << 20)) cap = (size_t)1 << 20;
        unsigned char *c = sg_big_realloc(NULL, cap);
        if (!c) return;
        memcpy(c, &fp->chunk, sizeof fp->chunk);       /* the previous chunk */
        fp->chunk = c;
        fp->chunk_cap = cap;
        fp->chunk_used = 32;                            /* slots stay 32-byte aligned */
    }
    n->pay = fp->chunk + fp->chunk_used;
    n->cap = SG_FP_LEND_BYTES;
    n->lent = 1;
    fp->chunk_used += SG_FP_LEND_BYTES;
}

static void chunks_free(sg_fp *fp)
{
    while (fp->chunk) {
        unsigned char *prev;
        memcpy(&prev, fp->chunk, sizeof prev);
        sg_big_free(fp->chunk);
        fp->chunk = prev;
    }
}

/* Every node of fp gives back the slot it was lent, if any, from the slab
 * or the chunks (its bytes are lost: the slab is about to be reused). */
static void slab_unlend(sg_fp *fp)
{
    for (size_t i = 0; i < fp->nodes_cap; i++) {
        sg_fp_node *n = &fp->nodes[i];
        if (n->lent) {
            n->pay = NULL;
            n->cap = n->lent = 0;
        }
    }
}


int sg_fp_node_copy(sg_fp_node *dst, const sg_fp_node *src)
{
    if (src->len > dst->cap && sg_fp_pay_reserve(dst, src->len)) return -1;
    if (src->len) sg_fp_copy_padded(dst->pay, src->pay, SG_FP_PAD32(src->len));   /* the padding too */
    dst->k = src->k;
    dst->len = src->len;
    dst->pi = src->pi;
    return 0;
}

static int grow_array(void **buf, size_t *cap, size_t n, size_t elem, int zero)
{
    if (n <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < n) c *= 2;
    void *p = sg_big_realloc(*buf, c * elem);
    if (!p) return -1;
    if (zero) memset((char *)p + *cap * elem, 0, (c - *cap) * elem);
    *buf = p;
    *cap = c;
    return 0;
}

/* grow_array to exactly n: a copy knows its size (a copy kept per exec
 * would otherwise hold up to twice its nodes' room). */
static int grow_exact(void **buf, size_t *cap, size_t n, size_t elem, int zero)
{
    if (n <= *cap) return 0;
    void *p = sg_big_realloc(*buf, n * elem);
    if (!p) return -1;
    if (zero) memset((char *)p + *cap * elem, 0, (n - *cap) * elem);
    *buf = p;
    *cap = n;
    return 0;
}

int sg_fp_copy(sg_fp *dst, const sg_fp *src)
{
    if (grow_exact((void **)&dst->nodes, &dst->nodes_cap, src->n, sizeof *dst->nodes, 1) ||
        grow_exact((void **)&dst->edges, &dst->edges_cap, src->nedges, sizeof *dst->edges, 0))
        return -1;
    /* the payloads go into one slab, each in a slot of its padded length:
     * one block instead of one per node (fingerprint.h) */
    size_t total = 0;
    for (size_t i = 0; i < src->n; i++) total += SG_FP_PAD32(src->nodes[i].len);
    slab_unlend(dst);
    if (total > dst->slab_cap) {
        unsigned char *slab = sg_big_realloc(dst->slab, total);
        if (!slab) return -1;
        dst->slab = slab;
        dst->slab_cap = total;
    }
    unsigned char *at = dst->slab;
    for (size_t i = 0; i < src->n; i++) {
        sg_fp_copy_into_slot(&dst->nodes[i], &src->nodes[i], at);
        at += SG_FP_PAD32(src->nodes[i].len);
    }
    if (src->nedges) memcpy(dst->edges, src->edges, src->nedges * sizeof *src->edges);
    dst->n = src->n;
    dst->nedges = src->nedges;
    dst->epoch = src->epoch;
    dst->origin = src->origin;
    dst->unsupported = src->unsupported;
    return 0;
}

/* A description done growing keeps its lent slots in one chunk as large as
 * they need: the slots of nodes dropped since (a record reused for a smaller
 * graph) would otherwise stay in its chunks, which would then grow with
 * every capture that adds nodes again. One chunk that is not much larger
 * than needed (the same graph captured again) is left alone. */
static void chunks_compact(sg_fp *fp)
{
    if (!fp->chunk) return;
    unsigned char *prev, *c;
    memcpy(&prev, fp->chunk, sizeof prev);
    size_t need = 32, at = 32;
    for (size_t i = 0; i < fp->n; i++)
        if (fp->nodes[i].lent) need += fp->nodes[i].cap;
    if (need == 32) {                                   /* no slot lent: no chunk kept */
        chunks_free(fp);
        fp->chunk_cap = fp->chunk_used = 0;
        return;
    }
    if ((!prev && fp->chunk_cap <= 2 * need) || !(c = sg_big_realloc(NULL, need))) return;
    prev = NULL;                                        /* no previous chunk */
    memcpy(c, &prev, sizeof prev);
    for (size_t i = 0; i < fp->n; i++) {
        sg_fp_node *n = &fp->nodes[i];
        if (!n->lent) continue;
        memcpy(c + at, n->pay, n->cap);
        n->pay = c + at;
        at += n->cap;
    }
    chunks_free(fp);
    fp->chunk = c;
    fp->chunk_cap = fp->chunk_used = need;
}

void sg_fp_shrink(sg_fp *fp)
{
    if (fp->nodes_cap > fp->n) {
        for (size_t i = fp->n; i < fp->nodes_cap; i++) sg_fp_node_free(&fp->nodes[i]);
        sg_fp_node *nodes = sg_big_realloc(fp->nodes, (fp->n ? fp->n : 1) * sizeof *nodes);
        if (nodes) {
            fp->nodes = nodes;
            fp->nodes_cap = fp->n ? fp->n : 1;
        } else {                         /* kept as it is: the nodes past n emptied */
            memset(fp->nodes + fp->n, 0, (fp->nodes_cap - fp->n) * sizeof *fp->nodes);
        }
    }
    if (fp->edges_cap > fp->nedges) {
        sg_fp_edge *edges =
            sg_big_realloc(fp->edges, (fp->nedges ? fp->nedges : 1) * sizeof *edges);
        if (edges) {
            fp->edges = edges;
            fp->edges_cap = fp->nedges ? fp->nedges : 1;
        }
    }
    chunks_compact(fp);
}

sg_fp_node *sg_fp_push_node_grow(sg_fp *fp)
{
    if (grow_array((void **)&fp->nodes, &fp->nodes_cap, fp->n + 1, sizeof *fp->nodes, 1))
        return NULL;
    return sg_fp_push_node(fp);
}

int sg_fp_push_edge_grow(sg_fp *fp, uint32_t from, uint32_t to, const void *data8)
{
    if (grow_array((void **)&fp->edges, &fp->edges_cap, fp->nedges + 1, sizeof *fp->edges, 0))
        return -1;
    return sg_fp_push_edge(fp, from, to, data8);
}

void sg_fp_swap(sg_fp *a, sg_fp *b)
{
    sg_fp t = *a;
    *a = *b;
    *b = t;
}

void sg_fp_node_free(sg_fp_node *n)
{
    if (!n->lent) free(n->pay);
    memset(n, 0, sizeof *n);
}

void sg_fp_free(sg_fp *fp)
{
    for (size_t i = 0; i < fp->nodes_cap; i++) sg_fp_node_free(&fp->nodes[i]);
    sg_big_free(fp->slab);
    chunks_free(fp);
    sg_big_free(fp->nodes);
    sg_big_free(fp->edges);
    memset(fp, 0, sizeof *fp);
}
