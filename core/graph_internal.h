/*
 * core/graph_internal.h: what the three graph files share: graph_records.c
 * (the record table and each record's life), graphs.c (instantiation,
 * launches, notifications, the router's entry) and graph_update.c (the
 * update decisions); graph_uobj.c's marks are graphs.h's. Not for the rest
 * of core/: graphs.h is the interface.
 * Locks: graph_records.c's header.
 */
#ifndef SG_GRAPH_INTERNAL_H
#define SG_GRAPH_INTERNAL_H

#include "graphs.h"

#include <pthread.h>

/* uthash reports a failed add here (graph_records.c, its table lock held). */
extern int sg_graph_table_oom;
#define uthash_nonfatal_oom(elt) (sg_graph_table_oom = 1)
#include "hash.h"
#include "lock.h"
#include "util.h"

typedef enum { REC_CURRENT, REC_STALE } rec_state;

/* Records are type-stable (graph_records.c): never freed, a record whose
 * last reference goes is emptied and kept for the next exec, so that a
 * launch can find its record without the table lock (sg_grec_lock_hot). */
typedef struct sg_grec {
    sg_lock lock;                /* lock.h (every launch takes it); guards the fields
                                  * below but hh, refs and live */
    CUgraphExec exec;            /* key; written with table_lock and lock both held */
    UT_hash_handle hh;           /* table_lock */
    int refs;                    /* atomic (see Locks above) */
    int live;                    /* atomic: in the table (set and cleared under table_lock) */
    CUcontext ctx;
    rec_state state;
    sg_reason stale_reason;
    int unsupported;             /* sticky */
    int fixed;                   /* sticky */
    int uobj;                    /* instantiated or updated from a graph holding user-object
                                  * references (graph_uobj.c): whole-graph updates forwarded,
                                  * no observer shortcut; sticky */
    int logged;                  /* the unsupported line was logged */
    uint64_t fgen;               /* sg_mem_foreign_gen() + 1 when the driver last accepted, or
                                  * the library last checked, fp's foreign operands; 0: never */
    sg_fp fp;                    /* what the program asked the exec to hold (state current) */
    sg_fp next;                  /* the candidate of an update (buffers reused) */
    sg_fp_delta delta;           /* or its nodes that differ from fp (buffers reused) */
    sg_fp_scratch scratch;
    CUgraph graph;               /* the graph it was instantiated from (map valid while set);
                                  * written through sg_grec_set_graph only */
    struct sg_grec *gnext, *gprev;   /* named_lock: the records naming a graph of the same hash */
    sg_fp_map map;               /* its node handles -> indices */
    CUgraphNode *nodes;          /* its node handles in fp order (NULL: not known) */
    size_t nnodes;
    int nodes_partial;           /* some entries of nodes are NULL (captured, not named) */
    int nodes_origin;            /* fp.origin when they were taken (the order they follow) */
    int learn_failed;            /* reading them back did not match fp, or a node of unknown
                                  * handle may have left the graph: not tried again */
    int flags_known, device_launch;   /* instantiation flags, asked once */
    sg_fp_node node;             /* the candidate of a per-node update */
    void *pol;                   /* the observer's state, NULL if none */
    struct sg_exec *stat;        /* the exec's counters (stats.c) */
} sg_grec;

extern sg_caps sg_graph_caps;
extern const sg_exec_observer *sg_graph_obs;

/* The record of exec with a reference for the caller; made (stale) if
 * unknown and make is set; NULL if none or out of memory. */
sg_grec *sg_grec_get(CUgraphExec exec, int make);
/* The table's hot slots (graph_records.c): per hash of an exec handle, the
 * record last added or found for it; atomic pointers, written under
 * table_lock. */
#define SG_GREC_HOT_N 256                    /* a power of two */
extern sg_grec *sg_grec_hot[SG_GREC_HOT_N];

static inline unsigned sg_grec_hot_index(CUgraphExec exec)
{
    return sg_hash8(&exec) & (SG_GREC_HOT_N - 1);
}

/* The launch's lookup: exec's record with its lock held and no reference
 * taken, found without table_lock through its hot slot; NULL when the slot
 * names no live record of exec (then sg_grec_get). Valid until the caller
 * unlocks it: a record is only emptied or refilled under its lock, and
 * `exec` is only written under it (graph_records.c's header). */
