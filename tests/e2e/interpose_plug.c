/*
 * tests/e2e/interpose_plug.c: a plugin of tests/e2e/adv_interpose.c
 * (case next_plugin), built as interpose_plug.so and linked with libcuda,
 * which the program loads (dlopen, RTLD_LOCAL) after the driver. As tools
 * that wrap driver calls do, it looks driver functions up with
 * dlsym(RTLD_NEXT): glibc searches the plugin's own dependencies, libcuda
 * among them, though libcuda was loaded before the plugin.
 *
 * No state but the wrapper's next function (set once, by one thread).
 */
#include <cuda.h>
#include <dlfcn.h>

/* dlsym(RTLD_NEXT, name), called from this plugin. */
void *adv_plug_next(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

/* A wrapper of the plugin's own: the next cuMemsetD32_v2, with value + 1. */
CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t n)
{
    static CUresult (*next)(CUdeviceptr, unsigned int, size_t);
    if (!next) *(void **)&next = dlsym(RTLD_NEXT, "cuMemsetD32_v2");
    if (!next) return CUDA_ERROR_NOT_FOUND;
    return next(dst, value + 1, n);
}
