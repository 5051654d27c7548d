/*
 * emu_graph.h: what the graph files of the emulated CUDA driver share
 * (private to emu_graph.c, emu_graph_params.c, emu_capture.c, emu_exec.c
 * and emu_exec_update.c): node parameters, graphs and nodes, graph execs.
 *
 * Model:
 *   - A node keeps its own copy of its parameters (emu_nparams: kernel
 *     arguments packed by emu_args_pack). Nodes are numbered in creation
 *     order; an exec pairs its nodes with the original graph's nodes by that
 *     serial, and an exec node is named by the original graph's node handle,
 *     as in CUDA. A node's serial is its creation number in its graph, never
 *     reused; its index is its position in the graph's array, which shifts
 *     when an earlier node is destroyed (cuGraphDestroyNode).
 *   - A graph (CUgraph and its nodes) is not thread-safe, as in CUDA: callers
 *     serialise their use of one graph. g->capture is guarded by emu_cap_lock.
 *   - exec->lock guards an exec's node parameters (nodes[].p, disabled) and
 *     its last launch token.
 *   - A child graph node (CU_GRAPH_NODE_TYPE_GRAPH) owns its embedded graph
 *     (p.child, a clone made when the node was added; the graph's `owner` is
 *     the node). An exec instantiates it as a nested exec (exec_node.sub, no
 *     handle, the same flags) whose nodes a launch runs in place of the child
 *     node, in the child's topological order, and which cuGraphExecUpdate
 *     and cuGraphExecChildGraphNodeSetParams check and update recursively.
 *   - A conditional node (CU_GRAPH_NODE_TYPE_CONDITIONAL: IF with one body or
 *     two (then / else), WHILE with one, SWITCH with `size`) owns its body
 *     graphs as a child graph node owns its graph (p.cond_body[], made empty
 *     when the node is added; their `owner` is the node); an exec
 *     instantiates each as exec_node.sub[i], and a launch snapshot holds all
 *     bodies' nodes under the node's entry (emu_nparams.body, body_end), the
 *     one the handle's value picks run when the node's turn comes
 *     (emu_cond.c).
 *   - An event record or wait node (CU_GRAPH_NODE_TYPE_EVENT_RECORD,
 *     WAIT_EVENT) holds a reference to its event, so the event's handle
 *     value is not reused while a node names it. A launch of an exec with
 *     such nodes is queued as a chain of works in one piece (emu_exec.c,
 *     launch_chain): the nodes before the event node, then what
 *     cuEventRecord or cuStreamWaitEvent would queue there, then the rest.
 *
 * Lock order: emu_cap_lock (emu_capture.c) -> exec->lock -> tok_lock
 * (emu_exec.c); stream-internal locks (emu_stream.c) come after all of them,
 * and none is held while waiting on a stream.
 */
#ifndef EMU_GRAPH_H
#define EMU_GRAPH_H

#include "emu_internal.h"

#include <stdlib.h>

/* Ensures `arr` (a pointer variable) has room for `need` elements; `cap` is
 * its capacity variable. Evaluates to 0 on allocation failure (arr intact). */
static inline size_t emu_grow_size(size_t cap, size_t need)
{
    size_t n = cap ? cap * 2 : 4;
    while (n < need) n *= 2;
    return n;
}
#define EMU_GROW(arr, cap, need) __extension__ ({                           \
    int ok_ = 1;                                                            \
    if ((need) > (cap)) {                                                   \
        size_t n_ = emu_grow_size((cap), (need));                           \
        void *p_ = realloc((arr), n_ * sizeof *(arr));                      \
        if (p_) { (arr) = p_; (cap) = n_; } else ok_ = 0;                   \
    }                                                                       \
    ok_; })

/* User-object references a graph, an exec or a launch holds (emu_uobj.c):
 * one entry per object, with how many. */
typedef struct emu_uref { CUuserObject o; unsigned long long n; } emu_uref;
typedef struct emu_urefs { emu_uref *v; size_t n, cap; } emu_urefs;

/* Kernel node attribute ids are below this (CU_LAUNCH_ATTRIBUTE_*). */
#define EMU_NODE_ATTR_IDS 17