static inline sg_grec *sg_grec_lock_hot(CUgraphExec exec)
{
    sg_grec *r = __atomic_load_n(&sg_grec_hot[sg_grec_hot_index(exec)], __ATOMIC_ACQUIRE);
    if (!r) return NULL;
    sg_lock_take(&r->lock);
    if (__builtin_expect(r->exec == exec && __atomic_load_n(&r->live, __ATOMIC_ACQUIRE), 1))
        return r;
    sg_lock_drop(&r->lock);
    return NULL;
}
void sg_grec_put(sg_grec *r);
/* The view the observer gets (r->lock held). */
static inline sg_exec_view sg_grec_view(const sg_grec *r)
{
    return (sg_exec_view){ .exec = r->exec, .ctx = r->ctx,
                           .L = r->state == REC_CURRENT ? &r->fp : NULL,
                           .nodes = r->graph ? r->nodes : NULL,
                           .fixed = r->fixed || r->unsupported || r->uobj };
}
void sg_grec_make_stale(sg_grec *r, sg_reason why);
/* Keeps v (n node handles of graph, in fp order; NULL entries: not known)
 * as r's nodes. -1 if out of memory (nothing changed). */
int sg_grec_set_nodes(sg_grec *r, CUgraph graph, const CUgraphNode *v, size_t n);
/* Sets r->graph (r->lock held), keeping the index of the records that name a
 * graph (graph_records.c). */
void sg_grec_set_graph(sg_grec *r, CUgraph graph);
/* graph was destroyed: every record naming it names none (no other record
 * is visited). */
void sg_grec_forget_graph(CUgraph graph);
void sg_grec_drop_nodes(sg_grec *r);
/* Makes sure r->nodes name every node of fp: a record of a captured graph
 * knows only the handles the program was given during the capture, so the
 * instantiation graph is read back once and its handles kept if it
 * describes fp node for node. 0, or -1 (per-node updates are then
 * forwarded). */
int sg_grec_learn_nodes(sg_grec *r);
/* The index in fp of the node the program names by node, learning the
 * handles (above) only if it is not among those known. -1 if none. */
long sg_grec_node_index(sg_grec *r, CUgraphNode node);
/* The update in r->next is now the exec's state (whole graph). */
void sg_grec_take_next(sg_grec *r);
/* Marks r unsupported if its fingerprint or the exec's flags say so, and
 * logs it once (r->lock held). */
void sg_grec_check_supported(sg_grec *r);
/* r's exec holds, or is about to hold, user-object references (r->lock
 * held): the observer brings the program's exec to L and stays out for good
 * (graph_records.c); sets r->uobj. CUDA_SUCCESS, or the error the program's call
 * gets (nothing forwarded, r unchanged). */
CUresult sg_grec_uobj_hold(sg_grec *r);

/* Calls fn on every record, each locked in turn and referenced (the table
 * lock is not held during fn). */
void sg_grec_foreach(void (*fn)(sg_grec *r, void *u), void *u);
/* A fresh record for exec (replacing any; stale: untracked_exec), with a
 * reference for the caller; NULL if out of memory. */
sg_grec *sg_grec_add(CUgraphExec exec);
/* Removes exec's record from the table, if any. */
void sg_grec_remove(CUgraphExec exec);
/* Takes every record of ctx out of the table: a malloc'd array (*n records,
 * the table's references move to the caller). */
sg_grec **sg_grec_take_ctx(CUcontext ctx, size_t *n);
/* Puts records sg_grec_take_ctx took back in the table (a cuCtxDestroy the
 * driver refused); one whose exec got a record meanwhile is dropped. */
void sg_grec_give_back(sg_grec **v, size_t n);
void sg_grec_atfork(int phase);
void sg_grec_reset(void);

/* UPDATE_GRAPH and UPDATE_NODE calls (graph_update.c). */
CUresult sg_graph_update(const sg_call *c);
CUresult sg_graph_update_node(const sg_call *c);
/* Whether child graph g (nested ones included) holds a memset / memcpy
 * node whose range the driver would refuse over placed memory
 * (graph_update.c; read through the driver). */
int sg_graph_child_range_bad(CUgraph g);

#endif /* SG_GRAPH_INTERNAL_H */
