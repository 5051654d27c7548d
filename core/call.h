/*
 * core/call.h: one hooked call, as interpose/ hands it to core/.
 *
 * Each hooked call arrives as an sg_call: what kind of operation it is (the
 * `call` column of interpose/hooks.def), the arguments core/ cares about in
 * the member of `u` that the kind names, and a forward function that makes
 * the original call on the real driver (the exact variant the program called,
 * with its original arguments). core/ decides whether and when to forward,
 * observes, and returns the CUresult the program gets.
 */
#ifndef SG_CALL_H
#define SG_CALL_H

#include <cuda.h>
#include <stddef.h>

typedef enum {
    SG_CALL_FORWARD,        /* nothing to observe: forward */
    /* memory (memory.c) */
    SG_CALL_ALLOC,          /* u.alloc */
    SG_CALL_DEV_ALLOC,      /* another path that takes device memory: on OUT_OF_MEMORY the
                             * library gives back what it holds and retries once */
    SG_CALL_FREE,           /* u.free */
    SG_CALL_POOL_SET,       /* u.pool: cuDeviceSetMemPool, cuMemSetMemPool (which cuMemAllocAsync
                             * the library may place) */
    SG_CALL_ADDR_RANGE,     /* u.range */
    SG_CALL_PTR_ATTR,       /* u.attr */
    SG_CALL_PTR_ATTRS,      /* u.attrs */
    SG_CALL_PTR_SET,        /* u.attr: cuPointerSetAttribute (data: the value) */
    SG_CALL_IPC_HANDLE,     /* u.ipc */
    SG_CALL_IPC_OPEN,       /* u.ipc_open: cuIpcOpenMemHandle(_v2) (ipc.c) */
    SG_CALL_IPC_CLOSE,      /* u.ipc_close: cuIpcCloseMemHandle (ipc.c) */
    SG_CALL_FOREIGN_FREE,   /* cuMemFreeHost, cuMemHostUnregister, cuMemUnmap: memory the library
                             * did not place may end (sg_mem_foreign_gone) */
    SG_CALL_RETAIN_HANDLE,  /* u.retain: cuMemRetainAllocationHandle */
    SG_CALL_MEM_ACCESS,     /* u.access: cuMemGetAccess */
    SG_CALL_MEM_INFO,       /* u.info: cuMemGetInfo */
    SG_CALL_POOL_ATTR,      /* u.pattr: cuMemPoolGetAttribute, cuMemPoolSetAttribute */
    SG_CALL_MEMOP,          /* u.memop: a copy, memset or memcpy/memset node (range checks) */
    SG_CALL_STREAM_DESTROY, /* u.stream */
    SG_CALL_KERNEL_LOOKUP,  /* u.lookup: cuLibraryGetKernel (the kernel loaded into the current
                             * context, mem_lazy.c) */
    /* contexts (contexts.c) */
    SG_CALL_CTX_CREATE,     /* cuCtxCreate*: as DEV_ALLOC (memory.c), never refused for an earlier
                             * sticky error (core.c) */
    SG_CALL_CTX_DESTROY,    /* u.ctx */
    SG_CALL_CTX_SWITCH,     /* cuCtxSetCurrent, cuCtxPushCurrent, cuCtxPopCurrent: the thread's
                             * launch filter starts again (memory.c) */
    SG_CALL_PRIMARY_RETAIN, /* u.primary: tells which context is a device's primary one */
    SG_CALL_PRIMARY_DROP,   /* u.primary.dev: cuDevicePrimaryCtxRelease / Reset; -1:
                             * cuGreenCtxDestroy of u.primary.green (which releases its device's
                             * primary context) */
    /* captures and what they record (capture.c); graphs (graphs.c) */
    SG_CALL_CAPTURE_BEGIN,  /* u.capture */
    SG_CALL_CAPTURE_END,    /* u.capture */
    SG_CALL_KERNEL,         /* u.kernel: a kernel launch (recorded when its stream captures) */
    SG_CALL_MODULE_UNLOAD,  /* cuModuleUnload, cuLibraryUnload: cached function facts die */
    SG_CALL_GRAPH_DESTROY,  /* u.graph */
    SG_CALL_GRAPH_UOBJ,     /* u.graph: cuGraphRetainUserObject (graph_uobj.c) */
    SG_CALL_GRAPH_CLONE,    /* u.clone: cuGraphClone (recorded too: gb) */
    SG_CALL_NODE_DESTROY,   /* u.node */
    SG_CALL_INSTANTIATE,    /* u.inst */
    SG_CALL_LAUNCH,         /* u.launch */
    SG_CALL_UPLOAD,         /* u.launch: cuGraphUpload */
    SG_CALL_UPDATE_GRAPH,   /* u.update */
    SG_CALL_UPDATE_NODE,    /* u.node_update */
    SG_CALL_EXEC_ENABLE,    /* u.exec: cuGraphNodeSetEnabled */
    SG_CALL_EXEC_DIRTY,     /* u.exec: a setter of a node type the library does not model */
    SG_CALL_EXEC_DESTROY,   /* u.exec */
} sg_call_kind;

