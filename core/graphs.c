/*
 * core/graphs.c: graph execs. Keeps per exec a record of what the driver's
 * exec holds (a fingerprint, fingerprint.h) and decides, for each update,
 * whether it would leave the exec exactly as it is:
 *   - skip_temp, skip_profiled: such an update is answered here (success,
 *     CU_GRAPH_EXEC_UPDATE_SUCCESS in the result info) and the driver is not
 *     called;
 *   - always_update: it is forwarded and counted as would_skip for its exec.
 * Anything else is forwarded and counted with its reason (stats.h); after a
 * successful forward the record becomes the new description, after a failed
 * one it stays (the driver left the exec unchanged).
 *
 * Record states:
 *   unsupported  the exec holds a node the library does not model, a
 *                device-updatable kernel node, or was instantiated for device
 *                launch: every update is forwarded (unsupported_node); sticky.
 *   stale        the exec's content is not known: changed by a call the
 *                library does not model (exec_modified), first seen at an
 *                update (untracked_exec), or not describable
 *                (not_comparable). Updates are forwarded with that reason; a
 *                successful cuGraphExecUpdate that could be described makes
 *                the record current again.
 * skip_profiled (and always_update, to count would_skip_profiled): a tracked
 * exec also has an sg_prof (profiled.h) that profiles its launches, decides,
 * and in GENERATIONS mode accepts updates without the driver and picks the
 * exec variant each launch runs; under skip_profiled `fp` is then the
 * program's logical state, not what every driver exec holds.
 * Exec nodes are named, as CUDA names them, by the node handles of the graph
 * the exec was instantiated from (`map`); an exec first seen at an update has
 * no such map and its per-node updates are always forwarded.
 *
 * Locks (in this order; neither is held while taking the other in reverse):
 *   table_lock   the record table (uthash by CUgraphExec). Held for a lookup
 *                (and the reference it takes) and an add / remove only.
 *                `refs` is atomic: taken under table_lock by a lookup, dropped
 *                without it (rec_put). The table holds one reference while
 *                the record is in it and drops it only when removing it, so
 *                the last reference goes after no lookup can find the record
 *                any more: whoever drops it frees it, with no lock.
 *   rec->lock    one per record: everything else in it. Held while building,
 *                comparing and forwarding an update of that exec, so two
 *                threads updating one exec (the program's race) are
 *                serialized instead of corrupting the record.
 * A record is freed when its last reference goes: the table holds one while
 * the exec lives, each call in progress holds one.
 * Inside rec->lock fingerprint.c may take pinfo_lock and sg_mem_find's lock;
 * stats.c's exec_lock is taken for counting; profiled.c takes the slot
 * locks of slots.c (and may wait for a generation's last launch).
 */
#include "graphs.h"

#include "driver.h"
#include "fingerprint.h"
#include "log.h"
#include "profiled.h"
#include "stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int table_oom;    /* set by uthash on a failed add (table_lock held) */
#define uthash_nonfatal_oom(elt) (table_oom = 1)
#include "hash.h"

typedef struct sg_grec {
    CUgraphExec exec;            /* key (table_lock) */
    UT_hash_handle hh;           /* table_lock */
    int refs;                    /* atomic (see Locks above) */
    pthread_mutex_t lock;        /* guards the fields below */
    int unsupported;
    int stale;
    sg_reason stale_reason;
    int tracked;                 /* map holds the original graph's node handles */
    int logged;                  /* the unsupported line was logged */
    sg_fp fp;                    /* what the exec holds */
    sg_fp next;                  /* the candidate of an update (buffers reused) */
    sg_fp_scratch scratch;
    sg_fp_map map;
    sg_fp_node node;             /* the candidate of a per-node update */
    sg_prof *prof;               /* skip_profiled / always_update: NULL if untracked */
    struct sg_exec *stat;        /* the exec's counters (stats.c); set at instantiate */
} sg_grec;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_grec *table;

