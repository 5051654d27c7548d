/*
 * core/profiled.c: the skip_profiled policy (profiled.h): profiling, the
 * decision, and exec variants ("generations") whose driver state is the
 * program's logical state translated through slots (slots.h).
 *
 * Terms:
 *   L      the logical state: what the program last asked the exec to hold
 *          (graphs.c's record fingerprint, raw values).
 *   X_g    the driver execs: X_0 is the program's own exec, X_g>0 the
 *          library's, instantiated from a clone of the graph taken at
 *          instantiate time (one clone per exec; its nodes found with
 *          cuGraphNodeFindInClone; `clone_st` tracks what the clone holds).
 *   group  the aliased positions that pointed into the same own-handle
 *          allocation at every profiled launch: one slot per group and
 *          generation.
 *   canonical payload  a node's payload with every aliased word replaced by
 *          its offset within the allocation it points into. Generation g's
 *          driver state equals T_g(L) (aliased words = slot address +
 *          offset, everything else raw) exactly when the canonical payloads
 *          it was set from equal L's, node by node, so each generation keeps
 *          its canonical payloads (`canon`), a per-node equality flag and the
 *          number of mismatching nodes (`mism`). A changed node of L is
 *          compared once per generation; a launch whose L did not change
 *          compares nothing.
 *
 * Launch in GENERATIONS mode (choose_generation): the first generation that
 * holds T_g(L) and whose slots already show L's allocations (no driver call
 * but the launch); else a new generation while fewer than
 * STABLEGRAPH_MAX_GENERATIONS exist (slots created and bound, clone set to
 * T_g(L), instantiated: a variant); else one that holds T_g(L) (rebind, an
 * idle one first); else the least recently used one (rebind, and the exec
 * brought to T_g(L) with one cuGraphExecUpdate from the clone: counted as a
 * forwarded update). Deviation from the brief's order (which rebinds a
 * matching generation before making a new one): a program rotating among
 * k <= MAX_GENERATIONS buffer sets would then remap on every launch; making
 * the new generation first is what gives rotating_inputs its steady state
 * with no VMM call at all (issue 5).
 *
 * Any failure of a slot or instantiate call, an aliased group whose
 * positions leave their allocation, or a buffer that does not fit its slot:
 * the exec is demoted (X_0 restored to L, variants destroyed) and stays
 * PLAIN, with the reason logged.
 *
 * Restoring the program's exec (x0_restore): X_0 must never be launched in a
 * state other than raw L. Three paths, each on driver entries the others do
 * not use but for cuGraphExecUpdate_v2 (A and C), so that one failing entry
 * leaves one working:
 *   A  the clone set to raw L through the per-type setters
 *      (cuGraphKernelNodeSetParams_v2, cuGraphMemcpyNodeSetParams,
 *      cuGraphMemsetNodeSetParams), one cuGraphExecUpdate_v2 of X_0;
 *   B  per-node exec updates of X_0 (cuGraphExecKernelNodeSetParams_v2 with
 *      L's canonical payload as an `extra` buffer, cuGraphExecMemcpy /
 *      MemsetNodeSetParams) for the nodes where what X_0 holds (`x0_st`,
 *      kept from the decision on) differs from L; these name the nodes of
 *      the graph X_0 was instantiated from, so they fail once the program
 *      has destroyed that graph;
 *   C  (when A failed before its update) the clone set through the generic
 *      cuGraphNodeSetParams, one cuGraphExecUpdate_v2.
 * If all fail, X_0 is "stale": PLAIN, keeping generation 0's slots; every
 * later launch and demote retries the restore, and the launch returns an
 * error instead of running X_0 (plausible(): CUDA_ERROR_OUT_OF_MEMORY, or
 * a driver error that says the context is unusable), until a restore or a
 * forwarded whole-graph update of the program (which sets every node:
 * graphs.c forwards the program's updates of a demoted exec even when the
 * restore before them failed, the eager application of its state) brings
 * X_0 to the program's state.
 *
 * Thread safety: see profiled.h (the exec record's mutex guards an sg_prof;
 * the module settings are written once at init).
 */
#include "profiled.h"

#include "driver.h"
#include "log.h"
#include "stats.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ settings */

static int prof_steps = SG_PROFILE_STEPS_DEFAULT;
static sg_alias_mode alias_mode = SG_ALIAS_DEFAULT;
static int max_gens = SG_MAX_GENERATIONS_DEFAULT;

void sg_prof_init(const sg_config *cfg)
{
    prof_steps = cfg->profile_steps > 0 ? cfg->profile_steps : SG_PROFILE_STEPS_DEFAULT;
    alias_mode = cfg->alias;
    max_gens = cfg->max_generations > 0 ? cfg->max_generations : SG_MAX_GENERATIONS_DEFAULT;
    if (cfg->policy == SG_POLICY_SKIP_PROFILED && cfg->alias != SG_ALIAS_NEVER)
        sg_mem_set_own_handles_min(cfg->alias_min_bytes ? cfg->alias_min_bytes : 1);
}

static const sg_prof_slot_ops real_ops = {
    sg_slot_gen_create, sg_slot_addr, sg_slot_gen_matches, sg_slot_gen_idle,
    sg_slot_gen_bind, sg_slot_gen_launched, sg_slot_gen_destroy, sg_slots_stats,
};
static const sg_prof_slot_ops *ops = &real_ops;

void sg_prof_set_slot_ops(const sg_prof_slot_ops *o) { ops = o ? o : &real_ops; }

static sg_prof_find_fn find_hook;
void sg_prof_set_find(sg_prof_find_fn fn) { find_hook = fn; }

unsigned long long sg_prof_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* Published VMM costs per 2 MiB (background.md, third-party, A100): used
 * until the library has measured its own binds. */
#define SG_DEFAULT_BIND_NS (1450ull + 36000ull + 25600ull)
#define SG_DEFAULT_PAGE ((size_t)2 << 20)

/* ------------------------------------------------------------ lookups */

/* Many lookups in a row: one memory view (or the test's hook). Under
 * always_update nothing is placed, so the simulation asks the driver for the
 * allocation range instead (such allocations never have own handles). */
typedef struct finder { const sg_mem_view *v; int driver; } finder;

static void finder_begin(finder *f)
{
    f->v = find_hook ? NULL : sg_mem_view_acquire();
    f->driver = !find_hook && sg_core_policy() == SG_POLICY_ALWAYS_UPDATE &&
                sg_drv.cuPointerGetAttribute;
}
static void finder_end(finder *f) { if (f->v) sg_mem_view_release(f->v); }

static int driver_find(uint64_t p, sg_alloc_info *ai)
{
    CUdeviceptr start = 0;
    size_t size = 0;
    CUcontext ctx = NULL;
    if (SG_DRIVER_CALL(cuPointerGetAttribute, &start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                       (CUdeviceptr)p) != CUDA_SUCCESS ||
        SG_DRIVER_CALL(cuPointerGetAttribute, &size, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                       (CUdeviceptr)p) != CUDA_SUCCESS)
        return 0;
    if (SG_DRIVER_CALL(cuPointerGetAttribute, &ctx, CU_POINTER_ATTRIBUTE_CONTEXT,
                       (CUdeviceptr)p) != CUDA_SUCCESS)
        ctx = NULL;
    *ai = (sg_alloc_info){ .base = start, .size = size, .id = start, .ctx = ctx };
    return 1;
}

static int finder_find(const finder *f, uint64_t p, sg_alloc_info *ai)
{
    if (!p) return 0;
    if (find_hook) return find_hook((CUdeviceptr)p, ai);
    if (f->v ? sg_mem_view_find(f->v, (CUdeviceptr)p, ai) : sg_mem_find((CUdeviceptr)p, ai))
        return 1;
    return f->driver && driver_find(p, ai);
}

