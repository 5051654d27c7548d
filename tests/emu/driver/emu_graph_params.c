/*
 * emu_graph_params.c: the parameters of graph nodes of the emulated CUDA
 * driver (emu_nparams, emu_graph.h): building them from each node type's
 * input (kernel, memcpy, memset, host, empty, memory allocation and free,
 * child graph, event record and wait, batch memory operations; the generic
 * cuGraphNodeParams), copying and freeing them, the kernel node
 * attributes CUDA documents as valid for graph nodes (stored per node with
 * CUDA's defaults: all zero except memSyncDomainMap.remote = 1; no effect on
 * how the emulation runs a kernel; other ids give CUDA_ERROR_INVALID_VALUE),
 * and the check of what a parameter change may do (change_check:
 * cuGraphExecUpdate and the per-node exec set-params calls).
 *
 * The owning context of a kernel function is taken from emu_func_ctx(), else
 * from the context current when the node was made (or the capturing
 * stream's context).
 *
 * Locks: none; parameters belong to their node or exec (emu_graph.h).
 */
#include "emu_graph.h"

#include <stdlib.h>
#include <string.h>

/* ============================================================ node params */

/* Whether `id` is an attribute CUDA documents as valid for graph nodes. */
int emu_node_attr_valid(CUkernelNodeAttrID id)
{
    switch ((int)id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
        return 1;
    default:
        return 0;
    }
}

