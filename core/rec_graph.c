/*
 * core/rec_graph.c: the table of graph records (record.h): records made by
 * the explicit graph API, records of finished captures (capture.c hands them
 * over), the node table that names explicit nodes, what spoils a record,
 * and the fetch of the exec side with its one check against the driver.
 *
 * Locks: rec_lock (record.h) guards everything here; the driver calls of a
 * fetch's check (two count queries) and the program's own calls (route) run
 * without it.
 */
#include "rec_internal.h"

#include "driver.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

sg_lock sg_rec_lock;                   /* futex lock (lock.h): every captured node takes it */
int sg_rec_oom;
int sg_rec_on;

const char *const sg_readback_names[SG_READBACK_COUNT] = {
#define SG_READBACK_NAME_(s, n) n,
    SG_READBACK_LIST(SG_READBACK_NAME_)
};

static sg_grecord *table;              /* by graph */
static sg_grecord *building;           /* captures in progress (next_building) */

/* An explicit node: handle -> its record and index. */
typedef struct node_ent {
    CUgraphNode node;
    UT_hash_handle hh;
    sg_grecord *rec;
    uint32_t index;
} node_ent;
static node_ent *nodes;

static unsigned long readbacks[SG_READBACK_COUNT];   /* atomic */
static unsigned long used;                            /* atomic */

/* ------------------------------------------------------------ records */

/* Records whose graph went, kept with their buffers (node array, payloads,
 * edges, handles) for the next capture: a program that captures the same
 * graph every step allocates nothing in the steady state (rec_lock). */
#define POOL_MAX 8
static sg_grecord *pool[POOL_MAX];
static int npool;

static sg_grecord *grecord_new(void)
{
    sg_grecord *r = npool ? pool[--npool] : calloc(1, sizeof *r);
    if (!r) return NULL;
    r->graph = NULL;
    r->next_building = NULL;
    r->fp.n = r->fp.nedges = 0;
    r->fp.unsupported = 0;
    r->fp.origin = SG_FP_RECORDED;
    r->fp.epoch = sg_fp_epoch();
    r->unknown = 0;
    r->why = SG_READBACK_NONE;
    r->checked = 0;
    return r;
}

void sg_grecord_spoil(sg_grecord *r, sg_readback why)
{
    if (r->why == SG_READBACK_NONE) r->why = why;
}

/* Forgets r's explicit nodes (rec_lock held). */
/* Takes handle h out of the node table if it names a node of owner (any
 * record's when owner is NULL: a destroyed node, whose handle the driver may
 * give at once to a new node of a graph whose record does not know it). */
static void forget_node(CUgraphNode h, const sg_grecord *owner)
{
    node_ent *e;
    HASH_FIND_PTR(nodes, &h, e);
    if (!e || (owner && e->rec != owner)) return;
    HASH_DEL(nodes, e);
    free(e);
}

static void forget_nodes(sg_grecord *r)
{
    for (size_t i = 0; r->handles && i < r->fp.n; i++)
        if (r->handles[i]) forget_node(r->handles[i], r);
}

static void grecord_free(sg_grecord *r)
{
    forget_nodes(r);
    if (npool < POOL_MAX) {
        pool[npool++] = r;
        return;
    }
    sg_fp_free(&r->fp);
    free(r->handles);
    free(r);
}

/* Removes g's record from the table and frees it (rec_lock held). */
static void remove_locked(CUgraph g)
{
    sg_grecord *r;
    HASH_FIND_PTR(table, &g, r);
    if (!r) return;
    HASH_DEL(table, r);
    grecord_free(r);
}

/* Adds r under g, replacing any record of g (rec_lock held). On failure r
 * is freed. */
static void insert_locked(sg_grecord *r, CUgraph g)
{
    remove_locked(g);
    r->graph = g;
    sg_rec_oom = 0;
    HASH_ADD_PTR(table, graph, r);
    if (sg_rec_oom) grecord_free(r);
}

void sg_grecord_forget_locked(CUgraph g) { remove_locked(g); }

static sg_grecord *find_locked(CUgraph g)
{
    sg_grecord *r;
    HASH_FIND_PTR(table, &g, r);
    return r;
}