/* What a per-node exec update carries. */
typedef enum {
    SG_NODE_KERNEL_V1,      /* const CUDA_KERNEL_NODE_PARAMS_v1 * */
    SG_NODE_KERNEL,         /* const CUDA_KERNEL_NODE_PARAMS * */
    SG_NODE_GENERIC,        /* CUgraphNodeParams * */
    SG_NODE_MEMCPY,         /* const CUDA_MEMCPY3D *, ctx */
    SG_NODE_MEMSET,         /* const CUDA_MEMSET_NODE_PARAMS *, ctx */
} sg_node_params_kind;

/* What a copy or memset touches, for the driver's range checks
 * (memory.c: sg_mem_check_op). */
typedef enum {
    SG_OP_RANGES,           /* up to two device ranges: (dst, dst_bytes), (src, src_bytes) */
    SG_OP_COPY2D,           /* desc: const CUDA_MEMCPY2D * */
    SG_OP_COPY3D,           /* desc: const CUDA_MEMCPY3D * */
    SG_OP_COPY3D_PEER,      /* desc: const CUDA_MEMCPY3D_PEER * (checked as its CUDA_MEMCPY3D) */
    SG_OP_MEMSET_NODE,      /* desc: const CUDA_MEMSET_NODE_PARAMS * */
    SG_OP_NODE_PARAMS,      /* desc: const CUgraphNodeParams * (memset / memcpy types checked) */
} sg_op_kind;

/* What a call adds to, or changes in, a graph (record.h): the `gb` facet of
 * an sg_call, set by the hooks of stream operations other than kernel
 * launches (recorded when their stream captures) and of the explicit graph
 * API (always recorded). */
typedef enum {
    /* stream operations (stream) */
    SG_GB_MEMSET,           /* u.memset */
    SG_GB_COPY,             /* u.copy: a 1D copy */
    SG_GB_COPY2D,           /* u.desc: const CUDA_MEMCPY2D * */
    SG_GB_COPY3D,           /* u.desc: const CUDA_MEMCPY3D * */
    SG_GB_EVENT_RECORD,     /* u.event (flags: cuEventRecordWithFlags) */
    SG_GB_EVENT_WAIT,       /* u.event */
    SG_GB_EVENT_DESTROY,    /* u.event.event: cuEventDestroy (what a capture recorded in it goes) */
    SG_GB_STREAM_OTHER,     /* an operation the recorder does not model (host function,
                             * wait / write value, dependency update, ...) */
    SG_GB_SYNC_OP,          /* a synchronous copy or memset (never recorded) */
    SG_GB_STREAM_CREATE,    /* u.create_stream: a stream with a priority */
    SG_GB_STREAM_ATTR,      /* stream: its launch attributes set (cuStreamSetAttribute)
                             * or copied from another (cuStreamCopyAttributes) */
    SG_GB_CAPTURE_INFO,     /* u.capinfo: cuStreamGetCaptureInfo_v2/_v3 (the stream's
                             * last nodes, which name captured nodes) */
    /* explicit graph calls */
    SG_GB_GRAPH_CREATE,     /* u.graph_out */
    SG_GB_ADD_NODE,         /* u.add */
    SG_GB_SET_NODE,         /* u.set */
    SG_GB_ADD_DEPS,         /* u.deps */
    SG_GB_SET_ATTR,         /* u.attr */
    SG_GB_CLONE,            /* u.clone */
    SG_GB_GRAPH_OTHER,      /* u.graph: changes graph in a way the recorder does not model */
    SG_GB_NODE_OTHER,       /* u.node: the same, naming a node */
} sg_gb_kind;

typedef struct sg_gb {
    sg_gb_kind kind;
    CUstream stream;                          /* stream operations */
    union {
        struct { CUdeviceptr dst; size_t pitch, width, height; unsigned value, elem; } memset;
        struct {
            CUdeviceptr dst, src;             /* device operands */
            void *dst_host;
            const void *src_host;
            size_t bytes;
            CUmemorytype dst_type, src_type;  /* UNIFIED for cuMemcpy(Async) */
        } copy;
        const void *desc;
        struct { CUevent event; unsigned flags; } event;
        struct { CUstream *out; int priority; } create_stream;
        struct {
            CUstreamCaptureStatus *status;
            const CUgraphNode **deps;
            size_t *ndeps;
        } capinfo;
        CUgraph *graph_out;
        struct {
            CUgraph graph;
            CUgraphNode *out;
            const CUgraphNode *deps;
            const CUgraphEdgeData *edata;     /* NULL: default edges */
            size_t ndeps;
            int empty;                        /* an empty node (params unused) */
            sg_node_params_kind pk;
            const void *params;
            CUcontext ctx;                    /* SG_NODE_MEMCPY / MEMSET */
        } add;
        struct { CUgraphNode node; sg_node_params_kind pk; const void *params; CUcontext ctx; } set;
        struct {
            CUgraph graph;
            const CUgraphNode *from, *to;
            const CUgraphEdgeData *edata;
            size_t n;
        } deps;
        struct { CUgraphNode node; CUkernelNodeAttrID id; const CUkernelNodeAttrValue *value; } attr;
        struct { CUgraph *out; CUgraph orig; } clone;
        CUgraph graph;
        CUgraphNode node;
    } u;
} sg_gb;

