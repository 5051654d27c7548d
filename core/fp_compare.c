/*
 * core/fp_compare.c: comparison of descriptions, and deltas (fingerprint.h;
 * their storage, copies and ownership: fp_store.c).
 *
 * sg_fp_compare skips equal nodes with a chunked comparison (node_scan, AVX2
 * where the CPU has it); the reason is only worked out when something
 * differs. Nothing here logs.
 */
#include "fp_internal.h"

#include "driver.h"
#include "memory.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ comparison */

static int reason_rank(int r)
{
    switch (r) {
    case SG_REASON_TOPOLOGY: return 10;
    case SG_REASON_UNSUPPORTED_NODE: return 9;
    case SG_REASON_NOT_COMPARABLE: return 8;
    case SG_REASON_FUNCTION_CHANGED: return 7;
    case SG_REASON_DIMS_CHANGED: return 6;
    case SG_REASON_ATTRIBUTES_CHANGED: return 5;
    case SG_REASON_MEMCPY_CHANGED:
    case SG_REASON_MEMSET_CHANGED: return 4;
    case SG_REASON_SCALAR_CHANGED: return 3;
    case SG_REASON_POINTER_CHANGED: return 2;
    default: return r < 0 ? 0 : 1;
    }
}

/* The fast comparison: node_scan returns the first node of [x, end) that
 * does not equal its partner in y byte for byte (state SG_FP_OK, equal keys,
 * lengths and payloads, padding included: see SG_FP_PAD32), or end. Keys
 * are 16-byte aligned (fingerprint.h) and payload buffers come from malloc
 * (aligned for any fundamental type: 16 on x86-64). With AVX2 (checked at
 * run time) 32 bytes are compared per instruction, else 16 (SSE2 on x86-64,
 * two words elsewhere). */
_Static_assert(sizeof(sg_fp_key) == 9 * 16 && _Alignof(sg_fp_key) >= 16,
               "keys are compared as 9 aligned 16-byte chunks");
#define SG_X16_(i) (p[i] ^ q[i])

static const sg_fp_node *node_scan_16(const sg_fp_node *x, const sg_fp_node *y,
                                      const sg_fp_node *end)
{
    for (; x < end; x++, y++) {
        uint32_t len = x->len;
        if (x->k.state != SG_FP_OK || len != y->len) break;
        const sg_v16 *p = (const sg_v16 *)(const void *)&x->k,
                     *q = (const sg_v16 *)(const void *)&y->k;
        sg_v16 d = SG_X16_(0) | SG_X16_(1) | SG_X16_(2) | SG_X16_(3) | SG_X16_(4) | SG_X16_(5) |
                   SG_X16_(6) | SG_X16_(7) | SG_X16_(8);
        if (len) {
            p = __builtin_assume_aligned(x->pay, 16);
            q = __builtin_assume_aligned(y->pay, 16);
            d |= SG_X16_(0) | SG_X16_(1);
            for (uint32_t i = 2; i < SG_FP_PAD32(len) / 16; i++) d |= SG_X16_(i);
        }
        if (!v16_zero(d)) break;
    }
    return x;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SG_X32_(a, b) _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(a)), \
                                       _mm256_loadu_si256((const __m256i *)(const void *)(b)))
/* The bytes of x and y that differ, OR-ed into *d; 0 if x is not
 * SG_FP_OK or the lengths differ (then *d is not set). */
