/*
 * core/graphs.h: graph execs (graphs.c).
 *
 * Keeps, per graph exec, a record of what the program asked the exec to hold
 * (its logical state: a fingerprint, fingerprint.h), so that an update that
 * would leave the exec exactly as it is can be answered without the driver
 * (capability skip_identical), or counted as "would skip" (always_update).
 * Counts launches and updates per exec for the report, makes the driver's
 * range checks for memset / memcpy nodes over placed memory, and tells a
 * policy that wants more (the profiled policy, profiled.h) about every exec
 * event through an observer.
 *
 * The observer: one set of functions, registered once at start-up. Each is
 * called with the exec record's lock held (one exec's calls never overlap),
 * and gets the record's view of the exec.
 */
#ifndef SG_GRAPHS_H
#define SG_GRAPHS_H

#include <cuda.h>

#include "call.h"
#include "fingerprint.h"
#include "policy.h"
#include "stats.h"
#include "streams.h"

/* What the record knows of an exec. */
typedef struct sg_exec_view {
    CUgraphExec exec;              /* the program's exec */
    CUcontext ctx;                 /* the context it was instantiated in (NULL: unknown) */
    const sg_fp *L;                /* the logical state; NULL when not known completely */
    const CUgraphNode *nodes;      /* the nodes of the graph it was instantiated from, in L's
                                    * order (per-node updates name them); NULL once that graph
                                    * or one of its nodes was destroyed */
    int fixed;                     /* the exec holds state no record describes (a disabled node,
                                    * a setter of a node type not modeled): never variants */
} sg_exec_view;

/* An update the record cannot answer itself, as the observer sees it. */
typedef struct sg_update {
    const sg_fp *next;             /* whole graph: the new state, or NULL if ... */
    const sg_fp_delta *delta;      /* ... given as the nodes that differ from L (valid) */
    long node;                     /* per-node: the index of the node */
    const sg_fp_node *desc;        /* per-node: its new description */
    const sg_call *call;           /* the program's call (forward() it, never twice) */
} sg_update;

typedef struct sg_exec_observer {
    /* A new exec (the record knows L, or not). Returns the policy's state for
     * it, or NULL (then nothing else is called for it). */
    void *(*created)(const sg_exec_view *x, CUgraph graph);
    /* An update that changes L. The observer may answer it without the
     * driver (returns 1: the record then takes the new state, and the program
     * gets success) or not (0); -1: it would have, but only observes
     * (always_update): forwarded with no before_forward. */
    int (*accept)(void *st, const sg_exec_view *x, const sg_update *u);
    /* After an accepted update, once the record holds the new state. */
    void (*accepted)(void *st, const sg_exec_view *x);
    /* The update goes to the driver now: the program's exec must hold L
     * before the driver changes it (CUDA_SUCCESS), or the call gets the
     * error returned (nothing forwarded). */
    CUresult (*before_forward)(void *st, const sg_exec_view *x, const sg_update *u);
    /* A forwarded update succeeded (x->L is the new state, or NULL if it is
     * not known); node: its index for a per-node update, -1 for a whole
     * graph, -2 for a per-node update of a node the record does not know;
     * ns: the time it took. */
    void (*forwarded)(void *st, const sg_exec_view *x, long node, uint64_t ns);
    /* A launch of the exec: the observer launches (something equivalent)
     * and returns what the program gets. */
    CUresult (*launch)(void *st, const sg_exec_view *x, const sg_call *c);
    /* An upload of the exec (cuGraphUpload), which the driver orders behind
     * the exec's previous launches: the observer forwards it so ordered
     * (whatever it launched in the exec's place) and returns what the
     * program gets. */
    CUresult (*upload)(void *st, const sg_exec_view *x, const sg_call *c);
    /* A call is about to change exec state no record describes
     * (cuGraphNodeSetEnabled, a setter of a node type not modeled), or the
     * exec comes to hold user-object references (graph_uobj.c): the
     * program's exec must hold L first, and the exec stays out of the
     * observer's shortcuts for good; why: the report's reason (NULL: the
     * first kind). CUDA_SUCCESS, or the error the call gets (nothing
     * forwarded). */
    CUresult (*fix)(void *st, const sg_exec_view *x, const char *why);
    /* A stream is about to be destroyed (its handle may come back). */
    void (*stream_gone)(void *st, const sg_exec_view *x, sg_stream_id s);
    /* A module or library is about to be unloaded: function handles in x->L
     * may be handed out again, so the record's content stops being known
     * after it. Anything the observer runs instead of the program's exec
     * must be given up now, the program's exec brought to x->L while its
     * functions still exist. NULL: nothing to do. */
    void (*content_lost)(void *st, const sg_exec_view *x);
    /* The exec is gone: destroyed by the program (ctx_gone 0: the observer
     * destroys what it made), or with its context (1: the driver destroyed
     * the context's execs and events; make no call on them). Frees st. */
    void (*destroyed)(void *st, int ctx_gone);
} sg_exec_observer;

/* Reads the capabilities and registers the context teardown of the
 * records. Called once at start-up; obs may be NULL. */
void sg_graph_init(const sg_caps *caps, const sg_exec_observer *obs);

/* Handles INSTANTIATE, LAUNCH, UPLOAD, UPDATE_GRAPH, UPDATE_NODE, EXEC_ENABLE,
 * EXEC_DIRTY, EXEC_DESTROY, GRAPH_DESTROY, NODE_DESTROY and MODULE_UNLOAD
 * calls; returns what the program gets. */
CUresult sg_graph_call(const sg_call *c);
/* SG_CALL_LAUNCH only: what sg_graph_call does with it, reached directly by
 * the router (a launch is the hottest graph call). */
CUresult sg_graph_launch(const sg_call *c);

/* Stream s is about to be destroyed: the observer of every exec hears of it
 * (before the driver destroys it). */
void sg_graph_stream_gone(CUstream s);

/* Graphs that hold user-object references (graph_uobj.c): marked when the
 * program retains references into one (cuGraphRetainUserObject) or clones
 * a marked one, forgotten as it is destroyed (before the driver frees the
 * handle, which another thread may get at once; sg_graph_uobj_forget says
 * whether it was marked). An exec instantiated or
 * updated from a marked graph gets every whole-graph update forwarded
 * (user_objects) and no observer shortcut; the library clones no marked
 * graph (prof_restore.c). */
void sg_graph_uobj_mark(CUgraph g);
int sg_graph_uobj_held(CUgraph g);
void sg_graph_uobj_cloned(CUgraph orig, CUgraph clone);
int sg_graph_uobj_forget(CUgraph g);
/* g was just made (cuGraphCreate, cuGraphClone): a mark its value holds is
 * an older graph's, which died unseen (an embedded graph): forgotten. */
void sg_graph_uobj_born(CUgraph g);
void sg_graph_uobj_atfork(int phase);
void sg_graph_uobj_reset(void);

/* Fork: 0 prepare (lock), 1 parent, 2 child (unlock). */
void sg_graph_atfork(int phase);

/* Drops every record (unit tests). */
void sg_graph_reset(void);

#endif /* SG_GRAPHS_H */
