/*
 * core/prof_restore.c: the clone of an exec's graph, bringing an exec to a
 * state, and leaving VARIANTS mode (prof.h).
 *
 * The clone: a copy of a graph of the exec's shape, whose nodes the library
 * sets to the state a variant must hold (clone_st tracks what they hold) and
 * from which variants are instantiated and updated (one cuGraphExecUpdate_v2
 * each). It is taken only when variants are bought, not at instantiation
 * (an exec that never buys costs no driver copy of its graph): from the
 * graph of the whole-graph update whose rent made the purchase due, while
 * the program's call still holds it (sg_prof_clone_take), else from the
 * graph the exec was instantiated from, if it and its nodes still exist
 * (sg_prof_clone_from_source). Until then clone_st holds L as instantiated:
 * the attributes every clone must have (the exec's own, which its updates
 * do not change).
 *
 * Restoring the program's exec (sg_prof_x0_restore): X_0 must never be
 * launched in a state other than raw L. Three paths, each on driver entries
 * the others do not use but for cuGraphExecUpdate_v2 (A and C), so that one
 * failing entry leaves one working:
 *   A  the clone set to raw L through the per-type setters
 *      (cuGraphKernelNodeSetParams_v2, cuGraphMemcpyNodeSetParams,
 *      cuGraphMemsetNodeSetParams), one cuGraphExecUpdate_v2 of X_0;
 *   B  per-node exec updates of X_0 (cuGraphExecKernelNodeSetParams_v2 with
 *      L's payload as an `extra` buffer, cuGraphExecMemcpy /
 *      MemsetNodeSetParams) for the nodes where what X_0 holds (`x0_st`)
 *      differs from L; these name the nodes of the graph X_0 was instantiated
 *      from, so they are not tried once the program destroyed that graph or
 *      one of its nodes (graphs.c then gives no node handles);
 *   C  (when A failed before its update) the clone set through the generic
 *      cuGraphNodeSetParams, one cuGraphExecUpdate_v2.
 * If all fail, X_0 is "stale": PLAIN; every later launch and update retries
 * the restore, and the launch returns an error instead of running X_0
 * (sg_prof_plausible: CUDA_ERROR_OUT_OF_MEMORY, or a driver error that says
 * the context is unusable), until a restore or a forwarded whole-graph update
 * of the program (which sets every node) brings X_0 to the program's state.
 *
 * A node the library could not read (not SG_FP_OK) is never "in sync" and
 * cannot be set: anything that needs it fails, and the exec stays on its own
 * exec (issue 10, class 11).
 */
#include "prof.h"

#include "driver.h"
#include "log.h"
#include "record.h"

#include <stdlib.h>
#include <string.h>

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
    if (sg_prof_clone_map(p) != 0) return CUDA_ERROR_NOT_SUPPORTED;
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
        if (ln->k.state != SG_FP_OK) return CUDA_ERROR_NOT_SUPPORTED;   /* cannot be set */
        const unsigned char *want = sg_prof_translate(p, L, g, i);
        if (!want) return CUDA_ERROR_OUT_OF_MEMORY;
        if (cn->k.state == SG_FP_OK && cn->len == ln->len && !memcmp(&cn->k, &ln->k, sizeof cn->k) &&
            sg_bytes_eq(sg_prof_pay(cn), want, ln->len))
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

CUresult sg_prof_clone_sync(sg_prof *p, const sg_fp *L, int g) { return clone_sync_with(p, L, g, 0); }

/* One whole-graph update of exec e from the clone; X_0 then holds what the
 * clone holds. */
static CUresult update_from_clone(sg_prof *p, CUgraphExec e)
{
    if (!sg_drv.cuGraphExecUpdate_v2) return CUDA_ERROR_NOT_SUPPORTED;
    CUgraphExecUpdateResultInfo info;
    CUresult rc = SG_DRIVER_CALL(cuGraphExecUpdate_v2, e, p->clone, &info);
    if (rc == CUDA_SUCCESS && e == p->exec) p->x0_known = sg_prof_fp_copy(&p->x0_st, &p->clone_st) == 0;
    return rc;
}

