/*
 * emu_green.c: green contexts (CUDA 12.4+, the "Green Contexts" section of
 * cuda.h): SM resources, their split into groups, resource descriptors,
 * green contexts, their converted context (cuCtxFromGreenCtx) and streams.
 *
 * The model (docs/emulator.md, "Green contexts"):
 *   - a device's SM resource is CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT SMs,
 *     with the compute capability 9.0 rules of cuda.h: a group has at least
 *     8 SMs and a multiple of 8 (CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING:
 *     2 and a multiple of 2); kernels run as they always do whatever the
 *     partition (no SM is modelled);
 *   - a green context retains the device's primary context until it is
 *     destroyed; its converted context is a distinct CUcontext that counts as
 *     the primary context for everything but streams (memory, modules,
 *     events, graphs made with it current are the primary context's, and
 *     outlive the green context);
 *   - its streams (its default stream, cuGreenCtxStreamCreate's, and
 *     cuStreamCreate's with the converted context current) belong to it:
 *     cuStreamGetCtx answers the converted context, cuStreamGetCtx_v2 the
 *     primary one and the green context; after cuGreenCtxDestroy they answer
 *     CUDA_ERROR_CONTEXT_IS_DESTROYED.
 * A green context's struct and its converted context come from the handle
 * pools (the converted one from the contexts' pool, shared with
 * cuCtxCreate): cuGreenCtxDestroy gives both values to the next
 * cuGreenCtxCreate (or the context's to the next cuCtxCreate). Until then a thread that still holds the converted
 * context current gets CUDA_ERROR_CONTEXT_IS_DESTROYED; afterwards it holds
 * the new green context's (as with a real driver). The destroyed green
 * context's streams keep answering CONTEXT_IS_DESTROYED: each stream knows
 * the id of its green context, which a reused struct does not have.
 */
#include "emu_internal.h"
#include "emu_stream.h"

#include <stdlib.h>
#include <string.h>

/* What the emulator keeps in a CUdevResource's internal bytes (the program must not
 * change them: "This structure should not be directly modified outside of the API that
 * created it"). split: 0 for a resource that may be split (a device's, a context's), else
 * the number of the cuDevSmResourceSplitByCount call that made it. */
#define RES_MAGIC 0x67726e31u   /* "grn1" */
typedef struct res_tag { unsigned magic; int device; unsigned long long split; } res_tag;
_Static_assert(sizeof(res_tag) <= sizeof(((CUdevResource *)0)->_internal_padding), "tag fits");

struct CUdevResourceDesc_st { int device; unsigned sm_count; };

#define SM_MIN 8u               /* compute capability 9.0: "minimum count is 8 SMs and must be a multiple of 8" */
#define SM_MIN_NOCOSCHED 2u

static unsigned long long next_split = 1, next_green_id = 1;   /* atomic */
/* Destroyed green contexts: kept (a thread may still hold the converted context current and
 * must see CUDA_ERROR_CONTEXT_IS_DESTROYED), reachable from here. */

static void res_make(CUdevResource *r, int dev, unsigned sms, unsigned long long split)
{
    memset(r, 0, sizeof *r);
    r->type = CU_DEV_RESOURCE_TYPE_SM;
    r->sm.smCount = sms;
    r->sm.minSmPartitionSize = SM_MIN;
    r->sm.smCoscheduledAlignment = SM_MIN;
    res_tag t = { RES_MAGIC, dev, split };
    memcpy(r->_internal_padding, &t, sizeof t);
}

/* 1 and *t if r is an SM resource this driver made. */
static int res_read(const CUdevResource *r, res_tag *t)
{
    memcpy(t, r->_internal_padding, sizeof *t);
    return t->magic == RES_MAGIC && t->device >= 0 && t->device < emu_device_count();
}

static CUresult green_of(CUgreenCtx h, struct CUgreenCtx_st **out)
{
    if (!h || !emu_handle_ok(h, EMU_K_GREEN)) return CUDA_ERROR_INVALID_CONTEXT;
    *out = h;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource, CUdevResourceType type)
{
    EMU_ENTRY_INIT();
    if (device < 0 || device >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    if (!resource) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    res_make(resource, device, (unsigned)emu_device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device), 0);
    return CUDA_SUCCESS;
}

/* A context's resources: a converted context's are its green context's, any other's the
 * device's. */