typedef struct sg_call {
    unsigned hook;                            /* hook index, for log lines */
    sg_call_kind kind;
    CUresult (*forward)(const void *args);    /* the original call */
    const void *args;                         /* its arguments, for forward */
    int per_thread;                           /* _ptsz/_ptds flavour: NULL stream = per-thread */
    const sg_gb *gb;                          /* what it does to a graph, or NULL */
    union {
        struct { CUdeviceptr *out; size_t bytes; CUstream stream; CUmemoryPool pool; int async; } alloc;
        struct { CUdeviceptr ptr; CUstream stream; int async; } free;
        struct {
            CUdevice dev;                   /* cuDeviceSetMemPool */
            const CUmemLocation *loc;       /* cuMemSetMemPool (by_location) */
            CUmemAllocationType type;
            CUmemoryPool pool;
            int by_location;
            int destroyed;                  /* cuMemPoolDestroy of pool */
        } pool;
        struct { CUdeviceptr *base; size_t *size; CUdeviceptr ptr; } range;
        struct { void *data; CUpointer_attribute attr; CUdeviceptr ptr; } attr;
        struct { unsigned n; CUpointer_attribute *attrs; void **data; CUdeviceptr ptr; } attrs;
        struct { CUipcMemHandle *out; CUdeviceptr ptr; } ipc;
        struct { CUdeviceptr *out; const CUipcMemHandle *handle; unsigned flags; } ipc_open;
        struct { CUdeviceptr ptr; } ipc_close;
        struct { CUmemGenericAllocationHandle *out; void *addr; } retain;
        struct { unsigned long long *flags; const CUmemLocation *loc; CUdeviceptr ptr; } access;
        struct { size_t *free; size_t *total; } info;
        struct { CUmemoryPool pool; CUmemPool_attribute attr; void *value; int set; } pattr;
        struct {
            sg_op_kind kind;
            CUdeviceptr dst, src;             /* SG_OP_RANGES; 0 = not device memory */
            size_t dst_bytes, src_bytes;
            const void *desc;                 /* the other kinds */
            int node_update;                  /* a graph node set: the driver's error is INVALID_VALUE */
        } memop;
        struct { CUstream stream; } stream;
        struct { CUkernel *out; } lookup;
        struct {
            CUstream stream;
            CUgraph *graph_out;                   /* END */
            int to_graph;                         /* BEGIN: cuStreamBeginCaptureToGraph */
            CUgraph graph;                        /* BEGIN to_graph: the graph captured into */
        } capture;
        struct {
            CUfunction f;
            unsigned grid[3], block[3], shmem;
            CUstream stream;
            void **params, **extra;
            int cooperative;
            const CUlaunchAttribute *attrs;       /* cuLaunchKernelEx's, nattrs of them */
            unsigned nattrs;
        } kernel;
        struct { CUcontext ctx; } ctx;
        struct { CUcontext *out; CUdevice dev; CUgreenCtx green; } primary;   /* green: PRIMARY_DROP -1 */
        struct { CUgraph graph; } graph;
        struct { CUgraph *out; CUgraph orig; } clone;
        struct { CUgraphNode node; } node;
        struct { CUgraphExec *out; CUgraph graph; } inst;
        struct { CUgraphExec exec; CUstream stream; } launch;
        struct {
            CUgraphExec exec;
            CUgraph graph;
            CUgraphExecUpdateResultInfo *info;    /* _v2 */
            CUgraphNode *error_node;              /* legacy */
            CUgraphExecUpdateResult *result;      /* legacy */
        } update;
        struct {
            CUgraphExec exec;
            CUgraphNode node;
            sg_node_params_kind kind;
            const void *params;
            CUcontext ctx;                        /* SG_NODE_MEMCPY / MEMSET */
        } node_update;
        struct {
            CUgraphExec exec;
            CUgraphNode node;
            CUgraph child;                        /* cuGraphExecChildGraphNodeSetParams */
        } exec;
    } u;
} sg_call;

#endif /* SG_CALL_H */