/* A node's payload; never NULL (a payload of length 0 may have no buffer). */
static const unsigned char empty_pay[8];
static const unsigned char *pay_of(const sg_fp_node *n) { return n->pay ? n->pay : empty_pay; }

static uint64_t word_at(const unsigned char *pay, uint32_t off)
{
    uint64_t v;
    memcpy(&v, pay + off, 8);
    return v;
}

static void word_put(unsigned char *pay, uint32_t off, uint64_t v) { memcpy(pay + off, &v, 8); }

/* The address words of a memcpy / memset payload: up to 2 offsets into
 * `offs`; a memcpy operand counts only with device memory type. */
static int address_words(const sg_fp_node *n, uint32_t offs[2])
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
    finder f;
    finder_begin(&f);
    for (size_t i = 0; i < fp->n; i++) {
        const sg_fp_node *n = &fp->nodes[i];
        sg_alloc_info ai;
        if (n->k.state != SG_FP_OK) continue;
        if (n->k.type == CU_GRAPH_NODE_TYPE_KERNEL) {
            for (uint32_t off = 0; off + 8 <= n->len; off += 8) {
                uint64_t v = word_at(n->pay, off);
                if (finder_find(&f, v, &ai)) fn(u, (sg_prof_pos){ (uint32_t)i, off }, v, &ai);
            }
            continue;
        }
        uint32_t offs[2];
        int k = address_words(n, offs);
        for (int j = 0; j < k; j++) {
            uint64_t v = word_at(n->pay, offs[j]);
            if (finder_find(&f, v, &ai)) fn(u, (sg_prof_pos){ (uint32_t)i, offs[j] }, v, &ai);
        }
    }
    finder_end(&f);
}

/* ------------------------------------------------------------ state */

/* A pointer position while profiling. */
typedef struct ppos {
    uint32_t node, off;
    uint32_t seen;          /* profiled launches at which it pointed into a placed allocation */
    int own_always;         /* into an own-handle allocation of the exec's context every time */
    uint64_t id_first, id_last;
    uint64_t idseq;         /* FNV-1a over the allocation id at each launch (0: none) */
    uint32_t changes;       /* launches at which its allocation differed from the previous */
    size_t max_size;        /* largest allocation it pointed into */
    int32_t group;
} ppos;

/* An aliased position in GENERATIONS mode. */
typedef struct apos {
    uint32_t node, off;
    uint32_t group;
    uint64_t canon;         /* value - allocation base at the last reconcile */
} apos;

typedef struct pgen {
    int live;
    CUgraphExec exec;       /* gen 0: the program's */
    sg_slot_gen *slots;     /* NULL without aliasing (or not made yet) */
    unsigned char **canon;  /* per node: canonical payload the exec holds; NULL = unknown */
    uint32_t *clen;
    unsigned char *eq;      /* per node: canon == L's canonical payload */
    size_t mism;            /* nodes with eq == 0 */
    unsigned long last_use;
} pgen;

struct sg_prof {
    CUgraphExec exec;
    int sim;                /* always_update: decide and count, never act */
    int state;
    int final_plain;        /* PLAIN after a failure: never profiled again */
    CUcontext ctx;
    CUdevice dev;
    unsigned long long inst_flags;
    /* the clone */
    CUgraph clone;
    CUgraphNode *clone_nodes;
    sg_fp clone_st;         /* what each clone node holds (keys and payloads) */
    /* X_0 (restore paths, see "Restoring the program's exec" above) */
    CUgraphNode *nodes;     /* the nodes X_0 was instantiated from (its per-node updates name them) */
    sg_fp x0_st;            /* what X_0 holds, raw, while x0_known */
    int x0_known;
    int x0_stale;           /* X_0 does not hold L: nothing may launch it before it is restored */
    size_t n;               /* node count (of the clone / L while GENERATIONS) */
    /* profiling */
    int launches;
    unsigned long long update_ns;
    sg_fp base;             /* L at the first profiled launch */
    unsigned char **varied; /* per node of base: bytes that differed at some launch */
    size_t nvaried;
    ppos *pos;
    size_t npos, cappos;
    ppos *tmp;              /* merge buffer */
    size_t captmp;
    sg_exec_profile prof;
    /* generations */
    apos *ap;
    size_t nap;
    uint32_t *ap_first;     /* per node: first index into ap (n + 1 entries) */
    size_t ngroups;
    size_t *slot_size;
    sg_slot_bind *want;     /* per group: what L points into */
    unsigned char **lc;     /* per node with aliased positions: canonical payload */
    uint32_t *lc_cap;
    unsigned char *dirty;
    uint32_t *dirty_list;
    size_t ndirty;
    pgen gens[SG_MAX_GENERATIONS_MAX];
    int cur;                /* last generation launched */
    int hit;                /* the launch fast path's generation, or -1 (see set_hit) */
    unsigned long tick;
    unsigned char *scratch; /* a translated payload */
    size_t scratch_cap;
};

int sg_prof_state(const sg_prof *p) { return p->state; }

/* Copies src into dst (dst's buffers reused). 0, or -1 if out of memory. */
static int fp_copy(sg_fp *dst, const sg_fp *src)
{
    if (src->n > dst->nodes_cap) {
        sg_fp_node *nn = realloc(dst->nodes, src->n * sizeof *nn);
        if (!nn) return -1;
        memset(nn + dst->nodes_cap, 0, (src->n - dst->nodes_cap) * sizeof *nn);
        dst->nodes = nn;
        dst->nodes_cap = src->n;
    }
    if (src->nedges > dst->edges_cap) {
        sg_fp_edge *e = realloc(dst->edges, src->nedges * sizeof *e);
        if (!e) return -1;
        dst->edges = e;
        dst->edges_cap = src->nedges;
    }
    for (size_t i = 0; i < src->n; i++)
        if (sg_fp_node_copy(&dst->nodes[i], &src->nodes[i])) return -1;
    if (src->nedges) memcpy(dst->edges, src->edges, src->nedges * sizeof *src->edges);
    dst->n = src->n;
    dst->nedges = src->nedges;
    dst->unsupported = src->unsupported;
    return 0;
}

/* Whether a and b have the same topology and node keys (payload lengths
 * included): the only thing profiling may see change is payload bytes. */
static int same_shape(const sg_fp *a, const sg_fp *b)
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

static void profile_reset(sg_prof *p)
{
    for (size_t i = 0; i < p->nvaried; i++) free(p->varied[i]);
    free(p->varied);
    p->varied = NULL;
    p->nvaried = 0;
    p->base.n = p->base.nedges = 0;
    p->npos = 0;
    p->launches = 0;
    p->update_ns = 0;
}

