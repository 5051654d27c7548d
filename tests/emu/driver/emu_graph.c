/*
 * emu_graph.c: graphs and nodes of the emulated CUDA driver: create,
 * destroy, clone, the node types (kernel, memcpy, memset, host, empty,
 * memory allocation and free, child graphs, event record and wait,
 * cuGraphAddNode), their get/set
 * params and kernel node attributes, edges and dependencies (edge data is
 * stored and reported, but every edge is a full dependency), node and edge
 * queries, the graph memory attributes of a device.
 *
 * A graph with memory nodes has one exec at a time and cannot be cloned. A
 * child graph node owns its embedded graph (emu_graph.h).
 *
 * Locks: a graph is not thread-safe (callers serialise its use, as in CUDA);
 * g->capture is read under emu_cap_lock (emu_capture.c).
 */
#include "emu_graph.h"

#include <stdatomic.h>
#include <string.h>

/* ================================================================ helpers */

int emu_edge_data_is_default(const CUgraphEdgeData *e)
{
    static const CUgraphEdgeData zero;
    return memcmp(e, &zero, sizeof zero) == 0;
}

/* ================================================================= graphs */

static atomic_ulong graph_uids;

int emu_graph_ok(CUgraph g) { return g && emu_handle_ok(g, EMU_K_GRAPH); }

/* 1 if g has an allocation or free node. */
int emu_graph_has_mem(CUgraph g)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->nodes[i]->p.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || g->nodes[i]->p.type == CU_GRAPH_NODE_TYPE_MEM_FREE)
            return 1;
    return 0;
}
int emu_node_ok(CUgraphNode n) { return n && emu_handle_ok(n, EMU_K_NODE); }

static int node_serial_cmp(const void *a, const void *b)
{
    uint64_t x = (*(const CUgraphNode *)a)->serial, y = (*(const CUgraphNode *)b)->serial;
    return x < y ? -1 : x > y;
}

/* Nodes stay in creation order, so their serials increase along g->nodes. */
CUgraphNode emu_graph_node_by_serial(CUgraph g, uint64_t serial)
{
    struct CUgraphNode_st key = { .serial = serial };
    CUgraphNode k = &key, *hit = bsearch(&k, g->nodes, g->n, sizeof *g->nodes, node_serial_cmp);
    return hit ? *hit : NULL;
}

/* 1 if a capture is in progress into g (cuStreamBeginCaptureToGraph). */
static int graph_capturing(CUgraph g)
{
    pthread_mutex_lock(&emu_cap_lock);
    int capturing = g->capture != NULL;
    pthread_mutex_unlock(&emu_cap_lock);
    return capturing;
}

CUgraph emu_graph_new(void)
{
    CUgraph g = emu_handle_mem_get(EMU_K_GRAPH, sizeof *g);   /* a destroyed graph's value */
    g->uid = atomic_fetch_add(&graph_uids, 1) + 1;
    emu_handle_add(g, EMU_K_GRAPH);
    return g;
}

/* Frees a node whose handle is gone and that no graph holds any more. */
static void node_free(CUgraph g, CUgraphNode nd)
{
    if (nd->p.type == CU_GRAPH_NODE_TYPE_MEM_FREE) emu_gmem_set_freed_in(nd->p.mem_ptr, g->uid, 0);
    emu_nparams_free(&nd->p);
    free(nd->deps);
    emu_handle_mem_put(EMU_K_NODE, nd);
}

void emu_graph_free(CUgraph g)
{
    emu_capture_graph_gone(g);
    for (size_t i = 0; i < g->n; i++) {
        emu_handle_del(g->nodes[i]);
        node_free(g, g->nodes[i]);
    }
    emu_handle_del(g);
    emu_urefs_drop(&g->urefs);
    free(g->nodes);
    free(g->edges);
    emu_handle_mem_put(EMU_K_GRAPH, g);
}

static int node_has_dep(CUgraphNode to, CUgraphNode from)
{
    for (size_t i = 0; i < to->ndeps; i++)
        if (to->deps[i] == from) return 1;
    return 0;
}

/* Adds the edge from -> to (validated by the caller); 0 on allocation failure. */
static int edge_add(CUgraph g, CUgraphNode from, CUgraphNode to, const CUgraphEdgeData *data)
{
    if (!EMU_GROW(g->edges, g->cap_edges, g->nedges + 1) ||
        !EMU_GROW(to->deps, to->cap_deps, to->ndeps + 1))
        return 0;
    emu_edge *e = &g->edges[g->nedges++];
    e->from = from;
    e->to = to;
    memset(&e->data, 0, sizeof e->data);
    if (data) e->data = *data;
    to->deps[to->ndeps++] = from;
    return 1;
}

size_t emu_node_dep_pos(CUgraphNode to, CUgraphNode from)
{
    size_t k = 0;
    while (k + 1 < to->ndeps && to->deps[k] != from) k++;
    return k;
}

/* The upstream end's rules of CUgraphEdgeData: "Only kernel nodes define
 * non-zero ports" (DEFAULT, PROGRAMMATIC, LAUNCH_ORDER); a programmatic
 * edge "may only be used between kernel nodes, and must be used with either
 * the CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC or
 * CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER outgoing port"; the PROGRAMMATIC
 * port "must be used with edge type CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC".
 * The downstream end: emu_edge_to_ok. */
