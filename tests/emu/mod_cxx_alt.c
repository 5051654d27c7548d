/*
 * mod_cxx_alt.c: the second module of the CUDAEMU_MODULES tests
 * (test_library.c). Its _Z3addPffi subtracts, so a test sees which module
 * provided the kernel (the first listed must win); _Z3negPfi exists only here.
 *
 *   _Z3addPffi   add(float *x, float a, int n)   x[i] -= a
 *   _Z3negPfi    neg(float *x, int n)            x[i] = -x[i]
 */
#include "emu_kernel.h"

static void sub(void **p, const emu_launch *l)
{
    (void)l;
    float *x = *(float **)p[0], a = *(float *)p[1];
    int n = *(int *)p[2];
    for (int i = 0; i < n; i++) x[i] -= a;
}

static void neg(void **p, const emu_launch *l)
{
    (void)l;
    float *x = *(float **)p[0];
    int n = *(int *)p[1];
    for (int i = 0; i < n; i++) x[i] = -x[i];
}

const emu_kernel emu_module[] = {
    { "_Z3addPffi", sub, 3, { sizeof(void *), sizeof(float), sizeof(int) } },
    { "_Z3negPfi", neg, 2, { sizeof(void *), sizeof(int) } },
    { 0, 0, 0, { 0 } },
};
