/*
 * tests/e2e/libctor.c: a shared library whose constructor calls the driver
 * before the interposer's own constructor has run (it is initialised before
 * the preloaded library, as a dependency of the program). With
 * SG_TEST_NO_CTOR_CALLS set it calls nothing, so that the first driver calls
 * are the racing threads of startup_prog.
 */
#include <cuda.h>
#include <stdlib.h>

__attribute__((visibility("default"))) CUresult ctor_init_result = CUDA_ERROR_UNKNOWN;
__attribute__((visibility("default"))) CUresult ctor_alloc_result = CUDA_ERROR_UNKNOWN;

__attribute__((constructor)) static void early_driver_use(void)
{
    CUdeviceptr p;
    const char *quiet = getenv("SG_TEST_NO_CTOR_CALLS");
    if (quiet && *quiet) return;
    ctor_init_result = cuInit(0);
    ctor_alloc_result = cuMemAlloc(&p, 0);   /* size 0: CUDA_ERROR_INVALID_VALUE */
}
