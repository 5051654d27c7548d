/*
 * wl_kernels.c: the workload kernels as an emulated-driver module
 * (built as $(BUILD)/workloads/wl_kernels.so, loaded by cuModuleLoad on
 * cudaemu). Same names and arguments as wl_kernels.cu; the per-element math
 * lives in wl_math.h so both compute identical bits. Each function runs the
 * whole launch: every element 0..n-1, as the CUDA grid-stride loops do.
 */
#include "emu_kernel.h"
#include "wl_math.h"

#define ARG(type, i) (*(type *)params[i])

/* wl_seed(const unsigned *in, const unsigned *prev, unsigned *out, unsigned n, unsigned salt) */
static void k_seed(void **params, const emu_launch *launch)
{
    const unsigned *in = ARG(const unsigned *, 0), *prev = ARG(const unsigned *, 1);
    unsigned *out = ARG(unsigned *, 2);
    unsigned n = ARG(unsigned, 3), salt = ARG(unsigned, 4);
    (void)launch;
    for (unsigned e = 0; e < n; e++)
        out[e] = wl_seed_elem(in[e], prev[e], salt, e);
}

/* wl_mix(const unsigned *x, unsigned *y, unsigned n, unsigned k) */
static void k_mix(void **params, const emu_launch *launch)
{
    const unsigned *x = ARG(const unsigned *, 0);
    unsigned *y = ARG(unsigned *, 1);
    unsigned n = ARG(unsigned, 2), k = ARG(unsigned, 3);
    (void)launch;
    for (unsigned e = 0; e < n; e++)
        y[e] = wl_mix_elem(x[e], y[e], k);
}

/* wl_fscale(const unsigned *x, unsigned *y, unsigned n, float a, float b) */
static void k_fscale(void **params, const emu_launch *launch)
{
    const unsigned *x = ARG(const unsigned *, 0);
    unsigned *y = ARG(unsigned *, 1);
    unsigned n = ARG(unsigned, 2);
    float a = ARG(float, 3), b = ARG(float, 4);
    (void)launch;
    for (unsigned e = 0; e < n; e++)
        y[e] = wl_fscale_elem(x[e], y[e], a, b);
}

/* wl_stencil(const unsigned *x, unsigned *out, unsigned n); x and out must not overlap */
static void k_stencil(void **params, const emu_launch *launch)
{
    const unsigned *x = ARG(const unsigned *, 0);
    unsigned *out = ARG(unsigned *, 1);
    unsigned n = ARG(unsigned, 2);
    (void)launch;
    for (unsigned e = 0; e < n; e++)
        out[e] = wl_stencil_elem(x[(e + n - 1) % n], x[e], x[(e + 1) % n]);
}

#define P sizeof(void *)
#define U sizeof(unsigned)
#define F sizeof(float)

const emu_kernel emu_module[] = {
    { "wl_seed",    k_seed,    5, { P, P, P, U, U } },
    { "wl_mix",     k_mix,     4, { P, P, U, U } },
    { "wl_fscale",  k_fscale,  5, { P, P, U, F, F } },
    { "wl_stencil", k_stencil, 3, { P, P, U } },
    { 0, 0, 0, { 0 } },
};