__attribute__((target("avx2"), always_inline))
static inline int node_diff_32(const sg_fp_node *x, const sg_fp_node *y, __m256i *dout)
{
    uint32_t len = x->len;
    if ((x->k.state | (len ^ y->len)) != 0) return 0;   /* not SG_FP_OK, or other lengths */
    const unsigned char *p = (const unsigned char *)&x->k, *q = (const unsigned char *)&y->k;
    /* 144 bytes: 0, 32, 64, 96 and 112 (overlapping) */
    __m256i d = _mm256_or_si256(_mm256_or_si256(SG_X32_(p, q), SG_X32_(p + 32, q + 32)),
                                _mm256_or_si256(SG_X32_(p + 64, q + 64), SG_X32_(p + 96, q + 96)));
    d = _mm256_or_si256(d, SG_X32_(p + 112, q + 112));
    p = x->pay;
    q = y->pay;
    if (__builtin_expect(len - 1u < 32u, 1)) {         /* 1 to 32 bytes: one chunk */
        d = _mm256_or_si256(d, SG_X32_(p, q));
    } else if (len) {
        for (uint32_t i = 0; i < len; i += 32) d = _mm256_or_si256(d, SG_X32_(p + i, q + i));
    }
    *dout = d;
    return 1;
}

__attribute__((target("avx2")))
static const sg_fp_node *node_scan_32(const sg_fp_node *x, const sg_fp_node *y,
                                      const sg_fp_node *end)
{
    /* two nodes per test; on a difference the loop below finds which */
    for (; end - x >= 2; x += 2, y += 2) {
        __m256i d0, d1;
        if (!node_diff_32(x, y, &d0) || !node_diff_32(x + 1, y + 1, &d1)) break;
        d0 = _mm256_or_si256(d0, d1);
        if (!_mm256_testz_si256(d0, d0)) break;
    }
    for (; x < end; x++, y++) {
        __m256i d;
        if (!node_diff_32(x, y, &d) || !_mm256_testz_si256(d, d)) break;
    }
    return x;
}

/* 1 if the CPU has AVX2, 0 if not, -1 before the first call. */
static int have_avx2 = -1;

static const sg_fp_node *node_scan(const sg_fp_node *x, const sg_fp_node *y,
                                   const sg_fp_node *end)
{
    int h = __atomic_load_n(&have_avx2, __ATOMIC_RELAXED);
    if (__builtin_expect(h < 0, 0)) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&have_avx2, h, __ATOMIC_RELAXED);
    }
    return h ? node_scan_32(x, y, end) : node_scan_16(x, y, end);
}

int sg_fp_scan_width(int force)
{
    int h = __atomic_load_n(&have_avx2, __ATOMIC_RELAXED);
    if (h < 0 || force == 32) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    if (force == 16) h = 0;
    if (force) __atomic_store_n(&have_avx2, h, __ATOMIC_RELAXED);
    return h ? 32 : 16;
}
#else
#define node_scan node_scan_16
int sg_fp_scan_width(int force)
{
    (void)force;
    return 16;
}
#endif

/* The driver's allocation ranges found during one comparison: a graph's
 * nodes often point into the same few allocations, so each is asked for once
 * per comparison, not once per pointer (the ranges are not kept beyond it:
 * the program may free and allocate between two comparisons). */
#define RANGES_KEPT 8
typedef struct dev_ranges {
    CUdeviceptr start[RANGES_KEPT];
    size_t size[RANGES_KEPT];
    unsigned n;
} dev_ranges;

static void range_keep(dev_ranges *dr, CUdeviceptr start, size_t size)
{
    dr->start[dr->n % RANGES_KEPT] = start;
    dr->size[dr->n % RANGES_KEPT] = size;
    dr->n++;
}

/* is_device_ptr past the kept ranges, out of line: the registry, then the
 * driver. */
static __attribute__((noinline)) int device_ptr_search(uint64_t v, dev_ranges *dr)
{
    sg_alloc_info ai;
    CUdeviceptr start;
    size_t size;
    if (sg_mem_find((CUdeviceptr)v, &ai)) {
        range_keep(dr, ai.base, ai.size);
        return 1;
    }
    if (!sg_drv.cuPointerGetAttribute ||
        SG_DRIVER_CALL(cuPointerGetAttribute, &start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                       (CUdeviceptr)v) != CUDA_SUCCESS)
        return 0;
    if (SG_DRIVER_CALL(cuPointerGetAttribute, &size, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                       (CUdeviceptr)v) == CUDA_SUCCESS)
        range_keep(dr, start, size);
    return 1;
}