int emu_edge_from_ok(CUgraphNode from, const CUgraphEdgeData *e)
{
    if (!e->from_port && e->type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT) return 1;
    if (from->p.type != CU_GRAPH_NODE_TYPE_KERNEL || e->from_port > CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER) return 0;
    if (e->type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC) return e->from_port != CU_GRAPH_KERNEL_NODE_PORT_DEFAULT;
    return e->from_port != CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
}

int emu_edge_to_ok(CUgraphNodeType to, const CUgraphEdgeData *e)
{
    return e->type != CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC || to == CU_GRAPH_NODE_TYPE_KERNEL;
}

/* Validates a dependency list for a new node of g: live nodes of g, no
 * duplicates, edge data with zeroed reserved bytes and to_port. */
CUresult emu_graph_deps_check(CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data, size_t n)
{
    if (n && !deps) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        if (!emu_node_ok(deps[i]) || deps[i]->graph != g) return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i]) return CUDA_ERROR_INVALID_VALUE;
        if (data) {
            const CUgraphEdgeData *e = &data[i];
            for (size_t k = 0; k < sizeof e->reserved; k++)
                if (e->reserved[k]) return CUDA_ERROR_INVALID_VALUE;
            if (e->to_port || e->type > CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC)
                return CUDA_ERROR_INVALID_VALUE;
            if (!emu_edge_from_ok(deps[i], e)) return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

/* Adds a node owning *p (on success only; on failure the caller still owns
 * it). */
CUresult emu_graph_node_add(CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data,
                            size_t n, emu_nparams *p, CUgraphNode *out)
{
    CUresult r = emu_graph_deps_check(g, deps, data, n);
    if (r != CUDA_SUCCESS) return r;
    /* cuGraphChildGraphNodeGetGraph: "Allocation and free nodes cannot be
     * added to the returned graph. Attempting to do so will return an error." */
    if (g->owner && (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || p->type == CU_GRAPH_NODE_TYPE_MEM_FREE))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; data && i < n; i++)
        if (!emu_edge_to_ok(p->type, &data[i])) return CUDA_ERROR_INVALID_VALUE;
    CUgraphNode nd = emu_handle_mem_get(EMU_K_NODE, sizeof *nd);  /* a destroyed node's value */
    if (!EMU_GROW(g->nodes, g->cap, g->n + 1) ||
        !EMU_GROW(g->edges, g->cap_edges, g->nedges + n) ||
        !EMU_GROW(nd->deps, nd->cap_deps, n)) {
        free(nd->deps);
        emu_handle_mem_put(EMU_K_NODE, nd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    nd->graph = g;
    nd->index = g->n;
    nd->serial = g->next_serial++;
    nd->p = *p;
    g->nodes[g->n++] = nd;
    for (size_t i = 0; i < n; i++) edge_add(g, deps[i], nd, data ? &data[i] : NULL); /* room reserved */
    emu_handle_add(nd, EMU_K_NODE);
    if (p->child) p->child->owner = nd;
    for (unsigned i = 0; p->cond_body && i < p->cond_size; i++) p->cond_body[i]->owner = nd;
    if (p->type == CU_GRAPH_NODE_TYPE_MEM_FREE) emu_gmem_set_freed_in(p->mem_ptr, g->uid, 1);
    if (out) *out = nd;
    return CUDA_SUCCESS;
}

/* The shared tail of every cuGraphAdd*Node: validates the graph and output,
 * builds nothing itself; p is freed on failure. */
static CUresult node_add_api(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                             const CUgraphEdgeData *data, size_t n, emu_nparams *p)
{
    CUresult r = emu_graph_node_add(g, deps, data, n, p, out);
    if (r != CUDA_SUCCESS) emu_nparams_free(p);
    return r;
}

/* A live node of the given type, else CUDA_ERROR_INVALID_VALUE. */
static CUresult node_of(CUgraphNode nd, CUgraphNodeType type)
{
    return emu_node_ok(nd) && nd->p.type == type ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#define CHECK_GRAPH_OUT(out, g) do {                                        \
    if (!(out) || !emu_graph_ok(g)) return CUDA_ERROR_INVALID_VALUE;        \
} while (0)

/* Replaces a graph node's parameters (same type required); a kernel node
 * keeps its attributes. */
static CUresult node_set(CUgraphNode nd, emu_nparams *p)
{
    if (nd->p.type != p->type) { emu_nparams_free(p); return CUDA_ERROR_INVALID_VALUE; }
    memcpy(p->attr, nd->p.attr, sizeof p->attr);
    emu_nparams_free(&nd->p);
    nd->p = *p;
    return CUDA_SUCCESS;
}

/* Fills `out` (capacity *num) from `src` (count n) as the graph queries do:
 * NULL out gives the count; extra entries are NULLed; *num gets the count
 * actually returned. */
static void fill_nodes(CUgraphNode *out, size_t *num, const CUgraphNode *src, size_t n)
{
    if (!out) { *num = n; return; }
    size_t i;
    for (i = 0; i < *num && i < n; i++) out[i] = src[i];
    for (size_t j = i; j < *num; j++) out[j] = NULL;
    *num = i;
}

/* ============================================================= graph API */

EMU_EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    EMU_ENTRY_INIT();
    if (!phGraph || flags) return CUDA_ERROR_INVALID_VALUE;
    CUgraph g = emu_graph_new();
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = g;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    EMU_ENTRY_INIT();
    if (!emu_graph_ok(hGraph)) return CUDA_ERROR_INVALID_VALUE;
    /* "all operations other than destroy": a graph captured into, or one
     * whose conditional body or child graph is (destroying it would destroy
     * the graph the capture adds to) */
    if (emu_capture_within(hGraph)) return CUDA_ERROR_INVALID_VALUE;
    /* An embedded graph: "the node retains ownership of the graph"
     * (cuGraphChildGraphNodeGetGraph); it goes with its node. The documentation
     * does not say what destroying it does: refused, loudly. */
    if (hGraph->owner) {
        emu_violation(__func__, "graph %p is embedded in child graph node %p, which owns it",
                      (void *)hGraph, (void *)hGraph->owner);
        return CUDA_ERROR_INVALID_VALUE;
    }
    emu_graph_free(hGraph);
    emu_destroy_delay();
    return CUDA_SUCCESS;
}

/* cuGraphDestroyNode: "Removes hNode from its graph. This operation also
 * severs any dependencies of other nodes on hNode and vice versa. Nodes
 * which belong to a graph which contains allocation or free nodes cannot be
 * destroyed." The order of the remaining nodes and edges is kept; an exec
 * instantiated before is a snapshot and keeps the node, but the node no
 * longer names it (exec setters: "hNode must not have been removed from the
 * original graph"). A graph a capture is in progress into refuses, as it
 * refuses cuGraphDestroy (the capture holds its nodes as dependencies). */
EMU_EXPORT CUresult cuGraphDestroyNode(CUgraphNode hNode)
{
    EMU_ENTRY_INIT();
    if (!emu_node_ok(hNode)) return CUDA_ERROR_INVALID_VALUE;
    CUgraph g = hNode->graph;
    if (emu_graph_has_mem(g) || graph_capturing(g)) return CUDA_ERROR_INVALID_VALUE;
    /* a node whose conditional body (or child graph) is captured into: its
     * removal would destroy the graph the capture adds to (as cuGraphDestroy) */
    if (hNode->p.child && emu_capture_within(hNode->p.child)) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned b = 0; hNode->p.cond_body && b < hNode->p.cond_size; b++)
        if (emu_capture_within(hNode->p.cond_body[b])) return CUDA_ERROR_INVALID_VALUE;
    size_t k = 0;
    for (size_t i = 0; i < g->nedges; i++)
        if (g->edges[i].from != hNode && g->edges[i].to != hNode) g->edges[k++] = g->edges[i];
    g->nedges = k;
    for (size_t i = 0; i < g->n; i++) {
        CUgraphNode m = g->nodes[i];
        k = 0;
        for (size_t j = 0; j < m->ndeps; j++)
            if (m->deps[j] != hNode) m->deps[k++] = m->deps[j];
        m->ndeps = k;
    }
    for (size_t i = hNode->index + 1; i < g->n; i++) {
        g->nodes[i - 1] = g->nodes[i];
        g->nodes[i - 1]->index = i - 1;
    }
    g->n--;
    emu_handle_del(hNode);
    node_free(g, hNode);
    emu_destroy_delay();
    return CUDA_SUCCESS;
}

