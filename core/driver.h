/*
 * core/driver.h: the table of real driver functions that core/ may call.
 *
 * core/ never looks symbols up: interpose/ fills this table with the real
 * libcuda functions (by the ELF names below, sg_driver_set()) before the
 * first hook reaches core/; unit tests fill it with fakes. Until then every
 * entry is NULL. A NULL entry means "not available": callers must check it
 * and do without.
 *
 * This file and driver.c are the leaf of core/: every other part uses them,
 * they use nothing of core/.
 *
 * Every call core/ makes goes through SG_DRIVER_CALL, which counts it in
 * sg_driver_calls[] so the report can say exactly which driver calls the
 * library added to the program's own (the e2e tests subtract them when they
 * compare the emulated driver's call counts).
 *
 * Thread safety: the table is written once before use and then only read;
 * the counters are atomics.
 */
#ifndef SG_DRIVER_H
#define SG_DRIVER_H

#include <cuda.h>

/* X(ELF name, return type, parameter types) */
#define SG_DRIVER_LIST(X)                                                     \
    /* contexts, devices, streams, events */                                  \
    X(cuCtxGetCurrent, CUresult, (CUcontext *))                               \
    X(cuCtxSetCurrent, CUresult, (CUcontext))                                 \
    X(cuCtxGetDevice, CUresult, (CUdevice *))                                 \
    X(cuCtxSynchronize, CUresult, (void))                                     \
    X(cuDeviceGet, CUresult, (CUdevice *, int))                               \
    X(cuDeviceGetAttribute, CUresult, (int *, CUdevice_attribute, CUdevice))  \
    X(cuDeviceCanAccessPeer, CUresult, (int *, CUdevice, CUdevice))           \
    X(cuDeviceGetCount, CUresult, (int *))                                    \
    X(cuDevicePrimaryCtxGetState, CUresult, (CUdevice, unsigned int *, int *))\
    X(cuDeviceTotalMem_v2, CUresult, (size_t *, CUdevice))                    \
    X(cuDeviceGetDefaultMemPool, CUresult, (CUmemoryPool *, CUdevice))       \
    X(cuDeviceGetMemPool, CUresult, (CUmemoryPool *, CUdevice))              \
    X(cuMemGetInfo_v2, CUresult, (size_t *, size_t *))                       \
    X(cuStreamGetCtx, CUresult, (CUstream, CUcontext *))                      \
    X(cuStreamGetCtx_ptsz, CUresult, (CUstream, CUcontext *))                 \
    X(cuStreamGetCtx_v2, CUresult, (CUstream, CUcontext *, CUgreenCtx *))     \
    X(cuCtxFromGreenCtx, CUresult, (CUcontext *, CUgreenCtx))                 \
    X(cuStreamGetCtx_v2_ptsz, CUresult, (CUstream, CUcontext *, CUgreenCtx *))\
    X(cuStreamIsCapturing, CUresult, (CUstream, CUstreamCaptureStatus *))     \
    X(cuStreamIsCapturing_ptsz, CUresult, (CUstream, CUstreamCaptureStatus *))\
    X(cuStreamSynchronize, CUresult, (CUstream))                              \
    X(cuStreamSynchronize_ptsz, CUresult, (CUstream))                         \
    X(cuStreamWaitEvent, CUresult, (CUstream, CUevent, unsigned int))         \
    X(cuStreamWaitEvent_ptsz, CUresult, (CUstream, CUevent, unsigned int))    \
    X(cuStreamWriteValue64_v2, CUresult, (CUstream, CUdeviceptr, cuuint64_t, unsigned int)) \
    X(cuStreamWriteValue64_v2_ptsz, CUresult, (CUstream, CUdeviceptr, cuuint64_t, unsigned int)) \
    X(cuThreadExchangeStreamCaptureMode, CUresult, (CUstreamCaptureMode *))   \
    X(cuEventCreate, CUresult, (CUevent *, unsigned int))                     \
    X(cuEventDestroy_v2, CUresult, (CUevent))                                 \
    X(cuEventRecord, CUresult, (CUevent, CUstream))                           \
    X(cuEventRecord_ptsz, CUresult, (CUevent, CUstream))                      \
    X(cuLaunchHostFunc, CUresult, (CUstream, CUhostFn, void *))               \
    X(cuLaunchHostFunc_ptsz, CUresult, (CUstream, CUhostFn, void *))          \
    X(cuEventQuery, CUresult, (CUevent))                                      \
    X(cuEventSynchronize, CUresult, (CUevent))                                \
    X(cuMemHostAlloc, CUresult, (void **, size_t, unsigned int))              \
    X(cuMemFreeHost, CUresult, (void *))                                      \
    X(cuMemHostGetDevicePointer_v2, CUresult, (CUdeviceptr *, void *, unsigned int)) \
    /* memory and VMM */                                                      \
    X(cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))                       \
    X(cuMemFree_v2, CUresult, (CUdeviceptr))                                  \
    X(cuMemAddressReserve, CUresult, (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long)) \
    X(cuMemAddressFree, CUresult, (CUdeviceptr, size_t))                      \
    X(cuMemCreate, CUresult, (CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long)) \
    X(cuMemRelease, CUresult, (CUmemGenericAllocationHandle))                 \
    X(cuMemMap, CUresult, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)) \
    X(cuMemUnmap, CUresult, (CUdeviceptr, size_t))                            \
    X(cuMemSetAccess, CUresult, (CUdeviceptr, size_t, const CUmemAccessDesc *, size_t)) \
    X(cuMemGetAllocationGranularity, CUresult, (size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags)) \
    X(cuMemExportToShareableHandle, CUresult, (void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long)) \
    X(cuMemImportFromShareableHandle, CUresult, (CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType)) \
    X(cuPointerGetAttribute, CUresult, (void *, CUpointer_attribute, CUdeviceptr)) \
    X(cuMemGetAddressRange_v2, CUresult, (CUdeviceptr *, size_t *, CUdeviceptr)) \
    X(cuPointerGetAttributes, CUresult, (unsigned int, CUpointer_attribute *, void **, CUdeviceptr)) \
    /* graphs */                                                              \
    X(cuGraphGetNodes, CUresult, (CUgraph, CUgraphNode *, size_t *))          \
    X(cuGraphGetEdges_v2, CUresult, (CUgraph, CUgraphNode *, CUgraphNode *, CUgraphEdgeData *, size_t *)) \
    X(cuGraphNodeGetType, CUresult, (CUgraphNode, CUgraphNodeType *))         \
    X(cuGraphChildGraphNodeGetGraph, CUresult, (CUgraphNode, CUgraph *))       \
    X(cuGraphKernelNodeGetParams_v2, CUresult, (CUgraphNode, CUDA_KERNEL_NODE_PARAMS *)) \
    X(cuGraphKernelNodeSetParams_v2, CUresult, (CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *)) \
    X(cuGraphKernelNodeGetAttribute, CUresult, (CUgraphNode, CUkernelNodeAttrID, CUkernelNodeAttrValue *)) \
    X(cuGraphMemcpyNodeGetParams, CUresult, (CUgraphNode, CUDA_MEMCPY3D *))   \
    X(cuGraphMemcpyNodeSetParams, CUresult, (CUgraphNode, const CUDA_MEMCPY3D *)) \
    X(cuGraphMemsetNodeGetParams, CUresult, (CUgraphNode, CUDA_MEMSET_NODE_PARAMS *)) \
    X(cuGraphMemsetNodeSetParams, CUresult, (CUgraphNode, const CUDA_MEMSET_NODE_PARAMS *)) \
    X(cuGraphClone, CUresult, (CUgraph *, CUgraph))                           \
    X(cuGraphNodeFindInClone, CUresult, (CUgraphNode *, CUgraphNode, CUgraph))\
    X(cuGraphDestroy, CUresult, (CUgraph))                                    \
    X(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec *, CUgraph, unsigned long long)) \
    X(cuGraphExecDestroy, CUresult, (CUgraphExec))                            \
    X(cuGraphExecGetFlags, CUresult, (CUgraphExec, cuuint64_t *))             \
    X(cuGraphExecUpdate_v2, CUresult, (CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *)) \
    X(cuGraphExecKernelNodeSetParams_v2, CUresult, (CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *)) \
    X(cuGraphExecMemcpyNodeSetParams, CUresult, (CUgraphExec, CUgraphNode, const CUDA_MEMCPY3D *, CUcontext)) \
    X(cuGraphExecMemsetNodeSetParams, CUresult, (CUgraphExec, CUgraphNode, const CUDA_MEMSET_NODE_PARAMS *, CUcontext)) \
    X(cuGraphNodeSetParams, CUresult, (CUgraphNode, CUgraphNodeParams *))     \
    X(cuGraphLaunch, CUresult, (CUgraphExec, CUstream))                       \
    X(cuGraphLaunch_ptsz, CUresult, (CUgraphExec, CUstream))                  \
    X(cuFuncGetParamInfo, CUresult, (CUfunction, size_t, size_t *, size_t *)) \
    X(cuKernelGetParamInfo, CUresult, (CUkernel, size_t, size_t *, size_t *)) \
    X(cuKernelGetFunction, CUresult, (CUfunction *, CUkernel))                \
    X(cuFuncGetName, CUresult, (const char **, CUfunction))                  \
    X(cuGraphExecNodeSetParams, CUresult, (CUgraphExec, CUgraphNode, CUgraphNodeParams *))