/* Whether v is an address inside a live allocation: one the library placed
 * (sg_mem_find) or one the driver knows (its allocation range). The ranges
 * found are kept for the rest of the comparison (a graph's pointers are
 * mostly into a few buffers), and looked at first, inline. */
static inline int is_device_ptr(uint64_t v, dev_ranges *dr)
{
    if (!v) return 0;
    unsigned kept = dr->n < RANGES_KEPT ? dr->n : RANGES_KEPT;
    for (unsigned i = 0; i < kept; i++)
        if (v >= dr->start[i] && v - dr->start[i] < dr->size[i]) return 1;
    return device_ptr_search(v, dr);
}

/* Why two argument blocks of the same layout differ: scalar_changed unless
 * every differing byte lies in an 8-byte word (aligned to its argument's
 * start) whose new value is a device address. Old values are not checked:
 * the program may have freed them already. */
static int args_reason(const sg_fp_node *old, const sg_fp_node *nw, dev_ranges *dr)
{
    const sg_fp_pinfo *pi = nw->pi;
    if (!pi || old->len != nw->len) return SG_REASON_SCALAR_CHANGED;
    for (uint32_t i = 0; i < pi->n; i++) {
        const unsigned char *a = old->pay + pi->arg[i].off, *b = nw->pay + pi->arg[i].off;
        uint32_t size = pi->arg[i].size, w;
        if (size == 8) {                     /* the common argument (a pointer) without a call */
            uint64_t va, vb;
            memcpy(&va, a, 8);
            memcpy(&vb, b, 8);
            if (va != vb && !is_device_ptr(vb, dr)) return SG_REASON_SCALAR_CHANGED;
            continue;
        }
        if (size == 4) {                     /* too short for an address */
            uint32_t va, vb;
            memcpy(&va, a, 4);
            memcpy(&vb, b, 4);
            if (va != vb) return SG_REASON_SCALAR_CHANGED;
            continue;
        }
        if (!memcmp(a, b, size)) continue;
        for (w = 0; w + 8 <= size; w += 8) {
            uint64_t va, vb;
            memcpy(&va, a + w, 8);
            memcpy(&vb, b + w, 8);
            if (va != vb && !is_device_ptr(vb, dr)) return SG_REASON_SCALAR_CHANGED;
        }
        if (w < size && memcmp(a + w, b + w, size - w)) return SG_REASON_SCALAR_CHANGED;
    }
    if (pi->gaps && !sg_bytes_eq(old->pay, nw->pay, nw->len)) {
        /* only reachable if overlapping arguments hid a difference: be conservative */
        for (uint32_t i = 0; i < pi->n; i++)
            if (memcmp(old->pay + pi->arg[i].off, nw->pay + pi->arg[i].off, pi->arg[i].size))
                return SG_REASON_POINTER_CHANGED;
        return SG_REASON_SCALAR_CHANGED;
    }
    return SG_REASON_POINTER_CHANGED;
}

/* The attribute bytes of two keys, equal (16 bytes at a time, no call). */
_Static_assert(SG_FP_ATTR_BYTES == 5 * 16 && offsetof(sg_fp_key, attrs) % 16 == 0,
               "attributes are compared as 5 aligned 16-byte chunks");
static inline int attrs_eq(const sg_fp_key *a, const sg_fp_key *b)
{
    const unsigned char *p = a->attrs, *q = b->attrs;
    sg_v16 d = (ld16(p) ^ ld16(q)) | (ld16(p + 16) ^ ld16(q + 16)) | (ld16(p + 32) ^ ld16(q + 32)) |
               (ld16(p + 48) ^ ld16(q + 48)) | (ld16(p + 64) ^ ld16(q + 64));
    return v16_zero(d);
}

