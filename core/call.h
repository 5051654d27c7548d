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
    SG_CALL_ADDR_RANGE,     /* u.range */
    SG_CALL_PTR_ATTR,       /* u.attr */
    SG_CALL_PTR_ATTRS,      /* u.attrs */
    SG_CALL_IPC_HANDLE,     /* u.ipc */
    SG_CALL_RETAIN_HANDLE,  /* u.retain: cuMemRetainAllocationHandle */
    SG_CALL_MEM_ACCESS,     /* u.access: cuMemGetAccess */
    SG_CALL_MEM_INFO,       /* u.info: cuMemGetInfo */
    SG_CALL_MEMOP,          /* u.memop: a copy, memset or memcpy/memset node (range checks) */
    SG_CALL_STREAM_DESTROY, /* u.stream */
    /* contexts (contexts.c) */
    SG_CALL_CTX_DESTROY,    /* u.ctx */
    SG_CALL_PRIMARY_RETAIN, /* u.primary: tells which context is a device's primary one */
    SG_CALL_PRIMARY_DROP,   /* u.primary.dev: cuDevicePrimaryCtxRelease / Reset */
    /* capture and graphs (capture state in core.c; graphs.c) */
    SG_CALL_CAPTURE_BEGIN,  /* u.stream */
    SG_CALL_CAPTURE_END,    /* u.stream */
    SG_CALL_MODULE_UNLOAD,  /* cuModuleUnload, cuLibraryUnload: cached function facts die */
    SG_CALL_GRAPH_DESTROY,  /* u.graph */
    SG_CALL_NODE_DESTROY,   /* u.node */
    SG_CALL_INSTANTIATE,    /* u.inst */
    SG_CALL_LAUNCH,         /* u.launch */
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
    SG_OP_MEMSET_NODE,      /* desc: const CUDA_MEMSET_NODE_PARAMS * */
    SG_OP_NODE_PARAMS,      /* desc: const CUgraphNodeParams * (memset / memcpy types checked) */
} sg_op_kind;

typedef struct sg_call {
    unsigned hook;                            /* hook index, for log lines */
    sg_call_kind kind;
    CUresult (*forward)(const void *args);    /* the original call */
    const void *args;                         /* its arguments, for forward */
    int per_thread;                           /* _ptsz/_ptds flavour: NULL stream = per-thread */
    union {
        struct { CUdeviceptr *out; size_t bytes; CUstream stream; CUmemoryPool pool; int async; } alloc;
        struct { CUdeviceptr ptr; CUstream stream; int async; } free;
        struct { CUdeviceptr *base; size_t *size; CUdeviceptr ptr; } range;
        struct { void *data; CUpointer_attribute attr; CUdeviceptr ptr; } attr;
        struct { unsigned n; CUpointer_attribute *attrs; void **data; CUdeviceptr ptr; } attrs;
        struct { CUipcMemHandle *out; CUdeviceptr ptr; } ipc;
        struct { CUmemGenericAllocationHandle *out; void *addr; } retain;
        struct { unsigned long long *flags; const CUmemLocation *loc; CUdeviceptr ptr; } access;
        struct { size_t *free; size_t *total; } info;
        struct {
            sg_op_kind kind;
            CUdeviceptr dst, src;             /* SG_OP_RANGES; 0 = not device memory */
            size_t dst_bytes, src_bytes;
            const void *desc;                 /* the other kinds */
            int node_update;                  /* a graph node set: the driver's error is INVALID_VALUE */
        } memop;
        struct { CUstream stream; } stream;
        struct { CUcontext ctx; } ctx;
        struct { CUcontext *out; CUdevice dev; } primary;
        struct { CUgraph graph; } graph;
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
        struct { CUgraphExec exec; CUgraphNode node; } exec;
    } u;
} sg_call;

#endif /* SG_CALL_H */
