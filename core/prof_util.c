/*
 * core/prof_util.c: what every part of the profiled policy uses (prof.h):
 * its settings (capabilities, the slot operations and the test seams),
 * finding the placed allocation a word points into, reading and writing
 * payload words, copying and comparing fingerprints' shapes, and resetting
 * a profile. Calls nothing else of the policy.
 *
 * Thread safety: the settings are written once at start-up (or by a unit
 * test before it starts); everything else works on the caller's sg_prof,
 * under its record's lock.
 */
#include "prof.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ settings */

sg_caps sg_prof_caps;

static const sg_prof_slot_ops real_ops = {
    sg_slot_gen_create, sg_slot_addr, sg_slot_gen_matches, sg_slot_gen_idle,
    sg_slot_gen_bind, sg_slot_gen_launched, sg_slot_gen_retire, sg_slots_stats,
};
const sg_prof_slot_ops *sg_prof_slots = &real_ops;
sg_prof_find_fn sg_prof_find_hook;

void sg_prof_set_slot_ops(const sg_prof_slot_ops *o) { sg_prof_slots = o ? o : &real_ops; }
void sg_prof_set_find(sg_prof_find_fn fn) { sg_prof_find_hook = fn; }

/* ------------------------------------------------------------ lookups */

void sg_prof_finder_begin(sg_prof_finder *f)
{
    /* under always_update, which places nothing, the view holds the
     * allocations forwarded to the driver: what placing would have placed */
    f->v = sg_prof_find_hook ? NULL : sg_mem_view_acquire();
}

void sg_prof_finder_end(sg_prof_finder *f)
{
    if (f->v) sg_mem_view_release(f->v);
}

int sg_prof_finder_find(sg_prof_finder *f, uint64_t p, sg_alloc_info *ai)
{
    if (!p) return 0;
    if (sg_prof_find_hook) return sg_prof_find_hook((CUdeviceptr)p, ai);
    return f->v ? sg_mem_view_find(f->v, (CUdeviceptr)p, ai) : sg_mem_find((CUdeviceptr)p, ai);
}

int sg_prof_finder_find_end(const sg_prof_finder *f, uint64_t p, sg_alloc_info *ai)
{
    if (!p) return 0;
    if (sg_prof_find_hook)
        return sg_prof_find_hook((CUdeviceptr)p - 1, ai) && ai->base + ai->size == p;
    return f->v && sg_mem_view_find_end(f->v, (CUdeviceptr)p, ai);
}

static const unsigned char empty_pay[8];
const unsigned char *sg_prof_pay(const sg_fp_node *n) { return n->pay ? n->pay : empty_pay; }

uint64_t sg_prof_word(const unsigned char *pay, uint32_t off)
{
    uint64_t v;
    memcpy(&v, pay + off, 8);
    return v;
}

void sg_prof_word_put(unsigned char *pay, uint32_t off, uint64_t v) { memcpy(pay + off, &v, 8); }

/* The address words of a memcpy / memset payload: up to 2 offsets into
 * `offs`; a memcpy operand counts only with device memory type. */
int sg_prof_address_words(const sg_fp_node *n, uint32_t offs[2])
{
    int k = 0;
    if (n->k.type == CU_GRAPH_NODE_TYPE_MEMCPY && n->len >= sizeof(CUDA_MEMCPY3D)) {
        const CUDA_MEMCPY3D *c = (const CUDA_MEMCPY3D *)(const void *)n->pay;
        if (c->srcMemoryType == CU_MEMORYTYPE_DEVICE) offs[k++] = offsetof(CUDA_MEMCPY3D, srcDevice);
        if (c->dstMemoryType == CU_MEMORYTYPE_DEVICE) offs[k++] = offsetof(CUDA_MEMCPY3D, dstDevice);
    } else if (n->k.type == CU_GRAPH_NODE_TYPE_MEMSET &&
               n->len >= sizeof(CUDA_MEMSET_NODE_PARAMS)) {
        offs[k++] = offsetof(CUDA_MEMSET_NODE_PARAMS, dst);
    }
    return k;
}

void sg_prof_scan(const sg_fp *fp,
                  void (*fn)(void *u, sg_prof_pos pos, uint64_t value, const sg_alloc_info *ai),
                  void *u)
{
    sg_prof_finder f;
    sg_prof_finder_begin(&f);
    for (size_t i = 0; i < fp->n; i++) {
        const sg_fp_node *n = &fp->nodes[i];
        sg_alloc_info ai;
        if (n->k.state != SG_FP_OK) continue;
        if (n->k.type == CU_GRAPH_NODE_TYPE_KERNEL) {
            for (uint32_t off = 0; off + 8 <= n->len; off += 8) {
                uint64_t v = sg_prof_word(n->pay, off);
                if (sg_prof_finder_find(&f, v, &ai)) fn(u, (sg_prof_pos){ (uint32_t)i, off }, v, &ai);
            }
            continue;
        }
        uint32_t offs[2];
        int k = sg_prof_address_words(n, offs);
        for (int j = 0; j < k; j++) {
            uint64_t v = sg_prof_word(n->pay, offs[j]);
            if (sg_prof_finder_find(&f, v, &ai)) fn(u, (sg_prof_pos){ (uint32_t)i, offs[j] }, v, &ai);
        }
    }
    sg_prof_finder_end(&f);
}