int sg_grecord_known_locked(CUgraph g) { return find_locked(g) != NULL; }

sg_grecord *sg_grecord_building(void)
{
    sg_grecord *r = grecord_new();
    if (!r) return NULL;
    r->next_building = building;
    building = r;
    return r;
}

static void unlink_building(sg_grecord *r)
{
    for (sg_grecord **p = &building; *p; p = &(*p)->next_building)
        if (*p == r) {
            *p = r->next_building;
            break;
        }
    r->next_building = NULL;
}

void sg_grecord_finish(sg_grecord *r, CUgraph g)
{
    unlink_building(r);
    sg_fp_shrink(&r->fp);      /* grown by doubling while captured; done growing */
    insert_locked(r, g);
}

void sg_grecord_drop(sg_grecord *r)
{
    unlink_building(r);
    grecord_free(r);
}

/* Names node i of r by handle in the node table (rec_lock held). 0, or -1
 * if out of memory (r is then spoiled). */
static int node_name(sg_grecord *r, size_t i, CUgraphNode handle)
{
    node_ent *e = malloc(sizeof *e);
    if (e) {
        node_ent *old;
        HASH_FIND_PTR(nodes, &handle, old);     /* a handle value the driver reused */
        if (old) {
            HASH_DEL(nodes, old);
            free(old);
        }
        *e = (node_ent){ .node = handle, .rec = r, .index = (uint32_t)i };
        sg_rec_oom = 0;
        HASH_ADD_PTR(nodes, node, e);
        if (!sg_rec_oom) return 0;
        free(e);
    }
    sg_grecord_spoil(r, SG_READBACK_OUT_OF_MEMORY);
    return -1;
}

sg_fp_node *sg_grecord_add(sg_grecord *r, CUgraphNode handle)
{
    size_t i = r->fp.n;
    if (sg_grow((void **)&r->handles, &r->handles_cap, i + 1, sizeof *r->handles) != 0 ||
        i >= UINT32_MAX) {
        sg_grecord_spoil(r, SG_READBACK_OUT_OF_MEMORY);
        return NULL;
    }
    sg_fp_node *n = sg_fp_push_node(&r->fp);
    if (!n) {
        sg_grecord_spoil(r, SG_READBACK_OUT_OF_MEMORY);
        return NULL;
    }
    sg_fp_node_lend(&r->fp, n);
    r->handles[i] = handle;
    if (!handle) r->unknown++;
    else (void)node_name(r, i, handle);
    return n;
}

void sg_grecord_learn(sg_grecord *r, uint32_t i, CUgraphNode handle)
{
    if (!r || !handle || r->why != SG_READBACK_NONE || i >= r->fp.n) return;
    if (r->handles[i]) {
        if (r->handles[i] != handle) sg_grecord_spoil(r, SG_READBACK_UNKNOWN_NODE);
        return;
    }
    if (node_name(r, i, handle) != 0) return;
    r->handles[i] = handle;
    r->unknown--;
}

void sg_rec_taint(void)
{
    sg_grecord *r, *tmp;
    HASH_ITER(hh, table, r, tmp)
        if (r->unknown) sg_grecord_spoil(r, SG_READBACK_UNKNOWN_NODE);
    for (r = building; r; r = r->next_building) sg_grecord_spoil(r, SG_READBACK_UNKNOWN_NODE);
}

/* A record changed: its counts must be checked again before the next use. */
static void changed(sg_grecord *r) { r->checked = 0; }

/* ------------------------------------------------------------ descriptions */

int sg_rec_memset_desc(sg_fp_node *n, CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem,
                       size_t width, size_t height, CUcontext ctx)
{
    /* a one-row memset is described with the pitch of its row, as the
     * driver reports it */
    CUDA_MEMSET_NODE_PARAMS m = { .dst = dst, .pitch = height > 1 ? pitch : width * elem,
                                  .value = value, .elementSize = elem, .width = width,
                                  .height = height };
    return sg_fp_memset_desc(n, &m, ctx);
}