EMU_EXPORT CUresult cuCtxGetDevResource(CUcontext hCtx, CUdevResource *resource, CUdevResourceType type)
{
    EMU_ENTRY_INIT();
    if (!hCtx) hCtx = emu_ctx_current_raw();
    if (!hCtx || !emu_ctx_live(hCtx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!resource) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    unsigned sms = hCtx->green ? hCtx->green->sm_count
                               : (unsigned)emu_device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, hCtx->device);
    res_make(resource, hCtx->device, sms, 0);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGreenCtxGetDevResource(CUgreenCtx hCtx, CUdevResource *resource, CUdevResourceType type)
{
    EMU_ENTRY_INIT();
    struct CUgreenCtx_st *g;
    CUresult r = green_of(hCtx, &g);
    if (r != CUDA_SUCCESS) return r;
    if (!resource) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    res_make(resource, g->ctx->device, g->sm_count, 0);
    return CUDA_SUCCESS;
}

/* Groups of max(minCount, the minimum) SMs rounded up to the alignment, as many as fit
 * (at most *nbGroups where result is given); the rest in remaining. A group cannot be
 * split again ("the output results cannot be split again without first creating a
 * descriptor and a green context with that descriptor"). */
EMU_EXPORT CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
                                                const CUdevResource *input, CUdevResource *remaining,
                                                unsigned int useFlags, unsigned int minCount)
{
    EMU_ENTRY_INIT();
    const unsigned known = CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING |
                           CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE;
    res_tag t;
    if (!nbGroups || !input || (useFlags & ~known) || (result && *nbGroups == 0)) return CUDA_ERROR_INVALID_VALUE;
    if (input->type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    if (!res_read(input, &t)) return CUDA_ERROR_INVALID_VALUE;
    if (t.split) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    unsigned total = input->sm.smCount;
    if (minCount > total) return CUDA_ERROR_INVALID_VALUE;
    unsigned unit = useFlags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING ? SM_MIN_NOCOSCHED : SM_MIN;
    unsigned size = minCount < unit ? unit : (minCount + unit - 1) / unit * unit;
    unsigned fit = size <= total ? total / size : 0;
    if (!result) {
        *nbGroups = fit;
        return CUDA_SUCCESS;
    }
    unsigned n = fit < *nbGroups ? fit : *nbGroups;
    unsigned long long split = __atomic_fetch_add(&next_split, 1, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < n; i++) res_make(&result[i], t.device, size, split);
    if (remaining) {
        if (total - n * size) res_make(remaining, t.device, total - n * size, split);
        else memset(remaining, 0, sizeof *remaining);   /* nothing left: an invalid resource */
    }
    *nbGroups = n;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
                                              unsigned int nbResources)
{
    EMU_ENTRY_INIT();
    if (!phDesc || !resources || !nbResources) return CUDA_ERROR_INVALID_VALUE;
    res_tag first = { 0, 0, 0 }, t;
    unsigned sms = 0;
    for (unsigned i = 0; i < nbResources; i++) {
        if (resources[i].type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
        if (!res_read(&resources[i], &t)) return CUDA_ERROR_INVALID_VALUE;
        if (i == 0) first = t;
        /* "the device they came from must be the same"; SM resources "must be outputs
         * (whether result or remaining) from the same split API instance" */
        else if (t.device != first.device || !t.split || t.split != first.split)
            return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
        sms += resources[i].sm.smCount;
    }
    struct CUdevResourceDesc_st *d = emu_handle_mem_get(EMU_K_RESDESC, sizeof *d);
    d->device = first.device;
    d->sm_count = sms;
    emu_handle_add(d, EMU_K_RESDESC);   /* no API destroys a descriptor: kept */
    *phDesc = d;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)
{
    EMU_ENTRY_INIT();
    if (dev < 0 || dev >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    /* CU_GREEN_CTX_DEFAULT_STREAM "Required" */
    if (!phCtx || !desc || !emu_handle_ok(desc, EMU_K_RESDESC) || flags != CU_GREEN_CTX_DEFAULT_STREAM)
        return CUDA_ERROR_INVALID_VALUE;
    if (desc->device != dev) return CUDA_ERROR_INVALID_VALUE;
    struct CUgreenCtx_st *g = emu_handle_mem_get(EMU_K_GREEN, sizeof *g);
    __atomic_store_n(&g->id, __atomic_fetch_add(&next_green_id, 1, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    CUresult r = emu_ctx_green_begin(dev, g);
    if (r != CUDA_SUCCESS) {
        emu_handle_mem_put(EMU_K_GREEN, g);
        return r;
    }
    g->sm_count = desc->sm_count;
    emu_handle_add(g, EMU_K_GREEN);
    *phCtx = g;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
{
    EMU_ENTRY_INIT();
    struct CUgreenCtx_st *g;
    CUresult r = green_of(hCtx, &g);
    if (r != CUDA_SUCCESS) return r;
    emu_handle_del(g);
    __atomic_store_n(&g->destroyed, 1, __ATOMIC_RELEASE);
    emu_green_detach(g);
    emu_ctx_green_end(g);     /* drops its retain of the primary context */
    emu_handle_mem_put(EMU_K_GREEN, g);   /* the next green context gets both values */
    emu_destroy_delay();
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx)
{
    EMU_ENTRY_INIT();
    struct CUgreenCtx_st *g;
    CUresult r = green_of(hCtx, &g);
    if (r != CUDA_SUCCESS) return r;
    if (!pContext) return CUDA_ERROR_INVALID_VALUE;
    *pContext = g->ctx;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags, int priority)
{
    EMU_ENTRY_INIT();
    struct CUgreenCtx_st *g;
    CUresult r = green_of(greenCtx, &g);
    if (r != CUDA_SUCCESS) return r;
    return emu_green_stream_create(g, flags, priority, phStream);
}

/* "If green context is supplied as NULL and the current context is set to a green context,
 * the Id of the current green context is returned." */
EMU_EXPORT CUresult cuGreenCtxGetId(CUgreenCtx greenCtx, unsigned long long *greenCtxId)
{
    EMU_ENTRY_INIT();
    if (!greenCtx) {
        CUcontext cur = emu_ctx_current_raw();
        if (!cur || !cur->green) return CUDA_ERROR_INVALID_CONTEXT;
        if (!emu_ctx_live(cur)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
        greenCtx = cur->green;
    }
    struct CUgreenCtx_st *g;
    CUresult r = green_of(greenCtx, &g);
    if (r != CUDA_SUCCESS) return r;
    if (!greenCtxId) return CUDA_ERROR_INVALID_VALUE;
    *greenCtxId = g->id;
    return CUDA_SUCCESS;
}

/* The arguments of cuGreenCtxRecordEvent / cuGreenCtxWaitEvent: the green context (*g),
 * its streams (*v, *n: referenced, for emu_streams_release). record: the event must be of
 * g's primary context ("hEvent and hCtx must be from the same primary context otherwise
 * CUDA_ERROR_INVALID_HANDLE"); a wait refuses an event recorded in a capture in progress.
 * Both: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED if the specified green context hCtx has a
 * stream in the capture mode. In such a case, the call will invalidate all the conflicting
 * captures." */
static CUresult green_event_args(CUgreenCtx hCtx, CUevent hEvent, int record, struct CUgreenCtx_st **g,
                                 emu_stream ***v, size_t *n)
{
    CUresult r = green_of(hCtx, g);
    if (r != CUDA_SUCCESS) return r;
    if (!hEvent || !emu_handle_ok(hEvent, EMU_K_EVENT) || (record && emu_event_ctx(hEvent) != (*g)->ctx->owner))
        return CUDA_ERROR_INVALID_HANDLE;
    *n = emu_streams_of_green(*g, v);
    int any = !record && emu_capture_event_busy(hEvent);
    for (size_t i = 0; i < *n; i++)
        if (emu_stream_capture((*v)[i])) {
            emu_capture_invalidate((*v)[i]);
            any = 1;
        }
    if (!any) return CUDA_SUCCESS;
    emu_streams_release(*v, *n);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* "Captures in hEvent all the activities of the green context of hCtx at the time of this
 * call. hEvent and hCtx must be from the same primary context otherwise
 * CUDA_ERROR_INVALID_HANDLE is returned." Made as a record on the green context's default
 * stream behind a wait for each of its streams' work so far. */
EMU_EXPORT CUresult cuGreenCtxRecordEvent(CUgreenCtx hCtx, CUevent hEvent)
{
    EMU_ENTRY_INIT();
    struct CUgreenCtx_st *g;
    emu_stream **v;
    size_t n;
    CUresult r = green_event_args(hCtx, hEvent, 1, &g, &v, &n);
    if (r != CUDA_SUCCESS) return r;
    emu_stream *def = emu_green_default(g);
    dep *deps = emu_xcalloc(n ? n : 1, sizeof *deps);
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == def) continue;
        pthread_mutex_lock(&v[i]->lock);
        uint64_t seq = v[i]->submitted;
        pthread_mutex_unlock(&v[i]->lock);
        emu_stream_ref(v[i]);
        deps[nd++] = (dep){ v[i], seq };
    }
    emu_work *w[2];
    size_t k = 0;
    if (nd) w[k++] = emu_stream_wait_new(deps, nd, __func__);
    w[k++] = emu_event_mark_work(hEvent, __func__);
    r = emu_event_enqueue_chain(def, w, k);
    free(deps);
    emu_streams_release(v, n);
    return r;
}

/* "Makes all future work submitted to green context hCtx wait for all work captured in
 * hEvent": each stream g has now waits (streams made later do not: emulation limits). */
EMU_EXPORT CUresult cuGreenCtxWaitEvent(CUgreenCtx hCtx, CUevent hEvent)
{
    EMU_ENTRY_INIT();
    struct CUgreenCtx_st *g;
    emu_stream **v;
    size_t n;
    CUresult r = green_event_args(hCtx, hEvent, 0, &g, &v, &n);
    if (r != CUDA_SUCCESS) return r;
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
        emu_work *w = emu_event_wait_work(hEvent, v[i], __func__);
        if (w) r = emu_stream_enqueue(v[i], w);
    }
    emu_streams_release(v, n);
    return r;
}
