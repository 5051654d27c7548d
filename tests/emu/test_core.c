/*
 * test_core.c: the emulated driver's init, devices, errors and contexts
 * (emu_core.c).
 */
#include <cuda.h>
#include <string.h>

#include "check.h"

TEST(before_init)
{
    int v = 0;
    CHECK_CU(cuDriverGetVersion(&v), CUDA_SUCCESS);
    CHECK_EQ(v, 13000);
    CUdevice d;
    CHECK_CU(cuDeviceGet(&d, 0), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_CU(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuDeviceGet(&d, 0), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_CU(cuInit(0), CUDA_SUCCESS);
}

TEST(devices)
{
    int n = 0, v = -1;
    CUdevice d;
    char name[64];
    CHECK_CU(cuDeviceGetCount(&n), CUDA_SUCCESS);
    CHECK_EQ(n, 1);
    CHECK_CU(cuDeviceGet(&d, 0), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
    CHECK_CU(cuDeviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
    CHECK(strncmp(name, "cudaemu", 7) == 0);
    CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0), CUDA_SUCCESS);
    CHECK_EQ(v, 1);
    CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0), CUDA_SUCCESS);
    CHECK_EQ(v, 1);
    CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3), CUDA_ERROR_INVALID_DEVICE);
    size_t total = 0;
    CHECK_CU(cuDeviceTotalMem(&total, 0), CUDA_SUCCESS);
    CHECK(total > 0);
}

TEST(error_names)
{
    const char *s = NULL;
    CHECK_CU(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s), CUDA_SUCCESS);
    CHECK(s && strcmp(s, "CUDA_ERROR_INVALID_VALUE") == 0);
    CHECK_CU(cuGetErrorName(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, &s), CUDA_SUCCESS);
    CHECK(s && strcmp(s, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED") == 0);
    CHECK_CU(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    CHECK(s && strcmp(s, "out of memory") == 0);
    CHECK_CU(cuGetErrorName((CUresult)9999, &s), CUDA_ERROR_INVALID_VALUE);
    const void *table = (const void *)1;
    CUuuid id = {{0}};
    CHECK_CU(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
    CHECK(table == NULL);
}

TEST(primary_context)
{
    CUcontext a = NULL, b = NULL, cur = (CUcontext)1;
    CUdevice dev = -1;
    unsigned flags;
    int active = -1;
    CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == NULL);
    CHECK_CU(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuDevicePrimaryCtxRetain(&a, 0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRetain(&b, 0), CUDA_SUCCESS);
    CHECK(a && a == b);
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    CHECK_EQ(active, 1);
    CHECK_CU(cuCtxSetCurrent(a), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == a);
    CHECK_CU(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    CHECK_EQ(dev, 0);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_CU(cuCtxDestroy(a), CUDA_ERROR_INVALID_CONTEXT);  /* primary: release, not destroy */
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    CHECK_EQ(active, 1);
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    CHECK_EQ(active, 0);
    CHECK_CU(cuDevicePrimaryCtxRetain(&b, 0), CUDA_SUCCESS);
    CHECK(b == a);                                           /* stable handle */
    CHECK_CU(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    CHECK_EQ(active, 0);
    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
}

TEST(created_contexts)
{
    CUcontext c1 = NULL, c2 = NULL, cur = NULL, popped = NULL;
    CHECK_CU(cuCtxCreate(&c1, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == c1);
    CHECK_CU(cuCtxCreate(&c2, NULL, 0, 0), CUDA_SUCCESS);
    CHECK(c2 && c2 != c1);
    CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == c2);
    CHECK_CU(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
    CHECK(popped == c2);
    CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == c1);
    CHECK_CU(cuCtxPushCurrent(c2), CUDA_SUCCESS);
    CHECK_CU(cuCtxDestroy(c2), CUDA_SUCCESS);
    CHECK_CU(cuCtxDestroy(c2), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuCtxSetCurrent(c2), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuCtxDestroy(c1), CUDA_SUCCESS);
    CUdevice d;
    CHECK(cuCtxGetDevice(&d) != CUDA_SUCCESS);  /* current context is gone */
    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
}

TEST(teardown_frees_allocations)
{
    CUcontext c1 = NULL, c2 = NULL;
    CUdeviceptr p = 0, base = 0;
    size_t size = 0;
    CHECK_CU(cuCtxCreate(&c1, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    CHECK_CU(cuMemGetAddressRange(&base, &size, p), CUDA_SUCCESS);
    CHECK_CU(cuCtxDestroy(c1), CUDA_SUCCESS);
    CHECK_CU(cuCtxCreate(&c2, NULL, 0, 0), CUDA_SUCCESS);
    /* The driver frees a context's memory with it. */
    CHECK_CU(cuMemGetAddressRange(&base, &size, p), CUDA_ERROR_NOT_FOUND);
    CHECK_CU(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuCtxDestroy(c2), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
}

/* cuCtxDestroy: "If the context is current to the calling thread then the
 * context will also be popped from the current thread's context stack (as
 * though cuCtxPopCurrent() were called)." cuCtxCreate pushes: a create and
 * destroy loop must not fill the stack, and the context current before the
 * create is current again after the destroy. */
TEST(destroy_pops_current)
{
    CUcontext p = NULL, c = NULL, c2 = NULL, cur = NULL;
    CHECK_CU(cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(p), CUDA_SUCCESS);
    for (int i = 0; i < 40; i++) {
        CHECK_CU(cuCtxCreate(&c, NULL, 0, 0), CUDA_SUCCESS);
        CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
        CHECK(cur == c);
        CHECK_CU(cuCtxDestroy(c), CUDA_SUCCESS);
        CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
        CHECK(cur == p);
    }
    /* A context that is not current: the current one stays. */
    CHECK_CU(cuCtxCreate(&c, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxCreate(&c2, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxDestroy(c), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == c2);
    CHECK_CU(cuCtxDestroy(c2), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

int main(void)
{
    RUN(before_init);
    RUN(devices);
    RUN(error_names);
    RUN(primary_context);
    RUN(created_contexts);
    RUN(teardown_frees_allocations);
    RUN(destroy_pops_current);
    return check_done();
}
