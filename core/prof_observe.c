/*
 * core/prof_observe.c: the profiled policy's profiling and decision
 * (prof.h): where an exec's pointers are at each profiled launch, what
 * varied, which pointers could be aliased into slots and at what cost, and
 * the decision between PLAIN and VARIANTS.
 *
 * A position is a word of a node's canonical payload (kernel arguments; the
 * device address words of memcpy / memset nodes) whose value lies inside a
 * placed allocation. Profiling merges each launch's positions into p->pos
 * (sorted by node, offset) and records which payload bytes varied. The
 * decision makes groups of the positions that pointed into an own-handle
 * allocation of the exec's context at every launch and into another one from
 * launch to launch (aliasing: opt-in), and decides for variants (RENTING
 * first: prof_rent.c buys them once the forwarded updates have cost as
 * much) when some pointer varied, every node of L could be read (a node the
 * library cannot read would make every variant run what it held at
 * instantiation) and L's attributes are those of instantiation (a clone,
 * taken when variants are bought, must have them: prof_restore.c). While
 * renting, any update variants would not accept sends the exec back to
 * profiling, and nothing else changes what these checks found.
 */
#include "prof.h"

#include "driver.h"
#include "log.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* Published VMM costs per 2 MiB (background.md, third-party, A100): used
 * until the library has measured its own binds. */
#define SG_DEFAULT_BIND_NS (1450ull + 36000ull + 25600ull)
#define SG_DEFAULT_PAGE ((size_t)2 << 20)

/* ------------------------------------------------------------ profiling */

typedef struct hit { uint32_t node, off; uint64_t id; size_t size; int own; } hit;
typedef struct hits { hit *h; size_t n, cap; int oom; CUcontext ctx; } hits;

static void collect(void *u, sg_prof_pos pos, uint64_t value, const sg_alloc_info *ai)
{
    (void)value;
    hits *hs = u;
    if (hs->n == hs->cap) {
        size_t cap = hs->cap ? 2 * hs->cap : 64;
        hit *h = sg_big_realloc(hs->h, cap * sizeof *h);
        if (!h) { hs->oom = 1; return; }
        hs->h = h;
        hs->cap = cap;
    }
    hs->h[hs->n++] = (hit){ pos.node, pos.off, ai->id, ai->size,
                            ai->own_handles && (!hs->ctx || ai->ctx == hs->ctx) };
}

/* FNV-1a over v's 8 bytes, least significant first. */
static uint64_t fnv_mix(uint64_t h, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    return sg_fnv1a(h, b, sizeof b);
}

static int pos_cmp(uint32_t an, uint32_t ao, uint32_t bn, uint32_t bo)
{
    return an != bn ? (an < bn ? -1 : 1) : ao != bo ? (ao < bo ? -1 : 1) : 0;
}

/* Whether every hit is at a position p->pos already holds (both sorted). */
static int no_new_position(const sg_prof *p, const hits *hs)
{
    size_t i = 0;
    for (size_t j = 0; j < hs->n; j++) {
        const hit *h = &hs->h[j];
        while (i < p->npos && pos_cmp(p->pos[i].node, p->pos[i].off, h->node, h->off) < 0) i++;
        if (i == p->npos || pos_cmp(p->pos[i].node, p->pos[i].off, h->node, h->off) != 0) return 0;
    }
    return 1;
}

/* Merges this launch's hits (sorted) into p->pos. -1 if out of memory.
 * When no hit is at a new position (every launch after the first, as a rule)
 * each position is rewritten where it is: no second buffer of positions. */
