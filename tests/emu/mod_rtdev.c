/*
 * mod_rtdev.c: an emulated module (see emu_kernel.h) with the C++ kernels of
 * tests/e2e/rt_devices.cu, by their mangled names, for the CUDA runtime
 * program that drives two devices (tests/e2e/test_rt_devices.sh).
 *
 *   _Z4fillPffi      fill(float *x, float v, int n)                x[i] = v + i % 7
 *   _Z4axpyPfPKffi   axpy(float *y, const float *x, float a, int n)  y[i] += a * x[i]
 *   _Z4latePfi       late(float *x, int n)                         x[i] = 2 * x[i] + 1
 *
 * Each runs the whole launch: the indices the grid covers, below n.
 */
#include "emu_kernel.h"

static int covered(const emu_launch *l, int n)
{
    long t = (long)l->grid.x * l->grid.y * l->grid.z * l->block.x * l->block.y * l->block.z;
    return t < n ? (int)t : n;
}

static void fill(void **p, const emu_launch *l)
{
    float *x = *(float **)p[0], v = *(float *)p[1];
    int n = covered(l, *(int *)p[2]);
    for (int i = 0; i < n; i++) x[i] = v + i % 7;
}

static void axpy(void **p, const emu_launch *l)
{
    float *y = *(float **)p[0];
    const float *x = *(const float **)p[1];
    float a = *(float *)p[2];
    int n = covered(l, *(int *)p[3]);
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

static void late(void **p, const emu_launch *l)
{
    float *x = *(float **)p[0];
    int n = covered(l, *(int *)p[1]);
    for (int i = 0; i < n; i++) x[i] = 2 * x[i] + 1;
}

const emu_kernel emu_module[] = {
    { "_Z4fillPffi", fill, 3, { sizeof(void *), sizeof(float), sizeof(int) } },
    { "_Z4axpyPfPKffi", axpy, 4, { sizeof(void *), sizeof(void *), sizeof(float), sizeof(int) } },
    { "_Z4latePfi", late, 2, { sizeof(void *), sizeof(int) } },
    { 0, 0, 0, { 0 } },
};