/* The launch attributes cuLaunchKernelEx may give (emu_internal.h). */
CUresult emu_launch_attrs_check(const CUlaunchAttribute *a, unsigned n)
{
    if (n && !a) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        CUlaunchAttributeID id = a[i].id;
        if (id == CU_LAUNCH_ATTRIBUTE_IGNORE) continue;
        if (id == CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY) return CUDA_ERROR_INVALID_VALUE; /* streams only */
        if (id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) continue;   /* emu_launch_programmatic */
        if (!emu_node_attr_valid(id)) return CUDA_ERROR_NOT_SUPPORTED;
        const CUlaunchAttributeValue *v = &a[i].value;
        if ((id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION || id == CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION) &&
            (unsigned long long)v->clusterDim.x * v->clusterDim.y * v->clusterDim.z > 1)
            return CUDA_ERROR_NOT_SUPPORTED;
        if (id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && v->cooperative != 0 && v->cooperative != 1)
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

void emu_launch_attrs_apply(CUkernelNodeAttrValue *attr, const CUlaunchAttribute *a, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (a[i].id != CU_LAUNCH_ATTRIBUTE_IGNORE && emu_node_attr_valid(a[i].id)) attr[a[i].id] = a[i].value;
}

/* Whether a launch with attributes a asks for programmatic stream
 * serialization (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
 * non-zero, the last one given): the kernel may start before the previous
 * kernel on its stream has finished. Not a node attribute: a capture makes
 * the new node's edges from kernel nodes programmatic ones instead
 * (emu_capture.c). Run here as a full serialization, which the overlap it
 * allows includes. */
int emu_launch_programmatic(const CUlaunchAttribute *a, unsigned n)
{
    int on = 0;
    for (unsigned i = 0; i < n; i++)
        if (a[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
            on = a[i].value.programmaticStreamSerializationAllowed != 0;
    return on;
}

CUcontext emu_nparams_func_ctx(CUfunction f, CUcontext fallback)
{
    CUcontext c = emu_func_ctx(f);
    return c ? c : fallback;
}


void emu_nparams_free(emu_nparams *p)
{
    free(p->args);
    p->args = NULL;
    if (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && p->mem_ptr) emu_gmem_ref(p->mem_ptr, -1);
    p->mem_ptr = 0;
    if (p->child) emu_graph_free(p->child);     /* the embedded graph goes with its node, */
    p->child = NULL;
    for (unsigned i = 0; p->cond_body && i < p->cond_size; i++)   /* and the bodies with theirs */
        if (p->cond_body[i]) emu_graph_free(p->cond_body[i]);
    free(p->cond_body);
    p->cond_body = NULL;
    if (p->event) emu_event_unref(p->event);
    p->event = NULL;
    free(p->memops);
    p->memops = NULL;
    p->nmemops = 0;
    free(p->sems);
    p->sems = NULL;
    p->sem_params = NULL;
    p->nsems = 0;
    for (size_t i = 0; i < p->nbody; i++) emu_nparams_free(&p->body[i]);
    free(p->body);
    free(p->body_end);
    p->body = NULL;
    p->body_end = NULL;
    p->nbody = 0;
}

/* Deep copy (an embedded graph is cloned: cuGraphClone "Child graph nodes in
 * the original graph are recursively copied into the clone"); returns 0 on
 * allocation failure, leaving dst freeable. */
int emu_nparams_copy(emu_nparams *dst, const emu_nparams *src)
{
    *dst = *src;
    dst->args = NULL;
    dst->child = NULL;
    dst->cond_body = NULL;          /* a snapshot's bodies are never copied; a graph's */
    dst->body = NULL;               /* conditional node is never cloned ("The graph cannot be */
    dst->body_end = NULL;           /* cloned"): a copy keeps the handle, type, size, context */
    dst->nbody = 0;
    dst->memops = NULL;
    dst->nmemops = 0;
    dst->sems = NULL;
    dst->sem_params = NULL;
    dst->nsems = 0;
    if (src->sems) {                /* as they are: a semaphore destroyed since is the launch's to refuse */
        size_t bytes = src->nsems * (sizeof *src->sems + emu_extsem_params_size(src->type));
        if (!(dst->sems = malloc(bytes))) return 0;
        memcpy(dst->sems, src->sems, bytes);
        dst->sem_params = dst->sems + src->nsems;
        dst->nsems = src->nsems;
    }
    if (src->event) emu_event_ref(src->event);
    if (src->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) dst->mem_ptr = 0;
    if (src->memops) {
        if (!(dst->memops = malloc(src->nmemops * sizeof *src->memops))) return 0;
        memcpy(dst->memops, src->memops, src->nmemops * sizeof *src->memops);
        dst->nmemops = src->nmemops;
    }
    if (src->args && !(dst->args = emu_args_clone(src->args))) return 0;
    if (src->child && emu_graph_clone(src->child, &dst->child) != CUDA_SUCCESS) return 0;
    if (src->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        emu_gmem_ref(src->mem_ptr, 1);
        dst->mem_ptr = src->mem_ptr;
    }
    return 1;
}

/* An allocation node of graph graph_uid: checks the parameters as documented
 * (cuGraphAddMemAllocNode: pinned device memory, no handle types, at most one
 * access descriptor per device) and reserves the allocation's address, which
 * *out gets. */
CUresult emu_nparams_memalloc(emu_nparams *np, const CUDA_MEM_ALLOC_NODE_PARAMS *in, uint64_t graph_uid,
                              CUdeviceptr *out)
{
    if (!in || !in->bytesize || in->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        in->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        in->poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
        in->accessDescCount > (size_t)emu_device_count() || (in->accessDescCount && !in->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    int dev = in->poolProps.location.id;
    if (dev < 0 || dev >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    memset(np, 0, sizeof *np);
    CUresult r = emu_gmem_create(in->bytesize, dev, graph_uid, &np->mem_ptr);
    if (r != CUDA_SUCCESS) return r;
    np->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    np->mem_bytes = in->bytesize;
    np->mem_props = in->poolProps;
    np->mem_naccess = in->accessDescCount;
    if (in->accessDescCount) memcpy(np->mem_access, in->accessDescs, in->accessDescCount * sizeof *in->accessDescs);
    *out = np->mem_ptr;
    return CUDA_SUCCESS;
}

/* A free node: cuGraphAddMemFreeNode "will return CUDA_ERROR_INVALID_VALUE if
 * the user attempts to free an allocation twice in the same graph, an
 * address that was not returned by an allocation node, an invalid address";
 * and an allocation has at most one free node in any graph. */
CUresult emu_nparams_memfree(emu_nparams *np, CUdeviceptr p)
{
    uint64_t freed_in = 0;
    if (!emu_gmem_info(p, NULL, &freed_in) || freed_in) return CUDA_ERROR_INVALID_VALUE;
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    np->mem_ptr = p;
    return CUDA_SUCCESS;
}

/* ctx: the context the function belongs to if known (capture passes the
 * stream's), NULL for the current one. */
CUresult emu_nparams_kernel(emu_nparams *np, const kin *k, CUcontext ctx)
{
    const emu_launch *l = &k->launch;
    if (!l->grid.x || !l->grid.y || !l->grid.z || !l->block.x || !l->block.y || !l->block.z)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r;
    CUfunction f = k->func;
    if (!f) {
        /* CUDA_KERNEL_NODE_PARAMS_v2 / v3: "kern: Kernel to launch, will only
         * be referenced if func is NULL"; "ctx: Context for the kernel task to
         * run in. The value NULL will indicate the current context should be
         * used by the api. This field is ignored if func is set." The node
         * holds kern's function in that context (as cuKernelGetFunction with
         * it current), and GetParams reports that function. */
        CUcontext kc = k->kctx;
        if (!k->kern || !emu_handle_ok(k->kern, EMU_K_KERNEL)) return CUDA_ERROR_INVALID_VALUE;
        if ((r = emu_ctx_resolve(&kc)) != CUDA_SUCCESS) return r;
        if ((r = emu_func_resolve((CUfunction)(void *)k->kern, kc, &f)) != CUDA_SUCCESS) return r;
        ctx = kc;
    }
    if (!ctx && (r = emu_ctx_require(&ctx)) != CUDA_SUCCESS) return r;
    emu_args *a;
    if ((r = emu_args_pack(f, k->kernelParams, k->extra, &a)) != CUDA_SUCCESS) return r;
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_KERNEL;
    np->args = a;
    np->launch = *l;
    np->ctx = emu_nparams_func_ctx(f, ctx);
    np->attr[CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP].memSyncDomainMap.remote = 1;
    return CUDA_SUCCESS;
}

CUresult emu_nparams_memcpy(emu_nparams *np, const CUDA_MEMCPY3D *c, CUcontext ctx)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    CUresult r;
    if ((r = emu_ctx_resolve(&ctx)) != CUDA_SUCCESS) return r;
    if ((r = emu_memcpy3d_check(c)) != CUDA_SUCCESS) return r;
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_MEMCPY;
    np->copy = *c;
    np->ctx = ctx;
    if (c->srcMemoryType == CU_MEMORYTYPE_DEVICE) np->src_alloc_ctx = emu_mem_alloc_ctx(c->srcDevice + c->srcXInBytes);
    if (c->dstMemoryType == CU_MEMORYTYPE_DEVICE) np->dst_alloc_ctx = emu_mem_alloc_ctx(c->dstDevice + c->dstXInBytes);
    np->src_dev = c->srcMemoryType == CU_MEMORYTYPE_DEVICE ? emu_mem_operand_device(c->srcDevice + c->srcXInBytes) : -1;
    np->dst_dev = c->dstMemoryType == CU_MEMORYTYPE_DEVICE ? emu_mem_operand_device(c->dstDevice + c->dstXInBytes) : -1;
    /* An array operand: its context and device (what an update may not
     * change), and the array itself, by generation (a node keeps naming the
     * array it was given, not whatever array later gets the handle value). */
    if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY) {
        np->src_alloc_ctx = emu_array_ctx(c->srcArray);
        np->src_dev = emu_array_device(c->srcArray);
    }
    if (c->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
        np->dst_alloc_ctx = emu_array_ctx(c->dstArray);
        np->dst_dev = emu_array_device(c->dstArray);
    }
    emu_memcpy3d_gens(c, &np->src_gen, &np->dst_gen);
    return CUDA_SUCCESS;
}

CUresult emu_nparams_memset(emu_nparams *np, const CUDA_MEMSET_NODE_PARAMS *s, CUcontext ctx)
{
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    CUresult r;
    if ((r = emu_ctx_resolve(&ctx)) != CUDA_SUCCESS) return r;
    if ((r = emu_memset_check(s)) != CUDA_SUCCESS) return r;
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_MEMSET;
    np->set = *s;
    np->ctx = ctx;
    np->dst_alloc_ctx = emu_mem_alloc_ctx(s->dst);
    np->src_dev = -1;
    np->dst_dev = emu_mem_operand_device(s->dst);
    return CUDA_SUCCESS;
}

CUresult emu_nparams_host(emu_nparams *np, const CUDA_HOST_NODE_PARAMS *h)
{
    if (!h || !h->fn) return CUDA_ERROR_INVALID_VALUE;
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_HOST;
    np->host = *h;
    return CUDA_SUCCESS;
}

/* A child graph node: cuGraphAddChildGraphNode "If childGraph contains
 * allocation nodes, free nodes, or conditional nodes, this call will return
 * an error. [...] The child graph is cloned in this call." (An embedded
 * graph never gets memory nodes: emu_graph_node_add refuses them, so
 * checking childGraph's own nodes covers the graphs nested in it.) */
CUresult emu_nparams_child(emu_nparams *np, CUgraph child)
{
    if (!emu_graph_ok(child) || emu_graph_has_mem(child) || emu_graph_has_cond(child))
        return CUDA_ERROR_INVALID_VALUE;
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_GRAPH;
    return emu_graph_clone(child, &np->child);
}

/* An event record or wait node of ev (a live event: CUDA_ERROR_INVALID_VALUE
 * otherwise), holding a reference to it. */
CUresult emu_nparams_event(emu_nparams *np, CUgraphNodeType type, CUevent ev)
{
    if (!emu_event_live(ev)) return CUDA_ERROR_INVALID_VALUE;
    memset(np, 0, sizeof *np);
    np->type = type;
    np->event = ev;
    emu_event_ref(ev);
    return CUDA_SUCCESS;
}

/* cuGraphAddExternalSemaphoresSignalNode / WaitNode: the arrays are copied
 * (a node owns its parameters, as every other kind does). */
CUresult emu_nparams_extsem(emu_nparams *np, CUgraphNodeType type, const CUexternalSemaphore *sems,
                            const void *params, unsigned n)
{
    CUresult r = emu_extsem_check(type, sems, params, n);
    if (r != CUDA_SUCCESS) return r;
    size_t psz = emu_extsem_params_size(type);
    CUexternalSemaphore *v = malloc(n * (sizeof *sems + psz));
    if (!v) return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(v, sems, n * sizeof *sems);
    memcpy(v + n, params, n * psz);
    memset(np, 0, sizeof *np);
    np->type = type;
    np->sems = v;
    np->sem_params = v + n;
    np->nsems = n;
    return CUDA_SUCCESS;
}

void emu_nparams_empty(emu_nparams *np)
{
    memset(np, 0, sizeof *np);
    np->type = CU_GRAPH_NODE_TYPE_EMPTY;
}

/* cuGraphAddBatchMemOpNode: "the paramArray inside nodeParams is copied";
 * the operations are checked as cuStreamBatchMemOp_v2 checks them; the
 * context must be live (NULL: the current one). */
CUresult emu_nparams_memops(emu_nparams *np, const CUstreamBatchMemOpParams *ops, unsigned n, unsigned flags,
                            CUcontext ctx)
{
    CUresult r = emu_memops_check(ops, n, flags, 1);
    if (r != CUDA_SUCCESS) return r;
    if (!ctx) ctx = emu_ctx_current();
    if (!ctx || !emu_ctx_live(ctx)) return CUDA_ERROR_INVALID_VALUE;
    memset(np, 0, sizeof *np);
    if (!(np->memops = malloc(n * sizeof *ops))) return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(np->memops, ops, n * sizeof *ops);
    np->nmemops = n;
    np->type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    np->ctx = ctx;
    return CUDA_SUCCESS;
}

/* Kernel arguments are packed into zeroed storage, so their bytes compare;
 * attribute values compare as stored. */
int emu_nparams_same(const emu_nparams *a, const emu_nparams *b)
{
    if (a->type != b->type || a->ctx != b->ctx) return 0;
    switch (a->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return a->args->func == b->args->func && a->args->size == b->args->size &&
               memcmp(a->args->data, b->args->data, a->args->size) == 0 &&
               memcmp(&a->launch, &b->launch, sizeof a->launch) == 0 &&
               memcmp(a->attr, b->attr, sizeof a->attr) == 0;
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        const CUDA_MEMCPY3D *x = &a->copy, *y = &b->copy;   /* field by field: the struct has padding */
#define SAME(f) (x->src##f == y->src##f && x->dst##f == y->dst##f)
        return SAME(XInBytes) && SAME(Y) && SAME(Z) && SAME(LOD) && SAME(MemoryType) && SAME(Host) &&
               SAME(Device) && SAME(Array) && SAME(Pitch) && SAME(Height) &&
               x->WidthInBytes == y->WidthInBytes && x->Height == y->Height && x->Depth == y->Depth;
#undef SAME
    }
    case CU_GRAPH_NODE_TYPE_MEMSET:
        return memcmp(&a->set, &b->set, sizeof a->set) == 0;
    case CU_GRAPH_NODE_TYPE_HOST:
        return a->host.fn == b->host.fn && a->host.userData == b->host.userData;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return a->mem_ptr == b->mem_ptr && a->mem_bytes == b->mem_bytes;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return a->event == b->event;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return a->cond == b->cond && a->cond_type == b->cond_type && a->cond_size == b->cond_size;
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        return a->nmemops == b->nmemops && memcmp(a->memops, b->memops, a->nmemops * sizeof *a->memops) == 0;
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
        return a->nsems == b->nsems &&
               memcmp(a->sems, b->sems, a->nsems * (sizeof *a->sems + emu_extsem_params_size(a->type))) == 0;
    default:
        return 1;
    }
}

/* From the tagged union of cuGraphAddNode / cuGraphNodeSetParams /
 * cuGraphExecNodeSetParams. */
/* graph_uid: the graph the node is added to; 0 for the set-params calls. */
CUresult emu_nparams_generic(emu_nparams *np, CUgraphNodeParams *p, uint64_t graph_uid)
{
    if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2)
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        kin k = KIN_OF(&p->kernel);
        k.kern = p->kernel.kern;
        k.kctx = p->kernel.ctx;
        return emu_nparams_kernel(np, &k, NULL);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (p->memcpy.flags || p->memcpy.reserved) return CUDA_ERROR_INVALID_VALUE;
        return emu_nparams_memcpy(np, &p->memcpy.copyParams, p->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS_v2 *m = &p->memset;
        CUDA_MEMSET_NODE_PARAMS s = { .dst = m->dst, .pitch = m->pitch, .value = m->value,
                                      .elementSize = m->elementSize, .width = m->width,
                                      .height = m->height };
        return emu_nparams_memset(np, &s, m->ctx);
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
        CUDA_HOST_NODE_PARAMS h = { .fn = p->host.fn, .userData = p->host.userData };
        return emu_nparams_host(np, &h);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
        emu_nparams_empty(np);
        return CUDA_SUCCESS;
    /* Memory nodes can be added, never set ("API unsupported"). */
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
        if (!graph_uid) return CUDA_ERROR_NOT_SUPPORTED;
        CUDA_MEM_ALLOC_NODE_PARAMS a = { .poolProps = p->alloc.poolProps, .accessDescs = p->alloc.accessDescs,
                                         .accessDescCount = p->alloc.accessDescCount,
                                         .bytesize = p->alloc.bytesize };
        return emu_nparams_memalloc(np, &a, graph_uid, &p->alloc.dptr);
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return graph_uid ? emu_nparams_memfree(np, p->free.dptr) : CUDA_ERROR_NOT_SUPPORTED;
    /* A child graph node is added as a clone (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE);
     * a moved child graph, and setting the embedded graph of a node in a
     * graph (cuGraphNodeSetParams), are not emulated ("Emulation limits");
     * cuGraphExecNodeSetParams handles its case before this. */
    case CU_GRAPH_NODE_TYPE_GRAPH:
        if (!graph_uid || p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
            return CUDA_ERROR_NOT_SUPPORTED;
        return emu_nparams_child(np, p->graph.graph);
    /* Event nodes: added and set alike (cuGraphExecNodeSetParams: "event
     * wait: Unrestricted", "event record: Unrestricted"). */
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return emu_nparams_event(np, p->type, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return emu_nparams_event(np, p->type, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        return emu_nparams_memops(np, p->memOp.paramArray, p->memOp.count, p->memOp.flags,
                                  p->memOp.ctx);
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
        return emu_nparams_extsem(np, p->type, p->extSemSignal.extSemArray, p->extSemSignal.paramsArray,
                                  p->extSemSignal.numExtSems);
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
        return emu_nparams_extsem(np, p->type, p->extSemWait.extSemArray, p->extSemWait.paramsArray,
                                  p->extSemWait.numExtSems);
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* Device of a context, -1 if none. */
int emu_ctx_device(CUcontext c) { return c ? c->device : -1; }

static int is_1d_copy(const CUDA_MEMCPY3D *c) { return c->Height <= 1 && c->Depth <= 1; }
static int is_1d_set(const CUDA_MEMSET_NODE_PARAMS *s) { return s->height <= 1; }

/* The exec setters: "Both the instantiation-time memory operands and the
 * memory operands in copyParams must be 1-dimensional": an array operand
 * of 2 or 3 dimensions is not, whatever the copy's shape (a destroyed
 * instantiation-time array is judged by its successor, if any: not
 * multidimensional when none). */
static int multidim_array(const CUDA_MEMCPY3D *c)
{
    return (c->srcMemoryType == CU_MEMORYTYPE_ARRAY && emu_array_multidim(c->srcArray)) ||
           (c->dstMemoryType == CU_MEMORYTYPE_ARRAY && emu_array_multidim(c->dstArray));
}

/* A device operand that must stay device memory reachable by the node's
 * device (its context and mapping "cannot change"). */
static int operand_ok(CUmemorytype t, CUdeviceptr p, size_t n, int dev)
{
    if (t != CU_MEMORYTYPE_DEVICE) return 1;
    emu_range r;
    return emu_mem_find(p, &r) && emu_mem_accessible(p, n ? n : 1, dev);
}

/* "The source/destination memory must be allocated from the same contexts
 * as the original source/destination memory" (cuGraphExecUpdate and the
 * memset/memcpy exec setters): checked where both allocations were made in a
 * context (emu_mem_alloc_ctx); the docs name no context for other memory.
 * The original memory's context is the one recorded when the node's
 * parameters were set (emu_nparams_memcpy, _memset): by the time of the
 * update the original block may be freed and its address given to a block
 * of another context, which says nothing about the original. */
static int same_alloc_ctx(CUmemorytype t, CUcontext was, CUcontext now)
{
    if (t != CU_MEMORYTYPE_DEVICE && t != CU_MEMORYTYPE_ARRAY) return 1;
    return !was || !now || was == now;
}

/* "The CUDA device(s) to which the operand(s) was allocated/mapped cannot
 * change" (cuGraphExecUpdate): the device the memory lives on, whatever the
 * kind (a cuMemAlloc block's context's device, a VMM mapping's physical
 * location, a pool's device), recorded when the parameters were set. Until
 * round 31 only the allocating context was compared (above), which VMM
 * memory has not, so a peer copy turned around between two devices' VMM
 * mappings (placed memory, under the library) was accepted where the same
 * copy between cuMemAlloc blocks was refused (tests/e2e/adv_multidev.c
 * `copies`; test_update_rules.c `operand_device_changes_vmm`). */
static int same_dev(int was, int now) { return was < 0 || now < 0 || was == now; }

/* Whether an exec node may change from `old` to `nw` (same type), as
 * cuGraphExecUpdate (exec_set == 0) or the per-node exec set-params calls
 * (exec_set == 1) allow. Returns the update result code. */
CUgraphExecUpdateResult emu_nparams_change_check(const emu_nparams *old, const emu_nparams *nw, int exec_set)
{
    switch (old->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        if (old->ctx != nw->ctx) return CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE;
        return CU_GRAPH_EXEC_UPDATE_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        const CUDA_MEMCPY3D *a = &old->copy, *b = &nw->copy;
        if (a->srcMemoryType != b->srcMemoryType || a->dstMemoryType != b->dstMemoryType)
            return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        /* The node's checks again, memory may have changed since it was made:
         * an operand that now runs past its allocation is refused. */
        if (emu_memcpy3d_check(b) != CUDA_SUCCESS) return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        if (exec_set && (!is_1d_copy(a) || !is_1d_copy(b) || !b->WidthInBytes || multidim_array(a) ||
                         multidim_array(b)))
            return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        int dev = emu_ctx_device(old->ctx);
        size_t n = b->WidthInBytes;
        if (!operand_ok(b->srcMemoryType, b->srcDevice + b->srcXInBytes, n, dev) ||
            !operand_ok(b->dstMemoryType, b->dstDevice + b->dstXInBytes, n, dev) ||
            !same_alloc_ctx(b->srcMemoryType, old->src_alloc_ctx, nw->src_alloc_ctx) ||
            !same_alloc_ctx(b->dstMemoryType, old->dst_alloc_ctx, nw->dst_alloc_ctx) ||
            !same_dev(old->src_dev, nw->src_dev) || !same_dev(old->dst_dev, nw->dst_dev))
            return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        return CU_GRAPH_EXEC_UPDATE_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS *a = &old->set, *b = &nw->set;
        if (!b->width || emu_memset_check(b) != CUDA_SUCCESS) return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        if (!is_1d_set(a) || !is_1d_set(b)) {
            /* 2D: only address and value may change. */
            if (a->width != b->width || a->height != b->height || a->pitch != b->pitch ||
                a->elementSize != b->elementSize)
                return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        }
        if (!operand_ok(CU_MEMORYTYPE_DEVICE, b->dst, b->width * b->elementSize, emu_ctx_device(old->ctx)) ||
            !same_alloc_ctx(CU_MEMORYTYPE_DEVICE, old->dst_alloc_ctx, nw->dst_alloc_ctx) ||
            !same_dev(old->dst_dev, nw->dst_dev))
            return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        return CU_GRAPH_EXEC_UPDATE_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:      /* an allocation's address and size are fixed */
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return old->mem_ptr == nw->mem_ptr && old->mem_bytes == nw->mem_bytes
                   ? CU_GRAPH_EXEC_UPDATE_SUCCESS : CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    /* cuGraphExecUpdate, "Conditional nodes: Changing node parameters is not
     * supported. [...] Conditional handle flags and default values are
     * updated as part of the graph update.": the type, the number of bodies
     * and the context stay; the handle is the new graph's (its bodies'
     * kernels name it), and with it its flags and default. No per-node exec
     * setter takes one. */
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return !exec_set && old->cond_type == nw->cond_type && old->cond_size == nw->cond_size &&
                       old->ctx == nw->ctx
                   ? CU_GRAPH_EXEC_UPDATE_SUCCESS : CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    /* cuGraphExecBatchMemOpNodeSetParams: "The following fields on operations
     * may be modified on an executable graph: op.waitValue.address,
     * op.waitValue.value[64], op.waitValue.flags bits corresponding to wait
     * type (i.e. CU_STREAM_WAIT_VALUE_FLUSH bit cannot be modified),
     * op.writeValue.address, op.writeValue.value[64]. Other fields, such as
     * the context, count or type of operations, and other types of
     * operations such as membars, may not be modified." The same for a whole
     * update (its documentation names no rule of its own for these nodes). */
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        if (old->ctx != nw->ctx || old->nmemops != nw->nmemops) return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        for (unsigned i = 0; i < old->nmemops; i++) {
            const CUstreamBatchMemOpParams *a = &old->memops[i], *b = &nw->memops[i];
            if (a->operation != b->operation) return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
            switch (a->operation) {
            case CU_STREAM_MEM_OP_WAIT_VALUE_32:
            case CU_STREAM_MEM_OP_WAIT_VALUE_64:
                if ((a->waitValue.flags ^ b->waitValue.flags) & CU_STREAM_WAIT_VALUE_FLUSH)
                    return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
                break;
            case CU_STREAM_MEM_OP_WRITE_VALUE_32:
            case CU_STREAM_MEM_OP_WRITE_VALUE_64:
                if (a->writeValue.flags != b->writeValue.flags) return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
                break;
            case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
                break;
            default:                        /* a barrier: its type may not change */
                if (a->memoryBarrier.flags != b->memoryBarrier.flags)
                    return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
                break;
            }
        }
        return CU_GRAPH_EXEC_UPDATE_SUCCESS;
    /* cuGraphExecUpdate: "External semaphore wait nodes and record nodes:
     * Changing the number of semaphores is not supported."; the exec
     * setters: "Changing nodeParams->numExtSems is not supported." */
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
        return old->nsems == nw->nsems ? CU_GRAPH_EXEC_UPDATE_SUCCESS : CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    default:
        return CU_GRAPH_EXEC_UPDATE_SUCCESS;  /* host, empty, event record and wait: unrestricted */
    }
}
