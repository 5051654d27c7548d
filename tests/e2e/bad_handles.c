/*
 * tests/e2e/bad_handles.c: every hooked entry point that takes an exec, a
 * graph or a device pointer, called with bad ones, for test_bad_handles.sh.
 * Usage: bad_handles MODULE (the emulated mod_test.so).
 *
 * Entries are resolved by their exact ELF names with dlsym(RTLD_DEFAULT), so
 * each variant (_v2, _ptsz, legacy) is reached, through the library's hook
 * when it is preloaded. Bad values: NULL and destroyed execs (destroying
 * again is a double destroy), NULL and destroyed graphs, and pointers that
 * are 0, freed (freeing again is a double free), foreign (a host stack
 * address), inside a live allocation, or never mapped. The other arguments
 * are valid (a live exec, graph, node, stream), so the bad one decides the
 * result. Each call prints "<entry>(<case>) = <CUresult name>"; at the end
 * the live exec still runs and a checksum is printed.
 */
#include "life_common.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    K_EXEC_STREAM,   /* (exec, stream) */
    K_EXEC,          /* (exec) */
    K_GRAPH,         /* (graph) */
    K_INST5,         /* (exec *, graph, node *, char *, size_t) */
    K_INST_FLAGS,    /* (exec *, graph, flags) */
    K_INST_PARAMS,   /* (exec *, graph, CUDA_GRAPH_INSTANTIATE_PARAMS *) */
    K_UPDATE_V1,     /* (exec, graph, node *, CUgraphExecUpdateResult *) */
    K_UPDATE_V2,     /* (exec, graph, CUgraphExecUpdateResultInfo *) */
    K_KERNEL_PARAMS, /* (exec, node, const CUDA_KERNEL_NODE_PARAMS *) */
    K_NODE_ENABLED,  /* (exec, node, unsigned) */
    K_PTR,           /* (dptr) */
    K_PTR_STREAM,    /* (dptr, stream) */
    K_RANGE,         /* (base *, size *, dptr) */
    K_ATTR,          /* (data *, attribute, dptr) */
    K_IPC,           /* (CUipcMemHandle *, dptr) */
} entry_kind;

static const struct { const char *name; entry_kind kind; } entries[] = {
    { "cuGraphLaunch", K_EXEC_STREAM }, { "cuGraphLaunch_ptsz", K_EXEC_STREAM },
    { "cuGraphUpload", K_EXEC_STREAM }, { "cuGraphUpload_ptsz", K_EXEC_STREAM },
    { "cuGraphExecDestroy", K_EXEC }, { "cuGraphDestroy", K_GRAPH },
    { "cuGraphInstantiate", K_INST5 }, { "cuGraphInstantiate_v2", K_INST5 },
    { "cuGraphInstantiateWithFlags", K_INST_FLAGS },
    { "cuGraphInstantiateWithParams", K_INST_PARAMS },
    { "cuGraphInstantiateWithParams_ptsz", K_INST_PARAMS },
    { "cuGraphExecUpdate", K_UPDATE_V1 }, { "cuGraphExecUpdate_v2", K_UPDATE_V2 },
    { "cuGraphExecKernelNodeSetParams", K_KERNEL_PARAMS },
    { "cuGraphExecKernelNodeSetParams_v2", K_KERNEL_PARAMS },
    { "cuGraphNodeSetEnabled", K_NODE_ENABLED },
    { "cuMemFree_v2", K_PTR }, { "cuMemFreeAsync", K_PTR_STREAM },
    { "cuMemFreeAsync_ptsz", K_PTR_STREAM }, { "cuMemGetAddressRange_v2", K_RANGE },
    { "cuPointerGetAttribute", K_ATTR }, { "cuIpcGetMemHandle", K_IPC },
};

typedef struct { const char *name; CUgraphExec exec; } exec_case;
typedef struct { const char *name; CUgraph graph; } graph_case;
typedef struct { const char *name; CUdeviceptr ptr; } ptr_case;

static life_work live;          /* a live stream, buffer, graph and exec */
static CUgraphNode live_node;   /* a kernel node of live.graph */
static void *live_args[2];
static exec_case bad_execs[2];
static graph_case bad_graphs[2];
static ptr_case bad_ptrs[5];

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void show(const char *entry, const char *what, CUresult r)
{
    printf("%s(%s) = %s\n", entry, what, life_err(r));
    fflush(stdout);
}

/* An exec call with a bad exec; the rest valid. */
static CUresult call_exec(void *fn, entry_kind k, CUgraphExec e)
{
    CUDA_KERNEL_NODE_PARAMS kp = { .func = live.inc, .gridDimX = 1, .gridDimY = 1,
                                   .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1,
                                   .blockDimZ = 1, .kernelParams = live_args };
    CUgraphExecUpdateResultInfo info;
    CUgraphExecUpdateResult res;
    CUgraphNode err_node;
    switch (k) {
    case K_EXEC_STREAM: return ((CUresult (*)(CUgraphExec, CUstream))fn)(e, live.stream);
    case K_EXEC: return ((CUresult (*)(CUgraphExec))fn)(e);
    case K_UPDATE_V1:
        return ((CUresult (*)(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *))fn)(
            e, live.graph, &err_node, &res);
    case K_UPDATE_V2:
        return ((CUresult (*)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *))fn)(
            e, live.graph, &info);
    case K_KERNEL_PARAMS:
        return ((CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *))fn)(
            e, live_node, &kp);
    case K_NODE_ENABLED:
        return ((CUresult (*)(CUgraphExec, CUgraphNode, unsigned))fn)(e, live_node, 1);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* A graph call with a bad graph; an exec made by accident is destroyed. */