static void rec_free(sg_grec *r)
{
    sg_prof_free(r->prof);
    pthread_mutex_destroy(&r->lock);
    sg_fp_free(&r->fp);
    sg_fp_free(&r->next);
    sg_fp_scratch_free(&r->scratch);
    sg_fp_map_free(&r->map);
    sg_fp_node_free(&r->node);
    free(r);
}

/* Drops one reference (with or without table_lock). */
static void rec_unref_locked(sg_grec *r)
{
    if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) rec_free(r);
}

static void rec_put(sg_grec *r) { rec_unref_locked(r); }

/* Removes exec's record from the table, if any; table_lock held. */
static void rec_remove_locked(CUgraphExec exec)
{
    sg_grec *r;
    HASH_FIND_PTR(table, &exec, r);
    if (r) {
        HASH_DEL(table, r);
        rec_unref_locked(r);
    }
}

/* Adds a fresh record for exec (replacing any) and returns it with a
 * reference for the caller; NULL if out of memory. A record first seen at an
 * update starts stale (untracked_exec). */
static sg_grec *rec_add_locked(CUgraphExec exec)
{
    sg_grec *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->exec = exec;
    r->refs = 2;
    r->stale = 1;
    r->stale_reason = SG_REASON_UNTRACKED_EXEC;
    pthread_mutex_init(&r->lock, NULL);
    rec_remove_locked(exec);
    table_oom = 0;
    HASH_ADD_PTR(table, exec, r);
    if (table_oom) {
        rec_free(r);
        return NULL;
    }
    return r;
}

/* The record of exec with a reference for the caller, made (stale) if
 * unknown; NULL if out of memory. */
static sg_grec *rec_get(CUgraphExec exec)
{
    sg_grec *r;
    pthread_mutex_lock(&table_lock);
    HASH_FIND_PTR(table, &exec, r);
    if (r) __atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
    else r = rec_add_locked(exec);
    pthread_mutex_unlock(&table_lock);
    return r;
}

static void atfork_prepare(void) { pthread_mutex_lock(&table_lock); }
static void atfork_release(void) { pthread_mutex_unlock(&table_lock); }
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_register(void) { pthread_atfork(atfork_prepare, atfork_release, atfork_release); }

void sg_graph_init(const sg_config *cfg)
{
    sg_prof_init(cfg);   /* the policy itself is read through sg_core_policy() */
    pthread_once(&atfork_once, atfork_register);
}

/* ------------------------------------------------------------ accounting */

static int skipping(void)
{
    sg_policy p = sg_core_policy();
    return p == SG_POLICY_SKIP_TEMP || p == SG_POLICY_SKIP_PROFILED;
}

static int profiling(void)
{
    sg_policy p = sg_core_policy();
    return p == SG_POLICY_SKIP_PROFILED || p == SG_POLICY_ALWAYS_UPDATE;
}

/* Forwards an update; a profiling exec's (prof, may be NULL) is timed. */
static CUresult forward_update_timed(const sg_call *c, sg_reason reason, sg_prof *prof)
{
    SG_TOTAL_ADD(updates_forwarded, 1);
    sg_exec_update(c->exec, 1, reason);
    if (!prof || sg_prof_state(prof) != SG_PROF_PROFILING) return c->forward(c->args);
    unsigned long long t0 = sg_prof_now_ns();
    CUresult rc = c->forward(c->args);
    sg_prof_timed_update(prof, sg_prof_now_ns() - t0);
    return rc;
}

static CUresult forward_update(const sg_call *c, sg_reason reason)
{
    return forward_update_timed(c, reason, NULL);
}

/* Answers an identical update without the driver, as the driver would have. */
static CUresult skip_update(const sg_call *c)
{
    SG_TOTAL_ADD(updates_skipped, 1);
    sg_exec_update(c->exec, 0, SG_REASON_POLICY);
    if (c->kind == SG_CALL_UPDATE_GRAPH) {
        if (c->result_info) {
            c->result_info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
            c->result_info->errorNode = NULL;
            c->result_info->errorFromNode = NULL;
        } else {
            *c->error_node_out = NULL;
            *c->update_result_out = CU_GRAPH_EXEC_UPDATE_SUCCESS;
        }
    }
    return CUDA_SUCCESS;
}

