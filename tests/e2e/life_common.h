/*
 * tests/e2e/life_common.h: what the life-cycle and bad-handle programs
 * share. LIFE_R(call) runs a driver call, prints "<call> = <CUresult name>"
 * and gives the result back, so that a test can compare a run with the
 * library against one without it line by line. life_graph() captures a
 * chain of inc_u32 kernels (tests/emu/mod_test.so) on a stream into a graph.
 *
 * The driver functions are reached through the life_drv table, filled either
 * from the linked libcuda (life_drv_linked) or by dlsym on a handle (so a
 * program that dlopens libcuda shares the code).
 */
#ifndef LIFE_COMMON_H
#define LIFE_COMMON_H

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>

/* API names; cuda.h's macros turn them into the current ELF names (e.g.
 * cuMemAlloc -> cuMemAlloc_v2), for the fields and for dlsym alike. */
#define LIFE_DRV_LIST(X)                                                      \
    X(cuInit) X(cuDeviceGet) X(cuCtxCreate) X(cuCtxDestroy) X(cuCtxSetCurrent) \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                  \
    X(cuDevicePrimaryCtxReset) X(cuModuleLoad) X(cuModuleGetFunction)         \
    X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)               \
    X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuLaunchKernel)           \
    X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecDestroy)     \
    X(cuGraphDestroy) X(cuMemAlloc) X(cuMemFree) X(cuMemsetD32)               \
    X(cuMemcpyDtoH) X(cuGetErrorName) X(cuGraphExecUpdate)                    \
    X(cuGraphExecKernelNodeSetParams) X(cuGraphUpload) X(cuMemAllocAsync)     \
    X(cuMemFreeAsync) X(cuMemGetAddressRange) X(cuPointerGetAttribute)        \
    X(cuIpcGetMemHandle) X(cuGraphGetNodes)

typedef struct life_drv {
#define LIFE_FIELD_(n) __typeof__(&n) n;
    LIFE_DRV_LIST(LIFE_FIELD_)
} life_drv;

extern life_drv life;

/* Fills `life` from the libcuda this program is linked against (inline, so
 * that programs which dlopen libcuda do not need to link it). */
static inline void life_drv_linked(void)
{
#define LIFE_LINK_(n) life.n = n;
    LIFE_DRV_LIST(LIFE_LINK_)
}
/* Fills `life` by dlsym on handle; 0, or -1 naming the missing symbol. */
int life_drv_dlsym(void *handle, void *(*sym)(void *, const char *));

const char *life_err(CUresult r);
CUresult life_print(CUresult r, const char *what);
#define LIFE_R(call) life_print((call), #call)

/* The state of one piece of work: a context's module, stream and buffer. */
typedef struct life_work {
    CUfunction inc;
    CUstream stream;
    CUdeviceptr buf;
    uint64_t n;          /* 32-bit words in buf */
    CUgraph graph;
    CUgraphExec exec;
} life_work;

/* Loads `module` in the current context, creates a stream and a buffer of n
 * zeroed words. Returns 0, or -1 (after printing the failing call). */
int life_setup(life_work *w, const char *module, uint64_t n);
/* Captures `kernels` inc_u32 launches on w->buf into w->graph and
 * instantiates w->exec. 0 or -1. */
int life_graph(life_work *w, int kernels);
/* Launches w->exec `times` times without waiting. */
void life_launch(life_work *w, int times);
/* Waits, copies w->buf back and prints "<label> checksum: <hex>" (FNV-1a). */
void life_checksum(life_work *w, const char *label);
/* Destroys exec, graph, buffer and stream (printing each result). */
void life_teardown(life_work *w);

#endif /* LIFE_COMMON_H */
