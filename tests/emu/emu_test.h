/*
 * emu_test.h: the set-up every emulator test starts with: the driver
 * initialised, device 0's primary context current, and one of the test
 * modules (built next to the test program) loaded.
 */
#ifndef EMU_TEST_H
#define EMU_TEST_H

#include <cuda.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

/* Writes "<directory of this program>/<name>" into out (n bytes); 0, or -1
 * if the program's path cannot be read or does not fit. */
static inline int emu_test_module_path(const char *name, char *out, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return -1;
    exe[len] = 0;
    int w = snprintf(out, n, "%s/%s", dirname(exe), name);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

/* cuInit, device 0's primary context made current (*ctx), then the module
 * `name` next to this program loaded (*mod). Returns the first failing
 * result (CUDA_ERROR_FILE_NOT_FOUND if the path cannot be made). */
static inline CUresult emu_test_open(const char *name, CUcontext *ctx, CUmodule *mod)
{
    CUdevice dev;
    char path[PATH_MAX + 64];
    CUresult r;
    if ((r = cuInit(0)) != CUDA_SUCCESS || (r = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS ||
        (r = cuDevicePrimaryCtxRetain(ctx, dev)) != CUDA_SUCCESS ||
        (r = cuCtxSetCurrent(*ctx)) != CUDA_SUCCESS)
        return r;
    if (emu_test_module_path(name, path, sizeof path)) return CUDA_ERROR_FILE_NOT_FOUND;
    return cuModuleLoad(mod, path);
}

#endif /* EMU_TEST_H */