int sg_rec_copy2d_desc(sg_fp_node *n, const CUDA_MEMCPY2D *c, CUcontext ctx)
{
    CUDA_MEMCPY3D m = {
        .srcXInBytes = c->srcXInBytes, .srcY = c->srcY, .srcMemoryType = c->srcMemoryType,
        .srcHost = c->srcHost, .srcDevice = c->srcDevice, .srcArray = c->srcArray,
        .srcPitch = c->srcPitch, .srcHeight = c->srcY + c->Height,
        .dstXInBytes = c->dstXInBytes, .dstY = c->dstY, .dstHeight = c->dstY + c->Height,
        .dstMemoryType = c->dstMemoryType, .dstHost = c->dstHost, .dstDevice = c->dstDevice,
        .dstArray = c->dstArray, .dstPitch = c->dstPitch, .WidthInBytes = c->WidthInBytes,
        .Height = c->Height, .Depth = 1,
    };
    return sg_fp_memcpy_desc(n, &m, ctx);
}

/* Describes node n from the parameters an explicit call carries. Returns 0,
 * or why the record cannot hold it. */
static sg_readback params_desc(sg_fp_node *n, sg_node_params_kind pk, const void *params,
                               CUcontext ctx)
{
    int r = sg_fp_params_desc(n, pk, params, ctx, NULL);
    if (r < 0) return SG_READBACK_OUT_OF_MEMORY;
    return r == 0 ? SG_READBACK_NONE : SG_READBACK_UNMODELED_CALL;
}

/* ------------------------------------------------------------ explicit calls */

/* The index of dependency handle h in r, or -1. */
static long dep_index(const sg_grecord *r, CUgraphNode h)
{
    node_ent *e;
    HASH_FIND_PTR(nodes, &h, e);
    return e && e->rec == r ? (long)e->index : -1;
}

static void add_node(const sg_gb *gb)
{
    sg_grecord *r = find_locked(gb->u.add.graph);
    if (!r) return;                       /* a graph the recorder does not follow */
    changed(r);
    /* even a spoiled record keeps naming its nodes: a setter of one of them
     * then spoils nothing else */
    sg_fp_node *n = sg_grecord_add(r, *gb->u.add.out);
    if (!n || r->why != SG_READBACK_NONE) return;
    uint32_t idx = (uint32_t)(r->fp.n - 1);
    if (gb->u.add.empty) {
        memset(&n->k, 0, sizeof n->k);
        n->k.type = CU_GRAPH_NODE_TYPE_EMPTY;
    } else {
        sg_readback why = params_desc(n, gb->u.add.pk, gb->u.add.params, gb->u.add.ctx);
        if (why != SG_READBACK_NONE) sg_grecord_spoil(r, why);
    }
    if (n->k.state == SG_FP_UNSUPPORTED) r->fp.unsupported = 1;
    for (size_t i = 0; i < gb->u.add.ndeps && r->why == SG_READBACK_NONE; i++) {
        long d = dep_index(r, gb->u.add.deps[i]);
        if (d < 0) sg_grecord_spoil(r, SG_READBACK_UNKNOWN_NODE);
        else sg_grecord_edge(r, (uint32_t)d, idx, gb->u.add.edata ? &gb->u.add.edata[i] : NULL);
    }
}

/* The record and index of an explicit node, or NULL after tainting every
 * record that could hold it (a captured node: its handle is not known). */
static sg_grecord *node_of(CUgraphNode h, uint32_t *index)
{
    node_ent *e;
    HASH_FIND_PTR(nodes, &h, e);
    if (!e) {
        sg_rec_taint();
        return NULL;
    }
    *index = e->index;
    changed(e->rec);
    return e->rec;
}