/* Whether the out-pointers let an update be answered here: the driver
 * returns CUDA_ERROR_INVALID_VALUE for a NULL resultInfo (v2) or a NULL
 * hErrorNode_out / updateResult_out (legacy), so those calls are forwarded
 * for the driver to say so. */
static int outs_ok(const sg_call *c)
{
    if (c->kind != SG_CALL_UPDATE_GRAPH) return 1;
    return c->result_info || (c->error_node_out && c->update_result_out);
}

/* Skips, or forwards with `reason` (-1: identical). prof: the exec's
 * profile (NULL if none). lazy (skip_profiled GENERATIONS, or always_update
 * simulating it): the difference is of the kind GENERATIONS mode accepts
 * without the driver. Under skip_profiled a lazy update is answered here
 * (the caller records it); the caller has demoted the exec for any other
 * difference (demote_unless_lazy). Under always_update the update is
 * forwarded and counted as would_skip(_profiled). */
static CUresult decide(const sg_call *c, int reason, sg_prof *prof, int lazy, int *forwarded)
{
    int gens = prof && sg_prof_state(prof) == SG_PROF_GENERATIONS;
    *forwarded = 0;
    if (reason < 0) {
        if (skipping() && outs_ok(c)) return skip_update(c);
        if (!skipping()) {
            sg_exec_would_skip(c->exec);
            if (prof) sg_exec_event(c->exec, SG_EXEC_EV_WOULD_SKIP_PROFILED);
        }
        reason = skipping() ? SG_REASON_NOT_COMPARABLE : SG_REASON_POLICY;
    } else if (gens && lazy && outs_ok(c)) {
        if (skipping()) return skip_update(c);
        sg_exec_event(c->exec, SG_EXEC_EV_WOULD_SKIP_PROFILED);
    }
    *forwarded = 1;
    return forward_update_timed(c, (sg_reason)reason, prof);
}

/* Demotes a GENERATIONS exec before a change it cannot accept reaches the
 * driver, and retries the restore of a stale one (profiled.h) (r->lock
 * held; lazy: the change is acceptable; reason < 0: no change). Returns
 * CUDA_SUCCESS, or the error profiled.c gives when the program's exec could
 * not be restored: the program's updates go ahead anyway (forwarded: a
 * whole-graph one that succeeds sets every node, the eager application of
 * the program's state; launches stay blocked until the exec holds it),
 * exec_dirty's call gets the error (it would modify an exec whose content
 * the record could then no longer restore). */
static CUresult demote_unless_lazy(sg_grec *r, int reason, int lazy)
{
    if (reason < 0 || lazy || !r->prof ||
        (sg_prof_state(r->prof) != SG_PROF_GENERATIONS && !sg_prof_x0_stale(r->prof)))
        return CUDA_SUCCESS;
    return sg_prof_demote(r->prof, r->stale ? NULL : &r->fp);
}

/* Marks r unsupported if its fingerprint or the exec's flags say so, and
 * logs it once. r->lock held. */