sg_prof *sg_prof_new(CUgraphExec exec, CUgraph graph, const sg_fp *fp, const CUgraphNode *nodes,
                     int clone)
{
    sg_prof *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->exec = exec;
    p->sim = !clone;
    p->state = SG_PROF_PROFILING;
    p->hit = -1;
    if (sg_drv.cuCtxGetCurrent) SG_DRIVER_CALL(cuCtxGetCurrent, &p->ctx);
    if (p->ctx && sg_drv.cuCtxGetDevice) SG_DRIVER_CALL(cuCtxGetDevice, &p->dev);
    if (!clone) return p;
    cuuint64_t flags = 0;
    if (sg_drv.cuGraphExecGetFlags &&
        SG_DRIVER_CALL(cuGraphExecGetFlags, exec, &flags) == CUDA_SUCCESS)
        p->inst_flags = flags & (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                 CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
    /* Without a clone the exec can only be PLAIN (decided at the decision). */
    if (!sg_drv.cuGraphClone || !sg_drv.cuGraphNodeFindInClone || !sg_drv.cuGraphDestroy ||
        SG_DRIVER_CALL(cuGraphClone, &p->clone, graph) != CUDA_SUCCESS) {
        p->clone = NULL;
        return p;
    }
    p->clone_nodes = calloc(fp->n ? fp->n : 1, sizeof *p->clone_nodes);
    p->nodes = malloc((fp->n ? fp->n : 1) * sizeof *p->nodes);
    if (p->nodes && fp->n) memcpy(p->nodes, nodes, fp->n * sizeof *nodes);
    int ok = p->clone_nodes && fp_copy(&p->clone_st, fp) == 0;
    for (size_t i = 0; ok && i < fp->n; i++)
        ok = SG_DRIVER_CALL(cuGraphNodeFindInClone, &p->clone_nodes[i], nodes[i], p->clone) ==
             CUDA_SUCCESS;
    if (!ok) {
        SG_DRIVER_CALL(cuGraphDestroy, p->clone);
        p->clone = NULL;
    }
    p->n = fp->n;
    return p;
}

/* ------------------------------------------------------------ profiling */

typedef struct hit { uint32_t node, off; uint64_t id; size_t size; int own; } hit;
typedef struct hits { hit *h; size_t n, cap; int oom; CUcontext ctx; } hits;

static void collect(void *u, sg_prof_pos pos, uint64_t value, const sg_alloc_info *ai)
{
    (void)value;
    hits *hs = u;
    if (hs->n == hs->cap) {
        size_t cap = hs->cap ? 2 * hs->cap : 64;
        hit *h = realloc(hs->h, cap * sizeof *h);
        if (!h) { hs->oom = 1; return; }
        hs->h = h;
        hs->cap = cap;
    }
    hs->h[hs->n++] = (hit){ pos.node, pos.off, ai->id, ai->size,
                            ai->own_handles && (!hs->ctx || ai->ctx == hs->ctx) };
}

static uint64_t fnv_mix(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}
#define SG_FNV_BASIS 0xcbf29ce484222325ull

static int pos_cmp(uint32_t an, uint32_t ao, uint32_t bn, uint32_t bo)
{
    return an != bn ? (an < bn ? -1 : 1) : ao != bo ? (ao < bo ? -1 : 1) : 0;
}

/* Merges this launch's hits (sorted) into p->pos. -1 if out of memory. */
static int merge_hits(sg_prof *p, const hits *hs)
{
    size_t need = p->npos + hs->n;
    if (need > p->captmp) {
        ppos *t = realloc(p->tmp, need * sizeof *t);
        if (!t) return -1;
        p->tmp = t;
        p->captmp = need;
    }
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
        p->tmp[k++] = q;
    }
    ppos *t = p->pos;
    size_t cap = p->cappos;
    p->pos = p->tmp;
    p->cappos = p->captmp;
    p->tmp = t;
    p->captmp = cap;
    p->npos = k;
    return 0;
}

/* Records L at a profiled launch. -1 if out of memory (profiling restarts). */
static int observe(sg_prof *p, const sg_fp *L)
{
    if (p->launches > 0 && !same_shape(&p->base, L)) profile_reset(p);
    if (p->launches == 0) {
        profile_reset(p);
        if (fp_copy(&p->base, L)) return -1;
        p->varied = calloc(L->n ? L->n : 1, sizeof *p->varied);
        if (!p->varied) return -1;
        p->nvaried = L->n;
        for (size_t i = 0; i < L->n; i++)
            if (L->nodes[i].len && !(p->varied[i] = calloc(1, L->nodes[i].len))) return -1;
    } else {
        for (size_t i = 0; i < L->n; i++) {
            const sg_fp_node *a = &p->base.nodes[i], *b = &L->nodes[i];
            if (sg_bytes_eq(a->pay, b->pay, b->len)) continue;
            for (uint32_t x = 0; x < b->len; x++)
                if (a->pay[x] != b->pay[x]) p->varied[i][x] = 1;
        }
    }
    hits hs = { .ctx = p->ctx };
    sg_prof_scan(L, collect, &hs);
    int rc = hs.oom || merge_hits(p, &hs) ? -1 : 0;
    free(hs.h);
    if (rc == 0) p->launches++;
    return rc;
}

void sg_prof_timed_update(sg_prof *p, unsigned long long ns)
{
    if (p->state == SG_PROF_PROFILING) p->update_ns += ns;
}

/* ------------------------------------------------------------ the decision */

static int word_varied(const sg_prof *p, uint32_t node, uint32_t off)
{
    if (node >= p->nvaried || !p->varied[node] || off + 8 > p->base.nodes[node].len) return 0;
    for (int b = 0; b < 8; b++)
        if (p->varied[node][off + b]) return 1;
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
            if (p->varied[i][x] && !covered) n++;
        }
    }
    return n;
}

/* Estimated VMM time per bind of an allocation of `size` bytes. */
static unsigned long long bind_ns(size_t size)
{
    sg_slot_stats s = ops->stats();
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
        if (!q->own_always || q->seen != (uint32_t)p->launches || !word_varied(p, q->node, q->off))
            continue;
        int32_t g = -1;
        for (size_t j = 0; j < i && g < 0; j++)
            if (p->pos[j].group >= 0 && p->pos[j].idseq == q->idseq &&
                p->pos[j].id_first == q->id_first)
                g = p->pos[j].group;
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

/* Frees the generation-mode arrays (not the generations). */
static void gen_arrays_free(sg_prof *p)
{
    if (p->lc)
        for (size_t i = 0; i < p->n; i++) free(p->lc[i]);
    free(p->lc);
    free(p->lc_cap);
    free(p->ap);
    free(p->ap_first);
    free(p->want);
    free(p->dirty);
    free(p->dirty_list);
    p->lc = NULL;
    p->lc_cap = NULL;
    p->ap = NULL;
    p->ap_first = NULL;
    p->want = NULL;
    p->dirty = NULL;
    p->dirty_list = NULL;
    p->nap = p->ngroups = p->ndirty = 0;
}

static void gen_free_arrays(pgen *g, size_t n)
{
    if (g->canon)
        for (size_t i = 0; i < n; i++) free(g->canon[i]);
    free(g->canon);
    free(g->clen);
    free(g->eq);
    g->canon = NULL;
    g->clen = NULL;
    g->eq = NULL;
}

static int gen_alloc_arrays(pgen *g, size_t n)
{
    size_t m = n ? n : 1;
    g->canon = calloc(m, sizeof *g->canon);
    g->clen = calloc(m, sizeof *g->clen);
    g->eq = calloc(m, 1);
    g->mism = n;
    return g->canon && g->clen && g->eq ? 0 : -1;
}

static void mark_dirty(sg_prof *p, size_t i)
{
    p->hit = -1;
    if (i < p->n && p->dirty && !p->dirty[i]) {
        p->dirty[i] = 1;
        p->dirty_list[p->ndirty++] = (uint32_t)i;
    }
}

/* Sets up GENERATIONS mode for L with the aliased groups of the profile.
 * Generation 0 is the program's exec, holding raw L. -1 if out of memory. */
static int gen_setup(sg_prof *p, const sg_fp *L, size_t ngroups)
{
    size_t n = L->n;
    p->n = n;
    p->ngroups = ngroups;
    p->nap = 0;
    for (size_t i = 0; i < p->npos; i++) p->nap += p->pos[i].group >= 0;
    p->ap = calloc(p->nap ? p->nap : 1, sizeof *p->ap);
    p->ap_first = calloc(n + 1, sizeof *p->ap_first);
    p->want = calloc(ngroups ? ngroups : 1, sizeof *p->want);
    p->lc = calloc(n ? n : 1, sizeof *p->lc);
    p->lc_cap = calloc(n ? n : 1, sizeof *p->lc_cap);
    p->dirty = calloc(n ? n : 1, 1);
    p->dirty_list = calloc(n ? n : 1, sizeof *p->dirty_list);
    if (!p->ap || !p->ap_first || !p->want || !p->lc || !p->lc_cap || !p->dirty || !p->dirty_list)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < p->npos; i++)
        if (p->pos[i].group >= 0)
            p->ap[k++] = (apos){ p->pos[i].node, p->pos[i].off, (uint32_t)p->pos[i].group,
                                 UINT64_MAX };
    for (size_t i = 0, a = 0; i <= n; i++) {
        while (a < p->nap && p->ap[a].node < i) a++;
        p->ap_first[i] = (uint32_t)a;
    }
    pgen *g0 = &p->gens[0];
    memset(g0, 0, sizeof *g0);
    if (gen_alloc_arrays(g0, n)) return -1;
    g0->live = 1;
    g0->exec = p->exec;
    p->x0_known = fp_copy(&p->x0_st, L) == 0;
    /* X_0 holds raw L: its canonical form is known for nodes without aliased positions */
    for (size_t i = 0; i < n; i++) {
        if (p->ap_first[i] != p->ap_first[i + 1]) continue;
        g0->canon[i] = malloc(L->nodes[i].len ? L->nodes[i].len : 1);
        if (!g0->canon[i]) return -1;
        memcpy(g0->canon[i], L->nodes[i].pay, L->nodes[i].len);
        g0->clen[i] = L->nodes[i].len;
    }
    for (size_t i = 0; i < n; i++) mark_dirty(p, i);
    p->cur = 0;
    return 0;
}