/* Brings exec `e` to T_g(L) (g < 0: raw L) with one whole-graph update from
 * the clone. */
CUresult sg_prof_exec_to(sg_prof *p, const sg_fp *L, int g, CUgraphExec e)
{
    CUresult rc = sg_prof_clone_sync(p, L, g);
    return rc != CUDA_SUCCESS ? rc : update_from_clone(p, e);
}

/* Sets X_0's node i to L's node i with the per-node exec update of its type. */
static CUresult x0_node_set(sg_prof *p, const sg_fp_node *ln, CUgraphNode node)
{
    const unsigned char *pay = sg_prof_pay(ln);
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
static CUresult x0_nodes_to(sg_prof *p, const sg_fp *L, const CUgraphNode *nodes)
{
    if (!nodes || L->n != p->n) return CUDA_ERROR_NOT_SUPPORTED;
    int known = p->x0_known && p->x0_st.n == L->n;
    CUresult rc = CUDA_SUCCESS;
    for (size_t i = 0; i < L->n; i++) {
        const sg_fp_node *ln = &L->nodes[i];
        if (known) {
            const sg_fp_node *xn = &p->x0_st.nodes[i];
            if (xn->len == ln->len && !memcmp(&xn->k, &ln->k, sizeof xn->k) &&
                sg_bytes_eq(sg_prof_pay(xn), sg_prof_pay(ln), ln->len))
                continue;
        }
        CUresult r = x0_node_set(p, ln, nodes[i]);
        if (r != CUDA_SUCCESS) {
            rc = r;
            continue;       /* the others still get closer to L */
        }
        if (known && sg_fp_node_copy(&p->x0_st.nodes[i], ln)) known = p->x0_known = 0;
    }
    if (rc == CUDA_SUCCESS && !known) p->x0_known = sg_prof_fp_copy(&p->x0_st, L) == 0;
    return rc;
}

/* The error a program's call gets when X_0 could not be brought to the
 * program's state by any path: an error that says the context or the
 * driver is unusable is passed on (the program's own call would have got it
 * too); anything else (an error about a call the program never made)
 * becomes CUDA_ERROR_OUT_OF_MEMORY, as when the driver cannot obtain what it
 * needs to prepare the exec (cuGraphLaunch's upload, an exec update). */
CUresult sg_prof_plausible(CUresult rc)
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
CUresult sg_prof_x0_restore(sg_prof *p, const sg_exec_view *x)
{
    const sg_fp *L = x->L;
    if (!L) return CUDA_ERROR_UNKNOWN;
    sg_exec_event(p->exec, SG_EXEC_EV_LIB_UPDATE);
    const char *path = "A";
    CUresult rc = sg_prof_clone_sync(p, L, -1);
    int synced = rc == CUDA_SUCCESS;
    if (synced) rc = update_from_clone(p, p->exec);
    if (rc != CUDA_SUCCESS) {
        path = "B";
        rc = x0_nodes_to(p, L, x->nodes);
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

CUresult sg_prof_x0_recover(sg_prof *p, const sg_exec_view *x)
{
    return sg_prof_x0_restore(p, x);
}

/* Whether a and b have the same node types, attributes and edges (a clone's
 * attributes are never set by the library; its parameters are, from L). The
 * source graph may have changed since the exec was made from it: a node
 * setter changes only parameters, but cuGraphAdd/RemoveDependencies change
 * its edges, and variants cloned from it would run in another order. */
static int attrs_same(const sg_fp *a, const sg_fp *b)
{
    if (a->n != b->n || a->nedges != b->nedges ||
        !sg_bytes_eq(a->edges, b->edges, a->nedges * sizeof *a->edges))
        return 0;
    for (size_t i = 0; i < a->n; i++) {
        const sg_fp_key *x = &a->nodes[i].k, *y = &b->nodes[i].k;
        if (x->type != y->type || x->attr_mask != y->attr_mask || memcmp(x->attrs, y->attrs, sizeof x->attrs))
            return 0;
    }
    return 1;
}

int sg_prof_clone_take(sg_prof *p, CUgraph g, const sg_fp *state)
{
    if (p->clone) return 0;
    /* A clone of a graph holding user-object references would hold them
     * ("A cloned cudaGraph_t retains a copy of every reference"): an object
     * the program's handles no longer hold would live on in it
     * (graph_uobj.c). No clone, so no variants, until a graph without them. */
    if (sg_graph_uobj_held(g)) return -1;
    if (!g || !sg_drv.cuGraphClone || !sg_drv.cuGraphDestroy || !p->clone_st.n ||
        state->origin != p->clone_st.origin || !attrs_same(&p->clone_st, state))
        return -1;
    CUgraph c = NULL;
    if (SG_DRIVER_CALL(cuGraphClone, &c, g) != CUDA_SUCCESS) return -1;
    p->clone = c;
    if (state != &p->clone_st && sg_prof_fp_copy(&p->clone_st, state) != 0) {
        sg_prof_clone_free(p);       /* clone_st is no longer what instantiation held */
        return -1;
    }
    SG_DEBUG("graph exec %p: its graph cloned for variants (%zu nodes)", (void *)p->exec, state->n);
    return 0;
}

int sg_prof_clone_from_source(sg_prof *p, const sg_exec_view *x)
{
    if (p->clone) return 0;
    if (!x->nodes || !p->src || !p->clone_st.n) return -1;   /* the source or a node of it is gone */
    if (sg_graph_uobj_held(p->src)) return -1;               /* clone_take's refusal, before a read-back */
    sg_fp now = { 0 };
    sg_fp_scratch s = { 0 };
    int ok = p->clone_st.origin == SG_FP_RECORDED ? sg_rec_fetch(p->src, &now, NULL) == SG_READBACK_NONE
                                                 : sg_fp_build(&now, p->src, &s, NULL) == 0;
    int rc = ok ? sg_prof_clone_take(p, p->src, &now) : -1;
    sg_fp_free(&now);
    sg_fp_scratch_free(&s);
    return rc;
}

int sg_prof_clone_map(sg_prof *p)
{
    if (p->clone_nodes) return 0;
    if (!p->clone) return -1;
    sg_fp read = { 0 };
    sg_fp_scratch s = { 0 };
    /* The clone's attributes are not asked for (10 of the 12 driver calls per
     * node of a full read-back): sg_fp_same_order compares none, and they are
     * the graph's as they were when the clone was taken, which clone_take
     * checked against clone_st. A node of clone_st that the attributes made
     * UNSUPPORTED or NOT_COMPARABLE reads back here as comparable: no match,
     * so no variants (never a wrong mapping). */
    int ok = sg_fp_build_layout(&read, p->clone, &s) == 0 && sg_fp_same_order(&read, &p->clone_st) &&
             (p->clone_nodes = calloc(read.n ? read.n : 1, sizeof *p->clone_nodes)) != NULL;
    if (ok) memcpy(p->clone_nodes, s.nodes, read.n * sizeof *p->clone_nodes);
    sg_fp_free(&read);
    sg_fp_scratch_free(&s);
    if (!ok) {
        SG_INFO("graph exec %p: the library's clone of its graph does not read back as the graph "
                "it was made from: no variants", (void *)p->exec);
        sg_prof_clone_free(p);
        return -1;
    }
    return 0;
}

void sg_prof_clone_free(sg_prof *p)
{
    if (p->clone && sg_drv.cuGraphDestroy) SG_DRIVER_CALL(cuGraphDestroy, p->clone);
    p->clone = NULL;
    free(p->clone_nodes);
    p->clone_nodes = NULL;
    sg_fp_free(&p->clone_st);
}