static CUresult call_graph(void *fn, entry_kind k, CUgraph g)
{
    CUgraphExec made = NULL;
    CUgraphExecUpdateResultInfo info;
    CUgraphExecUpdateResult res;
    CUgraphNode err_node;
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = { 0 };
    CUresult r;
    switch (k) {
    case K_GRAPH: return ((CUresult (*)(CUgraph))fn)(g);
    case K_INST5:
        r = ((CUresult (*)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t))fn)(
            &made, g, &err_node, NULL, 0);
        break;
    case K_INST_FLAGS:
        r = ((CUresult (*)(CUgraphExec *, CUgraph, unsigned long long))fn)(&made, g, 0);
        break;
    case K_INST_PARAMS:
        r = ((CUresult (*)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *))fn)(
            &made, g, &ip);
        break;
    case K_UPDATE_V1:
        return ((CUresult (*)(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *))fn)(
            live.exec, g, &err_node, &res);
    case K_UPDATE_V2:
        return ((CUresult (*)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *))fn)(
            live.exec, g, &info);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (r == CUDA_SUCCESS && made) life.cuGraphExecDestroy(made);
    return r;
}

static CUresult call_ptr(void *fn, entry_kind k, CUdeviceptr p)
{
    CUdeviceptr base;
    size_t size;
    unsigned long long data[4];
    CUipcMemHandle h;
    switch (k) {
    case K_PTR: return ((CUresult (*)(CUdeviceptr))fn)(p);
    case K_PTR_STREAM: return ((CUresult (*)(CUdeviceptr, CUstream))fn)(p, live.stream);
    case K_RANGE: return ((CUresult (*)(CUdeviceptr *, size_t *, CUdeviceptr))fn)(&base, &size, p);
    case K_ATTR:
        return ((CUresult (*)(void *, CUpointer_attribute, CUdeviceptr))fn)(
            data, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p);
    case K_IPC: return ((CUresult (*)(CUipcMemHandle *, CUdeviceptr))fn)(&h, p);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

static int make_bad_handles(const char *module)
{
    life_work gone;
    size_t n = 1;
    int stack_word = 0;
    if (life_setup(&live, module, 64) || life_graph(&live, 3)) return -1;
    if (LIFE_R(life.cuGraphGetNodes(live.graph, &live_node, &n))) return -1;
    live_args[0] = &live.buf;
    live_args[1] = &live.n;
    if (life_setup(&gone, module, 64) || life_graph(&gone, 2)) return -1;
    LIFE_R(life.cuGraphExecDestroy(gone.exec));
    LIFE_R(life.cuGraphDestroy(gone.graph));
    LIFE_R(life.cuMemFree(gone.buf));
    bad_execs[0] = (exec_case){ "NULL exec", NULL };
    bad_execs[1] = (exec_case){ "destroyed exec", gone.exec };
    bad_graphs[0] = (graph_case){ "NULL graph", NULL };
    bad_graphs[1] = (graph_case){ "destroyed graph", gone.graph };
    bad_ptrs[0] = (ptr_case){ "0", 0 };
    bad_ptrs[1] = (ptr_case){ "freed pointer", gone.buf };
    bad_ptrs[2] = (ptr_case){ "foreign pointer", (CUdeviceptr)(uintptr_t)&stack_word };
    bad_ptrs[3] = (ptr_case){ "inside a live allocation", live.buf + 4 };
    bad_ptrs[4] = (ptr_case){ "never mapped", (CUdeviceptr)0x10 };
    return 0;
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    if (argc != 2) {
        fprintf(stderr, "usage: bad_handles MODULE\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    life_drv_linked();
    if (LIFE_R(life.cuInit(0)) || LIFE_R(life.cuDeviceGet(&dev, 0)) ||
        LIFE_R(life.cuDevicePrimaryCtxRetain(&ctx, dev)) || LIFE_R(life.cuCtxSetCurrent(ctx)) ||
        make_bad_handles(argv[1]))
        return 1;
    for (size_t i = 0; i < N_OF(entries); i++) {
        void *fn = dlsym(RTLD_DEFAULT, entries[i].name);
        entry_kind k = entries[i].kind;
        if (!fn) {
            printf("%s: not found\n", entries[i].name);
            continue;
        }
        if (k <= K_EXEC || (k >= K_UPDATE_V1 && k <= K_NODE_ENABLED))
            for (size_t j = 0; j < N_OF(bad_execs); j++)
                show(entries[i].name, bad_execs[j].name, call_exec(fn, k, bad_execs[j].exec));
        if ((k >= K_GRAPH && k <= K_UPDATE_V2))
            for (size_t j = 0; j < N_OF(bad_graphs); j++)
                show(entries[i].name, bad_graphs[j].name, call_graph(fn, k, bad_graphs[j].graph));
        if (k >= K_PTR)
            for (size_t j = 0; j < N_OF(bad_ptrs); j++)
                show(entries[i].name, bad_ptrs[j].name, call_ptr(fn, k, bad_ptrs[j].ptr));
    }
    LIFE_R(life.cuStreamSynchronize(live.stream));
    life_launch(&live, 3);
    life_checksum(&live, "live exec after the bad calls");
    life_teardown(&live);
    return 0;
}