static int node_compare(const sg_fp_node *old, const sg_fp_node *nw, int params_only,
                        dev_ranges *dr)
{
    const sg_fp_key *a = &old->k, *b = &nw->k;
    if (a->type != b->type) return SG_REASON_TOPOLOGY;
    if (a->state == SG_FP_UNSUPPORTED || b->state == SG_FP_UNSUPPORTED)
        return SG_REASON_UNSUPPORTED_NODE;
    if (a->state != SG_FP_OK || b->state != SG_FP_OK) return SG_REASON_NOT_COMPARABLE;
    int payload_reason;
    switch (a->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        if (a->func != b->func || a->kern != b->kern || a->ctx != b->ctx)
            return SG_REASON_FUNCTION_CHANGED;
        if (memcmp(a->grid, b->grid, sizeof a->grid) || memcmp(a->block, b->block, sizeof a->block) ||
            a->shmem != b->shmem)
            return SG_REASON_DIMS_CHANGED;
        if (!params_only && (a->attr_mask != b->attr_mask || !attrs_eq(a, b)))
            return SG_REASON_ATTRIBUTES_CHANGED;
        if (old->len == nw->len && sg_bytes_eq(old->pay, nw->pay, nw->len)) return -1;
        return args_reason(old, nw, dr);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        payload_reason = SG_REASON_MEMCPY_CHANGED;
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        payload_reason = SG_REASON_MEMSET_CHANGED;
        break;
    default:
        return -1;   /* empty */
    }
    if (a->ctx != b->ctx || old->len != nw->len || !sg_bytes_eq(old->pay, nw->pay, nw->len))
        return payload_reason;
    return -1;
}

int sg_fp_node_compare(const sg_fp_node *old, const sg_fp_node *nw, int params_only)
{
    dev_ranges dr = { .n = 0 };
    return node_compare(old, nw, params_only, &dr);
}

/* Moves d's slab (the payloads of its nodes, in the order of its nodes) to
 * a block of cap bytes (>= slab_used): its nodes follow, the slots past
 * them are dropped. 0, or -1 if out of memory (d unchanged). */
static int delta_slab_resize(sg_fp_delta *d, size_t cap)
{
    unsigned char *slab = sg_big_realloc(d->slab, cap);
    if (!slab) return -1;
    for (size_t k = 0; k < d->cap; k++) {
        sg_fp_node *c = &d->nodes[k];
        if (!c->lent) continue;
        if (k < d->n) {
            c->pay = slab + ((uintptr_t)c->pay - (uintptr_t)d->slab);
        } else {
            c->pay = NULL;
            c->cap = c->lent = 0;
        }
    }
    d->slab = slab;
    d->slab_cap = cap;
    return 0;
}

/* Adds a copy of node n (index i) to d, which never holds more than max
 * nodes (so it never has room for more); 0, or -1 if out of memory. */
static int delta_push(sg_fp_delta *d, size_t i, const sg_fp_node *n, int why, size_t max)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 8;
        if (cap > max && max > d->cap) cap = max;
        uint32_t *idx = sg_big_realloc(d->idx, cap * sizeof *idx);
        if (!idx) return -1;
        d->idx = idx;
        signed char *w = sg_big_realloc(d->why, cap * sizeof *w);
        if (!w) return -1;
        d->why = w;
        sg_fp_node *nodes = sg_big_realloc(d->nodes, cap * sizeof *nodes);
        if (!nodes) return -1;
        memset(nodes + d->cap, 0, (cap - d->cap) * sizeof *nodes);
        d->nodes = nodes;
        d->cap = cap;
    }
    uint32_t room = SG_FP_PAD32(n->len);
    if (room > d->slab_cap - d->slab_used) {
        size_t want = d->slab_cap ? 2 * d->slab_cap : 4096;
        while (want < d->slab_used + room) want *= 2;
        if (delta_slab_resize(d, want) != 0) return -1;
    }
    sg_fp_copy_into_slot(&d->nodes[d->n], n, d->slab + d->slab_used);
    d->slab_used += room;
    d->why[d->n] = (signed char)why;
    d->idx[d->n++] = (uint32_t)i;
    return 0;
}