static void set_node(const sg_gb *gb)
{
    uint32_t i;
    sg_grecord *r = node_of(gb->u.set.node, &i);
    if (!r || r->why != SG_READBACK_NONE) return;
    sg_fp_node *n = &r->fp.nodes[i];
    sg_fp_key keep = n->k;
    sg_readback why = params_desc(n, gb->u.set.pk, gb->u.set.params, gb->u.set.ctx);
    if (why != SG_READBACK_NONE) {
        sg_grecord_spoil(r, why);
        return;
    }
    if (n->k.type != keep.type) {         /* the driver refuses a change of type */
        sg_grecord_spoil(r, SG_READBACK_UNMODELED_CALL);
        return;
    }
    if (n->k.type == CU_GRAPH_NODE_TYPE_KERNEL) {   /* setting parameters keeps the attributes */
        n->k.attr_mask = keep.attr_mask;
        memcpy(n->k.attrs, keep.attrs, sizeof keep.attrs);
        if (keep.state == SG_FP_UNSUPPORTED) n->k.state = SG_FP_UNSUPPORTED;
    }
    if (n->k.state == SG_FP_UNSUPPORTED) r->fp.unsupported = 1;
}

static void set_attr(const sg_gb *gb)
{
    uint32_t i;
    sg_grecord *r = node_of(gb->u.attr.node, &i);
    if (!r || r->why != SG_READBACK_NONE) return;
    sg_fp_node *n = &r->fp.nodes[i];
    if (n->k.type != CU_GRAPH_NODE_TYPE_KERNEL || !gb->u.attr.value ||
        sg_fp_attr_set(&n->k, gb->u.attr.id, gb->u.attr.value) != 0)
        sg_grecord_spoil(r, SG_READBACK_UNMODELED_CALL);
    else if (n->k.state == SG_FP_UNSUPPORTED)
        r->fp.unsupported = 1;
}

static void add_deps(const sg_gb *gb)
{
    sg_grecord *r = find_locked(gb->u.deps.graph);
    if (!r) return;
    changed(r);
    for (size_t i = 0; i < gb->u.deps.n && r->why == SG_READBACK_NONE; i++) {
        long a = dep_index(r, gb->u.deps.from[i]), b = dep_index(r, gb->u.deps.to[i]);
        if (a < 0 || b < 0) sg_grecord_spoil(r, SG_READBACK_UNKNOWN_NODE);
        else sg_grecord_edge(r, (uint32_t)a, (uint32_t)b, gb->u.deps.edata ? &gb->u.deps.edata[i] : NULL);
    }
}

/* A clone: the same description; its node handles are the clone's own, not
 * known here. */
static void clone_graph(const sg_gb *gb)
{
    sg_grecord *src = find_locked(gb->u.clone.orig);
    if (!src || src->why != SG_READBACK_NONE) return;
    sg_grecord *r = grecord_new();
    if (!r) return;
    if (sg_fp_copy(&r->fp, &src->fp) != 0 ||
        sg_grow((void **)&r->handles, &r->handles_cap, src->fp.n, sizeof *r->handles) != 0) {
        grecord_free(r);
        return;
    }
    if (src->fp.n) memset(r->handles, 0, src->fp.n * sizeof *r->handles);   /* (none for an empty graph) */
    r->unknown = src->fp.n;
    insert_locked(r, *gb->u.clone.out);
}

/* A call the recorder does not model changed node n's graph: its record,
 * if any, is spoiled (rec_lock held). */
static void spoil_node_locked(CUgraphNode n)
{
    uint32_t i;
    sg_grecord *r = node_of(n, &i);
    if (r) sg_grecord_spoil(r, SG_READBACK_UNMODELED_CALL);
}

