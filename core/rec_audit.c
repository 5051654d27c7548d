/*
 * core/rec_audit.c: STABLEGRAPH_AUDIT_RECORDS=1, a check of the recorder
 * against the driver. Each time a decision uses a graph's capture-time
 * record (sg_rec_fetch, sg_rec_delta), the record is compared with the graph
 * read back node by node, as decisions were made before records existed:
 *   - the same nodes and edges, each node of the same type, state, function,
 *     launch dimensions and argument bytes (or memcpy / memset operands):
 *     sg_fp_same_order, or, where the driver lists the nodes in another order
 *     than they were made, the same multisets of nodes and of edges between
 *     them (by hash);
 *   - every attribute the record holds (a cuLaunchKernelEx attribute, a
 *     cuGraphKernelNodeSetAttribute) with the value the driver reports, and
 *     every other attribute the driver reports at its default, zero (the
 *     memory-synchronization domain map, whose default the driver fills in,
 *     is left out);
 *   - every node handle the record knows at the driver's index.
 * A record that differs would let a decision skip an update the driver
 * would apply or refuse; the audit counts it (report:
 * graph_descriptions.audit_mismatches) and logs which node differs and how.
 * The decision itself still uses the record: the audit changes no result,
 * only adds the read-back's driver calls (about 12 per node).
 *
 * The record is copied under rec_lock and read back after it is dropped
 * (driver calls are never made under it): a graph another thread changes
 * in between may show as a mismatch. Counters: atomic.
 */
#include "rec_internal.h"

#include "log.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int auditing;                       /* written once at start-up */
static unsigned long audited, mismatches;  /* atomic */

void sg_rec_audit_init(int on) { auditing = on; }

void sg_rec_audit_keep(sg_rec_audit *a, const sg_grecord *r)
{
    a->on = 0;
    if (!auditing) return;                     /* the decision's path: nothing more */
    memset(a, 0, sizeof *a);
    if (sg_fp_copy(&a->fp, &r->fp) != 0) {
        sg_fp_free(&a->fp);
        return;
    }
    a->handles = sg_grecord_handles(r);
    if (!a->handles && r->unknown < r->fp.n) { /* some known, and no memory to copy them */
        sg_fp_free(&a->fp);
        return;
    }
    a->on = 1;
}

/* A node's hash over what sg_fp_same_order compares. */
static uint64_t node_hash(const sg_fp_node *x)
{
    const sg_fp_key *k = &x->k;
    uint64_t h = 0xcbf29ce484222325ull;
    h = sg_fnv1a(h, &k->type, sizeof k->type);
    h = sg_fnv1a(h, &k->state, sizeof k->state);
    h = sg_fnv1a(h, &k->func, sizeof k->func);
    h = sg_fnv1a(h, &k->kern, sizeof k->kern);
    h = sg_fnv1a(h, k->grid, sizeof k->grid);
    h = sg_fnv1a(h, k->block, sizeof k->block);
    h = sg_fnv1a(h, &k->shmem, sizeof k->shmem);
    h = sg_fnv1a(h, &x->len, sizeof x->len);
    return sg_fnv1a(h, x->pay, x->len);
}

typedef struct { uint64_t h, h2; unsigned char data[8]; uint32_t i; } keyed;

static int keyed_cmp(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    if (x->h2 != y->h2) return x->h2 < y->h2 ? -1 : 1;
    return memcmp(x->data, y->data, sizeof x->data);
}

static int keyed_same(const keyed *x, const keyed *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (x[i].h != y[i].h || x[i].h2 != y[i].h2 || memcmp(x[i].data, y[i].data, sizeof x[i].data))
            return 0;
    return 1;
}

/* fp's nodes (hashes in nh, sorted with their indices into ks) and edges
 * (endpoint hashes, sorted into ke); 0, or -1 if out of memory. */
static int keys_of(const sg_fp *fp, uint64_t *nh, keyed *ks, keyed *ke)
{
    for (size_t i = 0; i < fp->n; i++) {
        nh[i] = node_hash(&fp->nodes[i]);
        ks[i] = (keyed){ .h = nh[i], .i = (uint32_t)i };
    }
    for (size_t i = 0; i < fp->nedges; i++) {
        const sg_fp_edge *e = &fp->edges[i];
        if (e->from >= fp->n || e->to >= fp->n) return -1;
        ke[i] = (keyed){ .h = nh[e->from], .h2 = nh[e->to], .i = (uint32_t)i };
        memcpy(ke[i].data, e->data, sizeof ke[i].data);
    }
    qsort(ks, fp->n, sizeof *ks, keyed_cmp);
    qsort(ke, fp->nedges, sizeof *ke, keyed_cmp);
    return 0;
}

/* The driver need not list nodes in creation order (cuGraphGetNodes
 * promises none): the record's nodes and edges compared with rb's as
 * multisets of node hashes and of edges between them. perm[i] is the
 * driver's index of record node i, or UINT32_MAX where another node has the
 * same hash (such nodes cannot be told apart: their attributes and handles
 * are not checked). NULL if they match; what differs if not. */