static int merge_hits(sg_prof *p, const hits *hs)
{
    int in_place = no_new_position(p, hs);
    ppos *dst = p->pos;
    if (!in_place) {
        size_t need = p->npos + hs->n;
        if (need > p->captmp) {
            ppos *t = sg_big_realloc(p->tmp, need * sizeof *t);
            if (!t) return -1;
            p->tmp = t;
            p->captmp = need;
        }
        dst = p->tmp;
    }
    /* in place, k == i after each entry: nothing unread is overwritten */
    size_t i = 0, j = 0, k = 0;
    int first = p->launches == 0;
    while (i < p->npos || j < hs->n) {
        int c = i == p->npos ? 1 : j == hs->n ? -1
              : pos_cmp(p->pos[i].node, p->pos[i].off, hs->h[j].node, hs->h[j].off);
        ppos q;
        if (c < 0) {                      /* not a pointer this time */
            q = p->pos[i++];
            q.own_always = 0;
            q.idseq = fnv_mix(q.idseq, 0);
            q.changes += q.id_last != 0;
            q.id_last = 0;
        } else {
            const hit *h = &hs->h[j++];
            if (c == 0) {
                q = p->pos[i++];
                q.seen++;
                q.own_always &= h->own;
                q.changes += q.id_last != h->id;
            } else {                      /* new: it was no pointer at the earlier launches */
                memset(&q, 0, sizeof q);
                q.node = h->node;
                q.off = h->off;
                q.seen = 1;
                q.own_always = first && h->own;
                q.idseq = SG_FNV_BASIS;
                for (int l = 0; l < p->launches; l++) q.idseq = fnv_mix(q.idseq, 0);
                q.id_first = first ? h->id : 0;
                q.changes = !first;
                q.group = -1;
            }
            q.idseq = fnv_mix(q.idseq, h->id);
            q.id_last = h->id;
            if (h->size > q.max_size) q.max_size = h->size;
        }
        dst[k++] = q;
    }
    if (!in_place) {
        ppos *t = p->pos;
        size_t cap = p->cappos;
        p->pos = p->tmp;
        p->cappos = p->captmp;
        p->tmp = t;
        p->captmp = cap;
    }
    p->npos = k;
    return 0;
}

/* Byte x of node i's payload varied (p->varied). */
static void varied_set(sg_prof *p, size_t i, uint32_t x)
{
    size_t b = p->vbit[i] + x;
    p->varied[b / 8] |= (unsigned char)(1u << (b % 8));
}
static int varied_get(const sg_prof *p, size_t i, uint32_t x)
{
    size_t b = p->vbit[i] + x;
    return p->varied[b / 8] >> (b % 8) & 1;
}

/* Records L at a profiled launch. -1 if out of memory (profiling restarts). */
int sg_prof_observe(sg_prof *p, const sg_fp *L)
{
    if (p->launches > 0 && !sg_prof_same_shape(&p->base, L)) sg_prof_profile_reset(p);
    if (p->launches == 0) {
        sg_prof_profile_reset(p);
        if (sg_prof_fp_copy(&p->base, L)) return -1;
        if (!(p->vbit = sg_big_realloc(NULL, (L->n + 1) * sizeof *p->vbit))) return -1;
        size_t bits = 0;
        for (size_t i = 0; i < L->n; i++) {
            p->vbit[i] = bits;
            bits += L->nodes[i].len;
        }
        p->vbit[L->n] = bits;
        if (!(p->varied = sg_big_realloc(NULL, bits / 8 + 1))) return -1;
        memset(p->varied, 0, bits / 8 + 1);
        p->nvaried = L->n;
    } else {
        for (size_t i = 0; i < L->n; i++) {
            const sg_fp_node *a = &p->base.nodes[i], *b = &L->nodes[i];
            if (sg_bytes_eq(a->pay, b->pay, b->len)) continue;
            for (uint32_t x = 0; x < b->len; x++)
                if (a->pay[x] != b->pay[x]) varied_set(p, i, x);
        }
    }
    sg_prof_count_state(p, L);
    hits hs = { .ctx = p->ctx };
    sg_prof_scan(L, collect, &hs);
    int rc = hs.oom || merge_hits(p, &hs) ? -1 : 0;
    sg_big_free(hs.h);
    if (rc == 0) p->launches++;
    return rc;
}

/* ------------------------------------------------------------ the decision */

static int word_varied(const sg_prof *p, uint32_t node, uint32_t off)
{
    if (node >= p->nvaried || off + 8 > p->base.nodes[node].len) return 0;
    for (uint32_t b = 0; b < 8; b++)
        if (varied_get(p, node, off + b)) return 1;
    return 0;
}

