/*
 * rt_graphs_kernels.c: rt_graphs.cu's three kernels as an emulated-driver
 * module (tests/emu/driver/emu_kernel.h), under the mangled names nvcc gives them,
 * so rt_graphs runs on the emulated driver with
 *   CUDAEMU_MODULES=$(BUILD)/gpu/rt_graphs_kernels.so
 * (the emulated driver looks each kernel of a CUDA program up by mangled name
 * in the modules listed there). The per-element math is rt_graphs.cu's
 * rt_first_elem / rt_middle_elem / rt_last_elem (rt_hash is wl_math.h's
 * wl_hash); rt_graphs checks its output against its own host recomputation,
 * so a difference here fails its "reference:" line.
 */
#include "emu_kernel.h"
#include "wl_math.h"

#define ARG(type, i) (*(type *)params[i])

/* _Z8rt_firstPKjS0_Pjjj: rt_first(const unsigned *in, const unsigned *out, unsigned *tmp, unsigned n, unsigned salt) */
static void k_first(void **params, const emu_launch *launch)
{
    const unsigned *in = ARG(const unsigned *, 0), *out = ARG(const unsigned *, 1);
    unsigned *tmp = ARG(unsigned *, 2), n = ARG(unsigned, 3), salt = ARG(unsigned, 4);
    (void)launch;
    for (unsigned e = 0; e < n; e++) tmp[e] = wl_hash(in[e] + salt + e * 0x9e3779b9u) ^ out[e];
}

/* _Z9rt_middlePjjj: rt_middle(unsigned *tmp, unsigned n, unsigned k) */
static void k_middle(void **params, const emu_launch *launch)
{
    unsigned *tmp = ARG(unsigned *, 0), n = ARG(unsigned, 1), k = ARG(unsigned, 2);
    (void)launch;
    for (unsigned e = 0; e < n; e++) tmp[e] = ((tmp[e] << 5) | (tmp[e] >> 27)) * 33u + k;
}

/* _Z7rt_lastPKjPjj: rt_last(const unsigned *tmp, unsigned *out, unsigned n) */
static void k_last(void **params, const emu_launch *launch)
{
    const unsigned *tmp = ARG(const unsigned *, 0);
    unsigned *out = ARG(unsigned *, 1), n = ARG(unsigned, 2);
    (void)launch;
    for (unsigned e = 0; e < n; e++) out[e] = tmp[e] ^ (tmp[(e + 1) % n] >> 3);
}

#define P sizeof(void *)
#define U sizeof(unsigned)

const emu_kernel emu_module[] = {
    { "_Z8rt_firstPKjS0_Pjjj", k_first, 5, { P, P, P, U, U } },
    { "_Z9rt_middlePjjj", k_middle, 3, { P, U, U } },
    { "_Z7rt_lastPKjPjj", k_last, 3, { P, P, U } },
    { 0, 0, 0, { 0 } },
};