#define SG_DRIVER_FIELD_(name, ret, params) ret (*name) params;
typedef struct sg_driver {
    SG_DRIVER_LIST(SG_DRIVER_FIELD_)
} sg_driver;

#define SG_DRIVER_ID_(name, ret, params) SG_DRV_##name,
enum { SG_DRIVER_LIST(SG_DRIVER_ID_) SG_DRIVER_COUNT };

/* The table core/ uses (all NULL until sg_driver_set()). */
extern sg_driver sg_drv;
/* Copies drv into sg_drv. Call once, before any hook reaches core/ (unit
 * tests: before each case). */
void sg_driver_set(const sg_driver *drv);
/* ELF names, indexed by SG_DRV_*. */
extern const char *const sg_driver_names[SG_DRIVER_COUNT];
/* Calls core/ made, indexed by SG_DRV_*. */
extern unsigned long sg_driver_calls[SG_DRIVER_COUNT];

/* A sticky error: a kernel faulted, and its context (CUDA_ERROR_ASSERT:
 * "The context cannot be used anymore, and must be destroyed") or the
 * process (the others: "any further CUDA work will return the same error")
 * answers every later call with it (cuda.h; core.c, sticky errors). */
static inline int sg_cu_sticky(CUresult rc)
{
    switch (rc) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_TIMEOUT: case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC: case CUDA_ERROR_LAUNCH_FAILED: case CUDA_ERROR_TENSOR_MEMORY_LEAK:
        return 1;
    default:
        return 0;
    }
}

/* Set once a call returned a sticky error (never cleared; core.c, sticky
 * errors). */
extern int sg_sticky_seen;
/* Notes rc if it is a sticky error; for the paths that see a failed result
 * (a success costs one comparison). */
static inline CUresult sg_cu_note(CUresult rc)
{
    if (__builtin_expect(rc != CUDA_SUCCESS, 0) && sg_cu_sticky(rc))
        __atomic_store_n(&sg_sticky_seen, 1, __ATOMIC_RELAXED);
    return rc;
}

#define SG_DRIVER_CALL(name, ...)                                             \
    (__atomic_fetch_add(&sg_driver_calls[SG_DRV_##name], 1, __ATOMIC_RELAXED), \
     sg_drv.name(__VA_ARGS__))

#endif /* SG_DRIVER_H */