CUresult sg_rec_graph_op(const sg_call *c, CUresult (*route)(const sg_call *))
{
    const sg_gb *gb = c->gb;
    if (c->kind == SG_CALL_NODE_DESTROY && sg_rec_on) {
        /* Before the driver frees the handle: once it has, another thread's
         * next node may get the value and be named in the node table, and
         * this destroy would then spoil that node's record and forget its
         * name, leaving the destroyed node in its own record, whose counts
         * were checked already (round 40, windownode: an update the driver
         * refuses for the topology answered SUCCESS). A refused destroy only
         * spoils the record (the graph is read back). */
        sg_lock_take(&sg_rec_lock);
        spoil_node_locked(gb->u.node);
        forget_node(gb->u.node, NULL);
        sg_lock_drop(&sg_rec_lock);
        return route(c);
    }
    CUresult rc = route(c);
    if (rc != CUDA_SUCCESS || !sg_rec_on) return rc;
    sg_lock_take(&sg_rec_lock);
    switch (gb->kind) {
    case SG_GB_GRAPH_CREATE: {
        sg_grecord *r = grecord_new();
        if (r) insert_locked(r, *gb->u.graph_out);
        break;
    }
    case SG_GB_ADD_NODE:
        if (gb->u.add.out) add_node(gb);
        break;
    case SG_GB_SET_NODE:
        set_node(gb);
        break;
    case SG_GB_SET_ATTR:
        set_attr(gb);
        break;
    case SG_GB_ADD_DEPS:
        add_deps(gb);
        break;
    case SG_GB_CLONE:
        if (gb->u.clone.out) clone_graph(gb);
        break;
    case SG_GB_GRAPH_OTHER: {
        sg_grecord *r = find_locked(gb->u.graph);
        if (r) sg_grecord_spoil(r, SG_READBACK_UNMODELED_CALL);
        break;
    }
    case SG_GB_NODE_OTHER:
        spoil_node_locked(gb->u.node);
        break;
    default:
        break;
    }
    sg_lock_drop(&sg_rec_lock);
    return rc;
}

void sg_rec_graph_gone(CUgraph g)
{
    if (!sg_rec_on) return;
    sg_lock_take(&sg_rec_lock);
    remove_locked(g);
    sg_lock_drop(&sg_rec_lock);
}

/* ------------------------------------------------------------ the exec side */

/* Node and edge counts of g, through the driver. 0, or -1 if it cannot tell. */
static int driver_counts(CUgraph g, size_t *n, size_t *e)
{
    *n = *e = 0;
    if (!sg_drv.cuGraphGetNodes || !sg_drv.cuGraphGetEdges_v2) return -1;
    if (SG_DRIVER_CALL(cuGraphGetNodes, g, NULL, n) != CUDA_SUCCESS) return -1;
    return SG_DRIVER_CALL(cuGraphGetEdges_v2, g, NULL, NULL, NULL, e) == CUDA_SUCCESS ? 0 : -1;
}

/* The record of g if it can be used for a decision, checked against the
 * driver once after each change; returns with rec_lock held (NULL and *why
 * set if it cannot be used). */
static sg_grecord *usable_locked(CUgraph g, sg_readback *why)
{
    sg_lock_take(&sg_rec_lock);
    sg_grecord *r = find_locked(g);
    *why = !r ? SG_READBACK_NOT_RECORDED : r->why;
    if (*why == SG_READBACK_NONE && !r->checked) {
        sg_lock_drop(&sg_rec_lock);
        size_t dn = 0, de = 0;
        int counted = driver_counts(g, &dn, &de);
        sg_lock_take(&sg_rec_lock);
        r = find_locked(g);                      /* it may have gone meanwhile */
        *why = !r ? SG_READBACK_NOT_RECORDED : r->why;
        if (*why == SG_READBACK_NONE && !r->checked) {
            if (counted != 0 || dn != r->fp.n || de != r->fp.nedges) {
                sg_grecord_spoil(r, SG_READBACK_COUNT_MISMATCH);
                *why = SG_READBACK_COUNT_MISMATCH;
            } else {
                r->checked = 1;
            }
        }
    }
    if (*why == SG_READBACK_NONE && r->fp.epoch != sg_fp_epoch()) *why = SG_READBACK_MODULE_UNLOADED;
    return *why == SG_READBACK_NONE ? r : NULL;
}

sg_readback sg_rec_fetch(CUgraph g, sg_fp *fp, CUgraphNode **handles)
{
    sg_readback why;
    if (handles) *handles = NULL;
    if (!sg_rec_on) return SG_READBACK_NOT_RECORDED;
    sg_rec_audit a;
    a.on = 0;
    sg_grecord *r = usable_locked(g, &why);
    if (r && sg_fp_copy(fp, &r->fp) != 0) why = SG_READBACK_OUT_OF_MEMORY;
    if (why == SG_READBACK_NONE && handles) *handles = sg_grecord_handles(r);
    if (why == SG_READBACK_NONE) sg_rec_audit_keep(&a, r);
    sg_lock_drop(&sg_rec_lock);
    sg_rec_audit_run(&a, g);
    if (why == SG_READBACK_NONE) __atomic_add_fetch(&used, 1, __ATOMIC_RELAXED);
    return why;
}

