/*
 * core/graph_records.c: the table of graph exec records (graph_internal.h):
 * their life (made at instantiation or first sight, dropped at destroy or
 * with their context) and the state every record has whatever the policy.
 *
 * Locks (in this order):
 *   table_lock   the record table (uthash by CUgraphExec) and its hot slots.
 *                Held for a lookup (and the reference it takes) and an add /
 *                remove only. `refs` is atomic: taken under table_lock by a
 *                lookup, dropped without it. The table holds one reference
 *                while the record is in it; whoever drops the last one empties
 *                the record (rec_recycle).
 *   rec->lock    one per record: everything else in it, and the observer's
 *                state. Held while building, comparing and forwarding an
 *                update or a launch of that exec, so two threads using one
 *                exec are serialized in call order, as the driver orders them.
 *   spare_lock   the list of emptied records; nothing is taken under it.
 *   named_lock   the index of the records by the graph they name (r->graph,
 *                written under rec->lock and named_lock both): a leaf, taken
 *                under rec->lock.
 * Inside rec->lock the fingerprint cache lock (fp_pinfo.c) and the memory
 * registry's lock (mem_registry.c) may be taken, and stats.c's for
 * counting. No lock of this file is held across a call that can wait on the
 * device.
 *
 * The launch's lookup takes no table_lock and no reference (a launch costs
 * a few hundred instructions in all, issue 11): records are type-stable (never
 * freed; an emptied one waits on `spare` for the next exec, its lock never
 * reset), and `hot` (a slot per hash of the handle, written under
 * table_lock) names the record last added or found for a handle. A launch
 * reads the slot, locks the record it names and keeps it only if it is still
 * exec's live record: `exec` is written with both table_lock and rec->lock
 * held, `live` is cleared under table_lock when the record leaves the table,
 * and a record is emptied (rec_recycle) and refilled (rec_add_locked) only
 * under its lock, so neither can happen while a launch holds it. A launch
 * that holds a record its exec's destroy just took out of the table behaves
 * as one that took its reference just before: the launch was first.
 */
#include "graph_internal.h"

#include "driver.h"
#include "log.h"
#include "record.h"
#include "util.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int sg_graph_table_oom;    /* set by uthash on a failed add (table_lock held) */

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_grec *table;
sg_caps sg_graph_caps;
const sg_exec_observer *sg_graph_obs;

sg_grec *sg_grec_hot[SG_GREC_HOT_N];   /* graph_internal.h */
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_grec *spare;                 /* emptied records, linked through hh.next */

/* The records that name a graph (r->graph), chained through gnext / gprev
 * in the bucket of the graph's hash, so that a graph's destroy visits them
 * and not every record (it visited every exec, each under its lock: with
 * 5,000 live execs a step that captures, updates and destroys a graph was 10
 * times slower: tests/stress/test_scale.sh, execs). The buckets double when
 * the records outnumber them twice (out of memory: they stay as they are). */
#define NAMED_MIN 64
static pthread_mutex_t named_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_grec **named;
static size_t nnamed, named_n;         /* buckets, records chained */

static sg_grec **named_bucket(sg_grec **b, size_t n, CUgraph g)
{
    return &b[sg_hash8(&g) & (n - 1)];
}

static void named_link(sg_grec **b, size_t n, sg_grec *r)
{
    sg_grec **h = named_bucket(b, n, r->graph);
    r->gprev = NULL;
    r->gnext = *h;
    if (*h) (*h)->gprev = r;
    *h = r;
}

/* Doubles the buckets (named_lock held). */
static void named_grow(void)
{
    size_t n = nnamed ? nnamed * 2 : NAMED_MIN;
    sg_grec **b = calloc(n, sizeof *b);
    if (!b) return;
    for (size_t i = 0; i < nnamed; i++)
        while (named[i]) {
            sg_grec *r = named[i];
            named[i] = r->gnext;
            named_link(b, n, r);
        }
    free(named);
    named = b;
    nnamed = n;
}

void sg_grec_set_graph(sg_grec *r, CUgraph graph)
{
    if (r->graph == graph) return;
    pthread_mutex_lock(&named_lock);
    if (r->graph) {
        if (r->gnext) r->gnext->gprev = r->gprev;
        if (r->gprev) r->gprev->gnext = r->gnext;
        else *named_bucket(named, nnamed, r->graph) = r->gnext;
        named_n--;
    }
    r->graph = NULL;
    if (graph) {
        if (named_n + 1 > 2 * nnamed) named_grow();
        if (nnamed) {                  /* else out of memory: names none (learns no handle) */
            r->graph = graph;
            named_link(named, nnamed, r);
            named_n++;
        }
    }
    pthread_mutex_unlock(&named_lock);
}