CUresult emu_graph_clone(CUgraph o, CUgraph *out)
{
    CUgraph g = emu_graph_new();
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < o->n; i++) {
        emu_nparams p;
        if (!emu_nparams_copy(&p, &o->nodes[i]->p) ||
            emu_graph_node_add(g, NULL, NULL, 0, &p, NULL) != CUDA_SUCCESS) {
            emu_nparams_free(&p);
            emu_graph_free(g);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    for (size_t i = 0; i < o->nedges; i++) {
        const emu_edge *e = &o->edges[i];
        if (!edge_add(g, g->nodes[e->from->index], g->nodes[e->to->index], &e->data)) {
            emu_graph_free(g);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    /* A cloned node keeps its original's serial: cuGraphNodeFindInClone. */
    for (size_t i = 0; i < o->n; i++) g->nodes[i]->serial = o->nodes[i]->serial;
    g->next_serial = g->clone_serials = o->next_serial;
    g->clone_of = o->uid;
    /* "A cloned cudaGraph_t retains a copy of every reference owned by the
     * source cudaGraph_t, with the same multiplicity." */
    emu_urefs_copy(&g->urefs, &o->urefs);
    *out = g;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphClone, originalGraph);
    /* "Cloning is not supported for graphs which contain memory allocation
     * nodes, memory free nodes, or conditional nodes." */
    if (emu_graph_has_mem(originalGraph) || emu_graph_has_cond(originalGraph)) return CUDA_ERROR_NOT_SUPPORTED;
    return emu_graph_clone(originalGraph, phGraphClone);
}

EMU_EXPORT CUresult cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode, CUgraph hClonedGraph)
{
    EMU_ENTRY_INIT();
    /* "hClonedGraph must have been cloned from hOriginalGraph via
     * cuGraphClone. hOriginalNode must have been in hOriginalGraph at the
     * time of the call to cuGraphClone, and the corresponding cloned node in
     * hClonedGraph must not have been removed." */
    if (!phNode || !emu_node_ok(hOriginalNode) || !emu_graph_ok(hClonedGraph) ||
        hClonedGraph->clone_of != hOriginalNode->graph->uid || hOriginalNode->serial >= hClonedGraph->clone_serials)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphNode nd = emu_graph_node_by_serial(hClonedGraph, hOriginalNode->serial);
    if (!nd) return CUDA_ERROR_INVALID_VALUE;
    *phNode = nd;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ node adding */

static CUresult add_kernel(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n, const kin *k)
{
    CHECK_GRAPH_OUT(out, g);
    emu_nparams p;
    CUresult r = emu_nparams_kernel(&p, k, NULL);
    return r != CUDA_SUCCESS ? r : node_add_api(out, g, deps, NULL, n, &p);
}

EMU_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    kin k = KIN_OF(nodeParams);
    return add_kernel(phGraphNode, hGraph, dependencies, numDependencies, &k);
}

EMU_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                            size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    kin k = KIN_OF(nodeParams);
    k.kern = nodeParams->kern;
    k.kctx = nodeParams->ctx;
    return add_kernel(phGraphNode, hGraph, dependencies, numDependencies, &k);
}