/* ------------------------------------------------------------ state */

/* Copies src into dst (dst's buffers reused). 0, or -1 if out of memory. */
int sg_prof_fp_copy(sg_fp *dst, const sg_fp *src) { return sg_fp_copy(dst, src); }

/* Whether a and b have the same topology and node keys (payload lengths
 * included): the only thing profiling may see change is payload bytes. */
int sg_prof_same_shape(const sg_fp *a, const sg_fp *b)
{
    if (a->n != b->n || a->nedges != b->nedges ||
        !sg_bytes_eq(a->edges, b->edges, a->nedges * sizeof *a->edges))
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->nodes[i].len != b->nodes[i].len ||
            memcmp(&a->nodes[i].k, &b->nodes[i].k, sizeof a->nodes[i].k))
            return 0;
    return 1;
}

void sg_prof_profile_reset(sg_prof *p)
{
    sg_big_free(p->varied);
    sg_big_free(p->vbit);
    p->varied = NULL;
    p->vbit = NULL;
    p->nvaried = 0;
    p->base.n = p->base.nedges = 0;
    p->npos = 0;
    p->launches = 0;
    p->update_ns = 0;
    p->nstates = 0;
}

void sg_prof_profile_free(sg_prof *p)
{
    sg_prof_profile_reset(p);
    sg_fp_free(&p->base);
    sg_big_free(p->pos);
    sg_big_free(p->tmp);
    p->pos = p->tmp = NULL;
    p->cappos = p->captmp = 0;
}

/* ------------------------------------------------------------ variants' nodes */

void sg_prof_cnode_free(cnode *c)
{
    free(c->pay);
    free(c->mask);
    memset(c, 0, sizeof *c);
}

/* A hash of c's bytes and mask (not of `known`). Equal nodes hash equal;
 * unequal ones almost never do, and are then still compared bytewise. */
uint64_t sg_prof_cnode_hash(const cnode *c)
{
    const uint64_t mul = 0x9e3779b97f4a7c15ull;
    uint64_t h = ((uint64_t)c->len << 32 | c->nmask) * mul;
    const unsigned char *b = c->pay;
    size_t i = 0;
    for (; i + 8 <= c->len; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * mul;
        h ^= h >> 29;
    }
    if (i < c->len) {
        /* the last 1 to 7 bytes, as memcpy(&w, b + i, t) would place them
         * (the rest zero), in fixed-size moves: no call */
        unsigned char tail[8] = { 0 };
        size_t t = c->len - i, o = 0;
        if (t & 4) { memcpy(tail, b + i, 4); o = 4; }
        if (t & 2) { memcpy(tail + o, b + i + o, 2); o += 2; }
        if (t & 1) tail[o] = b[i + o];
        uint64_t w;
        memcpy(&w, tail, 8);
        h = (h ^ w) * mul;
        h ^= h >> 29;
    }
    for (uint32_t k = 0; k < c->nmask; k++) {
        h = (h ^ c->mask[k]) * mul;
        h ^= h >> 29;
    }
    return h;
}

/* Copies src into dst (dst's buffers reused). -1 if out of memory. */
int sg_prof_cnode_set(cnode *dst, const cnode *src)
{
    if (src->len > dst->cap) {
        unsigned char *b = realloc(dst->pay, src->len);
        if (!b) return -1;
        dst->pay = b;
        dst->cap = src->len;
    }
    if (src->nmask > dst->capmask) {
        uint32_t *m = realloc(dst->mask, src->nmask * sizeof *m);
        if (!m) return -1;
        dst->mask = m;
        dst->capmask = src->nmask;
    }
    if (src->len) memcpy(dst->pay, src->pay, src->len);
    if (src->nmask) memcpy(dst->mask, src->mask, src->nmask * sizeof *src->mask);
    dst->len = src->len;
    dst->nmask = src->nmask;
    dst->known = src->known;
    dst->h = sg_prof_cnode_hash(dst);
    return 0;
}

void sg_prof_mark_dirty(sg_prof *p, size_t i)
{
    p->hit = -1;
    if (i < p->n && p->dirty && !p->dirty[i]) {
        p->dirty[i] = 1;
        p->dirty_list[p->ndirty++] = (uint32_t)i;
    }
}