/* The parameters of one node, owned (kernel arguments included). */
typedef struct emu_nparams {
    CUgraphNodeType type;
    CUcontext ctx;                  /* KERNEL: function's context; MEMCPY/MEMSET: node context */
    emu_args *args;                 /* KERNEL */
    emu_launch launch;              /* KERNEL */
    CUDA_MEMCPY3D copy;             /* MEMCPY */
    CUDA_MEMSET_NODE_PARAMS set;    /* MEMSET */
    CUcontext src_alloc_ctx;        /* MEMCPY: the context its device source was allocated in when
                                     * the parameters were set (emu_mem_alloc_ctx; NULL: none) */
    CUcontext dst_alloc_ctx;        /* MEMCPY, MEMSET: the same for the device destination */
    int src_dev, dst_dev;           /* MEMCPY (src, dst), MEMSET (dst): the device the operand's
                                     * memory lives on when the parameters were set
                                     * (emu_mem_operand_device, an array's device; -1: host or
                                     * unknown) */
    uint64_t src_gen, dst_gen;      /* MEMCPY: the arrays it names, bound when the parameters were
                                     * set (emu_memcpy3d_gens; 0: not an array) */
    CUDA_HOST_NODE_PARAMS host;     /* HOST */
    CUkernelNodeAttrValue attr[EMU_NODE_ATTR_IDS]; /* KERNEL: attributes by id */
    CUdeviceptr mem_ptr;            /* MEM_ALLOC: its allocation (one reference); MEM_FREE: what it frees */
    size_t mem_bytes;               /* MEM_ALLOC */
    CUmemPoolProps mem_props;       /* MEM_ALLOC, as given */
    CUmemAccessDesc mem_access[8];  /* MEM_ALLOC: access descriptors, as given */
    size_t mem_naccess;
    uint64_t mem_gen;               /* MEM_FREE in a launch: the incarnation it frees (0: none) */
    CUgraph child;                  /* GRAPH, in a graph: the embedded graph (owned by the node;
                                     * NULL in an exec, which holds its instance: exec_node.sub) */
    CUevent event;                  /* EVENT_RECORD, WAIT_EVENT: the node's event (one reference
                                     * held: emu_event_ref) */
    CUgraphConditionalHandle cond;  /* CONDITIONAL: its handle (emu_cond.c) */
    CUgraphConditionalNodeType cond_type; /* CONDITIONAL: IF, WHILE or SWITCH */
    unsigned cond_size;             /* CONDITIONAL: how many bodies (IF 1 or 2, WHILE 1, SWITCH >= 1) */
    CUgraph *cond_body;             /* CONDITIONAL in a graph: its cond_size body graphs (the array
                                     * and the graphs owned by the node; NULL in an exec, which
                                     * holds their instances: exec_node.sub) */
    struct emu_nparams *body;       /* CONDITIONAL in a launch snapshot: its bodies' nodes, each
                                     * body's in order, one body after the other (owned; nbody) */
    CUstreamBatchMemOpParams *memops; /* BATCH_MEM_OP: its operations (owned), nmemops of them; */
    unsigned nmemops;               /* ctx: the context they run in */
    CUexternalSemaphore *sems;      /* EXT_SEMAS_SIGNAL / _WAIT: nsems semaphores, then (same
                                     * allocation, owned) sem_params: their parameter structs */
    void *sem_params;
    unsigned nsems;
    size_t nbody;
    size_t *body_end;               /* ...body i is body[i ? body_end[i-1] : 0 .. body_end[i]) (owned;
                                     * cond_size entries) */
} emu_nparams;

/* Kernel node input, whichever struct version it came in. */
typedef struct kin {
    CUfunction func;
    CUkernel kern;        /* v2 / v3 structs: used only where func is NULL */
    CUcontext kctx;       /* their ctx: kern's context (NULL: the current one) */
    emu_launch launch;
    void **kernelParams, **extra;
} kin;

#define KIN_OF(p) ((kin){ .func = (p)->func,                                          \
    .launch = { { (p)->gridDimX, (p)->gridDimY, (p)->gridDimZ },                        \
                { (p)->blockDimX, (p)->blockDimY, (p)->blockDimZ }, (p)->sharedMemBytes }, \
    .kernelParams = (p)->kernelParams, .extra = (p)->extra })

/* Fills any CUDA_KERNEL_NODE_PARAMS version from a kernel node's parameters:
 * kernelParams points into the node's own argument storage, extra is NULL. */
#define KOUT(out, np) do {                                                      \
    (out)->func = (np)->args->func;                                             \
    (out)->gridDimX = (np)->launch.grid.x; (out)->gridDimY = (np)->launch.grid.y; \
    (out)->gridDimZ = (np)->launch.grid.z;                                      \
    (out)->blockDimX = (np)->launch.block.x; (out)->blockDimY = (np)->launch.block.y; \
    (out)->blockDimZ = (np)->launch.block.z;                                    \
    (out)->sharedMemBytes = (np)->launch.shared_bytes;                          \
    (out)->kernelParams = (np)->args->params;                                   \
    (out)->extra = NULL;                                                        \
} while (0)