/* A delta keeps its buffers from one comparison to the next, but not room
 * for many more nodes than it has used for a while: an exec whose first
 * updates changed every node (placement settling) would keep a whole
 * graph's copies for its life. A program that changes every node every
 * few steps keeps them (no reallocation each time). */
#define SG_DELTA_TRIM_AFTER 8
static void delta_trim(sg_fp_delta *d)
{
    if (d->cap < 64 || d->n >= d->cap / 4) {
        d->small = 0;
        return;
    }
    if (++d->small < SG_DELTA_TRIM_AFTER) return;
    d->small = 0;
    if (d->slab_cap > 4096 && d->slab_used < d->slab_cap / 4)
        (void)delta_slab_resize(d, d->slab_used * 2 > 4096 ? d->slab_used * 2 : 4096);
    size_t cap = d->n < 4 ? 8 : 2 * d->n;
    for (size_t k = cap; k < d->cap; k++) sg_fp_node_free(&d->nodes[k]);
    sg_fp_node *nodes = sg_big_realloc(d->nodes, cap * sizeof *nodes);
    if (!nodes) return;                  /* kept: the nodes past cap are empty */
    d->nodes = nodes;
    d->cap = cap;
    uint32_t *idx = sg_big_realloc(d->idx, cap * sizeof *idx);
    if (idx) d->idx = idx;               /* else the old, larger one stays */
    signed char *w = sg_big_realloc(d->why, cap * sizeof *w);
    if (w) d->why = w;
}

/* The comparison (sg_fp_compare); with d, every differing node of b is
 * copied into it, and the scan goes on past a node whose type changed. */
static int compare(const sg_fp *a, const sg_fp *b, sg_fp_delta *d)
{
    dev_ranges dr = { .n = 0 };
    if (d) {
        d->n = 0;
        d->slab_used = 0;
        d->epoch = b->epoch;
        d->valid = 0;
    }
    /* counts first: origin-independent (round 17, adv_updates topology_first) */
    if (a->n != b->n || a->nedges != b->nedges) return SG_REASON_TOPOLOGY;
    if (a->origin != b->origin) return SG_REASON_NOT_COMPARABLE;
    if (!sg_bytes_eq(a->edges, b->edges, a->nedges * sizeof *a->edges)) return SG_REASON_TOPOLOGY;
    int worst = -1, keep = d && !a->unsupported && !b->unsupported;
    const sg_fp_node *x = a->nodes, *y = b->nodes, *end = x + a->n;
    for (; x < end; x++, y++) {
        /* skip the nodes equal byte for byte: the same exec state */
        const sg_fp_node *z = node_scan(x, y, end);
        y += z - x;
        x = z;
        if (x == end) break;
        int r = node_compare(x, y, 0, &dr);
        if (reason_rank(r) > reason_rank(worst)) worst = r;
        if (r >= 0 && keep && delta_push(d, (size_t)(x - a->nodes), y, r, a->n) != 0) keep = 0;
        if (worst == SG_REASON_TOPOLOGY && !keep) break;
    }
    if (keep) d->valid = 1;
    if (d) delta_trim(d);
    return worst;
}

int sg_fp_compare(const sg_fp *a, const sg_fp *b) { return compare(a, b, NULL); }

int sg_fp_compare_delta(const sg_fp *a, const sg_fp *b, sg_fp_delta *d) { return compare(a, b, d); }

int sg_fp_delta_apply(sg_fp *a, const sg_fp_delta *d)
{
    for (size_t k = 0; k < d->n; k++)
        if (d->idx[k] >= a->n || sg_fp_node_copy(&a->nodes[d->idx[k]], &d->nodes[k]) != 0) return -1;
    a->epoch = d->epoch;
    return 0;
}

void sg_fp_delta_free(sg_fp_delta *d)
{
    for (size_t k = 0; k < d->cap; k++) sg_fp_node_free(&d->nodes[k]);
    sg_big_free(d->slab);
    sg_big_free(d->nodes);
    sg_big_free(d->idx);
    sg_big_free(d->why);
    memset(d, 0, sizeof *d);
}
