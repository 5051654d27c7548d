/*
 * prog_probe.c: a small driver client for the knob tests (test_knobs.sh).
 * Prints the results of cuInit, the device count, the VMM attribute and the
 * device memory (cuDeviceTotalMem, cuMemGetInfo after a 1 MiB cuMemAlloc), then
 * calls cuDriverGetVersion argv[1] times and prints each result's name, so a
 * test can see which call CUDAEMU_FAIL made fail and what CUDAEMU_STATS counted.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

static const char *name(CUresult r)
{
    const char *s = "?";
    cuGetErrorName(r, &s);
    return s;
}

int main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 0;
    CUresult r = cuInit(0);
    printf("init=%s\n", name(r));
    int n = -1, vmm = -1;
    size_t total = 0, free_after = 0, t2 = 0;
    if (r == CUDA_SUCCESS) {
        cuDeviceGetCount(&n);
        cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0);
    }
    if (r == CUDA_SUCCESS && n > 0) {
        CUcontext ctx;
        CUdeviceptr p;
        cuDeviceTotalMem(&total, 0);
        cuDevicePrimaryCtxRetain(&ctx, 0);
        cuCtxSetCurrent(ctx);
        if (cuMemAlloc(&p, 1 << 20) == CUDA_SUCCESS) cuMemGetInfo(&free_after, &t2);
    }
    printf("count=%d\nvmm=%d\nmem=%zu\nfree=%zu\n", n, vmm, total, free_after);
    for (int i = 1; i <= calls; i++) {
        int v;
        printf("call%d=%s\n", i, name(cuDriverGetVersion(&v)));
    }
    return 0;
}