/* Bytes that varied outside every pointer position's word. */
static unsigned scalar_bytes_varied(const sg_prof *p)
{
    unsigned n = 0;
    size_t k = 0;
    for (size_t i = 0; i < p->nvaried; i++) {
        uint32_t len = p->base.nodes[i].len;
        for (uint32_t x = 0; x < len; x++) {
            while (k < p->npos && pos_cmp(p->pos[k].node, p->pos[k].off + 7, (uint32_t)i, x) < 0) k++;
            int covered = k < p->npos && p->pos[k].node == i && p->pos[k].off <= x;
            if (!covered && varied_get(p, i, x)) n++;
        }
    }
    return n;
}

/* Estimated VMM time per bind of an allocation of `size` bytes. */
static unsigned long long bind_ns(size_t size)
{
    sg_slot_stats s = sg_prof_slots->stats();
    unsigned long real = s.binds > s.binds_reused ? s.binds - s.binds_reused : 0;
    if (real) return (s.map_ns + s.unmap_ns + s.access_ns) / real;
    size_t pages = (size + SG_DEFAULT_PAGE - 1) / SG_DEFAULT_PAGE;
    return (pages ? pages : 1) * SG_DEFAULT_BIND_NS;
}

/* Groups the aliasable varying positions (own-handle every time, same
 * allocation sequence); returns the number of groups and fills p->slot_size
 * and each position's group, plus the estimated remap time per step. */
static size_t make_groups(sg_prof *p, unsigned long long *remap_ns)
{
    size_t ng = 0;
    *remap_ns = 0;
    for (size_t i = 0; i < p->npos; i++) p->pos[i].group = -1;
    for (size_t i = 0; i < p->npos; i++) {
        ppos *q = &p->pos[i];
        /* aliasable: into an own-handle allocation of the context at every
         * launch, and into another one from launch to launch (a pointer that
         * moves inside one buffer gains nothing from a slot) */
        if (!q->own_always || q->seen != (uint32_t)p->launches || !q->changes ||
            !word_varied(p, q->node, q->off))
            continue;
        int32_t g = -1;
        for (size_t j = 0; j < i && g < 0; j++)
            if (p->pos[j].group >= 0 && p->pos[j].idseq == q->idseq &&
                p->pos[j].id_first == q->id_first)
                g = p->pos[j].group;
        if (g < 0 && ng >= 255) continue;     /* a group index fits a canonical mask byte */
        if (g < 0) {
            size_t *ss = realloc(p->slot_size, (ng + 1) * sizeof *ss);
            if (!ss) break;
            p->slot_size = ss;
            ss[ng] = 0;
            g = (int32_t)ng++;
            unsigned steps = p->launches > 1 ? (unsigned)p->launches - 1 : 1;
            *remap_ns += bind_ns(q->max_size) * q->changes / steps;
        }
        q->group = g;
        if (q->max_size > p->slot_size[g]) p->slot_size[g] = q->max_size;
    }
    return ng;
}

void sg_prof_log_decision(const sg_prof *p)
{
    const sg_exec_profile *d = &p->prof;
    SG_INFO("graph exec %lu (%p): launch %lu: %s (%s): %u pointer positions, %u varying, "
            "%u varying scalar bytes, %u aliased slots, update cost %llu ns/step, estimated remap "
            "cost %llu ns/step, %u generations allowed; variants priced at %llu ns (%u "
            "instantiations), forwarded updates %llu ns so far",
            sg_exec_id(p->exec), (void *)p->exec, p->nlaunch,
            d->generations ? "generations" : d->renting ? "renting" : "plain", d->why, d->positions,
            d->varying_positions, d->varying_scalar_bytes, d->aliased_slots,
            d->update_ns_per_step, d->remap_ns_per_step, d->generations_allowed, d->variant_ns,
            d->variants_priced, d->forwarded_ns);
}


/* Whether every kernel node of L has the attributes its clone node has
 * (variants are instantiated from the clone, whose attributes are those of
 * instantiation time). */
static int attrs_match_clone(const sg_prof *p, const sg_fp *L)
{
    if (L->n != p->clone_st.n) return 0;
    for (size_t i = 0; i < L->n; i++) {
        const sg_fp_key *a = &L->nodes[i].k, *b = &p->clone_st.nodes[i].k;
        if (a->type != b->type || a->attr_mask != b->attr_mask ||
            memcmp(a->attrs, b->attrs, sizeof a->attrs))
            return 0;
    }
    return 1;
}