typedef struct emu_edge { CUgraphNode from, to; CUgraphEdgeData data; } emu_edge;

struct CUgraphNode_st {
    CUgraph graph;
    size_t index;                   /* position in graph->nodes (creation order; shifts
                                       down when an earlier node is destroyed) */
    uint64_t serial;                /* creation number in its graph, never reused: names
                                       the node in execs and clones */
    emu_nparams p;
    CUgraphNode *deps;              /* incoming edges, in the order added */
    size_t ndeps, cap_deps;
};

struct CUgraph_st {
    uint64_t uid;                   /* unique over the process: names the graph in execs */
    CUgraphNode *nodes;
    size_t n, cap;
    emu_edge *edges;                /* every edge, in the order added */
    size_t nedges, cap_edges;
    struct emu_capture *capture;    /* capture in progress into this graph (emu_cap_lock) */
    int mem_execs;                  /* live execs of it while it has memory nodes (at most 1) */
    uint64_t next_serial;           /* the serial of the next node */
    uint64_t clone_of;              /* cuGraphClone: the original graph's uid (0: none)... */
    uint64_t clone_serials;         /* ...whose nodes with serials below this it copied */
    CUgraphNode owner;              /* the child graph node it is embedded in (NULL: none) */
    emu_urefs urefs;                /* the user-object references it owns (emu_uobj.c) */
};

typedef struct exec_node {
    CUgraphNode orig;               /* the original graph's node (never dereferenced
                                       without a handle check) */
    uint64_t serial;                /* orig's serial: names it (increasing along nodes[]) */
    emu_nparams p;
    size_t ndeps;
    size_t *deps;                   /* indices of its dependencies, in edge order */
    CUgraphEdgeData *edata;         /* the data of those edges, parallel to deps */
    int disabled;                   /* cuGraphNodeSetEnabled(…, 0); guarded by the exec's lock */
    struct CUgraphExec_st **sub;    /* GRAPH: the instance of its child graph (sub[0]); CONDITIONAL:
                                       those of its bodies, in body order (the array and the
                                       instances owned, no handles; guarded by the top-level
                                       exec's lock); nsub of them (0: other types) */
    unsigned nsub;
} exec_node;

/* Completion of one launch; launches of an exec wait for the previous one. */
typedef struct launch_token { int refs; int done; } launch_token;

struct CUgraphExec_st {
    CUgraph src;                    /* the graph it came from (checked against graph_uid) */
    int has_mem;                    /* it has memory nodes: counted in src->mem_execs */
    uint64_t graph_uid;
    cuuint64_t flags;
    size_t n;
    exec_node *nodes;
    size_t *order;                  /* topological order of node indices */
    pthread_mutex_t lock;           /* nodes[].p and last */
    launch_token *last;             /* the latest launch, NULL if none */
    size_t charge;                  /* device memory its first launch or upload took */
    int charge_dev;                 /* (CUDAEMU_EXEC_BYTES; 0: none yet), until destroyed */
    emu_urefs urefs;                /* its graph's user-object references (a nested instance:
                                       its child graph's), guarded by the top-level exec's lock */
};

/* emu_capture.c: the capture registry's lock (see there). */
extern pthread_mutex_t emu_cap_lock;

/* Node parameters (emu_graph_params.c) */
int emu_node_attr_valid(CUkernelNodeAttrID id);
CUcontext emu_nparams_func_ctx(CUfunction f, CUcontext fallback);
void emu_nparams_free(emu_nparams *p);
int emu_nparams_copy(emu_nparams *dst, const emu_nparams *src);
CUresult emu_nparams_memalloc(emu_nparams *np, const CUDA_MEM_ALLOC_NODE_PARAMS *in, uint64_t graph_uid,
                              CUdeviceptr *out);
CUresult emu_nparams_memfree(emu_nparams *np, CUdeviceptr p);
CUresult emu_nparams_kernel(emu_nparams *np, const kin *k, CUcontext ctx);
CUresult emu_nparams_memcpy(emu_nparams *np, const CUDA_MEMCPY3D *c, CUcontext ctx);
CUresult emu_nparams_memset(emu_nparams *np, const CUDA_MEMSET_NODE_PARAMS *s, CUcontext ctx);
CUresult emu_nparams_host(emu_nparams *np, const CUDA_HOST_NODE_PARAMS *h);
CUresult emu_nparams_child(emu_nparams *np, CUgraph child);
CUresult emu_nparams_event(emu_nparams *np, CUgraphNodeType type, CUevent ev);
/* A batch memory operation node (emu_copy.c checks the operations:
 * emu_memops_check); ctx NULL: the current context. */