/* Destroys generation g (g > 0: its exec too). */
static void gen_destroy(sg_prof *p, int g)
{
    pgen *x = &p->gens[g];
    p->hit = -1;
    if (!x->live) return;
    if (x->slots) ops->destroy(x->slots);
    if (g > 0 && x->exec && sg_drv.cuGraphExecDestroy) SG_DRIVER_CALL(cuGraphExecDestroy, x->exec);
    gen_free_arrays(x, p->n);
    memset(x, 0, sizeof *x);
}

static void log_decision(const sg_prof *p, const char *extra)
{
    const sg_exec_profile *d = &p->prof;
    SG_INFO("graph exec %lu (%p): profiled %d launches: %s (%s%s): %u pointer positions, %u varying, "
            "%u varying scalar bytes, %u aliased slots, update cost %llu ns/step, estimated remap "
            "cost %llu ns/step, %u generations allowed",
            sg_exec_id(p->exec), (void *)p->exec, p->launches,
            d->generations ? "generations" : "plain", d->why, extra ? extra : "", d->positions,
            d->varying_positions, d->varying_scalar_bytes, d->aliased_slots,
            d->update_ns_per_step, d->remap_ns_per_step, d->generations_allowed);
}

/* Whether every kernel node of L has the attributes its clone node has
 * (variants are instantiated from the clone, whose attributes are those of
 * instantiate time). */
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

/* Whether some kernel node of L has no argument bytes: its layout may be one
 * the driver could not report (cuFuncGetParamInfo failing at index 0 reads
 * as "no parameters"), and then its arguments are invisible: a lazily
 * accepted update would drop their changes, and variants would run the
 * clone's. Such an exec stays PLAIN (skip_temp forwards any update in which
 * something else changed, the whole graph with it). */
static int argless_kernel(const sg_fp *L)
{
    for (size_t i = 0; i < L->n; i++)
        if (L->nodes[i].k.type == CU_GRAPH_NODE_TYPE_KERNEL && L->nodes[i].len == 0) return 1;
    return 0;
}

/* The decision, at the launch after the last profiled one. */
static void decide(sg_prof *p, const sg_fp *L)
{
    sg_exec_profile *d = &p->prof;
    memset(d, 0, sizeof *d);
    d->decided = 1;
    d->positions = (unsigned)p->npos;
    for (size_t i = 0; i < p->npos; i++) d->varying_positions += word_varied(p, p->pos[i].node, p->pos[i].off);
    d->varying_scalar_bytes = scalar_bytes_varied(p);
    d->update_ns_per_step = p->launches ? p->update_ns / (unsigned long long)p->launches : 0;
    d->generations_allowed = (unsigned)max_gens;
    unsigned long long remap = 0;
    size_t ng = make_groups(p, &remap);
    int alias = alias_mode == SG_ALIAS_ALWAYS ||
                (alias_mode == SG_ALIAS_AUTO && remap < d->update_ns_per_step);
    if (!ng || !alias) {
        for (size_t i = 0; i < p->npos; i++) p->pos[i].group = -1;
        ng = 0;
    }
    d->aliased_slots = (unsigned)ng;
    d->remap_ns_per_step = remap;
    p->state = SG_PROF_PLAIN;
    if (!d->varying_positions) {
        d->why = "no pointer varied";
    } else if (!p->sim && !p->clone) {
        d->why = "the graph could not be cloned";
    } else if (argless_kernel(L)) {
        d->why = "a kernel node without argument bytes (its layout may be unknown)";
    } else if (!p->sim && !attrs_match_clone(p, L)) {
        d->why = "node attributes changed since instantiation";
    } else if (max_gens == 1 && !ng) {
        d->why = "one generation allowed and nothing aliased";
    } else {
        d->generations = 1;
        d->why = ng ? "varying pointers; aliased into slots"
                    : alias_mode == SG_ALIAS_NEVER ? "varying pointers; aliasing off (STABLEGRAPH_ALIAS=never)"
                    : ng == 0 && remap == 0 ? "varying pointers; none in own-handle buffers"
                                            : "varying pointers; remapping costs more than updating";
        p->state = SG_PROF_GENERATIONS;
        if (!p->sim && gen_setup(p, L, ng)) {
            gen_arrays_free(p);
            gen_destroy(p, 0);
            p->state = SG_PROF_PLAIN;
            d->generations = 0;
            d->why = "out of memory";
        }
    }
    if (!p->sim) log_decision(p, NULL);
    sg_exec_set_profile(p->exec, d);
}

/* ------------------------------------------------------------ lazy acceptance */

/* Whether two memcpy / memset payloads differ only in device address words
 * whose new value lies in a placed allocation of the exec's context. */
static int addresses_only(const sg_prof *p, const sg_fp_node *old, const sg_fp_node *nw)
{
    uint32_t offs[2];
    int k = address_words(old, offs);
    unsigned char tmp[sizeof(CUDA_MEMCPY3D)];
    if (nw->len > sizeof tmp) return 0;
    memcpy(tmp, nw->pay, nw->len);
    finder f;
    finder_begin(&f);
    int ok = 1;
    for (int j = 0; j < k && ok; j++) {
        uint64_t a = word_at(old->pay, offs[j]), b = word_at(nw->pay, offs[j]);
        sg_alloc_info ai;
        if (a == b) continue;
        ok = finder_find(&f, b, &ai) && (!p->ctx || !ai.ctx || ai.ctx == p->ctx);
        word_put(tmp, offs[j], a);
    }
    finder_end(&f);
    return ok && sg_bytes_eq(tmp, old->pay, old->len);
}

int sg_prof_lazy_node_ok(const sg_prof *p, const sg_fp_node *old, const sg_fp_node *nw)
{
    if (old->k.state != SG_FP_OK || nw->k.state != SG_FP_OK || old->len != nw->len) return 0;
    sg_fp_key a = old->k, b = nw->k;
    a.attr_mask = b.attr_mask = 0;
    memset(a.attrs, 0, sizeof a.attrs);
    memset(b.attrs, 0, sizeof b.attrs);
    if (memcmp(&a, &b, sizeof a)) return 0;
    if (sg_bytes_eq(old->pay, nw->pay, nw->len)) return 1;
    switch (a.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return 1;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET:
        return addresses_only(p, old, nw);
    default:
        return 0;
    }
}

