/*
 * mod_cxx.c: an emulated module (see emu_kernel.h) whose kernels carry the
 * mangled names nvcc gives C++ kernels, for the CUDA-image tests of the
 * emulated driver (test_library.c: CUDAEMU_MODULES lists it before
 * mod_cxx_alt.so, which defines _Z3addPffi differently).
 *
 *   _Z3addPffi    add(float *x, float a, int n)     x[i] += a
 *   _Z5scalePfif  scale(float *x, int n, float a)   x[i] *= a
 */
#include "emu_kernel.h"

static void add(void **p, const emu_launch *l)
{
    (void)l;
    float *x = *(float **)p[0], a = *(float *)p[1];
    int n = *(int *)p[2];
    for (int i = 0; i < n; i++) x[i] += a;
}

static void scale(void **p, const emu_launch *l)
{
    (void)l;
    float *x = *(float **)p[0], a = *(float *)p[2];
    int n = *(int *)p[1];
    for (int i = 0; i < n; i++) x[i] *= a;
}

const emu_kernel emu_module[] = {
    { "_Z3addPffi", add, 3, { sizeof(void *), sizeof(float), sizeof(int) } },
    { "_Z5scalePfif", scale, 3, { sizeof(void *), sizeof(int), sizeof(float) } },
    { 0, 0, 0, { 0 } },
};