void sg_grec_forget_graph(CUgraph graph)
{
    /* one record at a time, with no list to allocate (a record left naming
     * a destroyed graph would read back another graph given its handle) */
    for (;;) {
        sg_grec *r = NULL;
        pthread_mutex_lock(&named_lock);
        if (nnamed)
            for (r = *named_bucket(named, nnamed, graph); r && r->graph != graph; r = r->gnext) {}
        pthread_mutex_unlock(&named_lock);
        if (!r) return;
        /* records are never freed: one emptied or refilled meanwhile is
         * checked under its lock */
        sg_lock_take(&r->lock);
        if (r->graph == graph) sg_grec_set_graph(r, NULL);
        sg_lock_drop(&r->lock);
    }
}

/* Forgets r in its hot slot (table_lock held). */
static void hot_forget(sg_grec *r)
{
    sg_grec **h = &sg_grec_hot[sg_grec_hot_index(r->exec)];
    if (__atomic_load_n(h, __ATOMIC_RELAXED) == r) __atomic_store_n(h, NULL, __ATOMIC_RELAXED);
}

static void spare_push(sg_grec *r)
{
    pthread_mutex_lock(&spare_lock);
    r->hh.next = spare;
    spare = r;
    pthread_mutex_unlock(&spare_lock);
}

/* The last reference is gone (r is out of the table): the observer's state
 * and the buffers go, and the record waits on `spare`. Its lock is taken
 * first: a launch that found it through `hot` may still hold it. The caller
 * holds no record's lock. */
static void rec_recycle(sg_grec *r)
{
    sg_lock_take(&r->lock);
    sg_grec_set_graph(r, NULL);
    if (r->pol && sg_graph_obs) sg_graph_obs->destroyed(r->pol, 0);
    r->pol = NULL;
    sg_fp_free(&r->fp);
    sg_fp_free(&r->next);
    sg_fp_delta_free(&r->delta);
    sg_fp_scratch_free(&r->scratch);
    sg_fp_map_free(&r->map);
    sg_fp_node_free(&r->node);
    free(r->nodes);
    r->nodes = NULL;
    r->exec = NULL;
    sg_lock_drop(&r->lock);
    spare_push(r);
}

void sg_grec_put(sg_grec *r)
{
    if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) rec_recycle(r);
}

/* r leaves the table (table_lock held); the caller then owns the table's
 * reference. */
static void rec_unlink_locked(sg_grec *r)
{
    HASH_DEL(table, r);
    hot_forget(r);
    __atomic_store_n(&r->live, 0, __ATOMIC_RELEASE);
}

/* Removes exec's record from the table, if any; table_lock held. */
static void rec_remove_locked(CUgraphExec exec)
{
    sg_grec *r;
    HASH_FIND_PTR(table, &exec, r);
    if (r) {
        rec_unlink_locked(r);
        sg_grec_put(r);
    }
}

/* Adds a fresh record for exec (replacing any) and returns it with a
 * reference for the caller; NULL if out of memory. A record first seen at an
 * update starts stale (untracked_exec). table_lock held. */
static sg_grec *rec_add_locked(CUgraphExec exec)
{
    pthread_mutex_lock(&spare_lock);
    sg_grec *r = spare;
    if (r) spare = r->hh.next;
    pthread_mutex_unlock(&spare_lock);
    if (!r && !(r = calloc(1, sizeof *r))) return NULL;   /* zeroed: its lock unlocked */
    rec_remove_locked(exec);
    /* refilled under its lock (the first member, kept): a launch may hold
     * it, from an earlier life */
    _Static_assert(offsetof(sg_grec, lock) == 0, "the lock comes first");
    sg_lock_take(&r->lock);
    memset((char *)r + offsetof(sg_grec, exec), 0, sizeof *r - offsetof(sg_grec, exec));
    r->exec = exec;
    r->refs = 2;
    r->state = REC_STALE;
    r->stale_reason = SG_REASON_UNTRACKED_EXEC;
    sg_graph_table_oom = 0;
    HASH_ADD_PTR(table, exec, r);
    if (sg_graph_table_oom) {
        r->exec = NULL;
        sg_lock_drop(&r->lock);
        spare_push(r);
        return NULL;
    }
    __atomic_store_n(&r->live, 1, __ATOMIC_RELEASE);
    sg_lock_drop(&r->lock);
    __atomic_store_n(&sg_grec_hot[sg_grec_hot_index(exec)], r, __ATOMIC_RELEASE);
    return r;
}

/* The record of exec with a reference for the caller; made (stale) if
 * unknown and make is set; NULL if none or out of memory. A record found
 * takes its hot slot, so that the next launch finds it without the lock. */