sg_readback sg_rec_delta(CUgraph g, const sg_fp *fp, sg_fp_delta *d, int *reason)
{
    sg_readback why;
    d->valid = 0;
    if (!sg_rec_on) return SG_READBACK_NOT_RECORDED;
    if (fp->origin != SG_FP_RECORDED) return SG_READBACK_NOT_RECORDED;
    sg_rec_audit a;
    a.on = 0;
    sg_grecord *r = usable_locked(g, &why);
    if (r) {
        *reason = sg_fp_compare_delta(fp, &r->fp, d);
        if (d->valid) sg_rec_audit_keep(&a, r);     /* else the caller fetches it: audited there */
    }
    sg_lock_drop(&sg_rec_lock);
    sg_rec_audit_run(&a, g);
    if (why == SG_READBACK_NONE && d->valid) __atomic_add_fetch(&used, 1, __ATOMIC_RELAXED);
    return why;
}

void sg_rec_count_readback(sg_readback why)
{
    if (why >= 0 && why < SG_READBACK_COUNT) __atomic_add_fetch(&readbacks[why], 1, __ATOMIC_RELAXED);
}

void sg_rec_readback_counts(unsigned long *out)
{
    for (int i = 0; i < SG_READBACK_COUNT; i++) out[i] = __atomic_load_n(&readbacks[i], __ATOMIC_RELAXED);
}

unsigned long sg_rec_used(void) { return __atomic_load_n(&used, __ATOMIC_RELAXED); }

/* ------------------------------------------------------------ life */

void sg_rec_atfork(int phase)
{
    if (phase == 0) sg_lock_take(&sg_rec_lock);
    else sg_lock_drop(&sg_rec_lock);
}

void sg_rec_graphs_reset(void)
{
    sg_grecord *r, *tmp;
    sg_lock_take(&sg_rec_lock);
    HASH_ITER(hh, table, r, tmp) {
        HASH_DEL(table, r);
        grecord_free(r);
    }
    while (building) sg_grecord_drop(building);
    while (npool) {
        sg_grecord *p = pool[--npool];
        sg_fp_free(&p->fp);
        free(p->handles);
        free(p);
    }
    node_ent *e, *et;
    HASH_ITER(hh, nodes, e, et) {
        HASH_DEL(nodes, e);
        free(e);
    }
    memset(readbacks, 0, sizeof readbacks);
    used = 0;
    sg_rec_audit_reset();
    sg_lock_drop(&sg_rec_lock);
}

/* The node a captured memset or copy adds (rec_internal.h). */
int sg_rec_op_desc(sg_fp_node *n, const sg_gb *gb)
{
    switch (gb->kind) {
    case SG_GB_MEMSET:
        return sg_rec_memset_desc(n, gb->u.memset.dst, gb->u.memset.pitch, gb->u.memset.value,
                                  gb->u.memset.elem, gb->u.memset.width, gb->u.memset.height, NULL);
    case SG_GB_COPY: {
        CUDA_MEMCPY3D m;
        memset(&m, 0, sizeof m);
        m.srcMemoryType = gb->u.copy.src_type;
        m.dstMemoryType = gb->u.copy.dst_type;
        if (m.srcMemoryType == CU_MEMORYTYPE_HOST) m.srcHost = gb->u.copy.src_host;
        else m.srcDevice = gb->u.copy.src;
        if (m.dstMemoryType == CU_MEMORYTYPE_HOST) m.dstHost = gb->u.copy.dst_host;
        else m.dstDevice = gb->u.copy.dst;
        m.WidthInBytes = gb->u.copy.bytes;
        m.Height = 1;
        m.Depth = 1;
        return sg_fp_memcpy_desc(n, &m, NULL);
    }
    case SG_GB_COPY2D:
        return sg_rec_copy2d_desc(n, gb->u.desc, NULL);
    case SG_GB_COPY3D:
        return sg_fp_memcpy_desc(n, gb->u.desc, NULL);
    default:
        return 0;
    }
}