int sg_prof_lazy_ok(const sg_prof *p, const sg_fp *a, const sg_fp *b)
{
    if (a->n != b->n || a->nedges != b->nedges ||
        !sg_bytes_eq(a->edges, b->edges, a->nedges * sizeof *a->edges))
        return 0;
    for (size_t i = 0; i < a->n; i++) {
        const sg_fp_node *x = &a->nodes[i], *y = &b->nodes[i];
        if (x->k.attr_mask != y->k.attr_mask || memcmp(x->k.attrs, y->k.attrs, sizeof x->k.attrs) ||
            !sg_prof_lazy_node_ok(p, x, y))
            return 0;
    }
    return 1;
}

void sg_prof_accept_graph(sg_prof *p, const sg_fp *L, const sg_fp *b)
{
    if (p->sim || p->state != SG_PROF_GENERATIONS) return;
    for (size_t i = 0; i < L->n && i < b->n; i++)
        if (!sg_bytes_eq(L->nodes[i].pay, b->nodes[i].pay, b->nodes[i].len)) mark_dirty(p, i);
}

void sg_prof_accept_node(sg_prof *p, size_t i)
{
    if (!p->sim && p->state == SG_PROF_GENERATIONS) mark_dirty(p, i);
}

/* ------------------------------------------------------------ translation */

/* L's canonical payload of node i (L's own buffer when it has no aliased
 * positions). */
static const unsigned char *lc_of(const sg_prof *p, const sg_fp *L, size_t i)
{
    return p->ap_first[i] != p->ap_first[i + 1] ? p->lc[i] : pay_of(&L->nodes[i]);
}

/* The launch fast path (sg_prof_launch): p->hit is the generation
 * choose_generation would pick without any driver call, or -1. It is only
 * set without aliased groups (whose slots must be checked against where L's
 * buffers are at every launch), in GENERATIONS mode, with L reconciled: the
 * last generation launched if it holds L, else the first that does. Any
 * change of a generation (creation, update, destruction) or of L (marked
 * dirty) resets it; reconcile and a successful slow launch set it again. */
static void set_hit(sg_prof *p)
{
    p->hit = -1;
    if (p->sim || p->ngroups || p->state != SG_PROF_GENERATIONS || p->x0_stale || p->ndirty) return;
    if (p->gens[p->cur].live && p->gens[p->cur].mism == 0) {
        p->hit = p->cur;
        return;
    }
    for (int g = 0; g < max_gens; g++)
        if (p->gens[g].live && p->gens[g].mism == 0) {
            p->hit = g;
            return;
        }
}

/* Recomputes the canonical payloads of the dirty nodes and every
 * generation's equality with them. -1 if out of memory. */
static int reconcile(sg_prof *p, const sg_fp *L)
{
    for (size_t d = 0; d < p->ndirty; d++) {
        uint32_t i = p->dirty_list[d];
        const sg_fp_node *ln = &L->nodes[i];
        p->dirty[i] = 0;
        if (p->ap_first[i] != p->ap_first[i + 1]) {
            if (ln->len > p->lc_cap[i]) {
                unsigned char *b = realloc(p->lc[i], ln->len);
                if (!b) return -1;
                p->lc[i] = b;
                p->lc_cap[i] = ln->len;
            }
            memcpy(p->lc[i], ln->pay, ln->len);
            for (uint32_t a = p->ap_first[i]; a < p->ap_first[i + 1]; a++)
                word_put(p->lc[i], p->ap[a].off, p->ap[a].canon);
        }
        const unsigned char *c = lc_of(p, L, i);
        for (int g = 0; g < max_gens; g++) {
            pgen *x = &p->gens[g];
            if (!x->live) continue;
            unsigned char eq = x->canon[i] && x->clen[i] == ln->len && sg_bytes_eq(x->canon[i], c, ln->len);
            if (eq != x->eq[i]) {
                x->mism += eq ? (size_t)-1 : 1;
                x->eq[i] = eq;
            }
        }
    }
    p->ndirty = 0;
    set_hit(p);
    return 0;
}

void sg_prof_settle(sg_prof *p, const sg_fp *L)
{
    /* On failure (out of memory) the nodes stay dirty: the launch retries. */
    if (!p->sim && p->state == SG_PROF_GENERATIONS && p->ndirty) (void)reconcile(p, L);
}

/* Finds what every aliased group points into now (p->want) and the
 * canonical value of each aliased position (marking changed nodes dirty).
 * -1 if a group cannot be aliased now (not in one own-handle allocation of
 * the context, or bigger than its slot). */
static int resolve_binds(sg_prof *p, const sg_fp *L)
{
    if (!p->ngroups) return 0;
    memset(p->want, 0, p->ngroups * sizeof *p->want);
    finder f;
    finder_begin(&f);
    int rc = 0;
    for (size_t a = 0; a < p->nap && !rc; a++) {
        apos *q = &p->ap[a];
        uint64_t v = word_at(L->nodes[q->node].pay, q->off);
        sg_alloc_info ai;
        sg_slot_bind *w = &p->want[q->group];
        if (!finder_find(&f, v, &ai) || !ai.own_handles || (p->ctx && ai.ctx != p->ctx) ||
            ai.size > p->slot_size[q->group] || (w->id && w->id != ai.id)) {
            rc = -1;
            break;
        }
        w->id = ai.id;
        w->base = ai.base;
        if (v - ai.base != q->canon) {
            q->canon = v - ai.base;
            mark_dirty(p, q->node);
        }
    }
    finder_end(&f);
    return rc;
}

/* Writes T_g(L) of node i (g < 0: raw L) into p->scratch; returns it, or NULL
 * if out of memory. */
static const unsigned char *translate(sg_prof *p, const sg_fp *L, int g, size_t i)
{
    const sg_fp_node *ln = &L->nodes[i];
    if (g < 0 || p->ap_first[i] == p->ap_first[i + 1]) return pay_of(ln);
    if (ln->len > p->scratch_cap) {
        unsigned char *b = realloc(p->scratch, ln->len);
        if (!b) return NULL;
        p->scratch = b;
        p->scratch_cap = ln->len;
    }
    memcpy(p->scratch, ln->pay, ln->len);
    for (uint32_t a = p->ap_first[i]; a < p->ap_first[i + 1]; a++)
        word_put(p->scratch, p->ap[a].off,
                 ops->addr(p->gens[g].slots, p->ap[a].group) + p->ap[a].canon);
    return p->scratch;
}

/* A kernel node's raw parameters rebuilt from key k and canonical payload
 * pay (the `extra` buffer layout): b->kp, pointing into b. */
typedef struct kbuf {
    size_t size;
    void *extra[5];
    CUDA_KERNEL_NODE_PARAMS kp;
} kbuf;

static const CUDA_KERNEL_NODE_PARAMS *kparams_of(kbuf *b, const sg_fp_key *k,
                                                 const unsigned char *pay, uint32_t len)
{
    b->size = len;
    b->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    b->extra[1] = (void *)pay;
    b->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    b->extra[3] = &b->size;
    b->extra[4] = CU_LAUNCH_PARAM_END;
    b->kp = (CUDA_KERNEL_NODE_PARAMS){
        .func = (CUfunction)(uintptr_t)k->func, .kern = (CUkernel)(uintptr_t)k->kern,
        .ctx = (CUcontext)(uintptr_t)k->ctx,
        .gridDimX = k->grid[0], .gridDimY = k->grid[1], .gridDimZ = k->grid[2],
        .blockDimX = k->block[0], .blockDimY = k->block[1], .blockDimZ = k->block[2],
        .sharedMemBytes = k->shmem, .extra = len ? b->extra : NULL,
    };
    return &b->kp;
}

/* The context a memcpy / memset node runs in: its own, else the exec's. */
static CUcontext node_ctx(const sg_prof *p, const sg_fp_key *k)
{
    return k->ctx ? (CUcontext)(uintptr_t)k->ctx : p->ctx;
}

/* Sets clone node i to key k and payload pay, through the per-type setters
 * (cuGraphKernelNodeSetParams_v2, ...) or, generic, through
 * cuGraphNodeSetParams (an independent driver entry: restore path C). */