static const char *unordered_difference(const sg_fp *fp, const sg_fp *rb, uint32_t *perm)
{
    size_t n = fp->n, ne = fp->nedges;
    const char *what = "out of memory";
    uint64_t *nh = malloc(2 * (n ? n : 1) * sizeof *nh);
    keyed *ks = malloc(2 * (n ? n : 1) * sizeof *ks), *ke = malloc(2 * (ne ? ne : 1) * sizeof *ke);
    if (nh && ks && ke && keys_of(fp, nh, ks, ke) == 0 && keys_of(rb, nh + n, ks + n, ke + ne) == 0) {
        what = !keyed_same(ks, ks + n, n) ? "node parameters" : !keyed_same(ke, ke + ne, ne) ? "edges" : NULL;
        for (size_t k = 0; !what && k < n; k++) {
            int tied = (k > 0 && ks[k - 1].h == ks[k].h) || (k + 1 < n && ks[k + 1].h == ks[k].h);
            perm[ks[k].i] = tied ? UINT32_MAX : ks[n + k].i;
        }
    }
    free(nh);
    free(ks);
    free(ke);
    return what;
}

/* Where record fp first differs from rb, the graph read back (s its node
 * handles), as "what" at record node *at (-1: the graph as a whole); NULL if
 * nowhere. */
static const char *first_difference(const sg_fp *fp, const CUgraphNode *handles, const sg_fp *rb,
                                    const sg_fp_scratch *s, long *at)
{
    static const unsigned char zero[SG_FP_ATTR_BYTES];
    *at = -1;
    if (fp->n != rb->n) return "node count";
    if (fp->nedges != rb->nedges) return "edge count";
    uint32_t *perm = malloc((fp->n ? fp->n : 1) * sizeof *perm);
    if (!perm) return "out of memory";
    const char *what = NULL;
    if (sg_fp_same_order(fp, rb)) {
        for (size_t i = 0; i < fp->n; i++) perm[i] = (uint32_t)i;
    } else {
        what = unordered_difference(fp, rb, perm);
    }
    for (size_t i = 0; !what && i < fp->n; i++) {
        if (perm[i] == UINT32_MAX) continue;
        const sg_fp_key *k = &fp->nodes[i].k, *d = &rb->nodes[perm[i]].k;
        *at = (long)i;
        if (handles && handles[i] && handles[i] != s->nodes[perm[i]]) what = "node handle";
        if (what || k->type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
#define SG_AUDIT_ATTR_(id, bytes, off)                                        \
        if (!what && (d->attr_mask & (1u << (id))) &&                         \
            memcmp(k->attr_mask & (1u << (id)) ? k->attrs + (off) : zero, d->attrs + (off), (bytes)) && \
            ((k->attr_mask & (1u << (id))) || (id) != CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP)) \
            what = "launch attribute " #id;
        SG_FP_ATTR_LIST(SG_AUDIT_ATTR_)
#undef SG_AUDIT_ATTR_
    }
    free(perm);
    if (!what) *at = -1;
    return what;
}

/* A kernel node without argument bytes that is not comparable, described
 * as the comparable one it is taken for: a kernel without parameters is
 * recorded comparable when launched with kernelParams NULL and not
 * comparable with an (empty) array (fp_desc.c: an empty layout with an
 * array cannot be told from a probe that failed at once), and the driver
 * hands an array back either way. Both descriptions keep the library from
 * skipping wrongly (one not comparable never compares equal); which one a
 * node gets is not what the audit checks (round 27, adv_records noparams:
 * every record of such a node counted as a mismatch). */
static void audit_norm(sg_fp *fp)
{
    for (size_t i = 0; i < fp->n; i++) {
        sg_fp_key *k = &fp->nodes[i].k;
        if (k->type == CU_GRAPH_NODE_TYPE_KERNEL && k->state == SG_FP_NOT_COMPARABLE && !fp->nodes[i].len)
            k->state = SG_FP_OK;
    }
}

void sg_rec_audit_run(sg_rec_audit *a, CUgraph g)
{
    if (!a->on) return;
    sg_fp rb;
    sg_fp_scratch s;
    memset(&rb, 0, sizeof rb);
    memset(&s, 0, sizeof s);
    long at = -1;
    sg_fp_cache_enter();
    int read = sg_fp_build(&rb, g, &s, NULL) == 0;    /* else the driver cannot say: not audited */
    if (read) {
        audit_norm(&a->fp);
        audit_norm(&rb);
    }
    const char *what = read ? first_difference(&a->fp, a->handles, &rb, &s, &at) : NULL;
    sg_fp_cache_leave();
    if (read) __atomic_add_fetch(&audited, 1, __ATOMIC_RELAXED);
    if (what) {
        __atomic_add_fetch(&mismatches, 1, __ATOMIC_RELAXED);
        char where[48] = "";
        if (at >= 0) snprintf(where, sizeof where, ", node %ld of %zu", at, a->fp.n);
        SG_ERROR("record audit: graph %p: the capture-time record differs from the driver's graph "
                 "(%s%s): a decision made on it may be wrong; please report the program",
                 (void *)g, what, where);
    }
    sg_fp_free(&rb);
    sg_fp_scratch_free(&s);
    sg_fp_free(&a->fp);
    free(a->handles);
    a->on = 0;
}

void sg_rec_audit_counts(unsigned long *n, unsigned long *bad)
{
    *n = __atomic_load_n(&audited, __ATOMIC_RELAXED);
    *bad = __atomic_load_n(&mismatches, __ATOMIC_RELAXED);
}

void sg_rec_audit_reset(void)
{
    __atomic_store_n(&audited, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mismatches, 0, __ATOMIC_RELAXED);
}