/* Why some node of L keeps the exec out of variants, or NULL. A node the
 * driver could not describe (a failing query: its operands are unknown) would
 * make every variant run what the clone held at instantiation; a kernel node
 * without argument bytes may have a layout the driver could not report
 * (cuFuncGetParamInfo failing at index 0 reads as "no parameters"), and then
 * its arguments are invisible. Such an exec stays PLAIN (skip_temp forwards
 * any update in which something else changed, the whole graph with it). */
static const char *unreadable(const sg_fp *L)
{
    for (size_t i = 0; i < L->n; i++) {
        const sg_fp_node *n = &L->nodes[i];
        if (n->k.state != SG_FP_OK) return "a node whose parameters the driver could not report";
        if (n->k.type == CU_GRAPH_NODE_TYPE_KERNEL && n->len == 0)
            return "a kernel node without argument bytes (its layout may be unknown)";
    }
    return NULL;
}

void sg_prof_decide(sg_prof *p, const sg_fp *L)
{
    sg_exec_profile *d = &p->prof;
    memset(d, 0, sizeof *d);
    d->decided = 1;
    d->positions = (unsigned)p->npos;
    for (size_t i = 0; i < p->npos; i++) d->varying_positions += word_varied(p, p->pos[i].node, p->pos[i].off);
    d->varying_scalar_bytes = scalar_bytes_varied(p);
    d->update_ns_per_step = p->launches ? p->update_ns / (unsigned long long)p->launches : 0;
    d->generations_allowed = (unsigned)sg_prof_caps.max_variants;
    unsigned long long remap = 0;
    size_t ng = make_groups(p, &remap);
    sg_alias_mode am = sg_prof_caps.alias_mode;
    int alias = sg_prof_caps.alias &&
                (am == SG_ALIAS_ALWAYS || (am == SG_ALIAS_AUTO && remap < d->update_ns_per_step));
    if (!ng || !alias) {
        for (size_t i = 0; i < p->npos; i++) p->pos[i].group = -1;
        ng = 0;
    }
    d->aliased_slots = (unsigned)ng;
    d->remap_ns_per_step = remap;
    p->ngroups = ng;
    p->state = SG_PROF_PLAIN;
    const char *why_not = unreadable(L);
    if (!d->varying_positions) {
        d->why = "no pointer varied";
    } else if (why_not) {
        d->why = why_not;
    } else if (!p->sim && !attrs_match_clone(p, L)) {
        d->why = "node attributes changed since instantiation";
    } else if (sg_prof_caps.max_variants == 1 && !ng) {
        d->why = "one generation allowed and nothing aliased";
    } else {
        d->why = ng ? "varying pointers; aliased into slots"
               : !sg_prof_caps.alias ? "varying pointers; aliasing off (STABLEGRAPH_ALIAS=never)"
               : remap == 0 ? "varying pointers; none in own-handle buffers"
                            : "varying pointers; remapping costs more than updating";
        (void)sg_prof_rent_start(p, L, ng);   /* variants are bought when renting has cost as much */
    }
}

void sg_prof_decided(sg_prof *p)
{
    if (p->state == SG_PROF_PLAIN) p->ngroups = 0;
    if (!p->sim) sg_prof_log_decision(p);
    sg_exec_set_profile(p->exec, &p->prof);
    sg_prof_plain_for_good(p);
}

/* PLAIN is never left (only PROFILING, RENTING and VARIANTS change state),
 * so a PLAIN exec never profiles again nor makes a variant from its clone:
 * what profiling held goes, and so do the clone, if it was taken (the
 * driver's copy of the whole graph), and clone_st, which are kept while the
 * program's exec waits to be restored from them (x0_stale). */
void sg_prof_plain_for_good(sg_prof *p)
{
    if (p->state != SG_PROF_PLAIN) return;
    sg_prof_profile_free(p);
    if (p->sim || p->x0_stale || (!p->clone && !p->clone_st.nodes)) return;
    int had = p->clone != NULL;
    sg_prof_clone_free(p);
    if (had)
        SG_DEBUG("graph exec %lu (%p): plain for good: the graph's clone released at launch %lu",
                 sg_exec_id(p->exec), (void *)p->exec, p->nlaunch);
}
