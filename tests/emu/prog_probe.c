/*
 * prog_probe.c: a small driver client for the knob tests (test_knobs.sh).
 * Prints the results of cuInit, the device count and the VMM attribute, then
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
    if (r == CUDA_SUCCESS) {
        cuDeviceGetCount(&n);
        cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0);
    }
    printf("count=%d\nvmm=%d\n", n, vmm);
    for (int i = 1; i <= calls; i++) {
        int v;
        printf("call%d=%s\n", i, name(cuDriverGetVersion(&v)));
    }
    return 0;
}