static void check_supported(sg_grec *r)
{
    cuuint64_t flags = 0;
    if (r->fp.unsupported) r->unsupported = 1;
    if (sg_drv.cuGraphExecGetFlags &&
        SG_DRIVER_CALL(cuGraphExecGetFlags, r->exec, &flags) == CUDA_SUCCESS &&
        (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
        r->unsupported = 1;
    if (r->unsupported && !r->logged) {
        r->logged = 1;
        SG_INFO("graph exec %p holds a node the library does not model (host, child graph, "
                "event, memory, conditional, batch memop, external semaphore or "
                "device-updatable kernel node) or was instantiated for device launch: "
                "its updates always go to the driver", (void *)r->exec);
    }
}

/* ------------------------------------------------------------ calls */

/* Number of nodes of `graph`, through the driver; 0 with *known = 0 if it
 * cannot be asked. */
static size_t graph_node_count(CUgraph graph, int *known)
{
    size_t n = 0;
    *known = sg_drv.cuGraphGetNodes && SG_DRIVER_CALL(cuGraphGetNodes, graph, NULL, &n)
                                            == CUDA_SUCCESS;
    return *known ? n : 0;
}

static CUresult instantiate(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS || !c->exec_out) return rc;
    CUgraphExec exec = *c->exec_out;
    pthread_mutex_lock(&table_lock);
    sg_grec *r = rec_add_locked(exec);
    pthread_mutex_unlock(&table_lock);
    int known = 0;
    size_t nodes = 0;
    if (r) {
        pthread_mutex_lock(&r->lock);
        if (sg_fp_build(&r->fp, c->graph, &r->scratch, NULL) == 0 &&
            sg_fp_map_build(&r->map, r->scratch.nodes, r->fp.n) == 0) {
            r->stale = 0;
            r->tracked = 1;
            nodes = r->fp.n;
            known = 1;
        } else {
            r->stale_reason = SG_REASON_NOT_COMPARABLE;
        }
        check_supported(r);
        if (r->tracked && !r->unsupported && profiling())
            r->prof = sg_prof_new(exec, c->graph, &r->fp, r->scratch.nodes,
                                  sg_core_policy() == SG_POLICY_SKIP_PROFILED);
        pthread_mutex_unlock(&r->lock);
    } else {
        SG_WARN("out of memory: the updates of graph exec %p will always go to the driver",
                (void *)exec);
    }
    if (!known) nodes = graph_node_count(c->graph, &known);
    /* sg_exec_created retires an entry the handle had before: the record's
     * shortcut is taken after it, so that it names the new one. */
    if (sg_exec_created(exec, nodes, known) != 0)
        SG_WARN("out of memory: graph exec %p is not counted", (void *)exec);
    if (r) {
        struct sg_exec *stat = sg_exec_entry(exec);
        pthread_mutex_lock(&r->lock);
        r->stat = stat;
        pthread_mutex_unlock(&r->lock);
        rec_put(r);
    }
    return rc;
}

static CUresult update_graph(const sg_call *c)
{
    SG_TOTAL_ADD(updates_seen, 1);
    sg_grec *r = rec_get(c->exec);
    if (!r) return forward_update(c, SG_REASON_UNTRACKED_EXEC);
    pthread_mutex_lock(&r->lock);
    int built = 0, reason;
    if (r->unsupported) {
        reason = SG_REASON_UNSUPPORTED_NODE;
    } else {
        built = sg_fp_build(&r->next, c->graph, &r->scratch, &r->fp) == 0;
        if (r->stale) reason = r->stale_reason;
        else if (!built) reason = SG_REASON_NOT_COMPARABLE;
        else reason = sg_fp_compare(&r->fp, &r->next);
    }
    int lazy = reason >= 0 && built && !r->stale && r->prof &&
               sg_prof_state(r->prof) == SG_PROF_GENERATIONS && sg_prof_lazy_ok(r->prof, &r->fp, &r->next);
    if (lazy && skipping() && outs_ok(c)) sg_prof_accept_graph(r->prof, &r->fp, &r->next);
    (void)demote_unless_lazy(r, reason, lazy);   /* on failure the update still goes ahead */
    int fwd;
    CUresult rc = decide(c, reason, r->prof, lazy, &fwd);
    if (rc == CUDA_SUCCESS && !r->unsupported && reason >= 0) {
        if (built) {
            sg_fp_swap(&r->fp, &r->next);
            r->stale = 0;
            check_supported(r);
            if (lazy && r->prof) sg_prof_settle(r->prof, &r->fp);
        } else {
            r->stale = 1;
            r->stale_reason = SG_REASON_NOT_COMPARABLE;
        }
    }
    if (rc == CUDA_SUCCESS && fwd && r->prof)
        sg_prof_forwarded(r->prof, r->stale ? NULL : &r->fp, -1);
    pthread_mutex_unlock(&r->lock);
    rec_put(r);
    return rc;
}

/* Describes the parameters of a per-node update into n. Returns 0, 1 for a
 * node type the library does not model, -1 if they cannot be described. */
static int describe_update(const sg_call *c, sg_fp_node *n, const sg_fp_pinfo *hint)
{
    sg_fp_kin k;
    if (c->kind == SG_CALL_UPDATE_KERNEL) {
        if (c->kparams) k = SG_FP_KIN_V2(c->kparams);
        else if (c->kparams_v1) k = SG_FP_KIN_V1(c->kparams_v1);
        else return -1;
        return sg_fp_kernel_desc(n, &k, hint) < 0 ? -1 : 0;
    }
    const CUgraphNodeParams *p = c->nparams;
    if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2) return -1;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        k = SG_FP_KIN_V2(&p->kernel);
        return sg_fp_kernel_desc(n, &k, hint) < 0 ? -1 : 0;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (p->memcpy.flags || p->memcpy.reserved) return -1;
        return sg_fp_memcpy_desc(n, &p->memcpy.copyParams, p->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS_v2 *m = &p->memset;
        CUDA_MEMSET_NODE_PARAMS s = { .dst = m->dst, .pitch = m->pitch, .value = m->value,
                                      .elementSize = m->elementSize, .width = m->width,
                                      .height = m->height };
        return sg_fp_memset_desc(n, &s, m->ctx);
    }
    default:
        return 1;
    }
}

