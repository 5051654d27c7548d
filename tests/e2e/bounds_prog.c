/*
 * tests/e2e/bounds_prog.c: life cycles that must not make the library grow
 * (tests/e2e/test_bounds.sh, issue 14).
 *
 *   bounds_prog MODULE execs N      one captured graph (4 inc_u32 kernels)
 *       instantiated, launched, updated with itself, launched again and
 *       destroyed, N times, in the primary context
 *   bounds_prog MODULE contexts N   N times: a context created, the module
 *       loaded, a buffer allocated, a graph captured, instantiated and
 *       launched, then everything destroyed with the context
 *
 * MODULE is tests/emu/mod_test.so. Every cycle's result is checked (each
 * kernel adds 1 to every word); the program prints "<mode> N: ok" and exits
 * 0, or names the first failing call or wrong word and exits 1.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS 256
#define KERNELS 4

static void fail_call(CUresult r, const char *what, long cycle)
{
    const char *name = NULL;
    cuGetErrorName(r, &name);
    printf("cycle %ld: %s = %s\n", cycle, what, name ? name : "?");
    exit(1);
}
#define CK(call)                                                              \
    do {                                                                      \
        CUresult r_ = (call);                                                 \
        if (r_ != CUDA_SUCCESS) fail_call(r_, #call, cycle);                  \
    } while (0)

/* What one context needs: the kernel, a stream, a buffer and a graph. */
typedef struct work {
    CUmodule mod;
    CUfunction inc;
    CUstream stream;
    CUdeviceptr buf;
    uint64_t n;
    CUgraph graph;
} work;

static void work_open(work *w, const char *module, long cycle)
{
    void *args[] = { &w->buf, &w->n };
    w->n = WORDS;
    CK(cuModuleLoad(&w->mod, module));
    CK(cuModuleGetFunction(&w->inc, w->mod, "inc_u32"));
    CK(cuStreamCreate(&w->stream, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&w->buf, WORDS * 4));
    CK(cuMemsetD32(w->buf, 0, WORDS));
    CK(cuStreamBeginCapture(w->stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int k = 0; k < KERNELS; k++)
        CK(cuLaunchKernel(w->inc, 1, 1, 1, 1, 1, 1, 0, w->stream, args, NULL));
    CK(cuStreamEndCapture(w->stream, &w->graph));
}

/* Every word of the buffer must be `want`. */
static void work_check(work *w, uint32_t want, long cycle)
{
    uint32_t host[WORDS];
    CK(cuStreamSynchronize(w->stream));
    CK(cuMemcpyDtoH(host, w->buf, sizeof host));
    for (int i = 0; i < WORDS; i++) {
        if (host[i] != want) {
            printf("cycle %ld: word %d is %u, want %u\n", cycle, i, host[i], want);
            exit(1);
        }
    }
}

static void work_close(work *w, long cycle)
{
    CK(cuGraphDestroy(w->graph));
    CK(cuMemFree(w->buf));
    CK(cuStreamDestroy(w->stream));
    CK(cuModuleUnload(w->mod));
}

/* Instantiates w->graph, launches it, updates the exec with the same graph,
 * launches again, waits and destroys the exec. */
static void exec_cycle(work *w, long cycle)
{
    CUgraphExec exec;
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphInstantiateWithFlags(&exec, w->graph, 0));
    CK(cuGraphLaunch(exec, w->stream));
    CK(cuGraphExecUpdate(exec, w->graph, &info));
    CK(cuGraphLaunch(exec, w->stream));
    CK(cuStreamSynchronize(w->stream));
    CK(cuGraphExecDestroy(exec));
}

int main(int argc, char **argv)
{
    long cycle = -1;
    if (argc != 4 || (strcmp(argv[2], "execs") && strcmp(argv[2], "contexts"))) {
        fprintf(stderr, "usage: %s MODULE execs|contexts N\n", argv[0]);
        return 2;
    }
    long n = atol(argv[3]);
    CUdevice dev;
    CUcontext primary;
    work w;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    if (strcmp(argv[2], "execs") == 0) {
        CK(cuDevicePrimaryCtxRetain(&primary, dev));
        CK(cuCtxSetCurrent(primary));
        work_open(&w, argv[1], cycle);
        for (cycle = 0; cycle < n; cycle++) exec_cycle(&w, cycle);
        work_check(&w, (uint32_t)(2 * KERNELS * n), cycle);
        work_close(&w, cycle);
        CK(cuDevicePrimaryCtxRelease(dev));
    } else {
        for (cycle = 0; cycle < n; cycle++) {
            CUcontext ctx;
            CK(cuCtxCreate(&ctx, NULL, 0, dev));
            work_open(&w, argv[1], cycle);
            exec_cycle(&w, cycle);
            work_check(&w, 2 * KERNELS, cycle);
            work_close(&w, cycle);
            /* popped first: the emulated driver does not pop a current
             * context that cuCtxDestroy destroys, and its stack is 16 deep */
            CK(cuCtxPopCurrent(&ctx));
            CK(cuCtxDestroy(ctx));
        }
    }
    printf("%s %ld: ok\n", argv[2], n);
    return 0;
}