sg_grec *sg_grec_get(CUgraphExec exec, int make)
{
    sg_grec *r;
    pthread_mutex_lock(&table_lock);
    HASH_FIND_PTR(table, &exec, r);
    if (r) {
        __atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&sg_grec_hot[sg_grec_hot_index(exec)], r, __ATOMIC_RELEASE);
    } else if (make) {
        r = rec_add_locked(exec);
    }
    pthread_mutex_unlock(&table_lock);
    return r;
}

int sg_grec_set_nodes(sg_grec *r, CUgraph graph, const CUgraphNode *v, size_t n)
{
    CUgraphNode *keep = malloc((n ? n : 1) * sizeof *keep);
    if (!keep || sg_fp_map_build(&r->map, v, n) != 0) {
        free(keep);
        return -1;
    }
    if (n) memcpy(keep, v, n * sizeof *keep);
    free(r->nodes);
    r->nodes = keep;
    r->nnodes = n;
    r->nodes_partial = 0;
    for (size_t i = 0; i < n && !r->nodes_partial; i++) r->nodes_partial = !v[i];
    r->nodes_origin = r->fp.origin;
    sg_grec_set_graph(r, graph);
    return 0;
}

void sg_grec_drop_nodes(sg_grec *r)
{
    free(r->nodes);
    r->nodes = NULL;
    r->nnodes = 0;
    r->nodes_partial = 0;
    sg_fp_map_free(&r->map);
}

int sg_grec_learn_nodes(sg_grec *r)
{
    if (r->nodes && r->nodes_origin == r->fp.origin && !r->nodes_partial) return 0;
    sg_grec_drop_nodes(r);
    if (!r->graph || r->state != REC_CURRENT || r->learn_failed) return -1;
    sg_rec_count_readback(SG_READBACK_NO_HANDLES);
    if (sg_fp_build(&r->next, r->graph, &r->scratch, NULL) != 0 ||
        !sg_fp_same_order(&r->next, &r->fp) ||
        sg_grec_set_nodes(r, r->graph, r->scratch.nodes, r->next.n) != 0) {
        r->learn_failed = 1;             /* the exec changed since: not again */
        if (sg_log_enabled(SG_LOG_DEBUG)) {
            size_t i = 0;
            while (i < r->fp.n && i < r->next.n &&
                   !memcmp(&r->fp.nodes[i].k, &r->next.nodes[i].k, offsetof(sg_fp_key, attr_mask)))
                i++;
            SG_DEBUG("graph exec %p: the instantiation graph read back (%zu nodes) does not match "
                     "its record (%zu nodes) from node %zu: per-node updates go to the driver",
                     (void *)r->exec, r->next.n, r->fp.n, i);
            if (i < r->fp.n && i < r->next.n)
                SG_DEBUG("  record: func %llx kern %llx ctx %llx state %u; read back: func %llx "
                         "kern %llx ctx %llx state %u",
                         (unsigned long long)r->fp.nodes[i].k.func, (unsigned long long)r->fp.nodes[i].k.kern,
                         (unsigned long long)r->fp.nodes[i].k.ctx, r->fp.nodes[i].k.state,
                         (unsigned long long)r->next.nodes[i].k.func, (unsigned long long)r->next.nodes[i].k.kern,
                         (unsigned long long)r->next.nodes[i].k.ctx, r->next.nodes[i].k.state);
        }
        return -1;
    }
    return 0;
}

long sg_grec_node_index(sg_grec *r, CUgraphNode node)
{
    if (!r->graph) return -1;
    if (r->nodes && r->nodes_origin == r->fp.origin) {
        long i = sg_fp_map_find(&r->map, node);
        if (i >= 0 || !r->nodes_partial) return i;
    }
    return sg_grec_learn_nodes(r) == 0 ? sg_fp_map_find(&r->map, node) : -1;
}

void sg_grec_take_next(sg_grec *r)
{
    sg_fp_swap(&r->fp, &r->next);
    r->state = REC_CURRENT;
    if (r->nodes && r->nodes_origin != r->fp.origin) sg_grec_drop_nodes(r);
}

void sg_grec_make_stale(sg_grec *r, sg_reason why)
{
    r->state = REC_STALE;
    r->stale_reason = why;
}

/* Marks r unsupported if its fingerprint or the exec's flags say so, and
 * logs it once. r->lock held. */