EMU_EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    CUresult r = emu_nparams_memcpy(&p, copyParams, ctx);
    return r != CUDA_SUCCESS ? r : node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

EMU_EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                         CUcontext ctx)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    CUresult r = emu_nparams_memset(&p, memsetParams, ctx);
    return r != CUDA_SUCCESS ? r : node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

EMU_EXPORT CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                       size_t numDependencies, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    CUresult r = emu_nparams_host(&p, nodeParams);
    return r != CUDA_SUCCESS ? r : node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

EMU_EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                        size_t numDependencies)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    emu_nparams_empty(&p);
    return node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

/* docs/emulator.md, "Child graph nodes". */
EMU_EXPORT CUresult cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                             const CUgraphNode *dependencies, size_t numDependencies,
                                             CUgraph childGraph)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    CUresult r = emu_graph_deps_check(hGraph, dependencies, NULL, numDependencies);
    emu_nparams p;
    if (r == CUDA_SUCCESS) r = emu_nparams_child(&p, childGraph);
    return r != CUDA_SUCCESS ? r : node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

/* "This call does not clone the graph. Changes to the graph will be
 * reflected in the node, and the node retains ownership of the graph." */
EMU_EXPORT CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
    EMU_ENTRY_INIT();
    if (!phGraph || node_of(hNode, CU_GRAPH_NODE_TYPE_GRAPH)) return CUDA_ERROR_INVALID_VALUE;
    *phGraph = hNode->p.child;
    return CUDA_SUCCESS;
}

/* docs/emulator.md, "Event record and wait nodes". */
static CUresult add_event(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n, CUgraphNodeType type,
                          CUevent ev)
{
    CHECK_GRAPH_OUT(out, g);
    CUresult r = emu_graph_deps_check(g, deps, NULL, n);
    emu_nparams p;
    if (r == CUDA_SUCCESS) r = emu_nparams_event(&p, type, ev);
    return r != CUDA_SUCCESS ? r : node_add_api(out, g, deps, NULL, n, &p);
}

/* "Each launch of the graph will record event to capture execution of the
 * node's dependencies." */