static CUresult clone_set(sg_prof *p, size_t i, const sg_fp_key *k, const unsigned char *pay,
                          uint32_t len, int generic)
{
    CUgraphNode node = p->clone_nodes[i];
    CUgraphNodeParams np;
    kbuf kb;
    if (generic) {
        if (!sg_drv.cuGraphNodeSetParams) return CUDA_ERROR_NOT_SUPPORTED;
        memset(&np, 0, sizeof np);
        np.type = (CUgraphNodeType)k->type;
    }
    switch (k->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        const CUDA_KERNEL_NODE_PARAMS *kp = kparams_of(&kb, k, pay, len);
        if (generic) {
            np.kernel = (CUDA_KERNEL_NODE_PARAMS_v3){
                .func = kp->func, .gridDimX = kp->gridDimX, .gridDimY = kp->gridDimY,
                .gridDimZ = kp->gridDimZ, .blockDimX = kp->blockDimX, .blockDimY = kp->blockDimY,
                .blockDimZ = kp->blockDimZ, .sharedMemBytes = kp->sharedMemBytes,
                .extra = kp->extra, .kern = kp->kern, .ctx = kp->ctx,
            };
            return SG_DRIVER_CALL(cuGraphNodeSetParams, node, &np);
        }
        if (!sg_drv.cuGraphKernelNodeSetParams_v2) return CUDA_ERROR_NOT_SUPPORTED;
        return SG_DRIVER_CALL(cuGraphKernelNodeSetParams_v2, node, kp);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (len < sizeof(CUDA_MEMCPY3D)) return CUDA_ERROR_NOT_SUPPORTED;
        if (generic) {
            np.memcpy.copyCtx = node_ctx(p, k);
            memcpy(&np.memcpy.copyParams, pay, sizeof np.memcpy.copyParams);
            return SG_DRIVER_CALL(cuGraphNodeSetParams, node, &np);
        }
        if (!sg_drv.cuGraphMemcpyNodeSetParams) return CUDA_ERROR_NOT_SUPPORTED;
        return SG_DRIVER_CALL(cuGraphMemcpyNodeSetParams, node, (const CUDA_MEMCPY3D *)(const void *)pay);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        if (len < sizeof(CUDA_MEMSET_NODE_PARAMS)) return CUDA_ERROR_NOT_SUPPORTED;
        if (generic) {
            CUDA_MEMSET_NODE_PARAMS m;
            memcpy(&m, pay, sizeof m);
            np.memset = (CUDA_MEMSET_NODE_PARAMS_v2){
                .dst = m.dst, .pitch = m.pitch, .value = m.value, .elementSize = m.elementSize,
                .width = m.width, .height = m.height, .ctx = node_ctx(p, k),
            };
            return SG_DRIVER_CALL(cuGraphNodeSetParams, node, &np);
        }
        if (!sg_drv.cuGraphMemsetNodeSetParams) return CUDA_ERROR_NOT_SUPPORTED;
        return SG_DRIVER_CALL(cuGraphMemsetNodeSetParams, node,
                              (const CUDA_MEMSET_NODE_PARAMS *)(const void *)pay);
    default:
        return CUDA_SUCCESS;
    }
}

