/*
 * mod_sticky.c: an emulated kernel module (see emu_kernel.h) for the sticky
 * error test of the emulated driver (test_sticky.c). Every kernel runs the
 * whole launch on the CPU; `n` arguments count 32-bit elements. No shared
 * state, no locks.
 *
 *   fill_u32(u32 *p, u32 v, u64 n)   p[i] = v
 *   fault(u32 *p, i32 code)          p[0] = 1, cudaemu_fault(code) (a sticky
 *                                    error), p[1] = 1 (never)
 */
#include "emu_kernel.h"

#include <stdint.h>

static void fill_u32(void **a, const emu_launch *l)
{
    (void)l;
    uint32_t *p = *(uint32_t **)a[0], v = *(uint32_t *)a[1];
    uint64_t n = *(uint64_t *)a[2];
    for (uint64_t i = 0; i < n; i++) p[i] = v;
}

static void fault(void **a, const emu_launch *l)
{
    (void)l;
    volatile uint32_t *p = *(uint32_t **)a[0];
    p[0] = 1;
    cudaemu_fault(*(int32_t *)a[1]);
    p[1] = 1;
}

const emu_kernel emu_module[] = {
    { "fill_u32", fill_u32, 3, { sizeof(void *), 4, 8 } },
    { "fault", fault, 2, { sizeof(void *), 4 } },
    { NULL, NULL, 0, { 0 } },
};