EMU_EXPORT CUresult cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                              const CUgraphNode *dependencies, size_t numDependencies,
                                              CUevent event)
{
    EMU_ENTRY_INIT();
    return add_event(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}

/* "The graph node will wait for all work captured in event." */
EMU_EXPORT CUresult cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                            const CUgraphNode *dependencies, size_t numDependencies,
                                            CUevent event)
{
    EMU_ENTRY_INIT();
    return add_event(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}

static CUresult event_get(CUgraphNode nd, CUgraphNodeType type, CUevent *out)
{
    if (!out || node_of(nd, type)) return CUDA_ERROR_INVALID_VALUE;
    *out = nd->p.event;
    return CUDA_SUCCESS;
}

/* A NULL event or a node of another type: CUDA_ERROR_INVALID_VALUE; an event
 * that is not (or no longer) one: CUDA_ERROR_INVALID_HANDLE (both among the
 * documented results). */
static CUresult event_set(CUgraphNode nd, CUgraphNodeType type, CUevent ev)
{
    if (!ev || node_of(nd, type)) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    if (emu_nparams_event(&p, type, ev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_HANDLE;
    return node_set(nd, &p);
}

EMU_EXPORT CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
    EMU_ENTRY_INIT();
    return event_get(hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event_out);
}

EMU_EXPORT CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
    EMU_ENTRY_INIT();
    return event_get(hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event_out);
}

EMU_EXPORT CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event)
{
    EMU_ENTRY_INIT();
    return event_set(hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}

EMU_EXPORT CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event)
{
    EMU_ENTRY_INIT();
    return event_set(hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}

/* Batch memory operation nodes (docs/emulator.md, "Stream memory operations
 * in graphs"): the operations as cuStreamBatchMemOp_v2 checks them, copied
 * ("the paramArray inside nodeParams is copied and therefore it can be
 * freed after the call returns"). */
EMU_EXPORT CUresult cuGraphAddBatchMemOpNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                             const CUgraphNode *dependencies, size_t numDependencies,
                                             const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_graph_deps_check(hGraph, dependencies, NULL, numDependencies);
    emu_nparams p;
    if (r == CUDA_SUCCESS)
        r = emu_nparams_memops(&p, nodeParams->paramArray, nodeParams->count, nodeParams->flags, nodeParams->ctx);
    return r != CUDA_SUCCESS ? r : node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

/* "The paramArray returned in nodeParams_out is owned by the node." */
EMU_EXPORT CUresult cuGraphBatchMemOpNodeGetParams(CUgraphNode hNode, CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams_out)
{
    EMU_ENTRY_INIT();
    if (!nodeParams_out || node_of(hNode, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP)) return CUDA_ERROR_INVALID_VALUE;
    nodeParams_out->ctx = hNode->p.ctx;
    nodeParams_out->count = hNode->p.nmemops;
    nodeParams_out->paramArray = hNode->p.memops;
    nodeParams_out->flags = 0;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphBatchMemOpNodeSetParams(CUgraphNode hNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams || node_of(hNode, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP)) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    CUresult r = emu_nparams_memops(&p, nodeParams->paramArray, nodeParams->count, nodeParams->flags, nodeParams->ctx);
    return r != CUDA_SUCCESS ? r : node_set(hNode, &p);
}

/* External semaphore signal and wait nodes (docs/emulator.md, "External
 * memory and semaphores"): the arrays are checked as the stream calls check
 * them and copied; the getters hand out the node's own arrays. */
#define EXTSEM_NODE_API(kind, ptype, type)                                                        \
    EMU_EXPORT CUresult cuGraphAddExternalSemaphores##kind##Node(CUgraphNode *phGraphNode, CUgraph hGraph, \
        const CUgraphNode *dependencies, size_t numDependencies, const ptype *nodeParams)         \
    {                                                                                             \
        EMU_ENTRY_INIT();                                                                         \
        CHECK_GRAPH_OUT(phGraphNode, hGraph);                                                     \
        if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;                                         \
        CUresult r = emu_graph_deps_check(hGraph, dependencies, NULL, numDependencies);          \
        emu_nparams p;                                                                            \
        if (r == CUDA_SUCCESS)                                                                    \
            r = emu_nparams_extsem(&p, type, nodeParams->extSemArray, nodeParams->paramsArray,    \
                                   nodeParams->numExtSems);                                       \
        return r != CUDA_SUCCESS ? r : node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p); \
    }                                                                                             \
    EMU_EXPORT CUresult cuGraphExternalSemaphores##kind##NodeGetParams(CUgraphNode hNode, ptype *params_out) \
    {                                                                                             \
        EMU_ENTRY_INIT();                                                                         \
        if (!params_out || node_of(hNode, type)) return CUDA_ERROR_INVALID_VALUE;                 \
        params_out->extSemArray = hNode->p.sems;                                                  \
        params_out->paramsArray = hNode->p.sem_params;                                            \
        params_out->numExtSems = hNode->p.nsems;                                                  \
        return CUDA_SUCCESS;                                                                      \
    }                                                                                             \
    EMU_EXPORT CUresult cuGraphExternalSemaphores##kind##NodeSetParams(CUgraphNode hNode, const ptype *nodeParams) \
    {                                                                                             \
        EMU_ENTRY_INIT();                                                                         \
        if (!nodeParams || node_of(hNode, type)) return CUDA_ERROR_INVALID_VALUE;                 \
        emu_nparams p;                                                                            \
        CUresult r = emu_nparams_extsem(&p, type, nodeParams->extSemArray, nodeParams->paramsArray, \
                                        nodeParams->numExtSems);                                  \
        return r != CUDA_SUCCESS ? r : node_set(hNode, &p);                                       \
    }
EXTSEM_NODE_API(Signal, CUDA_EXT_SEM_SIGNAL_NODE_PARAMS, CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL)
EXTSEM_NODE_API(Wait, CUDA_EXT_SEM_WAIT_NODE_PARAMS, CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT)

static CUresult add_generic(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data,
                            size_t n, CUgraphNodeParams *params)
{
    CHECK_GRAPH_OUT(out, g);
    emu_nparams p;
    CUresult r = params && params->type == CU_GRAPH_NODE_TYPE_CONDITIONAL
                     ? emu_nparams_cond(&p, &params->conditional, g)
                     : emu_nparams_generic(&p, params, g->uid);
    return r != CUDA_SUCCESS ? r : node_add_api(out, g, deps, data, n, &p);
}

EMU_EXPORT CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    EMU_ENTRY_INIT();
    return add_generic(phGraphNode, hGraph, dependencies, NULL, numDependencies, nodeParams);
}