/* UPDATE_KERNEL and UPDATE_NODE. */
static CUresult update_node(const sg_call *c)
{
    SG_TOTAL_ADD(updates_seen, 1);
    sg_grec *r = rec_get(c->exec);
    if (!r) return forward_update(c, SG_REASON_UNTRACKED_EXEC);
    pthread_mutex_lock(&r->lock);
    long i = r->tracked ? sg_fp_map_find(&r->map, c->node) : -1;
    int desc = -1, reason;
    sg_fp_node *rec = i >= 0 && (size_t)i < r->fp.n ? &r->fp.nodes[i] : NULL;
    if (r->unsupported) {
        reason = SG_REASON_UNSUPPORTED_NODE;
    } else if (r->stale) {
        reason = r->stale_reason;
    } else if (!rec) {                           /* a node we do not know */
        reason = r->tracked ? SG_REASON_NOT_COMPARABLE : SG_REASON_UNTRACKED_EXEC;
    } else {
        desc = describe_update(c, &r->node, rec->pi);
        if (desc == 1) reason = SG_REASON_UNSUPPORTED_NODE;
        else if (desc < 0) reason = SG_REASON_NOT_COMPARABLE;
        else reason = sg_fp_node_compare(rec, &r->node, 1);
    }
    int lazy = reason >= 0 && desc == 0 && r->prof &&
               sg_prof_state(r->prof) == SG_PROF_GENERATIONS &&
               sg_prof_lazy_node_ok(r->prof, rec, &r->node);
    (void)demote_unless_lazy(r, reason, lazy);   /* on failure the update still goes ahead */
    int fwd;
    CUresult rc = decide(c, reason, r->prof, lazy, &fwd);
    if (rc == CUDA_SUCCESS && !r->unsupported && !r->stale && reason >= 0) {
        if (desc == 0) {
            /* a per-node update leaves the attributes (and what they made of the node) alone */
            r->node.k.attr_mask = rec->k.attr_mask;
            memcpy(r->node.k.attrs, rec->k.attrs, sizeof rec->k.attrs);
            if (rec->k.state != SG_FP_OK && r->node.k.state == SG_FP_OK)
                r->node.k.state = rec->k.state;
            if (sg_fp_node_copy(rec, &r->node) == 0) {
                desc = 2;
                if (lazy && skipping()) {
                    sg_prof_accept_node(r->prof, (size_t)i);
                    sg_prof_settle(r->prof, &r->fp);
                }
            }
        }
        if (desc != 2) {       /* the exec changed in a way the record cannot follow */
            r->stale = 1;
            r->stale_reason = desc == 1 || !rec ? SG_REASON_EXEC_MODIFIED
                                                : SG_REASON_NOT_COMPARABLE;
        }
    }
    if (rc == CUDA_SUCCESS && fwd && r->prof)
        sg_prof_forwarded(r->prof, r->stale ? NULL : &r->fp, i);
    pthread_mutex_unlock(&r->lock);
    rec_put(r);
    return rc;
}