CUresult emu_nparams_memops(emu_nparams *np, const CUstreamBatchMemOpParams *ops, unsigned n, unsigned flags,
                            CUcontext ctx);
void emu_nparams_empty(emu_nparams *np);
/* An external semaphore signal or wait node (type EXT_SEMAS_SIGNAL / _WAIT):
 * the arrays copied, checked as the stream calls check them (emu_ext.c). */
CUresult emu_nparams_extsem(emu_nparams *np, CUgraphNodeType type, const CUexternalSemaphore *sems,
                            const void *params, unsigned n);
/* Whether an update from `a` to `b` changes nothing the node does (the
 * "changed nodes" the statistics count: emu_stat_nodes). */
int emu_nparams_same(const emu_nparams *a, const emu_nparams *b);
CUresult emu_nparams_generic(emu_nparams *np, CUgraphNodeParams *p, uint64_t graph_uid);
int emu_ctx_device(CUcontext c);
CUgraphExecUpdateResult emu_nparams_change_check(const emu_nparams *old, const emu_nparams *nw, int exec_set);

/* Graphs and nodes (emu_graph.c) */
int emu_edge_data_is_default(const CUgraphEdgeData *e);
int emu_graph_ok(CUgraph g);
int emu_graph_has_mem(CUgraph g);
int emu_node_ok(CUgraphNode n);
CUgraph emu_graph_new(void);
void emu_graph_free(CUgraph g);
/* A deep copy of o (child graphs cloned too), its nodes keeping their serials. */
CUresult emu_graph_clone(CUgraph o, CUgraph *out);
/* CUgraphEdgeData's rules for the upstream node of an edge, and for its
 * downstream node's type (emu_graph.c). */
int emu_edge_from_ok(CUgraphNode from, const CUgraphEdgeData *e);
int emu_edge_to_ok(CUgraphNodeType to, const CUgraphEdgeData *e);
/* Where `from` is among the dependencies of `to` (an edge from -> to exists). */
size_t emu_node_dep_pos(CUgraphNode to, CUgraphNode from);
CUresult emu_graph_deps_check(CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data, size_t n);
/* The node of g with `serial`, NULL if none (destroyed, or never made). */
CUgraphNode emu_graph_node_by_serial(CUgraph g, uint64_t serial);
CUresult emu_graph_node_add(CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data,
                            size_t n, emu_nparams *p, CUgraphNode *out);

/* Conditional nodes (emu_cond.c) */
int emu_graph_has_cond(CUgraph g);
CUresult emu_nparams_cond(emu_nparams *np, CUDA_CONDITIONAL_NODE_PARAMS *in, CUgraph g);
CUgraphNode emu_cond_body_check(CUgraph g, int body);
CUgraphNode emu_cond_ctx_check(CUgraph g);
unsigned emu_cond_value(CUgraphConditionalHandle h);
void emu_cond_launch_default(CUgraphConditionalHandle h);
int emu_cond_pick(const emu_nparams *p, unsigned value);
int emu_cond_collect(const emu_nparams *v, size_t n, CUgraphConditionalHandle **out, size_t *nout, size_t *cap);

/* User-object references (emu_uobj.c). copy: dst gets (and counts) new
 * references to every object of src, as many; drop: r's references are
 * released (a count reaching zero queues the destructor), r emptied; move:
 * src's references become dst's (dst must hold none), src emptied. */
void emu_urefs_copy(emu_urefs *dst, const emu_urefs *src);
void emu_urefs_drop(emu_urefs *r);
void emu_urefs_move(emu_urefs *dst, emu_urefs *src);

/* Capture (emu_capture.c) */
int emu_capture_refuse(emu_stream *s);
/* Graph g is being freed: a capture into it is invalidated and detached
 * (a violation). */
void emu_capture_graph_gone(CUgraph g);
/* 1 if a capture is in progress into g or a graph embedded in it (bodies,
 * child graphs, any depth). */
int emu_capture_within(CUgraph g);

/* Graph execs (emu_exec.c) */
int emu_exec_ok(CUgraphExec e);
/* The nodes a launch of e runs: a child graph node counts as its graph's nodes. */
size_t emu_exec_count(CUgraphExec e);
/* Every node of e and its instances (a conditional node and its body's). */
size_t emu_exec_nodes(CUgraphExec e);

#endif /* EMU_GRAPH_H */