EMU_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                      const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                      CUgraphNodeParams *nodeParams)
{
    EMU_ENTRY_INIT();
    return add_generic(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
}

/* ------------------------------------------------------ node get/set params */

EMU_EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams || node_of(hNode, CU_GRAPH_NODE_TYPE_KERNEL)) return CUDA_ERROR_INVALID_VALUE;
    KOUT(nodeParams, &hNode->p);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams || node_of(hNode, CU_GRAPH_NODE_TYPE_KERNEL)) return CUDA_ERROR_INVALID_VALUE;
    KOUT(nodeParams, &hNode->p);
    nodeParams->kern = NULL;
    nodeParams->ctx = hNode->p.ctx;
    return CUDA_SUCCESS;
}

static CUresult kernel_set(CUgraphNode nd, const kin *k)
{
    if (node_of(nd, CU_GRAPH_NODE_TYPE_KERNEL)) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    CUresult r = emu_nparams_kernel(&p, k, NULL);
    return r != CUDA_SUCCESS ? r : node_set(nd, &p);
}

EMU_EXPORT CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    kin k = KIN_OF(nodeParams);
    return kernel_set(hNode, &k);
}

EMU_EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    kin k = KIN_OF(nodeParams);
    k.kern = nodeParams->kern;
    k.kctx = nodeParams->ctx;
    return kernel_set(hNode, &k);
}

EMU_EXPORT CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams || node_of(hNode, CU_GRAPH_NODE_TYPE_MEMCPY)) return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = hNode->p.copy;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
    EMU_ENTRY_INIT();
    if (node_of(hNode, CU_GRAPH_NODE_TYPE_MEMCPY)) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    CUresult r = emu_nparams_memcpy(&p, nodeParams, hNode->p.ctx);
    return r != CUDA_SUCCESS ? r : node_set(hNode, &p);
}

EMU_EXPORT CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams || node_of(hNode, CU_GRAPH_NODE_TYPE_MEMSET)) return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = hNode->p.set;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphMemsetNodeSetParams(CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (node_of(hNode, CU_GRAPH_NODE_TYPE_MEMSET)) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    CUresult r = emu_nparams_memset(&p, nodeParams, hNode->p.ctx);
    return r != CUDA_SUCCESS ? r : node_set(hNode, &p);
}

EMU_EXPORT CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!nodeParams || node_of(hNode, CU_GRAPH_NODE_TYPE_HOST)) return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = hNode->p.host;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    if (node_of(hNode, CU_GRAPH_NODE_TYPE_HOST)) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    CUresult r = emu_nparams_host(&p, nodeParams);
    return r != CUDA_SUCCESS ? r : node_set(hNode, &p);
}

EMU_EXPORT CUresult cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
    EMU_ENTRY_INIT();
    if (!emu_node_ok(hNode) || !nodeParams) return CUDA_ERROR_INVALID_VALUE;
    if (nodeParams->type != hNode->p.type) return CUDA_ERROR_INVALID_VALUE;
    emu_nparams p;
    CUresult r = emu_nparams_generic(&p, nodeParams, 0);
    return r != CUDA_SUCCESS ? r : node_set(hNode, &p);
}

/* -------------------------------------------------------- memory nodes */

EMU_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                           size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    CUdeviceptr dptr = 0;
    CUresult r = emu_graph_deps_check(hGraph, dependencies, NULL, numDependencies);
    if (r == CUDA_SUCCESS) r = emu_nparams_memalloc(&p, nodeParams, hGraph->uid, &dptr);
    if (r == CUDA_SUCCESS) r = node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
    if (r == CUDA_SUCCESS) nodeParams->dptr = dptr;
    return r;
}