/* The record of a known exec with a reference for the caller, or NULL. */
static sg_grec *rec_find(CUgraphExec exec)
{
    sg_grec *r;
    pthread_mutex_lock(&table_lock);
    HASH_FIND_PTR(table, &exec, r);
    if (r) __atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&table_lock);
    return r;
}

/* A call that changes the exec in a way the record cannot follow: a
 * GENERATIONS exec is demoted first (its own exec restored to the logical
 * state, which the call then modifies). */
static CUresult exec_dirty(const sg_call *c)
{
    sg_grec *r = rec_find(c->exec);
    if (!r) return c->forward(c->args);
    pthread_mutex_lock(&r->lock);
    CUresult rc = demote_unless_lazy(r, 0, 0);
    if (rc == CUDA_SUCCESS) rc = c->forward(c->args);
    if (rc == CUDA_SUCCESS && !r->stale) {
        r->stale = 1;
        r->stale_reason = SG_REASON_EXEC_MODIFIED;
    }
    pthread_mutex_unlock(&r->lock);
    rec_put(r);
    return rc;
}

/* A launch: under skip_profiled and always_update the exec's profile sees
 * it (and under skip_profiled may launch a variant instead). */
static CUresult launch(const sg_call *c)
{
    sg_grec *r = profiling() ? rec_find(c->exec) : NULL;
    struct sg_exec *stat = NULL;
    CUresult rc;
    if (r) {
        pthread_mutex_lock(&r->lock);
        stat = r->stat;
        rc = r->prof ? sg_prof_launch(r->prof, r->stale || r->unsupported ? NULL : &r->fp, c)
                     : c->forward(c->args);
        pthread_mutex_unlock(&r->lock);
        rec_put(r);
    } else {
        rc = c->forward(c->args);
    }
    if (rc == CUDA_SUCCESS) {
        SG_TOTAL_ADD(launches, 1);
        if (stat) sg_exec_entry_launched(stat);
        else sg_exec_launched(c->exec);
    }
    return rc;
}

/* Destroys the exec; its variants, slots and clone go with it. */
static CUresult exec_destroy(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS) return rc;
    sg_exec_destroyed(c->exec);
    sg_grec *r = rec_find(c->exec);
    if (r) {
        pthread_mutex_lock(&r->lock);
        sg_prof_free(r->prof);
        r->prof = NULL;
        pthread_mutex_unlock(&r->lock);
        pthread_mutex_lock(&table_lock);
        rec_remove_locked(c->exec);
        rec_unref_locked(r);
        pthread_mutex_unlock(&table_lock);
    }
    return rc;
}

void sg_graph_ctx_gone(CUcontext ctx)
{
    sg_grec *r, *tmp;
    pthread_mutex_lock(&table_lock);
    HASH_ITER(hh, table, r, tmp) {
        pthread_mutex_lock(&r->lock);
        int gone = sg_prof_ctx_gone(r->prof, ctx);
        pthread_mutex_unlock(&r->lock);
        if (gone) {
            sg_exec_destroyed(r->exec);
            HASH_DEL(table, r);
            rec_unref_locked(r);
        }
    }
    pthread_mutex_unlock(&table_lock);
}

CUresult sg_graph_call(const sg_call *c)
{
    switch (c->kind) {
    case SG_CALL_INSTANTIATE:
        return instantiate(c);
    case SG_CALL_LAUNCH:
        return launch(c);
    case SG_CALL_UPDATE_GRAPH:
        return update_graph(c);
    case SG_CALL_UPDATE_KERNEL:
    case SG_CALL_UPDATE_NODE:
        return update_node(c);
    case SG_CALL_EXEC_DIRTY:
        return exec_dirty(c);
    case SG_CALL_EXEC_DESTROY:
        return exec_destroy(c);
    default:
        return c->forward(c->args);
    }
}