/* Makes the clone hold T_g(L) (g < 0: raw L); generic: see clone_set. */
static CUresult clone_sync_with(sg_prof *p, const sg_fp *L, int g, int generic)
{
    for (size_t i = 0; i < L->n; i++) {
        const sg_fp_node *ln = &L->nodes[i];
        sg_fp_node *cn = &p->clone_st.nodes[i];
        const unsigned char *want = translate(p, L, g, i);
        if (!want) return CUDA_ERROR_OUT_OF_MEMORY;
        if (cn->len == ln->len && !memcmp(&cn->k, &ln->k, sizeof cn->k) &&
            sg_bytes_eq(pay_of(cn), want, ln->len))
            continue;
        CUresult rc = clone_set(p, i, &ln->k, want, ln->len, generic);
        if (rc != CUDA_SUCCESS) {
            cn->len = 0;            /* unknown now: set again next time */
            cn->k.state = SG_FP_NOT_COMPARABLE;
            return rc;
        }
        if (sg_fp_node_copy(cn, ln)) {
            cn->len = 0;
            cn->k.state = SG_FP_NOT_COMPARABLE;
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (ln->len) memcpy(cn->pay, want, ln->len);
    }
    return CUDA_SUCCESS;
}

static CUresult clone_sync(sg_prof *p, const sg_fp *L, int g) { return clone_sync_with(p, L, g, 0); }

/* Records that generation g now holds T_g(L) (canonical payloads = L's). */
static int gen_holds_L(sg_prof *p, const sg_fp *L, int g)
{
    pgen *x = &p->gens[g];
    p->hit = -1;
    for (size_t i = 0; i < L->n; i++) {
        uint32_t len = L->nodes[i].len;
        if (!x->canon[i] || x->clen[i] < len) {
            unsigned char *b = realloc(x->canon[i], len ? len : 1);
            if (!b) return -1;
            x->canon[i] = b;
        }
        if (len) memcpy(x->canon[i], lc_of(p, L, i), len);
        x->clen[i] = len;
        x->eq[i] = 1;
    }
    x->mism = 0;
    return 0;
}

/* One whole-graph update of exec e from the clone; X_0 then holds what the
 * clone holds. */
static CUresult update_from_clone(sg_prof *p, CUgraphExec e)
{
    if (!sg_drv.cuGraphExecUpdate_v2) return CUDA_ERROR_NOT_SUPPORTED;
    CUgraphExecUpdateResultInfo info;
    CUresult rc = SG_DRIVER_CALL(cuGraphExecUpdate_v2, e, p->clone, &info);
    if (rc == CUDA_SUCCESS && e == p->exec) p->x0_known = fp_copy(&p->x0_st, &p->clone_st) == 0;
    return rc;
}

/* Brings exec `e` to T_g(L) (g < 0: raw L) with one whole-graph update from
 * the clone. */
static CUresult exec_to(sg_prof *p, const sg_fp *L, int g, CUgraphExec e)
{
    CUresult rc = clone_sync(p, L, g);
    return rc != CUDA_SUCCESS ? rc : update_from_clone(p, e);
}

/* ------------------------------------------------------------ restoring X_0 */

/* Sets X_0's node i to L's node i with the per-node exec update of its type. */
static CUresult x0_node_set(sg_prof *p, const sg_fp_node *ln, size_t i)
{
    CUgraphNode node = p->nodes[i];
    const unsigned char *pay = pay_of(ln);
    if (ln->k.state != SG_FP_OK) return CUDA_ERROR_NOT_SUPPORTED;
    switch (ln->k.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        kbuf kb;
        if (!sg_drv.cuGraphExecKernelNodeSetParams_v2) return CUDA_ERROR_NOT_SUPPORTED;
        return SG_DRIVER_CALL(cuGraphExecKernelNodeSetParams_v2, p->exec, node,
                              kparams_of(&kb, &ln->k, pay, ln->len));
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (!sg_drv.cuGraphExecMemcpyNodeSetParams || ln->len < sizeof(CUDA_MEMCPY3D))
            return CUDA_ERROR_NOT_SUPPORTED;
        return SG_DRIVER_CALL(cuGraphExecMemcpyNodeSetParams, p->exec, node,
                              (const CUDA_MEMCPY3D *)(const void *)pay, node_ctx(p, &ln->k));
    case CU_GRAPH_NODE_TYPE_MEMSET:
        if (!sg_drv.cuGraphExecMemsetNodeSetParams || ln->len < sizeof(CUDA_MEMSET_NODE_PARAMS))
            return CUDA_ERROR_NOT_SUPPORTED;
        return SG_DRIVER_CALL(cuGraphExecMemsetNodeSetParams, p->exec, node,
                              (const CUDA_MEMSET_NODE_PARAMS *)(const void *)pay,
                              node_ctx(p, &ln->k));
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* Path B: per-node exec updates of X_0, for the nodes where what it holds
 * (x0_st) differs from L (every node if that is not known). */
static CUresult x0_nodes_to(sg_prof *p, const sg_fp *L)
{
    if (!p->nodes || L->n != p->n) return CUDA_ERROR_NOT_SUPPORTED;
    int known = p->x0_known && p->x0_st.n == L->n;
    CUresult rc = CUDA_SUCCESS;
    for (size_t i = 0; i < L->n; i++) {
        const sg_fp_node *ln = &L->nodes[i];
        if (known) {
            const sg_fp_node *xn = &p->x0_st.nodes[i];
            if (xn->len == ln->len && !memcmp(&xn->k, &ln->k, sizeof xn->k) &&
                sg_bytes_eq(pay_of(xn), pay_of(ln), ln->len))
                continue;
        }
        CUresult r = x0_node_set(p, ln, i);
        if (r != CUDA_SUCCESS) {
            rc = r;
            continue;       /* the others still get closer to L */
        }
        if (known && sg_fp_node_copy(&p->x0_st.nodes[i], ln)) known = p->x0_known = 0;
    }
    if (rc == CUDA_SUCCESS && !known) p->x0_known = fp_copy(&p->x0_st, L) == 0;
    return rc;
}

/* The error a program's call gets when X_0 could not be brought to the
 * program's state by any path: an error that says the context or the
 * driver is unusable is passed on (the program's own call would have got it
 * too); anything else (an error about a call the program never made)
 * becomes CUDA_ERROR_OUT_OF_MEMORY, as when the driver cannot obtain what it
 * needs to prepare the exec (cuGraphLaunch's upload, an exec update). */
static CUresult plausible(CUresult rc)
{
    switch (rc) {
    case CUDA_SUCCESS:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_OUT_OF_MEMORY:
        return rc;
    default:
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
}

/* Brings X_0 to raw L: path A (clone through the per-type setters, one
 * cuGraphExecUpdate), else path B (per-node exec updates of the nodes that
 * differ), else path C (clone through cuGraphNodeSetParams, one
 * cuGraphExecUpdate; only when A failed before its update). Clears x0_stale
 * on success; returns the last driver error otherwise. */
static CUresult x0_restore(sg_prof *p, const sg_fp *L)
{
    if (!L) return CUDA_ERROR_UNKNOWN;
    sg_exec_event(p->exec, SG_EXEC_EV_LIB_UPDATE);
    const char *path = "A";
    CUresult rc = clone_sync(p, L, -1);
    int synced = rc == CUDA_SUCCESS;
    if (synced) rc = update_from_clone(p, p->exec);
    if (rc != CUDA_SUCCESS) {
        path = "B";
        rc = x0_nodes_to(p, L);
    }
    if (rc != CUDA_SUCCESS && !synced) {
        path = "C";
        rc = clone_sync_with(p, L, -1, 1);
        if (rc == CUDA_SUCCESS) rc = update_from_clone(p, p->exec);
    }
    if (rc == CUDA_SUCCESS) {
        if (path[0] != 'A')
            SG_INFO("graph exec %p: restored to the program's state through path %s (per-node %s)",
                    (void *)p->exec, path, path[0] == 'B' ? "exec updates" : "cuGraphNodeSetParams");
        p->x0_stale = 0;
    }
    return rc;
}

/* ------------------------------------------------------------ demotion */

/* Leaves GENERATIONS mode: X_0 holds raw L again (one update if it did not),
 * generations destroyed. final: stay PLAIN (after a failure). */
static CUresult leave_generations(sg_prof *p, const sg_fp *L, int final, const char *why)
{
    CUresult rc = CUDA_SUCCESS;
    if (!p->sim) {
        int restore = 1;
        if (!p->ngroups && L && reconcile(p, L) == 0) restore = p->gens[0].mism != 0;
        if (restore) rc = x0_restore(p, L);
        for (int g = max_gens - 1; g >= (rc == CUDA_SUCCESS ? 0 : 1); g--) gen_destroy(p, g);
        if (rc != CUDA_SUCCESS) {
            SG_WARN("graph exec %p: could not restore the program's exec (%d): it keeps "
                    "generation 0's slots, and every launch tries again before it may run",
                    (void *)p->exec, (int)rc);
            p->x0_stale = 1;
            final = 1;
        } else {
            gen_arrays_free(p);
        }
    }
    sg_exec_event(p->exec, SG_EXEC_EV_DEMOTION);
    p->hit = -1;
    profile_reset(p);
    p->state = final ? SG_PROF_PLAIN : SG_PROF_PROFILING;
    p->final_plain |= final;
    if (final) {
        p->prof.generations = 0;
        p->prof.why = why;
        sg_exec_set_profile(p->exec, &p->prof);
        SG_INFO("graph exec %lu (%p): generations given up: %s; its updates go to the driver as "
                "under skip_temp", sg_exec_id(p->exec), (void *)p->exec, why);
    }
    return rc;
}

/* After a failed restore: tries again; on success X_0's slots go. */
static CUresult x0_recover(sg_prof *p, const sg_fp *L)
{
    CUresult rc = x0_restore(p, L);
    if (rc == CUDA_SUCCESS) {
        gen_destroy(p, 0);
        gen_arrays_free(p);
    }
    return rc;
}

CUresult sg_prof_demote(sg_prof *p, const sg_fp *L)
{
    if (p->state == SG_PROF_GENERATIONS) return plausible(leave_generations(p, L, 0, NULL));
    return p->x0_stale ? plausible(x0_recover(p, L)) : CUDA_SUCCESS;
}

int sg_prof_x0_stale(const sg_prof *p) { return p->x0_stale; }

void sg_prof_forwarded(sg_prof *p, const sg_fp *L, long i)
{
    if (!p->x0_stale) return;
    if (i < 0) {                 /* X_0 holds the program's whole graph now */
        p->x0_stale = 0;
        p->x0_known = 0;
        gen_destroy(p, 0);
        gen_arrays_free(p);
        return;
    }
    if (!L || !p->x0_known || (size_t)i >= p->x0_st.n || (size_t)i >= L->n ||
        sg_fp_node_copy(&p->x0_st.nodes[i], &L->nodes[i]))
        p->x0_known = 0;
}

/* ------------------------------------------------------------ launch */

/* Forwarded-update accounting for an update the library makes to bring a
 * variant to the program's state: scalar_changed if some differing kernel
 * word does not hold a placed address, else pointer_not_aliased. */
static sg_reason variant_update_reason(const sg_prof *p, const sg_fp *L, int g)
{
    const pgen *x = &p->gens[g];
    finder f;
    finder_begin(&f);
    sg_reason r = SG_REASON_POINTER_NOT_ALIASED;
    for (size_t i = 0; i < L->n && r == SG_REASON_POINTER_NOT_ALIASED; i++) {
        const sg_fp_node *ln = &L->nodes[i];
        if (x->eq[i] || ln->k.type != CU_GRAPH_NODE_TYPE_KERNEL || !x->canon[i] ||
            x->clen[i] != ln->len)
            continue;
        const unsigned char *c = lc_of(p, L, i);
        sg_alloc_info ai;
        for (uint32_t off = 0; off < ln->len; off += 8) {
            uint32_t w = ln->len - off < 8 ? ln->len - off : 8;
            if (!memcmp(x->canon[i] + off, c + off, w)) continue;
            if (w < 8 || !finder_find(&f, word_at(ln->pay, off), &ai)) {
                r = SG_REASON_SCALAR_CHANGED;
                break;
            }
        }
    }
    finder_end(&f);
    return r;
}

/* Makes a new generation g holding T_g(L): slots created and bound, clone
 * translated, instantiated. 0, or -1 (nothing left behind). */
static int gen_create(sg_prof *p, const sg_fp *L, int g)
{
    pgen *x = &p->gens[g];
    memset(x, 0, sizeof *x);
    if (gen_alloc_arrays(x, p->n)) goto fail;
    if (p->ngroups && (ops->create(p->ctx, p->dev, p->slot_size, p->ngroups, &x->slots) ||
                       ops->bind(x->slots, p->want, 1) != 0))
        goto fail;
    if (clone_sync(p, L, g) != CUDA_SUCCESS || !sg_drv.cuGraphInstantiateWithFlags ||
        SG_DRIVER_CALL(cuGraphInstantiateWithFlags, &x->exec, p->clone, p->inst_flags) !=
            CUDA_SUCCESS)
        goto fail;
    x->live = 1;
    if (gen_holds_L(p, L, g)) {
        gen_destroy(p, g);
        return -1;
    }
    sg_exec_event(p->exec, SG_EXEC_EV_VARIANT);
    return 0;
fail:
    if (x->slots) ops->destroy(x->slots);
    gen_free_arrays(x, p->n);
    memset(x, 0, sizeof *x);
    return -1;
}

static int slots_match(const sg_prof *p, const pgen *x)
{
    return !p->ngroups || (x->slots && ops->matches(x->slots, p->want));
}

/* Picks the generation to launch for L (see the header comment); -1 with
 * *why set if the exec must leave GENERATIONS mode. */
static int choose_generation(sg_prof *p, const sg_fp *L, const char **why)
{
    int nlive = 0, lru = -1, match_idle = -1, match_lru = -1;
    if (p->gens[p->cur].live && p->gens[p->cur].mism == 0 && slots_match(p, &p->gens[p->cur]))
        return p->cur;
    for (int g = 0; g < max_gens; g++) {
        pgen *x = &p->gens[g];
        if (!x->live) continue;
        nlive++;
        if (lru < 0 || x->last_use < p->gens[lru].last_use) lru = g;
        if (x->mism) continue;
        if (slots_match(p, x)) return g;
        if (match_idle < 0 && x->slots && ops->idle(x->slots)) match_idle = g;
        if (match_lru < 0 || x->last_use < p->gens[match_lru].last_use) match_lru = g;
    }
    if (nlive < max_gens) {
        for (int g = 0; g < max_gens; g++) {
            if (p->gens[g].live) continue;
            if (gen_create(p, L, g) == 0) return g;
            *why = "a variant could not be made (slots or instantiation failed)";
            return -1;
        }
    }
    int g = match_idle >= 0 ? match_idle : match_lru;
    if (g < 0) {
        g = lru;
        pgen *x = &p->gens[g];
        if (p->ngroups && !x->slots &&
            ops->create(p->ctx, p->dev, p->slot_size, p->ngroups, &x->slots)) {
            x->slots = NULL;
            *why = "slots could not be reserved";
            return -1;
        }
        if (p->ngroups && ops->bind(x->slots, p->want, 1) != 0) {
            *why = "a slot could not be bound";
            return -1;
        }
        sg_reason reason = variant_update_reason(p, L, g);
        if (exec_to(p, L, g, x->exec) != CUDA_SUCCESS || gen_holds_L(p, L, g)) {
            x->mism = p->n + 1;     /* unknown: never matches */
            p->hit = -1;
            memset(x->eq, 0, p->n);
            *why = "a variant could not be updated";
            return -1;
        }
        SG_TOTAL_ADD(updates_seen, 1);
        SG_TOTAL_ADD(updates_forwarded, 1);
        sg_exec_update(p->exec, 1, reason);
        return g;
    }
    if (ops->bind(p->gens[g].slots, p->want, 1) != 0) {
        *why = "a slot could not be bound";
        return -1;
    }
    return g;
}

static CUresult launch_exec(const sg_prof *p, int g, const sg_call *c)
{
    if (g == 0) return c->forward(c->args);
    CUgraphExec e = p->gens[g].exec;
    if (c->per_thread)
        return sg_drv.cuGraphLaunch_ptsz ? SG_DRIVER_CALL(cuGraphLaunch_ptsz, e, c->stream)
                                         : CUDA_ERROR_NOT_SUPPORTED;
    return sg_drv.cuGraphLaunch ? SG_DRIVER_CALL(cuGraphLaunch, e, c->stream)
                                : CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult launch_generations(sg_prof *p, const sg_fp *L, const sg_call *c)
{
    const char *why = NULL;
    int g = -1;
    if (resolve_binds(p, L)) why = "an aliased buffer left its allocation, or outgrew its slot";
    else if (reconcile(p, L)) why = "out of memory";
    else g = choose_generation(p, L, &why);
    if (g < 0) {
        CUresult rc = leave_generations(p, L, 1, why);
        return rc == CUDA_SUCCESS ? c->forward(c->args) : plausible(rc);
    }
    CUresult rc = launch_exec(p, g, c);
    if (rc == CUDA_SUCCESS) {
        if (p->gens[g].slots) ops->launched(p->gens[g].slots, c->stream, c->per_thread);
        p->gens[g].last_use = ++p->tick;
        p->cur = g;
        set_hit(p);
    }
    return rc;
}

/* Everything but the fast path. */
static __attribute__((noinline)) CUresult launch_slow(sg_prof *p, const sg_fp *L, const sg_call *c)
{
    if (p->x0_stale) {       /* a restore failed: X_0 must not run as it is */
        CUresult rc = x0_recover(p, L);
        if (rc != CUDA_SUCCESS) return plausible(rc);
    }
    if (p->state == SG_PROF_GENERATIONS) {
        if (p->sim) return c->forward(c->args);
        if (!L) {            /* the exec's content is unknown: cannot translate */
            CUresult rc = leave_generations(p, NULL, 1, "the exec's content became unknown");
            return rc == CUDA_SUCCESS ? c->forward(c->args) : plausible(rc);
        }
        return launch_generations(p, L, c);
    }
    if (p->state != SG_PROF_PROFILING) return c->forward(c->args);
    if (!L) {
        profile_reset(p);
        return c->forward(c->args);
    }
    if (p->launches >= prof_steps && same_shape(&p->base, L)) {
        decide(p, L);
        if (p->state == SG_PROF_GENERATIONS && !p->sim) return launch_generations(p, L, c);
        return c->forward(c->args);
    }
    if (observe(p, L)) profile_reset(p);
    return c->forward(c->args);
}

CUresult sg_prof_launch(sg_prof *p, const sg_fp *L, const sg_call *c)
{
    /* Fast path (issue 5: the steady state of a program rotating among
     * generations): the generation settled by the last update, no driver
     * call but the launch. */
    int g = p->hit;
    if (__builtin_expect(g >= 0 && L != NULL, 1)) {
        CUresult rc = launch_exec(p, g, c);
        if (rc == CUDA_SUCCESS) {
            p->gens[g].last_use = ++p->tick;
            p->cur = g;
        }
        return rc;
    }
    return launch_slow(p, L, c);
}

/* ------------------------------------------------------------ end of life */

int sg_prof_ctx_gone(sg_prof *p, CUcontext ctx)
{
    if (!p || p->ctx != ctx) return 0;
    for (int g = 0; g < max_gens; g++) p->gens[g].exec = NULL;
    return 1;
}

void sg_prof_free(sg_prof *p)
{
    if (!p) return;
    for (int g = max_gens - 1; g >= 0; g--) gen_destroy(p, g);
    gen_arrays_free(p);
    profile_reset(p);
    if (p->clone && sg_drv.cuGraphDestroy) SG_DRIVER_CALL(cuGraphDestroy, p->clone);
    free(p->clone_nodes);
    free(p->nodes);
    sg_fp_free(&p->clone_st);
    sg_fp_free(&p->x0_st);
    sg_fp_free(&p->base);
    free(p->pos);
    free(p->tmp);
    free(p->slot_size);
    free(p->scratch);
    free(p);
}