void sg_grec_check_supported(sg_grec *r)
{
    cuuint64_t flags = 0;
    if (r->fp.unsupported) r->unsupported = 1;
    if (!r->flags_known) {               /* instantiation flags never change */
        r->flags_known = 1;
        if (sg_drv.cuGraphExecGetFlags &&
            SG_DRIVER_CALL(cuGraphExecGetFlags, r->exec, &flags) == CUDA_SUCCESS &&
            (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
            r->device_launch = 1;
    }
    if (r->device_launch) r->unsupported = 1;
    if (r->unsupported && !r->logged) {
        r->logged = 1;
        SG_INFO("graph exec %p holds a node the library does not model (host, child graph, "
                "event, memory, conditional, batch memop, external semaphore or "
                "device-updatable kernel node) or was instantiated for device launch: "
                "its updates always go to the driver", (void *)r->exec);
    }
}

CUresult sg_grec_uobj_hold(sg_grec *r)
{
    if (r->uobj) return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    if (r->pol) {
        sg_exec_view x = sg_grec_view(r);
        rc = sg_graph_obs->fix(r->pol, &x, "the exec holds user-object references (their lifetimes "
                                           "follow the exec's updates; no variant or clone may hold them)");
    }
    if (rc != CUDA_SUCCESS) return rc;
    r->uobj = 1;
    SG_INFO("graph exec %p holds user-object references: its whole-graph updates always go to the driver",
            (void *)r->exec);
    return CUDA_SUCCESS;
}

/* Calls fn on every record (each locked in turn, with a reference; the
 * table lock is not held during fn, unless out of memory: below). */
void sg_grec_foreach(void (*fn)(sg_grec *r, void *u), void *u)
{
    size_t n = 0, cap = 0;
    sg_grec **v = NULL;
    sg_grec *r, *tmp;
    int oom = 0;
    pthread_mutex_lock(&table_lock);
    HASH_ITER(hh, table, r, tmp) {
        if (sg_grow((void **)&v, &cap, n + 1, sizeof *v) != 0) {
            oom = 1;
            break;
        }
        __atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
        v[n++] = r;
    }
    if (oom) {
        /* No memory for the list (round 17): the records past it were
         * skipped, and one that missed a node destroy kept a handle that
         * no longer named its node (an update skipped wrongly: adv_decide
         * reorder, OOM_FAIL=55). Every record is visited with the table
         * lock held instead (order 1 then 2, as rec_remove_locked). */
        HASH_ITER(hh, table, r, tmp) {
            sg_lock_take(&r->lock);
            fn(r, u);
            sg_lock_drop(&r->lock);
        }
        pthread_mutex_unlock(&table_lock);
        for (size_t i = 0; i < n; i++) sg_grec_put(v[i]);
        free(v);
        return;
    }
    pthread_mutex_unlock(&table_lock);
    for (size_t i = 0; i < n; i++) {
        sg_lock_take(&v[i]->lock);
        fn(v[i], u);
        sg_lock_drop(&v[i]->lock);
        sg_grec_put(v[i]);
    }
    free(v);
}

sg_grec *sg_grec_add(CUgraphExec exec)
{
    pthread_mutex_lock(&table_lock);
    sg_grec *r = rec_add_locked(exec);
    pthread_mutex_unlock(&table_lock);
    return r;
}

/* Removes exec's record from the table, if any. */
void sg_grec_remove(CUgraphExec exec)
{
    pthread_mutex_lock(&table_lock);
    rec_remove_locked(exec);
    pthread_mutex_unlock(&table_lock);
}

void sg_grec_give_back(sg_grec **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sg_grec *r = v[i], *cur;
        pthread_mutex_lock(&table_lock);
        HASH_FIND_PTR(table, &r->exec, cur);
        sg_graph_table_oom = 0;
        if (!cur) HASH_ADD_PTR(table, exec, r);
        int back = !cur && !sg_graph_table_oom;
        if (back) __atomic_store_n(&r->live, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&table_lock);
        if (!back) sg_grec_put(r);              /* the table's reference, not taken back */
    }
}

sg_grec **sg_grec_take_ctx(CUcontext ctx, size_t *n)
{
    sg_grec *r, *tmp;
    sg_grec **gone = NULL;
    size_t cap = 0;
    *n = 0;
    pthread_mutex_lock(&table_lock);
    HASH_ITER(hh, table, r, tmp) {
        if (r->ctx != ctx || sg_grow((void **)&gone, &cap, *n + 1, sizeof *gone) != 0) continue;
        rec_unlink_locked(r);          /* the table's reference moves to the caller */
        gone[(*n)++] = r;
    }
    pthread_mutex_unlock(&table_lock);
    return gone;
}

void sg_grec_atfork(int phase)
{
    if (phase == 0) {
        pthread_mutex_lock(&table_lock);
        pthread_mutex_lock(&spare_lock);
        pthread_mutex_lock(&named_lock);
    } else {
        pthread_mutex_unlock(&named_lock);
        pthread_mutex_unlock(&spare_lock);
        pthread_mutex_unlock(&table_lock);
    }
}

void sg_grec_reset(void)
{
    sg_grec *r, *tmp;
    pthread_mutex_lock(&table_lock);
    HASH_ITER(hh, table, r, tmp) {
        rec_unlink_locked(r);
        sg_grec_put(r);
    }
    pthread_mutex_unlock(&table_lock);
}
