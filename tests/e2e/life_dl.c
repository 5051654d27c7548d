/*
 * tests/e2e/life_dl.c: a program that reaches the driver only through
 * dlopen("libcuda.so.1"), for test_lifecycle.sh. Usage: life_dl MODULE.
 * If libcuda cannot be loaded it says so and exits with 7 (the program
 * handling a missing driver). Otherwise it does a graph's work, dlcloses
 * the driver, dlopens it again, does the work again and dlcloses it: every
 * result and both checksums are printed.
 */
#include "life_common.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static int round_trip(const char *module, const char *label)
{
    CUdevice dev;
    CUcontext ctx;
    life_work w;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("libcuda.so.1 not found: running without CUDA\n");
        return 7;
    }
    if (life_drv_dlsym(h, dlsym)) return 1;
    if (LIFE_R(life.cuInit(0)) || LIFE_R(life.cuDeviceGet(&dev, 0)) ||
        LIFE_R(life.cuDevicePrimaryCtxRetain(&ctx, dev)) || LIFE_R(life.cuCtxSetCurrent(ctx)) ||
        life_setup(&w, module, 256) || life_graph(&w, 6))
        return 1;
    life_launch(&w, 3);
    life_checksum(&w, label);
    life_teardown(&w);
    LIFE_R(life.cuDevicePrimaryCtxRelease(dev));
    memset(&life, 0, sizeof life);
    printf("dlclose = %d\n", dlclose(h));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: life_dl MODULE\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = round_trip(argv[1], "first");
    return rc ? rc : round_trip(argv[1], "after dlclose");
}