/* The pool properties and access descriptors returned are the node's own. */
EMU_EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    EMU_ENTRY_INIT();
    if (!params_out || node_of(hNode, CU_GRAPH_NODE_TYPE_MEM_ALLOC)) return CUDA_ERROR_INVALID_VALUE;
    params_out->poolProps = hNode->p.mem_props;
    params_out->accessDescs = hNode->p.mem_naccess ? hNode->p.mem_access : NULL;
    params_out->accessDescCount = hNode->p.mem_naccess;
    params_out->bytesize = hNode->p.mem_bytes;
    params_out->dptr = hNode->p.mem_ptr;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                          size_t numDependencies, CUdeviceptr dptr)
{
    EMU_ENTRY_INIT();
    CHECK_GRAPH_OUT(phGraphNode, hGraph);
    emu_nparams p;
    CUresult r = emu_nparams_memfree(&p, dptr);
    return r != CUDA_SUCCESS ? r : node_add_api(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

EMU_EXPORT CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
    EMU_ENTRY_INIT();
    if (!dptr_out || node_of(hNode, CU_GRAPH_NODE_TYPE_MEM_FREE)) return CUDA_ERROR_INVALID_VALUE;
    *dptr_out = hNode->p.mem_ptr;
    return CUDA_SUCCESS;
}

/* Graph memory is charged while allocated and given back when freed, so no
 * unused memory is cached for graphs: nothing to trim. */
EMU_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    EMU_ENTRY_INIT();
    return device >= 0 && device < emu_device_count() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* USED and RESERVED are the same here (no cache): the bytes graph
 * allocations hold on the device now, and their high watermark. */
EMU_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    EMU_ENTRY_INIT();
    if (device < 0 || device >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    uint64_t cur = 0, high = 0;
    emu_gmem_graph_attr(device, 1, 1, &cur, &high);
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: memcpy(value, &cur, sizeof cur); return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: memcpy(value, &high, sizeof high); return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Only the high watermarks, and only to 0 (a reset to the current value). */
EMU_EXPORT CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    EMU_ENTRY_INIT();
    if (device < 0 || device >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    uint64_t v;
    if (!value || (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&v, value, sizeof v);
    if (v) return CUDA_ERROR_INVALID_VALUE;
    emu_gmem_graph_attr(device, 0, 2, NULL, NULL);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                                  CUkernelNodeAttrValue *value_out)
{
    EMU_ENTRY_INIT();
    if (!value_out || node_of(hNode, CU_GRAPH_NODE_TYPE_KERNEL) || !emu_node_attr_valid(attr))
        return CUDA_ERROR_INVALID_VALUE;
    *value_out = hNode->p.attr[attr];
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphKernelNodeSetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                                  const CUkernelNodeAttrValue *value)
{
    EMU_ENTRY_INIT();
    if (!value || node_of(hNode, CU_GRAPH_NODE_TYPE_KERNEL) || !emu_node_attr_valid(attr))
        return CUDA_ERROR_INVALID_VALUE;
    if (attr == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) {
        /* 0 or 1, and a device-updatable node cannot opt out */
        int want = value->deviceUpdatableKernelNode.deviceUpdatable;
        if ((want != 0 && want != 1) ||
            (!want && hNode->p.attr[attr].deviceUpdatableKernelNode.deviceUpdatable))
            return CUDA_ERROR_INVALID_VALUE;
    }
    hNode->p.attr[attr] = *value;
    return CUDA_SUCCESS;
}

/* "Copies attributes from source node to destination node. Both node must
 * have the same context." Kernel nodes only. */
EMU_EXPORT CUresult cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src)
{
    EMU_ENTRY_INIT();
    if (node_of(dst, CU_GRAPH_NODE_TYPE_KERNEL) || node_of(src, CU_GRAPH_NODE_TYPE_KERNEL) ||
        dst->p.ctx != src->p.ctx)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(dst->p.attr, src->p.attr, sizeof dst->p.attr);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    EMU_ENTRY_INIT();
    if (!type || !emu_node_ok(hNode)) return CUDA_ERROR_INVALID_VALUE;
    *type = hNode->p.type;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ structure */

EMU_EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    EMU_ENTRY_INIT();
    if (!numNodes || !emu_graph_ok(hGraph)) return CUDA_ERROR_INVALID_VALUE;
    fill_nodes(nodes, numNodes, hGraph->nodes, hGraph->n);
    if (nodes) emu_stat_nodes(*numNodes, 0);   /* nodes listed (a count query lists none) */
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
    EMU_ENTRY_INIT();
    if (!numRootNodes || !emu_graph_ok(hGraph)) return CUDA_ERROR_INVALID_VALUE;
    CUgraphNode *roots = malloc((hGraph->n ? hGraph->n : 1) * sizeof *roots);
    if (!roots) return CUDA_ERROR_OUT_OF_MEMORY;
    size_t k = 0;
    for (size_t i = 0; i < hGraph->n; i++)
        if (!hGraph->nodes[i]->ndeps) roots[k++] = hGraph->nodes[i];
    fill_nodes(rootNodes, numRootNodes, roots, k);
    free(roots);
    return CUDA_SUCCESS;
}

static CUresult get_edges(CUgraph g, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *data, size_t *num)
{
    if (!num || !emu_graph_ok(g) || (!from) != (!to) || (data && !from)) return CUDA_ERROR_INVALID_VALUE;
    if (!from) { *num = g->nedges; return CUDA_SUCCESS; }
    size_t i;
    for (i = 0; i < *num && i < g->nedges; i++) {
        if (!data && !emu_edge_data_is_default(&g->edges[i].data)) return CUDA_ERROR_LOSSY_QUERY;
        from[i] = g->edges[i].from;
        to[i] = g->edges[i].to;
        if (data) data[i] = g->edges[i].data;
    }
    for (size_t j = i; j < *num; j++) {
        from[j] = to[j] = NULL;
        if (data) memset(&data[j], 0, sizeof data[j]);
    }
    *num = i;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges)
{
    EMU_ENTRY_INIT();
    return get_edges(hGraph, from, to, NULL, numEdges);
}

EMU_EXPORT CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                       CUgraphEdgeData *edgeData, size_t *numEdges)
{
    EMU_ENTRY_INIT();
    return get_edges(hGraph, from, to, edgeData, numEdges);
}

/* Incoming (dependents == 0) or outgoing (1) edges of a node. */
static CUresult node_edges(CUgraphNode nd, int dependents, CUgraphNode *out, CUgraphEdgeData *data, size_t *num)
{
    if (!num || !emu_node_ok(nd) || (data && !out)) return CUDA_ERROR_INVALID_VALUE;
    CUgraph g = nd->graph;
    size_t k = 0, cap = *num;
    for (size_t i = 0; i < g->nedges; i++) {
        const emu_edge *e = &g->edges[i];
        if ((dependents ? e->from : e->to) != nd) continue;
        if (out && k < cap) {
            if (!data && !emu_edge_data_is_default(&e->data)) return CUDA_ERROR_LOSSY_QUERY;
            out[k] = dependents ? e->to : e->from;
            if (data) data[k] = e->data;
        }
        k++;
    }
    if (!out) { *num = k; return CUDA_SUCCESS; }
    for (size_t j = k; j < cap; j++) {
        out[j] = NULL;
        if (data) memset(&data[j], 0, sizeof data[j]);
    }
    *num = k < cap ? k : cap;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies, size_t *numDependencies)
{
    EMU_ENTRY_INIT();
    return node_edges(hNode, 0, dependencies, NULL, numDependencies);
}

EMU_EXPORT CUresult cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies,
                                                  CUgraphEdgeData *edgeData, size_t *numDependencies)
{
    EMU_ENTRY_INIT();
    return node_edges(hNode, 0, dependencies, edgeData, numDependencies);
}

