/*
 * wl_kernels.cu: the workload kernels in CUDA C, for real GPUs. Same names
 * (extern "C") and argument lists as the emulated module wl_kernels.c; the
 * per-element math is shared through wl_math.h. Compiled with -fmad=false
 * into $(BUILD)/workloads/wl_kernels.fatbin (sm_80, sm_90 and PTX).
 * Grid-stride loops: any launch shape covers all n elements.
 */
#include "wl_math.h"

#define WL_FOR_EACH(e, n) \
    for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < (n); e += gridDim.x * blockDim.x)

extern "C" __global__ void wl_seed(const unsigned *in, const unsigned *prev, unsigned *out,
                                   unsigned n, unsigned salt)
{
    WL_FOR_EACH(e, n) out[e] = wl_seed_elem(in[e], prev[e], salt, e);
}

extern "C" __global__ void wl_mix(const unsigned *x, unsigned *y, unsigned n, unsigned k)
{
    WL_FOR_EACH(e, n) y[e] = wl_mix_elem(x[e], y[e], k);
}

extern "C" __global__ void wl_fscale(const unsigned *x, unsigned *y, unsigned n, float a, float b)
{
    WL_FOR_EACH(e, n) y[e] = wl_fscale_elem(x[e], y[e], a, b);
}

/* x and out must not overlap. */
extern "C" __global__ void wl_stencil(const unsigned *x, unsigned *out, unsigned n)
{
    WL_FOR_EACH(e, n) out[e] = wl_stencil_elem(x[(e + n - 1) % n], x[e], x[(e + 1) % n]);
}