EMU_EXPORT CUresult cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                                 size_t *numDependentNodes)
{
    EMU_ENTRY_INIT();
    return node_edges(hNode, 1, dependentNodes, NULL, numDependentNodes);
}

EMU_EXPORT CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                                    CUgraphEdgeData *edgeData, size_t *numDependentNodes)
{
    EMU_ENTRY_INIT();
    return node_edges(hNode, 1, dependentNodes, edgeData, numDependentNodes);
}

static CUresult add_deps(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                         const CUgraphEdgeData *data, size_t n)
{
    if (!emu_graph_ok(g)) return CUDA_ERROR_INVALID_VALUE;
    if (!n) return CUDA_SUCCESS;
    if (!from || !to) return CUDA_ERROR_INVALID_VALUE;
    /* Validate everything first: a failing call changes nothing. */
    for (size_t i = 0; i < n; i++) {
        if (!emu_node_ok(from[i]) || !emu_node_ok(to[i]) || from[i]->graph != g || to[i]->graph != g ||
            from[i] == to[i] || node_has_dep(to[i], from[i]))
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (from[j] == from[i] && to[j] == to[i]) return CUDA_ERROR_INVALID_VALUE;
        if (data && (emu_graph_deps_check(g, &from[i], &data[i], 1) != CUDA_SUCCESS ||
                     !emu_edge_to_ok(to[i]->p.type, &data[i])))
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (!EMU_GROW(g->edges, g->cap_edges, g->nedges + n)) return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++)
        if (!EMU_GROW(to[i]->deps, to[i]->cap_deps, to[i]->ndeps + n))
            return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) edge_add(g, from[i], to[i], data ? &data[i] : NULL);
    return CUDA_SUCCESS;
}

/* cuGraphRemoveDependencies (_v2): each pair must name an existing edge
 * whose data matches (NULL: the default data), else CUDA_ERROR_INVALID_VALUE
 * and nothing changes. Allowed during a capture into the graph, as every
 * operation but destruction and node removal. */
static CUresult remove_deps(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                            const CUgraphEdgeData *data, size_t n)
{
    if (!emu_graph_ok(g)) return CUDA_ERROR_INVALID_VALUE;
    if (!n) return CUDA_SUCCESS;
    if (!from || !to) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        if (!emu_node_ok(from[i]) || !emu_node_ok(to[i]) || from[i]->graph != g || to[i]->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (from[j] == from[i] && to[j] == to[i]) return CUDA_ERROR_INVALID_VALUE;
        size_t e = 0;
        while (e < g->nedges && (g->edges[e].from != from[i] || g->edges[e].to != to[i])) e++;
        if (e == g->nedges) return CUDA_ERROR_INVALID_VALUE;
        if (data ? memcmp(&g->edges[e].data, &data[i], sizeof data[i]) != 0
                 : !emu_edge_data_is_default(&g->edges[e].data))
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < n; i++) {
        size_t e = 0;
        while (g->edges[e].from != from[i] || g->edges[e].to != to[i]) e++;
        memmove(&g->edges[e], &g->edges[e + 1], (g->nedges - e - 1) * sizeof g->edges[0]);
        g->nedges--;
        CUgraphNode t = to[i];
        size_t k = 0;
        for (size_t j = 0; j < t->ndeps; j++)
            if (t->deps[j] != from[i]) t->deps[k++] = t->deps[j];
        t->ndeps = k;
    }
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                              size_t numDependencies)
{
    EMU_ENTRY_INIT();
    return remove_deps(hGraph, from, to, NULL, numDependencies);
}

EMU_EXPORT CUresult cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                                 const CUgraphEdgeData *edgeData, size_t numDependencies)
{
    EMU_ENTRY_INIT();
    return remove_deps(hGraph, from, to, edgeData, numDependencies);
}

EMU_EXPORT CUresult cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                           size_t numDependencies)
{
    EMU_ENTRY_INIT();
    return add_deps(hGraph, from, to, NULL, numDependencies);
}

EMU_EXPORT CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                              const CUgraphEdgeData *edgeData, size_t numDependencies)
{
    EMU_ENTRY_INIT();
    return add_deps(hGraph, from, to, edgeData, numDependencies);
}
